import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApprovalAssertion, ForbiddenError, UnprocessableError, type Explanation } from '../../src/sdk/index.js';
import { fixtureKey, REPO } from '../support/harness.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { clientFor, grantPublisherJobs } from './sdk-support.js';

let server: ServerProcess;
beforeAll(async () => {
  server = await startServerProcess();
  const governance = await grantPublisherJobs(server);
  // A risky job (risk 3: above production's approval threshold) runs with editor-alice's approval.
  await governance.request('POST', '/v1/grants', {
    id: 'g-publisher-risky-jobs', to: 'publisher', reason: 'the publisher runs the site rebuild, with an editor\'s sign-off',
    scope: { actions: ['run_job'], resources: ['job:rebuild-site:*'], environments: ['production'], fields: ['*'], risk_max: 3 },
  });
  await governance.request('POST', '/v1/approvals', {
    id: 'a-alice-publisher-jobs', from: 'editor-alice', to: 'publisher', reason: 'an editor signs off risky jobs',
    scope: { actions: ['run_job'], resources: ['job:**'], environments: ['production'], risk_max: 3 },
  });
});
afterAll(async () => server?.stop());

interface TickLine { name: string; tick: number; ran?: boolean; started?: number; ended?: number; fencingEpoch?: number; holder?: string | null; error?: string }

function runner(name: string, jobKey: string, startAt: number, ticks: number, periodMs: number, jobMs: number): Promise<TickLine[]> {
  const child = spawn(process.execPath, [
    join(REPO, 'test/sdk/fixtures/job-runner.mjs'), server.url, 'publisher', join(REPO, 'fixtures/keys/publisher.jwk'),
    jobKey, String(startAt), String(ticks), String(periodMs), String(jobMs), name,
  ], { cwd: REPO, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(out.trim().split('\n').map((l) => JSON.parse(l) as TickLine)) : reject(new Error(`${name} exited ${code}: ${out}`))));
  });
}

