import { expect, it } from 'vitest';
import { canonicalJson } from '../../../src/audit/canonical-json.js';
import { headsRoot, type CheckpointLeaf, type StoredCheckpoint } from '../../../src/audit/checkpoint.js';
import { GENESIS_HASH } from '../../../src/audit/hash-chain.js';
import type { EntryKind } from '../../../src/audit/receipt.js';
import type { NewEntry, ReceiptIndexRow } from '../../../src/audit/repository.js';
import type { WritStore } from '../../../src/store/contract.js';
import { describeEngines } from './engines.js';

const A = 'wp:post:1';
const B = 'wp:post:2';
const entry = (receipt_id: string, kind: EntryKind, at: number, chain: string): NewEntry => ({ chain, receipt_id, kind, body: canonicalJson({ at, kind, receipt_id }) });
const row = (receipt_id: string, at: number, resource_key: string, status: ReceiptIndexRow['status'] = 'PENDING'): ReceiptIndexRow => ({
  receipt_id,
  principal: 'seo-agent-7',
  resource_key,
  status,
  idempotency_key: `k-${receipt_id}`,
  request_hash: `req-${receipt_id}`,
  created_at: at,
  completed_at: status === 'REJECTED' ? at : null,
});
const intent = (s: WritStore, id: string, at: number, chain = A) => s.readWrite((tx) => tx.receipts.appendIntent(entry(id, 'intent', at, chain), row(id, at, chain)));
const settle = (s: WritStore, id: string, at: number) => s.readWrite((tx) => tx.receipts.appendSettlement(entry(id, 'completed', at, ''), 'COMPLETED', at));
const reject = (s: WritStore, id: string, at: number, chain = A) =>
  s.readWrite((tx) => tx.receipts.appendRejection(entry(id, 'rejected', at, chain), { ...row(id, at, chain, 'REJECTED'), idempotency_key: null }));
const entries = (s: WritStore) => s.read((tx) => tx.receipts.entriesFrom(null, 100));
const leafOf = async (s: WritStore, chain: string, floor: number): Promise<CheckpointLeaf> => {
  const all = await entries(s);
  const head = (await s.read((tx) => tx.receipts.heads())).find((h) => h.chain === chain)!;
  const f = all.find((e) => e.chain === chain && e.pos === floor);
  return { chain, pos: head.pos, hash: head.hash, floor_pos: floor, floor_hash: f?.hash ?? GENESIS_HASH };
};
const checkpoint = (seq: number, leaves: CheckpointLeaf[], archived = 0): StoredCheckpoint => ({ v: 2, seq, at: 9_000, chains: leaves.length, root: headsRoot(leaves), archived, jws: 'not-checked-by-the-store' });

/** Chain A: r1 intent (1), r2 rejected (2), r1 settled (3), r3 intent PENDING (4). Chain B: r4 intent (1), settled (2). */
async function history(s: WritStore) {
  await intent(s, 'r1', 1_000);
  await reject(s, 'r2', 2_000);
  await intent(s, 'r4', 2_500, B);
  await settle(s, 'r1', 3_000);
  await intent(s, 'r3', 4_000);
  await settle(s, 'r4', 5_000);
}

