import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthorityRevokedError, WritClient } from '../../src/sdk/index.js';
import { fixtureKey } from '../support/harness.js';
import { runWrit } from '../support/cli.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

let server: ServerProcess;
beforeAll(async () => {
  server = await startServerProcess();
});
afterAll(async () => server?.stop());

describe('an operator revokes from the command line while a running Writ serves the agent', () => {
  it('`writ revoke` in another process: the agent holding the lease is aborted at its next renewal, its write on the old decision is refused, its new decisions deny', { timeout: 60_000 }, async () => {
    const resource = 'wp:post:314';
    const agent = new WritClient({ baseUrl: server.url, principal: 'seo-agent-7', privateJwk: fixtureKey('seo-agent-7') });
    const decision = await agent.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] });
    expect(decision.allow).toBe(true);

    let revokedAt = 0;
    const outcome = await agent.withLease([decision], async ({ act, signal }) => {
      const r = await runWrit(server.dataDir, 'revoke', 'd-orch-seo', '--reason', 'incident 7: prompt injection');
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(`held by seo-agent-7 on ${resource}#title: AUTHORITY_REVOKED`);
      revokedAt = Date.now();
      const write = await act({ decision, action: 'update_post', resource, fields: ['title'], payload: { title: 'late' }, expected_version: 0 }).catch((e: unknown) => e);
      expect(write).toBeInstanceOf(AuthorityRevokedError);
      // The renewal (every third of the 1.5 s TTL) is refused: withLease aborts fn — perhaps already, on a loaded machine.
      if (!signal.aborted) await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      return signal.reason;
    }, { ttlMs: 1_500 });
    expect(outcome).toBeInstanceOf(AuthorityRevokedError);
    // At the next renewal: well within a few seconds even when the machine is busy (the bound is loose on purpose).
    expect(Date.now() - revokedAt).toBeLessThan(5_000);

    const after = await agent.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] });
    expect(after.allow).toBe(false);
    expect(after.reasons.join('\n')).toContain('edge d-orch-seo (orchestrator → seo-agent-7) was revoked');
    const history = await fetch(`${server.upstreamUrl}/posts/314/history`);
    expect(history.status === 404 || ((await history.json()) as { revisions: unknown[] }).revisions.length === 0).toBe(true);
  });
});
