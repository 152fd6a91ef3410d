import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ForbiddenError, WritClient } from '../../src/sdk/index.js';
import { readAdminCredential } from '../../src/service/index.js';
import { REPO } from '../support/harness.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { clientFor } from './sdk-support.js';

let server: ServerProcess;
beforeAll(async () => {
  server = await startServerProcess();
  // Governance lets the publisher service run scheduled jobs (the catalogue's run_job action on job:**).
  const admin = readAdminCredential(server.dataDir);
  const governance = new WritClient({ baseUrl: server.url, principal: 'governance', privateJwk: admin.privateJwk as never });
  await governance.request('POST', '/v1/grants', {
    id: 'g-publisher-jobs', to: 'publisher', reason: 'the publisher runs the scheduled publishing jobs',
    scope: { actions: ['run_job'], resources: ['job:**'], environments: ['production'], fields: ['*'], risk_max: 1 },
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
    const startAt = Date.now() + 1_500; // both processes are up by then
    const [a, b] = await Promise.all([
      runner('runner-a', 'job:daily-seo-publish', startAt, ticks, 1_000, 400),
      runner('runner-b', 'job:daily-seo-publish', startAt, ticks, 1_000, 400),
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
    expect(ran).toBe(false);
  });
});