describeEngines('receipt checkpoints and retention', (fresh) => {
  it('recordCheckpoint stores the checkpoint and its leaves; checkpointLeaves gives every chain\'s latest leaf as of a checkpoint', async () => {
    const { store } = await fresh();
    await history(store);
    expect(await store.read((tx) => tx.receipts.latestCheckpoint())).toBeNull();
    const first = [await leafOf(store, A, 0), await leafOf(store, B, 0)];
    const c1 = checkpoint(1, first);
    expect(await store.readWrite((tx) => tx.receipts.recordCheckpoint(c1, first, new Set()))).toEqual({ entries: 0, receipts: 0 });
    expect(await store.read((tx) => tx.receipts.latestCheckpoint())).toEqual(c1);
    await settle(store, 'r3', 6_000);
    // Only chain A moved: the second checkpoint stores its leaf alone, and still covers both chains.
    const movedA = await leafOf(store, A, 0);
    const c2 = checkpoint(2, [movedA, first[1]!]);
    expect(await store.readWrite((tx) => tx.receipts.recordCheckpoint(c2, [movedA], new Set()))).toEqual({ entries: 0, receipts: 0 });
    const sorted = (l: CheckpointLeaf[]) => [...l].sort((x, y) => (x.chain < y.chain ? -1 : 1));
    expect(sorted(await store.read((tx) => tx.receipts.checkpointLeaves(2)))).toEqual([movedA, first[1]]);
    expect(sorted(await store.read((tx) => tx.receipts.checkpointLeaves(1)))).toEqual(first);
    expect(await store.read((tx) => tx.receipts.latestCheckpoint())).toEqual(c2);
  });

  it('a leaf whose floor rose deletes exactly that chain\'s entries up to it and the index rows of the receipts they open', async () => {
    const { store } = await fresh();
    await history(store);
    const leaf = await leafOf(store, A, 3);
    const other = await leafOf(store, B, 0);
    const before = await entries(store);
    // A leaf that carries a floor without raising it (a periodic checkpoint after an archive) deletes nothing.
    expect(await store.readWrite((tx) => tx.receipts.recordCheckpoint(checkpoint(1, [leaf, other]), [leaf, other], new Set()))).toEqual({ entries: 0, receipts: 0 });
    expect(await entries(store)).toEqual(before);
    expect(await store.readWrite((tx) => tx.receipts.recordCheckpoint(checkpoint(2, [leaf, other], 3), [leaf, other], new Set([A])))).toEqual({ entries: 3, receipts: 2 });
    expect((await entries(store)).map((e) => `${e.chain}#${e.pos}`)).toEqual([`${A}#4`, `${B}#1`, `${B}#2`]);
    expect(await store.read((tx) => tx.receipts.entriesOf('r1'))).toEqual([]);
    expect(await store.read((tx) => tx.receipts.indexOrphans(10))).toEqual([]);
    // The archived receipt's idempotency key is forgotten with its row.
    expect(await store.read((tx) => tx.receipts.findByIdempotencyKey('seo-agent-7', 'k-r1'))).toBeNull();
    // Appends go on from the head.
    const done = await settle(store, 'r3', 6_000);
    expect(done).toMatchObject({ appended: true, entry: { chain: A, pos: 5 } });
    expect((await entries(store)).find((e) => e.chain === A && e.pos === 5)!.prev_hash).toBe((await entries(store)).find((e) => e.chain === A && e.pos === 4)!.hash);
  });

  it('a periodic checkpoint (recordCheckpoint with a turn) is recorded only in its holder\'s turn, not once it ran out or another took it', async () => {
    const { store } = await fresh();
    await history(store);
    const a = await leafOf(store, A, 0);
    const b = await leafOf(store, B, 0);
    const record = (seq: number, turn?: string) => store.readWrite((tx) => tx.receipts.recordCheckpoint(checkpoint(seq, [a, b]), seq === 1 ? [a, b] : [], new Set(), turn));
    const latest = async () => (await store.read((tx) => tx.receipts.latestCheckpoint()))?.seq ?? 0;
    const claim = (holder: string, ms: number) => store.readWrite((tx) => tx.receipts.claimCheckpointTurn(holder, ms));
    // No turn row yet: nobody's turn.
    expect(await record(1, 'a')).toBeNull();
    expect(await claim('a', 60_000)).toBe(true);
    expect(await record(1, 'b')).toBeNull();
    expect(await latest()).toBe(0);
    expect(await record(1, 'a')).toEqual({ entries: 0, receipts: 0 });
    // a's turn runs out (a stopped renewing): its late checkpoint is not recorded, before or after b takes over.
    expect(await claim('a', 1)).toBe(true);
    await new Promise((r) => setTimeout(r, 20));
    expect(await record(2, 'a')).toBeNull();
    expect(await claim('b', 60_000)).toBe(true);
    expect(await record(2, 'a')).toBeNull();
    expect(await latest()).toBe(1);
    expect(await record(2, 'b')).toEqual({ entries: 0, receipts: 0 });
    // Without a turn (writ audit checkpoint, an archive, a key rotation): recorded whoever's turn it is.
    expect(await record(3)).toEqual({ entries: 0, receipts: 0 });
    expect(await latest()).toBe(3);
  });

  it('two checkpoints with the same seq: one records, the other does nothing (returns null), so two archives racing cannot both delete', async () => {
    const { store, another } = await fresh();
    await history(store);
    const other = await another();
    const a = await leafOf(store, A, 3);
    const b = await leafOf(store, B, 2);
    const [x, y] = await Promise.all([
      store.readWrite((tx) => tx.receipts.recordCheckpoint(checkpoint(1, [a]), [a], new Set([A]))),
      other.readWrite((tx) => tx.receipts.recordCheckpoint(checkpoint(1, [b]), [b], new Set([B]))),
    ]);
    expect([x, y].filter((r) => r === null)).toHaveLength(1);
    expect((await store.read((tx) => tx.receipts.latestCheckpoint()))!.seq).toBe(1);
    expect(await store.read((tx) => tx.receipts.checkpointLeaves(1))).toHaveLength(1);
  });
});
