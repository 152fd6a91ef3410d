import { expect, it } from 'vitest';
import { canonicalJson } from '../../../src/audit/canonical-json.js';
import { ChainVerifier, chainEntryHash, GENESIS_HASH, type ChainBreak } from '../../../src/audit/hash-chain.js';
import type { EntryKind, ReceiptStatus } from '../../../src/audit/receipt.js';
import type { NewEntry, ReceiptIndexRow } from '../../../src/audit/repository.js';
import type { WritStore } from '../../../src/store/contract.js';
import { describeEngines } from './engines.js';

const entry = (receipt_id: string, kind: EntryKind, at = 1_000, chain = 'wp:post:100'): NewEntry => ({ chain, receipt_id, kind, body: canonicalJson({ at, kind, receipt_id }) });
const index = (receipt_id: string, over: Partial<ReceiptIndexRow> = {}): ReceiptIndexRow => ({
  receipt_id,
  principal: 'seo-agent-7',
  resource_key: 'wp:post:100',
  status: 'PENDING',
  idempotency_key: null,
  request_hash: `req-${receipt_id}`,
  created_at: 1_000,
  completed_at: null,
  ...over,
});
const intent = (s: WritStore, id: string, over: Partial<ReceiptIndexRow> = {}) =>
  s.readWrite((tx) => tx.receipts.appendIntent(entry(id, 'intent', 1_000, over.resource_key ?? 'wp:post:100'), index(id, over)));
const settle = (s: WritStore, id: string, status: 'COMPLETED' | 'FAILED' = 'COMPLETED', kind: EntryKind = 'completed') =>
  s.readWrite((tx) => tx.receipts.appendSettlement(entry(id, kind, 2_000), status, 2_000));

/** Every chain walked in (chain, pos) order in chunks of 7, each linked with hash-chain.ts hashes and reaching its kept head. */
async function verify(s: WritStore): Promise<{ ok: true; entries: number; chains: number } | (ChainBreak & { ok: false })> {
  return s.read(async (tx) => {
    const heads = new Map((await tx.receipts.heads()).map((h) => [h.chain, h]));
    let v: ChainVerifier | undefined;
    let entries = 0;
    const seen = new Set<string>();
    const close = () => {
      if (v && v.verified < (heads.get(v.chain)?.pos ?? 0)) return v.bad(v.verified + 1, 'tail missing');
      if (v && heads.get(v.chain)?.hash !== v.headHash) return v.bad(v.verified, 'head differs');
      entries += v?.count ?? 0;
      return undefined;
    };
    for (let after: { chain: string; pos: number } | null = null; ; ) {
      const chunk = await tx.receipts.entriesFrom(after, 7);
      if (chunk.length === 0) break;
      for (const e of chunk) {
        if (e.chain !== v?.chain) {
          const bad = close();
          if (bad) return { ok: false as const, ...bad };
          v = new ChainVerifier(e.chain);
          seen.add(e.chain);
        }
        const bad = v.feed([e]);
        if (bad) return { ok: false as const, ...bad };
      }
      after = { chain: chunk[chunk.length - 1]!.chain, pos: chunk[chunk.length - 1]!.pos };
    }
    const bad = close();
    if (bad) return { ok: false as const, ...bad };
    if (seen.size !== heads.size) return { ok: false as const, chain: '', pos: 0, problem: 'a chain has a head and no entries' };
    return { ok: true as const, entries, chains: seen.size };
  });
}

