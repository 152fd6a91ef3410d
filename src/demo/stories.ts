import { WritApiError, WritClient, generatePrincipalKeyPair, type Decision } from '../sdk/index.js';
import type { Stage } from './stage.js';

export interface StoryResult {
  title: string;
  /** What the story says will happen. */
  expected: string;
  /** What did happen. */
  outcome: string;
  ok: boolean;
}

type Say = (line: string) => void;

interface Story {
  title: string;
  expected: string;
  run(stage: Stage, say: Say): Promise<{ outcome: string; ok: boolean }>;
}

const PROD = 'production';
const update = (resource: string, fields: string[]) => ({ action: 'update_post', resource, environment: PROD, fields });

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'OK';
  } catch (e) {
    if (e instanceof WritApiError) return e.code;
    throw e;
  }
}

async function editField(stage: Stage, agent: WritClient, post: number, field: string, value: string, readRevision?: number) {
  const resource = `wp:post:${post}`;
  const decision = await agent.decide(update(resource, [field]));
  if (!decision.allow) throw new Error(`${agent.principal} was denied: ${decision.reasons.join('; ')}`);
  const expected = readRevision ?? (await stage.readPost(post)).revision;
  const act = { decision, action: 'update_post', resource, fields: [field], payload: { [field]: value }, expected_version: expected };
  return decision.obligations.lease_required ? agent.withLease([decision], (scope) => scope.act(act), { ttlMs: 5000 }) : agent.act(act);
}

