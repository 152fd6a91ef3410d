import { afterEach, describe, expect, it } from 'vitest';
import { GOVERNANCE_ID } from '../../../src/graph/model.js';
import { performAction, revokeEdge } from '../../../src/service/index.js';
import { allowToken, holdTransactionAfter, outcomeOf, settledOrWaitingForLock, twoReplicas, type PostgresReplicas } from '../../support/postgres-replicas.js';

/**
 * DESIGN.md: "the write's own transaction re-checks revocation against the database, so no write lands
 * through authority revoked before its intent committed". The gateway's intent on replica A re-reads
 * the graph events since the decision; replica B revokes an edge of the chain while A's intent
 * transaction is open after that read. On READ COMMITTED a plain SELECT would let the revocation commit
 * first and the write go upstream all the same.
 */
let r: PostgresReplicas | undefined;
afterEach(async () => {
  await r?.close();
  r = undefined;
});

const write = { action: 'update_post', resource: 'wp:post:1024', fields: ['meta_description'], payload: { meta_description: 'late' }, expected_version: 0 };

describe('a gateway write on one replica against a revocation on another', () => {
  it('a revocation of the chain while the intent\'s transaction is open waits for the intent, so it never commits before a write it did not stop', { timeout: 60_000 }, async () => {
    r = await twoReplicas('writ_intent_revocation');
    const { a, b, url } = r;
    const token = await allowToken(a, 'seo-agent-7', { action: 'update_post', resource: 'wp:post:1024', fields: ['meta_description'] });
    const hold = holdTransactionAfter(a.store, 'graph', 'read');
    const written = outcomeOf(performAction(a, 'seo-agent-7', write, { decision: token }));
    await hold.reached;
    // The intent has re-read the graph since the decision, and not committed.
    const revoke = outcomeOf(revokeEdge(b, GOVERNANCE_ID, 'd-orch-seo', 'compromised'));
    const meanwhile = await settledOrWaitingForLock(revoke, url);
    hold.release();
    const w = await written;
    const revoked = await revoke;
    expect(meanwhile).toBe('waiting');
    expect(w.ok && w.value.receipt.status, String(!w.ok && w.error)).toBe('COMPLETED');
    expect(revoked.ok && revoked.value.revoked).toBe(true);
  });

  it('a revocation committed after the checks, before the intent, refuses the write on a replica that has not folded it in', { timeout: 60_000 }, async () => {
    r = await twoReplicas('writ_intent_revocation');
    const { a, b, upstreamUrl } = r;
    const token = await allowToken(a, 'seo-agent-7', { action: 'update_post', resource: 'wp:post:1024', fields: ['meta_description'] });
    // The revocation lands on B as A's intent transaction begins (A's checks ran on its graph before it).
    const readWrite = a.store.readWrite.bind(a.store);
    let revoked = false;
    (a.store as { readWrite: typeof readWrite }).readWrite = async (fn, options) => {
      if (!revoked) {
        revoked = true;
        await revokeEdge(b, GOVERNANCE_ID, 'd-orch-seo', 'compromised');
      }
      return readWrite(fn, options);
    };
    const w = await outcomeOf(performAction(a, 'seo-agent-7', write, { decision: token }));
    expect(!w.ok && w.error).toMatchObject({ code: 'AUTHORITY_REVOKED', message: expect.stringMatching(/d-orch-seo/) });
    expect(((await (await fetch(`${upstreamUrl}/writes`)).json()) as { total: number }).total).toBe(0);
  });
});