describeEngines('receipts', (fresh) => {
  it('chains every entry to the one before it in its key\'s chain, with hash-chain.ts hashes; a settlement goes to its receipt\'s chain', async () => {
    const { store } = await fresh();
    const a = await intent(store, 'r1');
    expect(a).toMatchObject({ appended: true, entry: { seq: 1, chain: 'wp:post:100', pos: 1, receipt_id: 'r1', kind: 'intent', prev_hash: GENESIS_HASH } });
    if (!a.appended) return;
    expect(a.entry.hash).toBe(chainEntryHash(GENESIS_HASH, a.entry.body, 'wp:post:100', 1, 1, 'intent', 'r1'));
    // Another key: its own chain from the genesis; the store-wide seq goes on.
    const b = await intent(store, 'r9', { resource_key: 'wp:post:9' });
    expect(b).toMatchObject({ appended: true, entry: { chain: 'wp:post:9', pos: 1, prev_hash: GENESIS_HASH } });
    const done = await settle(store, 'r1');
    expect(done).toMatchObject({ appended: true, entry: { chain: 'wp:post:100', pos: 2, prev_hash: a.entry.hash } });
    const rej = await store.readWrite((tx) => tx.receipts.appendRejection(entry('r2', 'rejected'), index('r2', { status: 'REJECTED', completed_at: 1_000 })));
    expect(rej).toMatchObject({ chain: 'wp:post:100', pos: 3, kind: 'rejected' });
    const seqs = [a.entry.seq, (b as { entry: { seq: number } }).entry.seq, (done as { entry: { seq: number } }).entry.seq, rej.seq];
    expect([...seqs].sort((x, y) => x - y)).toEqual(seqs);
    expect(await store.read((tx) => tx.receipts.entriesOf('r1'))).toEqual([a.entry, (done as { entry: unknown }).entry]);
    expect(await store.read((tx) => tx.receipts.entriesOf('nope'))).toEqual([]);
    expect(await verify(store)).toMatchObject({ ok: true, entries: 4, chains: 2 });
    expect(await store.read((tx) => tx.receipts.heads())).toEqual(expect.arrayContaining([
      { chain: 'wp:post:100', pos: 3, hash: rej.hash },
      { chain: 'wp:post:9', pos: 1, hash: (b as { entry: { hash: string } }).entry.hash },
    ]));
    expect(await store.read((tx) => tx.receipts.indexOrphans(10))).toEqual([]);
  });

  it('headsSum is the sum of every chain\'s head position: 0 with none, a replayed intent adds nothing', async () => {
    const { store } = await fresh();
    const sum = () => store.read((tx) => tx.receipts.headsSum());
    expect(await sum()).toBe(0);
    await intent(store, 'r1');
    await settle(store, 'r1');
    await intent(store, 'r2', { resource_key: 'wp:post:9' });
    await intent(store, 'r3', { resource_key: 'wp:post:9', idempotency_key: 'k-1' });
    expect(await sum()).toBe(2 + 2);
    // The same idempotency key again: the first receipt, no entry (on PostgreSQL a head row may stay at 0).
    expect((await intent(store, 'r4', { resource_key: 'wp:post:7', idempotency_key: 'k-1' })).appended).toBe(false);
    expect(await sum()).toBe(4);
    const heads = await store.read((tx) => tx.receipts.heads());
    expect(await sum()).toBe(heads.reduce((n, h) => n + h.pos, 0));
  });

  it('an idempotency key names one receipt: a second intent writes nothing and returns the first', async () => {
    const { store } = await fresh();
    await intent(store, 'r1', { idempotency_key: 'k' });
    const again = await intent(store, 'r2', { idempotency_key: 'k', request_hash: 'other' });
    expect(again).toEqual({ appended: false, existing: { receipt_id: 'r1', request_hash: 'req-r1' } });
    expect(await store.read((tx) => tx.receipts.findByIdempotencyKey('seo-agent-7', 'k'))).toEqual({ receipt_id: 'r1', request_hash: 'req-r1' });
    expect(await store.read((tx) => tx.receipts.findByIdempotencyKey('someone-else', 'k'))).toBeNull();
    expect(await store.read((tx) => tx.receipts.entriesFrom(null, 100))).toHaveLength(1);
    // Another principal may use the same key; rejections never occupy one.
    expect((await intent(store, 'r3', { idempotency_key: 'k', principal: 'other-agent' })).appended).toBe(true);
    await store.readWrite((tx) => tx.receipts.appendRejection(entry('r4', 'rejected'), index('r4', { status: 'REJECTED', idempotency_key: 'k2' })));
    expect(await store.read((tx) => tx.receipts.findByIdempotencyKey('seo-agent-7', 'k2'))).toBeNull();
  });

  it('concurrent intents with one idempotency key from two connections: exactly one receipt', async () => {
    const { store, another } = await fresh();
    const other = await another();
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => intent(i % 2 ? other : store, `r${i}`, { idempotency_key: 'same' })));
    expect(results.filter((r) => r.appended)).toHaveLength(1);
    const winner = results.find((r) => r.appended)!;
    for (const r of results) if (!r.appended) expect(r.existing.receipt_id).toBe(winner.appended ? winner.entry.receipt_id : '');
    expect(await verify(store)).toMatchObject({ ok: true, entries: 1 });
  });

  it('the first settlement wins; a later one writes nothing; an unknown receipt is said to be unknown', async () => {
    const { store } = await fresh();
    await intent(store, 'r1');
    expect((await settle(store, 'r1', 'COMPLETED', 'reconciled')).appended).toBe(true);
    expect(await settle(store, 'r1', 'FAILED', 'failed')).toEqual({ appended: false, reason: 'settled' });
    expect(await settle(store, 'nope')).toEqual({ appended: false, reason: 'unknown' });
    const [found] = await store.read((tx) => tx.receipts.find({ limit: 10 }));
    expect(found!.entries.map((e) => e.kind)).toEqual(['intent', 'reconciled']);
    expect(await verify(store)).toMatchObject({ ok: true, entries: 2 });
  });

  it('concurrent settlements of one receipt from two connections: exactly one is appended', async () => {
    const { store, another } = await fresh();
    const other = await another();
    await intent(store, 'r1');
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => settle(i % 2 ? other : store, 'r1', i % 3 ? 'COMPLETED' : 'FAILED', i % 3 ? 'completed' : 'failed')));
    expect(results.filter((r) => r.appended)).toHaveLength(1);
    expect(await store.read((tx) => tx.receipts.entriesOf('r1'))).toHaveLength(2);
  });

  it('finds receipts by resource, principal, status and creation time, in chain order, a page at a time', async () => {
    const { store } = await fresh();
    for (let i = 1; i <= 6; i++) {
      await intent(store, `r${i}`, { resource_key: i % 2 ? 'wp:post:1' : 'wp:post:2', principal: i <= 3 ? 'a' : 'b', created_at: 1_000 * i });
    }
    await settle(store, 'r1');
    await settle(store, 'r4', 'FAILED', 'failed');
    const ids = (found: { entries: { receipt_id: string }[] }[]) => found.map((f) => f.entries[0]!.receipt_id);
    expect(ids(await store.read((tx) => tx.receipts.find({ limit: 100 })))).toEqual(['r1', 'r2', 'r3', 'r4', 'r5', 'r6']);
    expect(ids(await store.read((tx) => tx.receipts.find({ resource: 'wp:post:1', limit: 100 })))).toEqual(['r1', 'r3', 'r5']);
    expect(ids(await store.read((tx) => tx.receipts.find({ principal: 'b', limit: 100 })))).toEqual(['r4', 'r5', 'r6']);
    expect(ids(await store.read((tx) => tx.receipts.find({ status: 'PENDING' as ReceiptStatus, limit: 100 })))).toEqual(['r2', 'r3', 'r5', 'r6']);
    expect(ids(await store.read((tx) => tx.receipts.find({ createdAtOrBefore: 2_000, limit: 100 })))).toEqual(['r1', 'r2']);
    expect(ids(await store.read((tx) => tx.receipts.find({ createdAtOrAfter: 5_000, limit: 100 })))).toEqual(['r5', 'r6']);
    expect(ids(await store.read((tx) => tx.receipts.find({ createdAtOrAfter: 2_000, createdAtOrBefore: 4_000, principal: 'a', limit: 100 })))).toEqual(['r2', 'r3']);
    const page1 = await store.read((tx) => tx.receipts.find({ limit: 2 }));
    expect(ids(page1)).toEqual(['r1', 'r2']);
    expect(page1[0]!.entries.map((e) => e.kind)).toEqual(['intent', 'completed']);
    const page2 = await store.read((tx) => tx.receipts.find({ after: page1[1]!.first_seq, limit: 2 }));
    expect(ids(page2)).toEqual(['r3', 'r4']);
    expect(page2[1]!.entries.map((e) => e.kind)).toEqual(['intent', 'failed']);
    expect(ids(await store.read((tx) => tx.receipts.find({ principal: 'a', status: 'COMPLETED', limit: 100 })))).toEqual(['r1']);
    // Newest first, paging back in time with `before`; each receipt's entries still in chain order.
    const newest = await store.read((tx) => tx.receipts.find({ newestFirst: true, limit: 2 }));
    expect(ids(newest)).toEqual(['r6', 'r5']);
    expect(ids(await store.read((tx) => tx.receipts.find({ newestFirst: true, before: newest[1]!.first_seq, limit: 3 })))).toEqual(['r4', 'r3', 'r2']);
    const r4 = (await store.read((tx) => tx.receipts.find({ newestFirst: true, principal: 'b', status: 'FAILED', limit: 5 })))[0]!;
    expect(r4.entries.map((e) => e.kind)).toEqual(['intent', 'failed']);
    expect(ids(await store.read((tx) => tx.receipts.find({ newestFirst: true, resource: 'wp:post:1', createdAtOrBefore: 4_000, limit: 5 })))).toEqual(['r3', 'r1']);
  });

  it('finds receipts created at least so long ago by the store\'s own clock, whatever the caller\'s clock says (the reconciliation sweep of a replica whose clock runs ahead)', async () => {
    const { store } = await fresh();
    const now = Date.now();
    await intent(store, 'fresh', { created_at: now });
    await intent(store, 'old', { created_at: now - 10_000 });
    const ids = (found: { entries: { receipt_id: string }[] }[]) => found.map((f) => f.entries[0]!.receipt_id);
    expect(ids(await store.read((tx) => tx.receipts.find({ status: 'PENDING' as ReceiptStatus, createdAtLeastMsAgo: 5_000, limit: 100 })))).toEqual(['old']);
    expect(ids(await store.read((tx) => tx.receipts.find({ status: 'PENDING' as ReceiptStatus, createdAtLeastMsAgo: 0, limit: 100 })))).toEqual(['fresh', 'old']);
  });

  it('refuses a second receipt with the same id (ALREADY_EXISTS)', async () => {
    const { store } = await fresh();
    await intent(store, 'r1');
    await expect(intent(store, 'r1')).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
    await expect(store.readWrite((tx) => tx.receipts.appendRejection(entry('r1', 'rejected'), index('r1', { status: 'REJECTED' })))).rejects.toMatchObject({
      code: 'ALREADY_EXISTS',
    });
    expect(await verify(store)).toMatchObject({ ok: true, entries: 1 });
  });

  it('concurrent appenders on two connections never fork a chain, on one key or on several', async () => {
    const { store, another } = await fresh();
    const other = await another();
    await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        const s = i % 2 ? other : store;
        await intent(s, `r${i}`, { resource_key: i < 20 ? 'wp:post:100' : `wp:post:${i % 4}` });
        await settle(s, `r${i}`);
      }),
    );
    expect(await verify(store)).toMatchObject({ ok: true, entries: 80, chains: 5 });
    expect((await store.read((tx) => tx.receipts.heads())).find((h) => h.chain === 'wp:post:100')?.pos).toBe(40);
    expect(await store.read((tx) => tx.receipts.indexOrphans(10))).toEqual([]);
  });
});
