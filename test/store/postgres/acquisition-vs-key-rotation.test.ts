import { afterEach, describe, expect, it } from 'vitest';
import { verifyCallerAssertion, type AuthenticatedCaller } from '../../../src/decision/index.js';
import { GOVERNANCE_ID, type PublicJwk } from '../../../src/graph/model.js';
import { createCallerAssertion, generatePrincipalKeyPair } from '../../../src/sdk/index.js';
import { acquireLeases, listLeases, registerPrincipal, type WritContext } from '../../../src/service/index.js';
import { fixtureKey } from '../../support/harness.js';
import { allowToken, outcomeOf, twoReplicas, type PostgresReplicas } from '../../support/postgres-replicas.js';
import { replicaBehind } from '../../support/replica-behind.js';

/**
 * The caller's own check in an acquisition's granting transaction (a lease stream's caller, or a waiting
 * request's), against a change of its principal committed on another replica that this one has not
 * folded in yet: the graph events since the checks, read in the transaction, are folded in for it. Its
 * key replaced there refuses the grant; a key added beside it does not.
 */
let r: PostgresReplicas | undefined;
afterEach(async () => {
  await r?.close();
  r = undefined;
});

const SEO = 'seo-agent-7';
const title = { action: 'update_post', resource: 'wp:post:1024', fields: ['title'] };
const KEY = 'wp:post:1024#title';

/** Seo-agent-7 as it authenticates on `ctx` with its fixture key (as a lease stream's upgrade does). */
async function authenticatedSeo(ctx: WritContext): Promise<AuthenticatedCaller> {
  const graph = await ctx.graph.current();
  const assertion = await createCallerAssertion({ principal: SEO, privateJwk: fixtureKey(SEO) });
  return verifyCallerAssertion(`Bearer ${assertion}`, { principal: (id) => graph.principal(id), replay: ctx.replay, now: ctx.clock.now(), audience: ctx.config.audience, readSpent: false });
}

/** Seo-agent-7's acquisition on replica A as its authenticated stream caller, with its keys set to `keys(current)` on B after A's graph stopped. */
async function acquireAfterKeysSetOnB(keys: (current: PublicJwk) => PublicJwk[]) {
  r = await twoReplicas('writ_acquisition_rotation');
  const { a, b } = r;
  const token = await allowToken(a, SEO, title);
  const caller = await authenticatedSeo(a);
  const behind = await replicaBehind(a, (await a.graph.current()).revision);
  const p = (await b.graph.current()).principal(SEO)!;
  await registerPrincipal(b, GOVERNANCE_ID, { id: SEO, kind: 'agent', priority_class: p.priority_class, attributes: p.attributes, keys: keys(p.keys[0]!) });
  return outcomeOf(acquireLeases(behind, SEO, { decisions: [token], ttl_ms: 60_000 }, { authenticated: caller }));
}

describe('an authenticated caller\'s acquisition on one replica against its keys changed on another', () => {
  it('its key replaced (same kid, other key material) on a replica this one has not heard from: UNAUTHENTICATED, nothing held', { timeout: 60_000 }, async () => {
    const fresh = await generatePrincipalKeyPair();
    const got = await acquireAfterKeysSetOnB((current) => [{ ...fresh.publicJwk, kid: current.kid } as PublicJwk]);
    expect(!got.ok && got.error).toMatchObject({ code: 'UNAUTHENTICATED', message: expect.stringMatching(/no longer has the key/) });
    expect((await listLeases(r!.a, { key: KEY })).leases.filter((l) => l.state === 'HELD')).toEqual([]);
  });

  it('a key added beside the one it authenticated with: granted', { timeout: 60_000 }, async () => {
    const fresh = await generatePrincipalKeyPair();
    const got = await acquireAfterKeysSetOnB((current) => [current, { ...fresh.publicJwk, kid: 'second' } as PublicJwk]);
    expect(got.ok, String(!got.ok && got.error)).toBe(true);
  });
});
