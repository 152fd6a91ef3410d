import { randomUUID } from 'node:crypto';
import type { StoreTx, WritStore } from '../../../src/store/contract.js';
import { NEWCOMER_TICKET, type AcquireCommand, type AcquireOutcome } from '../../../src/lease/repository.js';

export interface Taken {
  leaseId: string;
  tokenHash: string;
  outcome: AcquireOutcome;
}

/** An acquisition command with fresh credentials; times are the real clock (PostgreSQL's lease time is its own clock). */
export function acquireCommand(keys: string[], holder: string, over: Partial<AcquireCommand> = {}): AcquireCommand {
  const id = randomUUID();
  return {
    keys,
    leaseId: `lease_${id}`,
    tokenHash: `hash_${id}`,
    holder,
    instance: null,
    priority: 0,
    ttlMs: 10_000,
    now: Date.now(),
    preempt: false,
    ticket: NEWCOMER_TICKET,
    ...over,
  };
}

export async function take(store: WritStore, keys: string[], holder: string, over: Partial<AcquireCommand> = {}): Promise<Taken & { cmd: AcquireCommand }> {
  const cmd = acquireCommand(keys, holder, over);
  const outcome = await store.readWrite((tx) => tx.leases.acquire(cmd));
  return { leaseId: cmd.leaseId, tokenHash: cmd.tokenHash, outcome, cmd };
}

export function epochsOf(t: { outcome: AcquireOutcome }): Record<string, number> {
  if (!t.outcome.granted) throw new Error(`expected a grant, got a refusal on ${t.outcome.key}`);
  return t.outcome.epochs;
}

export const release = (store: WritStore, t: Taken) => store.readWrite((tx) => tx.leases.release({ leaseId: t.leaseId, tokenHash: t.tokenHash, now: Date.now() }));
export const renew = (store: WritStore, t: Taken, ttlMs: number | null = null) =>
  store.readWrite((tx) => tx.leases.renew({ leaseId: t.leaseId, tokenHash: t.tokenHash, ttlMs, now: Date.now() }));

/** Everything the lease port can show about some keys, for "nothing changed" comparisons. */
export async function leaseView(store: WritStore, keys: string[]) {
  return store.read(async (tx: StoreTx) => ({
    keys: await tx.leases.listKeys({}).then((p) => p.keys),
    history: await tx.leases.history({}),
    waiters: await Promise.all(keys.map((k) => tx.leases.waiters(k, Date.now()))),
  }));
}

/** Puts `holder` in the queue of each of `keys` for `waitMs` from now; its ticket. */
export const enqueue = (store: WritStore, holder: string, priority: number, keys: string[], waitMs = 5_000): Promise<number> => {
  const now = Date.now();
  return store.readWrite((tx) => tx.leases.enqueue({ keys, holder, instance: null, priority, enqueuedAt: now, deadline: now + waitMs }));
};
