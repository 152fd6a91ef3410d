import { expect, it } from 'vitest';
import type { DecisionClaims } from '../../../src/decision/decision-claims.js';
import { describeEngines } from './engines.js';

const incident = (id: string, declared_at: number, ends_at: number, environment: string | null = 'production') =>
  ({ id, declared_by: 'incident-commander', reason: 'outage', decision_id: `dec-${id}`, environment, declared_at, ends_at });

describeEngines('incidents', (fresh) => {
  it('declares once, lists the active ones in declaration order, resolves once', async () => {
    const { store } = await fresh();
    expect(await store.readWrite((tx) => tx.incidents.declare(incident('i1', 1_000, 10_000)))).toBe(true);
    expect(await store.readWrite((tx) => tx.incidents.declare(incident('i1', 2_000, 20_000)))).toBe(false);
    await store.readWrite((tx) => tx.incidents.declare(incident('i0', 500, 3_000)));
    await store.readWrite((tx) => tx.incidents.declare(incident('i2', 1_500, 10_000)));
    expect(await store.read((tx) => tx.incidents.get('i1'))).toEqual({ ...incident('i1', 1_000, 10_000), resolved_at: null });
    expect(await store.read((tx) => tx.incidents.get('nope'))).toBeUndefined();
    expect((await store.read((tx) => tx.incidents.active(2_000))).map((i) => i.id)).toEqual(['i0', 'i1', 'i2']);
    expect((await store.read((tx) => tx.incidents.active(3_000))).map((i) => i.id)).toEqual(['i1', 'i2']);
    await store.readWrite((tx) => tx.incidents.resolve('i1', 4_000));
    await store.readWrite((tx) => tx.incidents.resolve('i1', 5_000));
    expect((await store.read((tx) => tx.incidents.get('i1')))?.resolved_at).toBe(4_000);
    expect((await store.read((tx) => tx.incidents.active(4_500))).map((i) => i.id)).toEqual(['i2']);
  });

  it('lists the same active incidents under a shared lock, in a write transaction, which a resolve in it still takes', async () => {
    const { store } = await fresh();
    await store.readWrite((tx) => tx.incidents.declare(incident('i1', 1_000, 10_000)));
    await store.readWrite((tx) => tx.incidents.declare(incident('i2', 1_500, 3_000)));
    const locked = await store.readWrite(async (tx) => {
      const active = await tx.incidents.active(2_000, { lock: 'share' });
      // The transaction's own lock does not stand in its way.
      await tx.incidents.resolve('i2', 2_500);
      return active;
    });
    expect(locked).toEqual([{ ...incident('i1', 1_000, 10_000), resolved_at: null }, { ...incident('i2', 1_500, 3_000), resolved_at: null }]);
    expect((await store.read((tx) => tx.incidents.active(2_600))).map((i) => i.id)).toEqual(['i1']);
  });

  it('keeps the environment each incident was declared for, and null (declared before environments were recorded) as null', async () => {
    const { store } = await fresh();
    await store.readWrite((tx) => tx.incidents.declare(incident('prod', 1_000, 10_000)));
    await store.readWrite((tx) => tx.incidents.declare(incident('dev', 1_000, 10_000, 'development')));
    await store.readWrite((tx) => tx.incidents.declare(incident('old', 1_000, 10_000, null)));
    expect(await store.read((tx) => tx.incidents.get('dev'))).toEqual({ ...incident('dev', 1_000, 10_000, 'development'), resolved_at: null });
    expect(await store.read((tx) => tx.incidents.get('old'))).toEqual({ ...incident('old', 1_000, 10_000, null), resolved_at: null });
    // Same declaration time: ties are listed by id, on every engine.
    expect((await store.read((tx) => tx.incidents.active(2_000))).map((i) => [i.id, i.environment])).toEqual([['dev', 'development'], ['old', null], ['prod', 'production']]);
  });
});

describeEngines('lease authority', (fresh) => {
  it('keeps the decisions a lease was taken with', async () => {
    const { store } = await fresh();
    const decisions = [{ decision_id: 'dec-1', principal: 'seo-agent-7', fields: ['title'], owners: { title: null }, graph_revision: 12 }] as unknown as DecisionClaims[];
    await store.readWrite((tx) => tx.leaseAuthority.record('lease_1', 'seo-agent-7', decisions, 1_000));
    expect(await store.read((tx) => tx.leaseAuthority.get('lease_1'))).toEqual({ holder: 'seo-agent-7', decisions });
    expect(await store.read((tx) => tx.leaseAuthority.get('lease_2'))).toBeUndefined();
    expect(await store.read((tx) => tx.leaseAuthority.holderOf('lease_1'))).toBe('seo-agent-7');
    expect(await store.read((tx) => tx.leaseAuthority.holderOf('lease_2'))).toBeUndefined();
  });
});
