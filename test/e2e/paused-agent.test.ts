import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WritClient } from '../../src/sdk/index.js';
import { fixtureKey, REPO } from '../support/harness.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

let server: ServerProcess;
beforeAll(async () => {
  server = await startServerProcess();
});
afterAll(async () => server?.stop());

describe('a paused agent is fenced out', () => {
  it('A takes epoch n, is SIGSTOPped past its TTL, B takes n+1 and writes, A resumes and writes with n → STALE_FENCING_EPOCH; the upstream never sees A', async () => {
    const resource = 'wp:post:77';
    const agent = spawn(process.execPath, [join(REPO, 'test/e2e/fixtures/paused-agent.mjs'), server.url, 'seo-agent-7', join(REPO, 'fixtures/keys/seo-agent-7.jwk'), resource, '1000'], {
      cwd: REPO,
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const lines = createInterface({ input: agent.stdout! })[Symbol.asyncIterator]();
    const ready = JSON.parse((await lines.next()).value as string);
    expect(ready.ready).toBe(true);
    const n = ready.epochs[`${resource}#title`] as number;

    agent.kill('SIGSTOP');
    try {
      await new Promise((r) => setTimeout(r, 1600)); // past A's 1 s TTL

      const b = new WritClient({ baseUrl: server.url, principal: 'editor-alice', privateJwk: fixtureKey('editor-alice') });
      const d = await b.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] });
      const lease = await b.acquireLease([d], { ttlMs: 10_000 });
      expect(lease.epochs[`${resource}#title`]).toBe(n + 1);
      const receipt = await b.act({ decision: d, action: 'update_post', resource, fields: ['title'], payload: { title: 'by editor-alice' }, expected_version: 0, lease });
      expect(receipt.status).toBe('COMPLETED');
    } finally {
      agent.kill('SIGCONT');
    }
    agent.stdin!.write('go\n');
    const result = JSON.parse((await lines.next()).value as string);
    expect(result.ok).toBe(false);
    expect(result.code).toBe('STALE_FENCING_EPOCH');

    const history = (await (await fetch(`${server.upstreamUrl}/posts/77/history`)).json()) as { revisions: { written_by: string }[] };
    expect(history.revisions.map((r) => r.written_by)).toEqual(['editor-alice']);
    const requests = (await (await fetch(`${server.upstreamUrl}/requests?post=77`)).json()) as { requests?: { principal: string | null; method: string }[] } | { principal: string | null; method: string }[];
    const list = Array.isArray(requests) ? requests : requests.requests ?? [];
    expect(list.filter((r) => r.principal === 'seo-agent-7')).toEqual([]);
  });
});