const STORIES: Story[] = [
  {
    title: 'Two agents edit different fields of one post in parallel',
    expected: 'both writes complete; title and body both land',
    async run(stage, say) {
      const seo = stage.agent('seo-agent-7');
      const content = stage.agent('content-agent-3');
      say('seo-agent-7 rewrites the title while content-agent-3 rewrites the body of wp:post:1024, at the same time.');
      const [a, b] = await Promise.all([editField(stage, seo, 1024, 'title', 'Ten tips for faster pages', 0), editField(stage, content, 1024, 'body', 'Fast pages start with…', 0)]);
      const post = await stage.readPost(1024);
      say(`  title: receipt ${a.receipt_id} ${a.status}; body: receipt ${b.receipt_id} ${b.status}; post is at revision ${post.revision}`);
      say('  Each exclusive field has its own coordination key (wp:post:1024#title, #body), and versions are per field, so neither blocks the other.');
      return { outcome: `title ${a.status}, body ${b.status}, revision ${post.revision}`, ok: a.status === 'COMPLETED' && b.status === 'COMPLETED' && post.fields.title !== undefined && post.fields.body !== undefined };
    },
  },
  {
    title: 'Two agents on the same field are serialized',
    expected: 'the second waits in Writ\'s queue, starts as soon as the first releases, then writes on top of the first',
    async run(stage, say) {
      const editor = stage.agent('editor-alice');
      const seo = stage.agent('seo-agent-7');
      const resource = 'wp:post:2048';
      const d1 = await editor.decide(update(resource, ['title']));
      const d2 = await seo.decide(update(resource, ['title']));
      let editorDone = 0;
      let seoStarted = 0;
      say('editor-alice holds the title lease of wp:post:2048 for 300 ms; seo-agent-7 asks for it meanwhile.');
      let held!: () => void;
      const editorHolds = new Promise<void>((r) => (held = r));
      const first = editor.withLease([d1], async (scope) => {
        held();
        await new Promise((r) => setTimeout(r, 300));
        const receipt = await scope.act({ decision: d1, action: 'update_post', resource, fields: ['title'], payload: { title: 'Editor title' }, expected_version: 0 });
        editorDone = Date.now();
        return receipt;
      }, { ttlMs: 5000 });
      await editorHolds;
      const second = seo.withLease([d2], async (scope) => {
        seoStarted = Date.now();
        const now = await stage.readPost(2048);
        return scope.act({ decision: d2, action: 'update_post', resource, fields: ['title'], payload: { title: 'SEO title' }, expected_version: now.revision });
      }, { ttlMs: 5000 });
      const [a, b] = await Promise.all([first, second]);
      const afterRelease = seoStarted - editorDone;
      say(`  editor-alice: ${a.status} at version ${a.final_version}; seo-agent-7 waited in the queue and started ${afterRelease} ms after the editor's write (its TTL was 5 000 ms), then ${b.status} at version ${b.final_version}`);
      return { outcome: `queued, then ${b.status} v${b.final_version} after v${a.final_version}`, ok: afterRelease >= 0 && a.status === 'COMPLETED' && b.status === 'COMPLETED' && (b.final_version ?? 0) > (a.final_version ?? 0) };
    },
  },
  {
    title: "A human editor's edit is not overwritten by an agent's stale snapshot",
    expected: 'the agent gets VERSION_CONFLICT; the editor\'s text stays',
    async run(stage, say) {
      const editor = stage.agent('editor-alice');
      const seo = stage.agent('seo-agent-7');
      await editField(stage, seo, 3000, 'title', 'Draft title', 0);
      const snapshot = (await stage.readPost(3000)).revision;
      say(`seo-agent-7 reads wp:post:3000 at revision ${snapshot} and starts thinking; editor-alice fixes the title meanwhile.`);
      await editField(stage, editor, 3000, 'title', 'Title fixed by a human', snapshot);
      const code = await codeOf(editField(stage, seo, 3000, 'title', 'Agent title from a stale snapshot', snapshot));
      const post = await stage.readPost(3000);
      say(`  seo-agent-7 writes with expected_version ${snapshot}: ${code}; the title is still "${String(post.fields.title)}"`);
      return { outcome: `${code}; title "${String(post.fields.title)}"`, ok: code === 'VERSION_CONFLICT' && post.fields.title === 'Title fixed by a human' };
    },
  },
  {
    title: 'A paused agent is fenced out after its lease passed to another',
    expected: 'the late write is refused with STALE_FENCING_EPOCH and never reaches the CMS',
    async run(stage, say) {
      const seo = stage.agent('seo-agent-7');
      const editor = stage.agent('editor-alice');
      const resource = 'wp:post:4000';
      const d = await seo.decide(update(resource, ['title']));
      const lease = await seo.acquireLease([d], { ttlMs: 600 });
      const n = lease.epochs[`${resource}#title`];
      say(`seo-agent-7 takes the title lease at fencing epoch ${n}, then stalls (GC pause, lost network) past its 600 ms TTL.`);
      await new Promise((r) => setTimeout(r, 800));
      const r = await editField(stage, editor, 4000, 'title', 'Editor wrote while the agent was stalled', 0);
      say(`  editor-alice takes the lease at epoch ${r.lease_epoch as number} and writes: ${r.status}`);
      const code = await codeOf(seo.act({ decision: d, action: 'update_post', resource, fields: ['title'], payload: { title: 'late agent write' }, expected_version: 0, lease }));
      const post = await stage.readPost(4000);
      say(`  seo-agent-7 wakes up and writes with epoch ${n}: ${code}; the CMS still says "${String(post.fields.title)}"`);
      return { outcome: code, ok: code === 'STALE_FENCING_EPOCH' && post.fields.title === 'Editor wrote while the agent was stalled' };
    },
  },
  {
    title: 'An incident commander preempts a release',
    expected: "the release's task is aborted with LEASE_PREEMPTED and its late write is fenced out",
    async run(stage, say) {
      const release = stage.agent('release-controller');
      const commander = stage.agent('incident-commander');
      const deploy = { action: 'deploy', resource: 'deploy:site:www', environment: PROD, fields: [] };
      const rd = await release.decide(deploy);
      let aborted = '';
      let lateWrite = '';
      say('release-controller holds deploy:site:www for a slow rollout.');
      const rollout = release.withLease([rd], async (scope) => {
        await new Promise<void>((resolve) => scope.signal.addEventListener('abort', () => resolve(), { once: true }));
        aborted = (scope.signal.reason as WritApiError).code;
        lateWrite = await codeOf(release.act({ decision: rd, action: 'deploy', resource: 'deploy:site:www', fields: [], payload: {}, expected_version: 0, lease: scope.lease }));
      }, { ttlMs: 900 });
      await new Promise((r) => setTimeout(r, 100));
      const inc = await commander.decide({ action: 'declare_incident', resource: 'incident:checkout-down', environment: PROD, fields: [] });
      await commander.request('POST', '/v1/incidents', { id: 'checkout-down', reason: 'checkout is returning 500s', decision: inc.token });
      const cd = await commander.decide(deploy);
      const taken = await commander.acquireLease([cd], { ttlMs: 10_000, preempt: true });
      say(`  incident-commander declares incident checkout-down and takes the lease over (epoch ${taken.epochs['deploy:site:www']}), per its preempts edge.`);
      await rollout.catch(() => undefined);
      say(`  release-controller's task was aborted: ${aborted}; its late write: ${lateWrite}`);
      return { outcome: `${aborted}, late write ${lateWrite}`, ok: aborted === 'LEASE_PREEMPTED' && lateWrite === 'STALE_FENCING_EPOCH' };
    },
  },
  {
    title: 'A same-name impersonator is refused',
    expected: 'a second seo-agent-7 without the lease token gets LEASE_TOKEN_MISMATCH; a forged key gets UNAUTHENTICATED',
    async run(stage, say) {
      const real = stage.agent('seo-agent-7');
      const twin = stage.agent('seo-agent-7');
      const resource = 'wp:post:5000';
      const d = await real.decide(update(resource, ['title']));
      const lease = await real.acquireLease([d], { ttlMs: 5000 });
      say('seo-agent-7 holds the title lease of wp:post:5000; another process calling itself seo-agent-7 tries to use it with a guessed token.');
      const twinDecision: Decision = await twin.decide(update(resource, ['title']));
      const guessed = { ...lease, token: 'guessed-token' };
      const write = await codeOf(twin.act({ decision: twinDecision, action: 'update_post', resource, fields: ['title'], payload: { title: 'hijacked' }, expected_version: 0, lease: guessed }));
      const renew = await codeOf(twin.renewLease(guessed));
      const forged = new WritClient({ baseUrl: stage.url, principal: 'seo-agent-7', privateJwk: (await generatePrincipalKeyPair('seo-agent-7-k1')).privateJwk });
      const forgedCode = await codeOf(forged.decide(update(resource, ['title'])));
      const ok = await real.act({ decision: d, action: 'update_post', resource, fields: ['title'], payload: { title: 'the real agent' }, expected_version: 0, lease });
      say(`  the twin's write: ${write}; its renew: ${renew}; a client with a forged key: ${forgedCode}; the real holder then writes: ${ok.status}`);
      return { outcome: `${write}, ${renew}, ${forgedCode}, holder ${ok.status}`, ok: write === 'LEASE_TOKEN_MISMATCH' && renew === 'LEASE_TOKEN_MISMATCH' && forgedCode === 'UNAUTHENTICATED' && ok.status === 'COMPLETED' };
    },
  },
  {
    title: 'A delegation that tries to widen its scope is refused',
    expected: 'ATTENUATION_VIOLATION naming the dimension and the values that exceed',
    async run(stage, say) {
      const orchestrator = stage.agent('orchestrator');
      say('orchestrator (which holds update_post and read_post) tries to hand seo-agent-7 publish_post as well.');
      let detail = '';
      const code = await codeOf(
        orchestrator
          .request('POST', '/v1/delegations', {
            from: 'orchestrator', to: 'seo-agent-7', reason: 'let the SEO agent publish too', max_depth: 0,
            scope: { actions: ['update_post', 'publish_post'], resources: ['wp:post:*'], environments: [PROD], fields: ['title'], risk_max: 1 },
          })
          .catch((e: WritApiError) => {
            detail = e.detail;
            throw e;
          }),
      );
      say(`  ${code}: ${detail}`);
      return { outcome: code, ok: code === 'ATTENUATION_VIOLATION' && detail.includes('publish_post') };
    },
  },
  {
    title: 'The receipt chain verifies',
    expected: 'writ audit verify: OK',
    async run(stage, say) {
      const gov = stage.agent('governance');
      const v = await gov.request<{ ok: boolean; entries: number; head: string }>('GET', '/v1/audit/verify');
      say(`  ${v.ok ? 'OK' : 'BROKEN'}: ${v.entries} receipt entries, head ${v.head.slice(0, 16)}…`);
      return { outcome: v.ok ? `OK (${v.entries} entries)` : 'BROKEN', ok: v.ok };
    },
  },
];

/** Plays every story against `stage` and reports how each ended. */
export async function playStories(stage: Stage, say: Say): Promise<StoryResult[]> {
  const results: StoryResult[] = [];
  for (const [i, story] of STORIES.entries()) {
    say(`\n${i + 1}. ${story.title}\n   expected: ${story.expected}`);
    try {
      const r = await story.run(stage, say);
      say(`   ${r.ok ? '✓' : '✗'} ${r.outcome}`);
      results.push({ title: story.title, expected: story.expected, ...r });
    } catch (e) {
      say(`   ✗ failed: ${(e as Error).message}`);
      results.push({ title: story.title, expected: story.expected, outcome: `error: ${(e as Error).message}`, ok: false });
    }
  }
  return results;
}
