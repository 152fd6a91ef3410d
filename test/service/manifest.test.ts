import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { applyManifest, type GraphManifest } from '../../src/service/index.js';
import { commitGraphChange } from '../../src/service/graph-changes.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h?.close());

const typo = { actions: ['update_psot'], resources: ['wp:post:*'], environments: ['production'], fields: ['*'], risk_max: 1 };

describe('applying a graph manifest', () => {
  it('an edge written before scopes were checked re-applies unchanged (a service with such a manifest still starts); a new one is refused, before anything is written', async () => {
    // As a Writ without the scope check would have written it.
    await commitGraphChange(h.ctx, GOVERNANCE_ID, (_graph, now) => [{
      type: 'edge.created',
      edge: { id: 'g-old-typo', kind: 'grant', from: GOVERNANCE_ID, to: 'editor-alice', scope: { actions: ['update_psot'], resources: ['wp:post:*'], environments: ['production'], fields: ['*'], constraints: { risk_max: 1 } }, max_depth: 0, reason: 'old', creator: GOVERNANCE_ID, created_at: now, not_before: null, expires_at: null },
    }]);
    const old: GraphManifest = { grants: [{ id: 'g-old-typo', to: 'editor-alice', reason: 'old', scope: typo, max_depth: 0 }] };
    await expect(applyManifest(h.ctx, GOVERNANCE_ID, old, '.')).resolves.toMatchObject({ created: [], unchanged: ['grant g-old-typo'] });

    const revision = (await h.ctx.graph.current()).revision;
    const fresh: GraphManifest = {
      principals: [{ id: 'manifest-agent', kind: 'agent', keys: [] }],
      grants: [...old.grants!, { id: 'g-new-typo', to: 'editor-alice', reason: 'new', scope: typo }],
    };
    await expect(applyManifest(h.ctx, GOVERNANCE_ID, fresh, '.')).rejects.toMatchObject({ code: 'UNPROCESSABLE', message: expect.stringMatching(/^grant g-new-typo: scope\.actions: "update_psot" is not an action of the policy/) });
    expect((await h.ctx.graph.current()).revision).toBe(revision);
    expect((await h.ctx.graph.current()).principal('manifest-agent')).toBeUndefined();
  });

  it('a key file that cannot be read or an item without a scope is refused before anything is written, naming the item', async () => {
    const revision = (await h.ctx.graph.current()).revision;
    await expect(applyManifest(h.ctx, GOVERNANCE_ID, { principals: [{ id: 'm-1', kind: 'agent', keys: [] }, { id: 'm-2', kind: 'agent', key_files: ['no-such.jwk'] }] }, '.')).rejects.toMatchObject({
      code: 'MALFORMED_REQUEST', message: expect.stringMatching(/^principal m-2: cannot read key file .*no-such\.jwk/),
    });
    await expect(applyManifest(h.ctx, GOVERNANCE_ID, { principals: [{ id: 'm-1', kind: 'agent', keys: [] }], grants: [{ id: 'g-no-scope', to: 'm-1', reason: 'r' } as never] }, '.')).rejects.toMatchObject({
      code: 'MALFORMED_REQUEST', message: expect.stringMatching(/^grant g-no-scope is malformed/),
    });
    expect((await h.ctx.graph.current()).revision).toBe(revision);
  });
});
