import { createHash, generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyGraphEvents, type GraphEventLink, type SignedPayload } from '../../src/audit/index.js';
import { revokeEdge, signCheckpoint } from '../../src/service/index.js';
import { runWrit } from '../support/cli.js';
import { startHarness, type Harness } from '../support/harness.js';
import { requireDist } from '../support/server-process.js';

/**
 * `writ audit verify --graph-events FILE [--graph-head REVISION:HASH]` checks saved GET /v1/graph/events
 * answers offline (no store, no data directory): what an auditor does with the pages and a checkpoint's
 * graph head. Each tampering of the file is BROKEN at the revision.
 */

let h: Harness;
let dir: string;
let pages: { events: (GraphEventLink & { at: string })[] }[];
let checkpoint: { seq: number; graph_revision: number; graph_hash: string; jws: string };
/** GET /v1/audit/verify's answer and /.well-known/jwks.json, as an auditor saves them. */
let verifyAnswer: { checkpoint: typeof checkpoint };
let jwks: { keys: { kid: string }[] };
beforeAll(async () => {
  requireDist();
  h = await startHarness();
  dir = mkdtempSync(join(tmpdir(), 'writ-graph-events-'));
  await revokeEdge(h.ctx, 'governance', 'd-orch-seo', 'retired "seo"\nagent');
  await h.ctx.receipts.checkpoint({ force: true });
  verifyAnswer = (await h.call('governance', { method: 'GET', url: '/v1/audit/verify' })).body;
  checkpoint = verifyAnswer.checkpoint;
  jwks = (await h.call(null, { method: 'GET', url: '/.well-known/jwks.json' })).body;
  await h.call('governance', { method: 'POST', url: '/v1/principals', payload: { id: 'late-agent', kind: 'agent', keys: [] } });
  pages = [];
  for (let after = 0; ;) {
    const page = (await h.call('governance', { method: 'GET', url: `/v1/graph/events?after=${after}&limit=4` })).body;
    pages.push(page);
    if (page.next === null) break;
    after = page.next;
  }
});
afterAll(async () => {
  await h?.close();
  rmSync(dir, { recursive: true, force: true });
});

const save = (name: string, value: unknown) => {
  const file = join(dir, name);
  writeFileSync(file, JSON.stringify(value));
  return file;
};
const saveText = (name: string, text: string) => {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
};
const writ = (...args: string[]) => runWrit(join(dir, 'no-data-dir'), 'audit', 'verify', ...args);
/**
 * The saved events with the one the checkpoint signed altered, then re-hashed from there by whoever
 * altered it (so they still link): what only the signed head catches.
 */
function rehashedFromSigned(): { events: (GraphEventLink & { at: string })[] } {
  const rewritten = structuredClone(pages.flatMap((p) => p.events));
  const signedAt = rewritten.findIndex((e) => e.revision === checkpoint.graph_revision);
  rewritten[signedAt]!.payload = rewritten[signedAt]!.payload.replace('retired', 'retyred');
  let prev = rewritten[signedAt]!.prev_hash!;
  for (const e of rewritten.slice(signedAt)) {
    e.prev_hash = prev;
    e.hash = createHash('sha256').update(`writ-graph-v1\n${prev}\n${e.revision}\n${Date.parse(e.at)}\n${JSON.stringify(e.actor)}\n${JSON.stringify(e.type)}\n${e.payload}`).digest('hex');
    prev = e.hash;
  }
  return { events: rewritten };
}
/** The events in ms, as the command reads them. */
const inMs = (events: (GraphEventLink & { at: string })[]) => events.map((e) => ({ ...e, at: Date.parse(e.at) }));