describe('runExclusive: a scheduled job on two runner processes', () => {
  it('at every tick exactly one runner runs the job, the runs never overlap and each has a newer fencing epoch', { timeout: 60_000 }, async () => {
    const ticks = 4;
    // Both processes are up by then, and each tick's job runs 700 of its 1 000 ms: a runner that comes to a
    // tick late (a loaded machine: one came 666 ms after the other in a clean-clone run, with a 400 ms job)
    // still finds it held, instead of running it a second time after it ended, which is no overlap but
    // not once a tick either.
    const startAt = Date.now() + 3_000;
    const [a, b] = await Promise.all([
      runner('runner-a', 'job:daily-seo-publish', startAt, ticks, 1_000, 700),
      runner('runner-b', 'job:daily-seo-publish', startAt, ticks, 1_000, 700),
    ]);
    const lines = [...a, ...b];
    expect(lines.filter((l) => l.error)).toEqual([]);
    const runs = lines.filter((l) => l.ran).sort((x, y) => x.started! - y.started!);
    for (let tick = 0; tick < ticks; tick++) {
      const atTick = lines.filter((l) => l.tick === tick);
      expect(atTick.filter((l) => l.ran), `tick ${tick}: ${JSON.stringify(atTick)}`).toHaveLength(1);
      // The other runner was told who holds the job, and did not run.
      expect(atTick.find((l) => !l.ran)).toMatchObject({ ran: false, holder: 'publisher' });
    }
    for (let i = 1; i < runs.length; i++) {
      expect(runs[i]!.started!).toBeGreaterThanOrEqual(runs[i - 1]!.ended!);
      expect(runs[i]!.fencingEpoch!).toBeGreaterThan(runs[i - 1]!.fencingEpoch!);
    }
    console.log(`[run-exclusive] runs per tick: ${runs.map((r) => `${r.name}@${r.fencingEpoch}`).join(', ')}`);
  });

  it('a principal without run_job authority gets ForbiddenError with the policy\'s reasons, and nothing runs', async () => {
    const { client } = clientFor(server, 'seo-agent-7');
    let ran = false;
    const refused = await client.runExclusive('job:daily-seo-publish', async () => {
      ran = true;
    }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ForbiddenError);
    expect((refused as ForbiddenError).status).toBe(403);
    expect((refused as ForbiddenError).detail).toContain('run_job on job:daily-seo-publish was denied');
    expect((refused as ForbiddenError).problem).toMatchObject({ approval_missing: false, reasons: expect.arrayContaining([expect.stringMatching(/job:daily-seo-publish is not within the scope/)]) });
    expect(ran).toBe(false);
  });

  it('a risky job without an approval throws ForbiddenError saying an approval is all it lacks; with one it runs, once', async () => {
    const { client } = clientFor(server, 'publisher');
    const jobKey = 'job:rebuild-site:example.com';
    let runs = 0;
    const refused = await client.runExclusive(jobKey, async () => void runs++, { context: { risk: 3 } }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ForbiddenError);
    expect((refused as ForbiddenError).problem).toMatchObject({ approval_missing: true, decision_id: expect.any(String) });
    expect((refused as ForbiddenError).detail).toMatch(/^run_job on job:rebuild-site:example\.com needs an approval \(decision [\w-]+\): ask an approver/);
    // What the agent sees when it asks why: the same want, and the chain that would allow it.
    const why: Explanation = await client.explain({ action: 'run_job', resource: jobKey, environment: 'production', fields: [], context: { risk: 3 } });
    expect(why).toMatchObject({ allow: false, approval_missing: true, obligations: { approval_required: true } });
    expect(why.chains.map((c) => c.edges.map((e) => e.id))).toContainEqual(['g-publisher-risky-jobs']);
    expect(why.chains.find((c) => c.edges[0]!.id === 'g-publisher-risky-jobs')!.verdict.ok).toBe(true);

    const approval = await createApprovalAssertion({ approver: 'editor-alice', privateJwk: fixtureKey('editor-alice'), approve: { principal: 'publisher', action: 'run_job', resource: jobKey, environment: 'production', fields: ['*'] } });
    const done = await client.runExclusive(jobKey, async () => void runs++, { context: { risk: 3, approval } });
    expect(done).toMatchObject({ ran: true });
    expect(runs).toBe(1);
    // The approval was single-use: the next run needs a new one.
    const again = await client.runExclusive(jobKey, async () => void runs++, { context: { risk: 3, approval } }).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(UnprocessableError);
    expect((again as UnprocessableError).detail).toMatch(/^the approval is not valid: /);
    expect(runs).toBe(1);
  });

  it('the approval is spent by the decision even when another runner holds the job ({ran: false})', async () => {
    const { client } = clientFor(server, 'publisher');
    const jobKey = 'job:rebuild-site:example.net';
    const approve = () => createApprovalAssertion({ approver: 'editor-alice', privateJwk: fixtureKey('editor-alice'), approve: { principal: 'publisher', action: 'run_job', resource: jobKey, environment: 'production', fields: ['*'] } });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const first = client.runExclusive(jobKey, async () => {
      started();
      await held;
    }, { context: { risk: 3, approval: await approve() } });
    await running;
    const second = await approve();
    expect(await client.runExclusive(jobKey, async () => undefined, { context: { risk: 3, approval: second } })).toEqual({ ran: false, holder: 'publisher' });
    release();
    expect(await first).toMatchObject({ ran: true });
    const reused = await client.runExclusive(jobKey, async () => undefined, { context: { risk: 3, approval: second } }).catch((e: unknown) => e);
    expect(reused).toBeInstanceOf(UnprocessableError);
  });

  it('a deny handed to withLease is a TypeError that says when an approval is what it lacks', async () => {
    const { client } = clientFor(server, 'publisher');
    const denied = await client.decide({ action: 'run_job', resource: 'job:rebuild-site:example.org', environment: 'production', fields: [], context: { risk: 3 } });
    expect(denied.approval_missing).toBe(true);
    await expect(client.withLease([denied], async () => undefined)).rejects.toThrow(new TypeError(`decision ${denied.decision_id} needs an approval: ask an approver to sign one, pass it as context.approval and decide again; a deny has no token`));
  });
});
