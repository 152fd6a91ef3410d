import { expect, it } from 'vitest';
import { canonicalJson } from '../../../src/audit/canonical-json.js';
import type { StoredCheckpoint } from '../../../src/audit/checkpoint.js';
import { GENESIS_HASH } from '../../../src/audit/hash-chain.js';
import type { EntryKind } from '../../../src/audit/receipt.js';
import type { NewEntry, ReceiptIndexRow } from '../../../src/audit/repository.js';
import type { WritStore } from '../../../src/store/contract.js';
import { describeEngines } from './engines.js';

const entry = (receipt_id: string, kind: EntryKind, at: number): NewEntry => ({ receipt_id, kind, body: canonicalJson({ at, kind, receipt_id }) });
const row = (receipt_id: string, at: number, status: ReceiptIndexRow['status'] = 'PENDING'): ReceiptIndexRow => ({
  receipt_id,
  principal: 'seo-agent-7',
  resource_key: 'wp:post:100',
  status,
  idempotency_key: `k-${receipt_id}`,
  request_hash: `req-${receipt_id}`,
  created_at: at,
  completed_at: status === 'REJECTED' ? at : null,
});
const intent = (s: WritStore, id: string, at: number) => s.readWrite((tx) => tx.receipts.appendIntent(entry(id, 'intent', at), row(id, at)));
const settle = (s: WritStore, id: string, at: number) => s.readWrite((tx) => tx.receipts.appendSettlement(entry(id, 'completed', at), 'COMPLETED', at));
const reject = (s: WritStore, id: string, at: number) =>
  s.readWrite((tx) => tx.receipts.appendRejection(entry(id, 'rejected', at), { ...row(id, at, 'REJECTED'), idempotency_key: null }));
const hashOf = async (s: WritStore, seq: number) => (await s.read((tx) => tx.receipts.entriesAfter(seq - 1, 1)))[0]!.hash;
const checkpoint = async (s: WritStore, through: number, seq = 1): Promise<StoredCheckpoint> => ({
  seq,
  archived_through: through,
  hash: await hashOf(s, through),
  prev_hash: GENESIS_HASH,
  count: through,
  at: 9_000,
  jws: 'not-checked-by-the-store',
});

/** r1: 1 intent, 3 settled (t 1000, 3000); r2: 2 rejected (t 2000); r3: 4 intent (t 4000) PENDING; r4: 5, 6 (t 5000). */
async function history(s: WritStore) {
  await intent(s, 'r1', 1_000);
  await reject(s, 'r2', 2_000);
  await settle(s, 'r1', 3_000);
  await intent(s, 'r3', 4_000);
  await intent(s, 'r4', 5_000);
  await settle(s, 'r4', 5_000);
}

describeEngines('receipt retention', (fresh) => {
  it('finds the first receipt that may not be archived: PENDING, or with an entry at or after the age', async () => {
    const { store } = await fresh();
    expect(await store.read((tx) => tx.receipts.firstUnarchivable(10_000))).toBeNull();
    await history(store);
    // r3 is PENDING (first_seq 4) however old; before 2500, r2 (2000) is old but r1 settled at 3000.
    expect(await store.read((tx) => tx.receipts.firstUnarchivable(10_000))).toBe(4);
    expect(await store.read((tx) => tx.receipts.firstUnarchivable(2_500))).toBe(1);
    expect(await store.read((tx) => tx.receipts.firstUnarchivable(1_000))).toBe(1);
  });

  it('finds receipts that straddle a cut (opened at or below it, settled after it)', async () => {
    const { store } = await fresh();
    await history(store);
    expect(await store.read((tx) => tx.receipts.firstStraddling(2))).toBe(1);
    expect(await store.read((tx) => tx.receipts.firstStraddling(3))).toBeNull();
    expect(await store.read((tx) => tx.receipts.firstStraddling(5))).toBe(5);
  });

  it('archiveThrough records the checkpoint and deletes exactly the entries and index rows up to it', async () => {
    const { store } = await fresh();
    await history(store);
    expect(await store.read((tx) => tx.receipts.latestCheckpoint())).toBeNull();
    const cp = await checkpoint(store, 3);
    expect(await store.readWrite((tx) => tx.receipts.archiveThrough(cp))).toEqual({ entries: 3, receipts: 2 });
    expect(await store.read((tx) => tx.receipts.latestCheckpoint())).toEqual(cp);
    expect((await store.read((tx) => tx.receipts.entriesAfter(0, 100))).map((e) => e.seq)).toEqual([4, 5, 6]);
    expect(await store.read((tx) => tx.receipts.entriesOf('r1'))).toEqual([]);
    expect(await store.read((tx) => tx.receipts.indexCounts(6))).toEqual({ receipts: 2, settled: 1 });
    // The archived receipt's idempotency key is forgotten with its row.
    expect(await store.read((tx) => tx.receipts.findByIdempotencyKey('seo-agent-7', 'k-r1'))).toBeNull();
    // Appends go on from the head.
    await settle(store, 'r3', 6_000);
    expect((await store.read((tx) => tx.receipts.entriesAfter(6, 1)))[0]).toMatchObject({ seq: 7, prev_hash: await hashOf(store, 6) });
  });

  it('a second checkpoint becomes the latest and deletes up to its own cut only', async () => {
    const { store } = await fresh();
    await history(store);
    await store.readWrite(async (tx) => tx.receipts.archiveThrough(await checkpoint(store, 2)));
    await settle(store, 'r3', 6_000);
    const second = { ...(await checkpoint(store, 6, 2)), prev_hash: await store.read(async (tx) => (await tx.receipts.latestCheckpoint())!.hash), count: 4 };
    // r1 (1, 3) was left by the first cut (straddling it is the caller's to avoid; the store deletes by seq and first_seq).
    expect(await store.readWrite((tx) => tx.receipts.archiveThrough(second))).toEqual({ entries: 4, receipts: 2 });
    expect(await store.read((tx) => tx.receipts.latestCheckpoint())).toEqual(second);
    expect((await store.read((tx) => tx.receipts.entriesAfter(0, 100))).map((e) => e.seq)).toEqual([7]);
  });

  it('a second archive with the same checkpoint seq does nothing (returns null): two archives racing cannot both delete', async () => {
    const { store, another } = await fresh();
    await history(store);
    const other = await another();
    const first = await checkpoint(store, 3);
    const [a, b] = await Promise.all([
      store.readWrite((tx) => tx.receipts.archiveThrough(first)),
      other.readWrite(async (tx) => tx.receipts.archiveThrough({ ...first, archived_through: 2, count: 2, hash: await hashOf(store, 2) })),
    ]);
    expect([a, b].filter((r) => r === null)).toHaveLength(1);
    expect((await store.read((tx) => tx.receipts.latestCheckpoint()))!.seq).toBe(1);
  });
});