describe('writ audit verify --graph-events', () => {
  it('saved pages recompute and link; with the checkpoint\'s graph head, the events up to it are the signed ones', { timeout: 60_000 }, async () => {
    const all = save('pages.json', pages);
    const head = `${checkpoint.graph_revision}:${checkpoint.graph_hash}`;
    const last = pages.at(-1)!.events.at(-1)!.revision;
    const ok = await writ('--graph-events', all, '--graph-head', head);
    expect(ok.code, ok.output).toBe(0);
    expect(ok.stdout).toContain(`OK: graph events 1..${last} of ${all}, ${last} hashed, recompute and link; revision ${checkpoint.graph_revision} has the signed hash: events 1..${checkpoint.graph_revision} are the ones signed`);
    const json = await writ('--graph-events', all, '--graph-head', head, '--json');
    expect(JSON.parse(json.stdout)).toEqual({ ok: true, events: last, first: 1, last, unhashed: 0, signed: { revision: checkpoint.graph_revision, hash: checkpoint.graph_hash } });

    // One page in the middle: linked from its first prev_hash as given, which the command says.
    const one = save('page.json', pages[1]);
    const mid = await writ('--graph-events', one);
    expect(mid.code, mid.output).toBe(0);
    expect(mid.stdout).toContain(`(from the prev_hash of event 5 as given: pass --checkpoint or --graph-head to anchor them)`);

    // The event a checkpoint signed altered, then re-hashed by whoever altered it: the signed head says so.
    const rewritten = save('rehashed.json', rehashedFromSigned());
    const rehashed = await writ('--graph-events', rewritten, '--graph-head', head);
    expect(rehashed.code, rehashed.output).toBe(1);
    expect(rehashed.stdout).toContain(`BROKEN in ${rewritten} at revision ${checkpoint.graph_revision}: graph event ${checkpoint.graph_revision} is not the one the checkpoint signed`);
    // Without the head nothing anchors the rewrite: it links (what the README warns of).
    expect((await writ('--graph-events', rewritten)).code).toBe(0);
    expect(existsSync(join(dir, 'no-data-dir')), 'no store was opened nor made').toBe(false);
  });

  it('--checkpoint FILE (the saved answer, or its JWS) with --jwks FILE: the graph head is taken from the verified signature', { timeout: 60_000 }, async () => {
    const all = save('pages-c.json', pages);
    const keys = save('jwks.json', jwks);
    const last = pages.at(-1)!.events.at(-1)!.revision;
    const signedLine = `revision ${checkpoint.graph_revision} has the signed hash (checkpoint ${checkpoint.seq} of `;
    for (const saved of [save('verify.json', verifyAnswer), save('checkpoint.json', checkpoint.jws), saveText('checkpoint.jws', `${checkpoint.jws}\n`)]) {
      const ok = await writ('--graph-events', all, '--checkpoint', saved, '--jwks', keys);
      expect(ok.code, ok.output).toBe(0);
      expect(ok.stdout).toContain(signedLine);
      expect(ok.stdout).toContain(`its signature verified with key ${jwks.keys[0]!.kid}): events 1..${checkpoint.graph_revision} are the ones signed`);
    }
    const json = JSON.parse((await writ('--graph-events', all, '--checkpoint', join(dir, 'verify.json'), '--jwks', keys, '--json')).stdout);
    expect(json).toMatchObject({ ok: true, last, signed: { revision: checkpoint.graph_revision, hash: checkpoint.graph_hash }, checkpoint: { seq: checkpoint.seq, kid: jwks.keys[0]!.kid } });
    // The events the checkpoint signed, rewritten and re-hashed: BROKEN against the verified head too.
    const rehashed = await writ('--graph-events', save('rehashed-c.json', rehashedFromSigned()), '--checkpoint', join(dir, 'verify.json'), '--jwks', keys);
    expect(rehashed.code, rehashed.output).toBe(1);
    expect(rehashed.stdout).toContain(`graph event ${checkpoint.graph_revision} is not the one the checkpoint signed`);

    // A checkpoint whose graph head was changed and signed again with another key under the servers' kid: BROKEN (exit 1), nothing judged.
    const [, body] = checkpoint.jws.split('.');
    const payload = JSON.parse(Buffer.from(body!, 'base64url').toString()) as Record<string, unknown>;
    const forged = signCheckpoint({ kid: jwks.keys[0]!.kid, privateKey: generateKeyPairSync('ed25519').privateKey }, { ...payload, graph_hash: 'e'.repeat(64) } as unknown as SignedPayload);
    const bad = await writ('--graph-events', all, '--checkpoint', saveText('forged.jws', forged), '--jwks', keys);
    expect([bad.code, bad.stdout.trim()]).toEqual([1, `BROKEN: the checkpoint of ${join(dir, 'forged.jws')} does not verify: the checkpoint's signature does not verify with key ${jwks.keys[0]!.kid} (it was forged or altered); nothing in ${all} was checked against it`]);
    // The saved answer's graph head altered beside its JWS (the unsigned members): BROKEN.
    const altered = save('altered.json', { ...verifyAnswer, checkpoint: { ...checkpoint, graph_hash: 'e'.repeat(64) } });
    const lied = await writ('--graph-events', all, '--checkpoint', altered, '--jwks', keys);
    expect(lied.code, lied.output).toBe(1);
    expect(lied.stdout).toContain("the answer's checkpoint.graph_hash");
    // A key the JWKS does not hold (another deployment's JWKS, or one saved before a rotation): BROKEN, naming the kid and the file.
    const otherKeys = save('other-jwks.json', { keys: [] });
    const unknown = await writ('--graph-events', all, '--checkpoint', join(dir, 'verify.json'), '--jwks', otherKeys);
    expect(unknown.code, unknown.output).toBe(1);
    expect(unknown.stdout).toContain(`the checkpoint was signed by key ${jwks.keys[0]!.kid}, which is not among the published keys: the keys of ${otherKeys} (0)`);
    // A version-2 checkpoint (taken before the graph chain), validly signed: it signs no graph head, nothing judged (exit 3).
    const v2 = signCheckpoint(h.ctx.keys.current(), { v: 2, seq: 1, at: Date.now(), chains: 0, root: 'a'.repeat(64), archived: 0 });
    const headless = await writ('--graph-events', all, '--checkpoint', saveText('v2.jws', v2), '--jwks', keys);
    expect(headless.code, headless.output).toBe(3);
    expect(headless.output).toContain('UNPROCESSABLE');
    expect(headless.output).toContain("signs no graph head: it was taken before the graph log's hash chain");
    // Not a checkpoint at all, or an answer from before any checkpoint: exit 3, nothing judged.
    const junk = await writ('--graph-events', all, '--checkpoint', save('junk.json', { receipts: [] }), '--jwks', keys);
    expect([junk.code, junk.output]).toEqual([3, expect.stringContaining('MALFORMED_REQUEST')]);
    const none = await writ('--graph-events', all, '--checkpoint', save('none.json', { ok: true, entries: 0, chains: 0 }), '--jwks', keys);
    expect([none.code, none.output]).toEqual([3, expect.stringContaining('holds no checkpoint')]);
    // Both heads at once is a usage error.
    const both = await writ('--graph-events', all, '--checkpoint', join(dir, 'verify.json'), '--graph-head', `${checkpoint.graph_revision}:${checkpoint.graph_hash}`);
    expect(both.code).toBe(2);
    expect(existsSync(join(dir, 'no-data-dir')), 'no store was opened nor made').toBe(false);
  });

  it('each tampering of the saved events is BROKEN at its revision', () => {
    const events = inMs(pages.flatMap((p) => p.events));
    const tampered = (f: (e: ReturnType<typeof inMs>) => void) => {
      const copy = structuredClone(events);
      f(copy);
      return verifyGraphEvents(copy);
    };
    expect(verifyGraphEvents(events)).toMatchObject({ ok: true, events: events.length, unhashed: 0 });
    expect(tampered((e) => { e[2]!.payload = e[2]!.payload.replace('}', ',"x":1}'); })).toMatchObject({ ok: false, firstBadRevision: 3, problem: expect.stringContaining('does not match its hash') });
    expect(tampered((e) => { e[2]!.actor = 'someone-else'; })).toMatchObject({ ok: false, firstBadRevision: 3 });
    expect(tampered((e) => { e[2]!.at += 1; })).toMatchObject({ ok: false, firstBadRevision: 3 });
    expect(tampered((e) => { e.splice(3, 1); })).toMatchObject({ ok: false, firstBadRevision: 5, problem: expect.stringContaining('follows 3') });
    expect(tampered((e) => { e[0]!.prev_hash = 'f'.repeat(64); })).toMatchObject({ ok: false, firstBadRevision: 1, problem: expect.stringContaining('genesis') });
    expect(tampered((e) => { e[4]!.prev_hash = e[2]!.hash; })).toMatchObject({ ok: false, firstBadRevision: 5, problem: expect.stringContaining('prev_hash is not the hash of event 4') });
    expect(tampered((e) => { e[3]!.hash = null; })).toMatchObject({ ok: false, firstBadRevision: 4, problem: expect.stringContaining('has no hash but event 5 after it has one') });
    // An old writer's events at the end: unhashed, not broken.
    expect(tampered((e) => { e.at(-1)!.hash = null; })).toMatchObject({ ok: true, unhashed: 1, events: events.length - 1 });
  });

  it('a file that is no graph events answer, or a head outside it, is said so (exit 3), nothing judged', { timeout: 60_000 }, async () => {
    const bad = await writ('--graph-events', save('bad.json', { receipts: [] }));
    expect(bad.code).toBe(3);
    expect(bad.output).toContain('MALFORMED_REQUEST');
    const outside = await writ('--graph-events', save('p0.json', pages[0]), '--graph-head', `${checkpoint.graph_revision}:${checkpoint.graph_hash}`);
    expect(outside.code).toBe(3);
    expect(outside.output).toContain(`revision ${checkpoint.graph_revision} of --graph-head is not among the events`);
    const usage = await writ('--graph-events', join(dir, 'p0.json'), '--graph-head', 'latest');
    expect(usage.output).toContain('--graph-head must be REVISION:HASH');
  });
});
