import { randomUUID } from 'node:crypto';
import type { Clock } from '../clock.js';
import type { TxRunner } from '../transactions.js';
import { WritError } from '../errors.js';
import { ArchiveWriter } from './archive-file.js';
import { canonicalJson } from './canonical-json.js';
import {
  headsRoot,
  forEachYielding,
  headsRootYielding,
  isHeadsCheckpoint,
  isLegacyCheckpoint,
  rangesHash,
  samePayload,
  type ArchivePayload,
  type ArchiveRange,
  type CheckpointLeaf,
  type CheckpointPayload,
  type CheckpointSigner,
  type SignedPayload,
  type StoredCheckpoint,
} from './checkpoint.js';
import { foldReceipt, readEntryBody } from './fold.js';
import { HeadsTree } from './heads-tree.js';
import { ChainVerifier, chainOf, GENESIS_HASH, LEGACY_CHAIN, type ChainBreak, type ChainHead, type ReceiptChainVerdict } from './hash-chain.js';
import { verifyGraphLog, type GraphLogChain } from './graph-chain.js';
import { checkIndexRows } from './index-check.js';
import { LogWalk } from './log-walk.js';
import { RECEIPT_PAGE, type Receipt, type ReceiptCompletion, type ReceiptIntent, type ReceiptPage, type ReceiptQuery, type ReceiptRejection, type ReconcileOutcome, type StoredEntry } from './receipt.js';
import type { ReceiptFilter, ReceiptRepository, SettlingEntry } from './repository.js';

/** Entries read and checked per step of a chain verification (8–15 ms of work on these machines). */
export const VERIFY_CHUNK = 1_000;

/** The transaction handle the receipt log needs. */
export interface ReceiptTx {
  readonly receipts: ReceiptRepository;
  /** The graph event log's hash chain: verified with the receipts, its head signed by the checkpoints. */
  readonly graph: GraphLogChain;
}

export interface ReceiptLogOptions {
  store: TxRunner<ReceiptTx>;
  clock: Clock;
  /** New receipt ids; defaults to `rcpt_<uuid>`. */
  newId?: () => string;
  /** Signs checkpoints when archiving and checks the latest one when verifying (the KeyRing's). */
  checkpoints?: CheckpointSigner;
  /**
   * The most chains whose checkpoint leaves are kept in memory between checkpoints (KEPT_CHAINS by
   * default; 0: none, every checkpoint reads and hashes all of them again).
   */
  keptChains?: number;
  /**
   * How long kept leaves are built on before a checkpoint reads and checks every chain again (KEPT_FOR_MS by
   * default): the whole pass is what notices a chain cut back or a stored leaf altered without an append.
   */
  keptForMs?: number;
  /** An unhashed graph event is a break, not `unhashed` (WRIT_GRAPH_REQUIRE_HASHES). */
  requireGraphHashes?: boolean;
}

/** An hour: the replica in turn makes one whole pass an hour. */
export const KEPT_FOR_MS = 3_600_000;

/** The most chains whose leaves a checkpoint keeps for the next (about 150 bytes each and the chain's name: see HeadsTree). */
export const KEPT_CHAINS = 4_000_000;

/** The latest checkpoint as this process signed or verified it: its leaves, and a mark of the store's state they are the heads of. */
interface KeptCheckpoint {
  seq: number;
  jws: string;
  tree: HeadsTree;
  /** headsMark of the read whose heads are the tree's leaves (every chain that moved since has an append after it). */
  mark: string;
  /** When the whole pass these leaves come from was made. */
  checkedAt: number;
}

/** What `archive` did: nothing (no receipt old and settled enough), or the chain ranges it moved and the checkpoint it recorded. */
export type ArchiveResult =
  | { archived: false; reason: string }
  | { archived: true; file: string; checkpoint: StoredCheckpoint; ranges: ArchiveRange[]; entries: number; receipts: number };

const DEFAULT_LIMIT = RECEIPT_PAGE.defaultLimit;
const MAX_LIMIT = RECEIPT_PAGE.maxLimit;

/**
 * The append-only receipt log: one hash chain per coordination key, under periodic signed checkpoints
 * over all chain heads. An intent is written before a write is forwarded and
 * settled after it, so a crash leaves a visible PENDING receipt, never a silent gap. Refused requests
 * are recorded too, as one REJECTED entry. Each write runs in its own transaction, or in the caller's
 * (`tx`), so that it commits together with the caller's other writes (e.g. the spent decision).
 */
export class ReceiptLog {
  private readonly store: TxRunner<ReceiptTx>;
  private readonly clock: Clock;
  private readonly newId: () => string;
  private readonly checkpoints: CheckpointSigner | undefined;
  private readonly keptChains: number;
  private readonly keptForMs: number;
  private readonly requireGraphHashes: boolean;
  /** The latest checkpoint's leaves, while they can be trusted to be it (see checkpoint). */
  private kept: KeptCheckpoint | undefined;
  /** Checkpoints of this log one at a time (the kept leaves are changed in place). */
  private checkpointing: Promise<unknown> = Promise.resolve();

  constructor(options: ReceiptLogOptions) {
    this.store = options.store;
    this.clock = options.clock;
    this.newId = options.newId ?? (() => `rcpt_${randomUUID()}`);
    this.checkpoints = options.checkpoints;
    this.keptChains = options.keptChains ?? KEPT_CHAINS;
    this.keptForMs = options.keptForMs ?? KEPT_FOR_MS;
    this.requireGraphHashes = options.requireGraphHashes === true;
  }

  /**
   * Writes the intent entry (status PENDING). If this principal already used `idempotency_key`:
   * with the same request_hash the existing receipt is returned with `replayed: true` and nothing is
   * written; with another request_hash it throws IDEMPOTENCY_MISMATCH.
   */
  async recordIntent(intent: ReceiptIntent, tx?: ReceiptTx): Promise<Receipt> {
    if (!tx) return this.store.readWrite((t) => this.recordIntent(intent, t));
    const at = this.clock.now();
    const receiptId = intent.receipt_id ?? this.newId();
    const body = { at, ...normalizedIntent(intent) };
    const result = await tx.receipts.appendIntent(
      { chain: chainOf(intent.resource_key), receipt_id: receiptId, kind: 'intent', body: canonicalJson(body) },
      {
        receipt_id: receiptId,
        principal: intent.principal,
        resource_key: intent.resource_key,
        status: 'PENDING',
        idempotency_key: intent.idempotency_key ?? null,
        request_hash: intent.request_hash,
        decision_id: intent.decision_id ?? null,
        created_at: at,
        completed_at: null,
      },
    );
    if (result.appended) return foldReceipt([result.entry]);
    checkSameRequest(intent.idempotency_key ?? '', result.existing, intent.request_hash);
    return { ...(await this.mustGet(tx, result.existing.receipt_id)), replayed: true };
  }

  /**
   * Settles a PENDING receipt as COMPLETED or FAILED. First settlement wins: if the receipt is already
   * settled (e.g. reconciled by another process) nothing is written and it is returned with `replayed: true`.
   */
  async complete(receiptId: string, completion: ReceiptCompletion, tx?: ReceiptTx): Promise<Receipt> {
    const at = this.clock.now();
    const body = {
      at,
      status: completion.status,
      final_version: completion.final_version ?? null,
      upstream_status: completion.upstream_status ?? null,
      error: completion.error ?? null,
      conflicts: completion.conflicts ?? [],
    };
    const kind = completion.status === 'COMPLETED' ? 'completed' : 'failed';
    return this.settle(receiptId, { receipt_id: receiptId, kind, body: canonicalJson(body) }, completion.status, at, tx);
  }

  /** Settles a PENDING receipt from what the upstream says (after a crash or a timeout). Same first-wins rule. */
  async reconcile(receiptId: string, outcome: ReconcileOutcome, tx?: ReceiptTx): Promise<Receipt> {
    const at = this.clock.now();
    const body =
      outcome.status === 'COMPLETED'
        ? { at, status: outcome.status, final_version: outcome.final_version, upstream_status: outcome.upstream_status ?? null, error: null, note: outcome.note }
        : { at, status: outcome.status, error: outcome.error, upstream_status: outcome.upstream_status ?? null, note: outcome.note };
    return this.settle(receiptId, { receipt_id: receiptId, kind: 'reconciled', body: canonicalJson(body) }, outcome.status, at, tx);
  }

  /** Records a refused request as a single REJECTED entry. */
  async recordRejection(rejection: ReceiptRejection, tx?: ReceiptTx): Promise<Receipt> {
    if (!tx) return this.store.readWrite((t) => this.recordRejection(rejection, t));
    const at = this.clock.now();
    const receiptId = this.newId();
    const body = {
      at,
      ...normalizedIntent({ ...rejection, request_hash: rejection.request_hash ?? undefined }),
      error: rejection.error,
      conflicts: rejection.conflicts ?? [],
      upstream_status: rejection.upstream_status ?? null,
      // Only when there is one: the body of every other rejection stays as it was.
      ...(rejection.presented_lease ? { presented_lease: rejection.presented_lease } : {}),
    };
    const entry = await tx.receipts.appendRejection(
      { chain: chainOf(rejection.resource_key), receipt_id: receiptId, kind: 'rejected', body: canonicalJson(body) },
      {
        receipt_id: receiptId,
        principal: rejection.principal,
        resource_key: rejection.resource_key,
        status: 'REJECTED',
        idempotency_key: null,
        request_hash: rejection.request_hash ?? null,
        decision_id: rejection.decision_id ?? null,
        created_at: at,
        completed_at: at,
      },
    );
    return foldReceipt([entry]);
  }

  /**
   * The first receipt of this principal's idempotency key, for a retry of the same request (it gets that
   * receipt instead of writing again); IDEMPOTENCY_MISMATCH when the key was used for another request.
   */
  findReplay(principal: string, idempotencyKey: string, requestHash: string): Promise<Receipt | null> {
    // "No receipt under this key" needs no commit in flight to be durable: the write then records its
    // intent or its refusal in a transaction of its own, durable before anything follows from it (and
    // which re-checks the key). A receipt found, or a mismatch, waits until what it saw is durable.
    return this.store.read(async (tx) => {
      const found = await tx.receipts.findByIdempotencyKey(principal, idempotencyKey);
      if (!found) return null;
      checkSameRequest(idempotencyKey, found, requestHash);
      return this.mustGet(tx, found.receipt_id);
    }, { waitsFor: (first) => first !== null });
  }

  get(receiptId: string): Promise<Receipt | null> {
    return this.store.read((tx) => receiptOf(tx, receiptId));
  }

  /**
   * Whose receipt this is, from the receipts index (null: no such receipt): its entries' bodies are not
   * read, so a reader may be told it may not read a receipt before anything of it is (even that it is damaged).
   */
  async ownerOf(receiptId: string): Promise<string | null> {
    const [found] = await this.store.read((tx) => tx.receipts.indexOf([receiptId]));
    return found?.row.principal ?? null;
  }

  query(q: ReceiptQuery = {}): Promise<ReceiptPage> {
    return this.page({
      resource: q.resource, principal: q.principal, status: q.status, decisionId: q.decision_id, after: q.after, before: q.before, newestFirst: q.newestFirst, createdAtOrAfter: q.since, createdAtOrBefore: q.until,
    }, q.limit ?? DEFAULT_LIMIT);
  }

  /** Receipts still PENDING, oldest first; `createdAtLeastMsAgo` (by the store's clock) leaves out writes that may still be in flight. */
  pending(options: { createdAtLeastMsAgo?: number; after?: number; limit?: number } = {}): Promise<ReceiptPage> {
    return this.page({ status: 'PENDING', createdAtLeastMsAgo: options.createdAtLeastMsAgo, after: options.after }, options.limit ?? MAX_LIMIT);
  }

  /** One page of receipts; asks for one more than the page to know whether there is a next one. */
  private async page(filter: Omit<ReceiptFilter, 'limit'>, requested: number): Promise<ReceiptPage> {
    const limit = Math.min(Math.max(1, Math.floor(requested)), MAX_LIMIT);
    const found = await this.store.read((tx) => tx.receipts.find({ ...filter, limit: limit + 1 }));
    const page = found.slice(0, limit);
    return { receipts: page.map((f) => foldReceipt(f.entries)), next: found.length > limit ? page[page.length - 1]!.first_seq : null };
  }

  /**
   * Verifies the whole log from the store, in chunks of VERIFY_CHUNK entries, awaiting `pause()` between
   * them (default: one turn of the event loop) so a server keeps answering other requests: the latest
   * signed checkpoint (its signature, and that its stored leaves add up to its signed root), then every
   * chain in (chain, pos) order from its archive floor (log-walk.ts: links, hashes, positions, the signed
   * and the kept heads reached), then the receipts index against the hashed entries both ways (what
   * queries show must be what was hashed, and no row may name an entry that is not its receipt's).
   * Reports the first problem. Entries appended meanwhile may or may not be checked.
   */
  async verifyChain(pause: () => Promise<void> = () => new Promise((resolve) => setImmediate(resolve))): Promise<ReceiptChainVerdict> {
    const receipts = await this.verifyReceipts(pause);
    // The graph log after the receipts, against the graph head the same checkpoint signed (version 3).
    const c = receipts.checkpoint;
    const signed = c?.graph_hash !== undefined ? { revision: c.graph_revision ?? 0, hash: c.graph_hash, checkpoint: c.seq } : undefined;
    const graph = await verifyGraphLog((f) => this.store.read((tx) => f(tx.graph)), signed, pause, this.requireGraphHashes);
    return { ...receipts, ok: receipts.ok && graph.ok, graph };
  }

  private async verifyReceipts(pause: () => Promise<void>): Promise<ReceiptChainVerdict> {
    const first = await this.verifyOnce(pause);
    if (first.ok) return first;
    // An archive that recorded a checkpoint meanwhile deleted entries below its new floors: once more from it.
    const latest = await this.store.read((tx) => tx.receipts.latestCheckpoint());
    return (latest?.seq ?? 0) !== (first.checkpoint?.seq ?? 0) ? this.verifyOnce(pause) : first;
  }

  private async verifyOnce(pause: () => Promise<void>): Promise<ReceiptChainVerdict> {
    const signed = await this.signedState();
    const checkpoint = signed.checkpoint ? checkpointSummary(signed.checkpoint) : undefined;
    // A break in no chain (the checkpoint itself, an index row naming no entry of its own) names none: chain
    // "" is the legacy chain's name, and a position would point an auditor at an entry that is sound.
    const verdict = (bad: ChainBreak | { problem: string }, walk?: LogWalk): ReceiptChainVerdict => ({
      ok: false, entries: walk?.sound ?? 0, chains: walk?.verified.length ?? 0, head: headsRoot(walk?.verified ?? []),
      ...('chain' in bad ? { chain: bad.chain, firstBadPos: bad.pos, ...(bad.seq !== undefined ? { firstBadSeq: bad.seq } : {}) } : {}), problem: bad.problem, ...(checkpoint ? { checkpoint } : {}),
    });
    if ('problem' in signed) return verdict({ problem: signed.problem });
    // The heads before the entries: entries and heads are written together, so the walk sees at least these.
    const heads = new Map((await this.store.read((tx) => tx.receipts.heads())).map((h) => [h.chain, h]));
    const walk = new LogWalk(signed.leaves, heads);
    let after: { chain: string; pos: number } | null = null;
    for (;;) {
      const chunk: StoredEntry[] = await this.store.read((tx) => tx.receipts.entriesFrom(after, VERIFY_CHUNK));
      const fed = walk.feed(chunk);
      if ('bad' in fed) return verdict(fed.bad, walk);
      if (fed.checked.length > 0) {
        const rows = await this.store.read((tx) => tx.receipts.indexOf([...new Set(fed.checked.map((e) => e.receipt_id))]));
        const wrong = checkIndexRows(fed.checked, rows);
        if (wrong) return verdict({ chain: wrong.entry.chain, pos: wrong.entry.pos, seq: wrong.entry.seq, problem: wrong.problem }, walk);
      }
      if (chunk.length < VERIFY_CHUNK) break;
      const last = chunk[chunk.length - 1]!;
      after = { chain: last.chain, pos: last.pos };
      await pause();
    }
    const end = walk.finish();
    if (end) return verdict(end, walk);
    const [orphan] = await this.store.read((tx) => tx.receipts.indexOrphans(1));
    if (orphan) {
      return verdict({
        problem: `receipt ${orphan.receipt_id}: its index row names entry seq ${orphan.first_seq}${orphan.last_seq !== orphan.first_seq ? ` and seq ${orphan.last_seq}` : ''}, which ${orphan.last_seq !== orphan.first_seq ? 'are' : 'is'} not its own (a row was added or repointed, or the entries it names were cut: the receipts index was altered)`,
      }, walk);
    }
    return { ok: true, entries: walk.entries, chains: walk.verified.length, head: headsRoot(walk.verified), ...(checkpoint ? { checkpoint } : {}) };
  }

  /**
   * Takes a signed checkpoint over the heads of all chains now: every server does it periodically
   * (`writ serve`, WRIT_RECEIPT_CHECKPOINT_INTERVAL_MS, in its turn: checkpointInTurn) and `writ audit checkpoint`
   * on demand. Null when no chain moved since the latest (unless `force`: `writ keys rotate` signs the same
   * heads again with the new key), or when another server recorded the same number first. The latest
   * checkpoint must verify: a new signature never vouches for a forgery.
   *
   * The leaves of the checkpoint this process signed (or verified) last are kept in memory with their tree,
   * keyed to that checkpoint (its number and its JWS) and to a mark of the store's state they are the heads
   * of. While the store's latest checkpoint is still that one (its signature checked again), the next
   * checkpoint reads only the heads of the chains that had an entry appended since the mark, by this
   * replica or any other (headsMovedSince), checks that those went forward from what was signed, and
   * rehashes their paths: its cost follows the chains that moved, not all chains. Any other latest
   * checkpoint (another replica's, an archive's), a restart, a lost race to record, more than `keptChains`
   * chains, or kept leaves older than `keptForMs`: the whole pass, reading and hashing every signed leaf and
   * every head, as before (what notices a chain cut back, or a stored leaf altered, with no append since:
   * the kept path signs what it checked before, so it launders neither, and `writ audit verify` reports them).
   */
  async checkpoint(options: { force?: boolean } = {}): Promise<StoredCheckpoint | null> {
    return this.checkpointQueued(options);
  }

  private async checkpointQueued(options: CheckpointOptions): Promise<StoredCheckpoint | null> {
    const run = this.checkpointing.then(() => this.checkpointOnce(options));
    this.checkpointing = run.catch(() => undefined);
    return run;
  }

  /**
   * The periodic checkpoint of `writ serve`: taken only in `holder`'s turn, which it takes or renews for
   * `turnMs` (claimCheckpointTurn), so that of several replicas one checkpoints per interval and another
   * takes over once the turn runs out (its holder stopped, or stopped renewing). `turn` says whether it was
   * this holder's turn; `checkpoint` what checkpoint() gave then. The checkpoint is recorded only if it is
   * still this holder's turn when it is written (recordCheckpoint's `turn`): one that paused meanwhile (a
   * stopped process, a long pause) and lost its turn to another signs nothing, and this drops its kept leaves.
   */
  async checkpointInTurn(holder: string, turnMs: number): Promise<{ turn: boolean; checkpoint: StoredCheckpoint | null }> {
    const turn = await this.store.readWrite((tx) => tx.receipts.claimCheckpointTurn(holder, turnMs));
    if (!turn) {
      // Another replica checkpoints: what this one kept will not be the latest checkpoint again.
      this.kept = undefined;
      return { turn, checkpoint: null };
    }
    return { turn, checkpoint: await this.checkpointQueued({ turn: holder }) };
  }

  private async checkpointOnce(options: CheckpointOptions): Promise<StoredCheckpoint | null> {
    const signer = this.signer('taking a checkpoint');
    const kept = this.kept;
    // Put back only once it is the latest checkpoint's again (a throw leaves none).
    this.kept = undefined;
    if (kept && this.clock.now() - kept.checkedAt < this.keptForMs) {
      const latest = await this.store.read((tx) => tx.receipts.latestCheckpoint());
      if (latest && latest.seq === kept.seq && latest.jws === kept.jws && !this.signatureProblem(latest, isHeadsCheckpoint)) {
        const taken = await this.checkpointFromKept(kept, latest, signer, options);
        if (taken !== 'whole pass') return taken;
      }
    }
    const signed = await this.signedState();
    if ('problem' in signed) throw new WritError('UNPROCESSABLE', `the latest checkpoint does not verify, so no checkpoint is built on it: ${signed.problem}`);
    const { mark, heads } = await this.store.read(async (tx) => ({ mark: await tx.receipts.headsMark(), heads: await tx.receipts.heads() }));
    const next = await this.nextLeaves(signed, heads);
    const changed: CheckpointLeaf[] = [];
    await forEachYielding(next.values(), (l) => {
      if (!sameLeaf(l, signed.leaves.get(l.chain))) changed.push(l);
    });
    const graph = await this.graphHead(signed.checkpoint);
    if (changed.length === 0 && !options.force && graph.graph_hash === (signed.checkpoint?.graph_hash ?? GENESIS_HASH)) {
      if (signed.checkpoint) this.keep(signed.checkpoint, signed.tree, mark);
      return null;
    }
    let tree = signed.tree;
    if (!tree || !(await tree.apply(changed))) tree = next.size <= this.keptChains ? await HeadsTree.build([...next.values()]) : undefined;
    const root = tree ? tree.root() : await headsRootYielding([...next.values()]);
    const stored = this.signedCheckpoint(signer, (signed.checkpoint?.seq ?? 0) + 1, next.size, root, 0, graph);
    const done = await this.store.readWrite((tx) => tx.receipts.recordCheckpoint(stored, changed, new Set(), options.turn));
    if (!done) return null;
    this.keep(stored, tree, mark);
    return stored;
  }

  /** The next checkpoint from the kept leaves: only the chains that moved since their mark are read. */
  private async checkpointFromKept(kept: KeptCheckpoint, latest: StoredCheckpoint, signer: CheckpointSigner, options: CheckpointOptions): Promise<StoredCheckpoint | null | 'whole pass'> {
    const { mark, moved } = await this.store.read(async (tx) => ({ mark: await tx.receipts.headsMark(), moved: await tx.receipts.headsMovedSince(kept.mark) }));
    const changed = await this.wentForward(kept.seq, moved.map((h) => [kept.tree.get(h.chain), h] as const));
    const graph = await this.graphHead(latest);
    if (changed.length === 0 && !options.force && graph.graph_hash === (latest.graph_hash ?? GENESIS_HASH)) {
      this.keep(kept, kept.tree, mark, kept.checkedAt);
      return null;
    }
    if (!(await kept.tree.apply(changed))) return 'whole pass';
    const stored = this.signedCheckpoint(signer, kept.seq + 1, kept.tree.size, kept.tree.root(), 0, graph);
    const done = await this.store.readWrite((tx) => tx.receipts.recordCheckpoint(stored, changed, new Set(), options.turn));
    if (!done) return null;
    this.keep(stored, kept.tree, mark, kept.checkedAt);
    return stored;
  }

  /** The checkpoint over the heads numbered `seq`, signed now: its payload is made here only (periodic, kept-leaves and archive checkpoints alike). */
  private signedCheckpoint(signer: CheckpointSigner, seq: number, chains: number, root: string, archived: number, graph: { graph_revision: number; graph_hash: string }): StoredCheckpoint {
    const payload: CheckpointPayload = { v: 3, seq, at: this.clock.now(), chains, root, archived, ...graph };
    return { ...payload, jws: signer.sign(payload) };
  }

  /** Keeps `tree` as the leaves of checkpoint `c`, heads as of `mark` (unless there is none, or it holds more chains than kept). */
  private keep(c: { seq: number; jws: string }, tree: HeadsTree | undefined, mark: string, checkedAt = this.clock.now()): void {
    this.kept = tree && tree.size <= this.keptChains ? { seq: c.seq, jws: c.jws, tree, mark, checkedAt } : undefined;
  }

  /**
   * The leaves of the next checkpoint: every chain's head now (`heads`), with its floor from the latest one. A
   * checkpoint signs whatever heads the store holds, so first it checks that no chain went back on what
   * the latest checkpoint signed (a head below or beside a signed one, a signed head entry gone or
   * changed, a signed chain gone): signing a cut or rewritten chain would launder it. Such a chain is
   * UNPROCESSABLE (`writ serve` logs it every interval) until `writ audit verify` is looked at.
   */
  private async nextLeaves(latest: { checkpoint: StoredCheckpoint | null; leaves: Map<string, CheckpointLeaf> }, headList: readonly ChainHead[]): Promise<Map<string, CheckpointLeaf>> {
    const heads = new Map<string, ChainHead>();
    await forEachYielding(headList, (h) => heads.set(h.chain, h));
    const next = new Map<string, CheckpointLeaf>();
    const pairs: (readonly [CheckpointLeaf | undefined, ChainHead | undefined])[] = [];
    await forEachYielding(latest.leaves.values(), (leaf) => {
      next.set(leaf.chain, leaf);
      const h = heads.get(leaf.chain);
      if (h?.pos !== leaf.pos || h.hash !== leaf.hash) pairs.push([leaf, h]);
    });
    await this.wentForward(latest.checkpoint?.seq, pairs);
    await forEachYielding(heads.values(), (h) => {
      const before = latest.leaves.get(h.chain);
      next.set(h.chain, { chain: h.chain, pos: h.pos, hash: h.hash, floor_pos: before?.floor_pos ?? 0, floor_hash: before?.floor_hash ?? GENESIS_HASH });
    });
    return next;
  }

  /**
   * The graph log's head for the next checkpoint, once it is seen not to go back on the one the latest
   * signed (fewer hashed events, or the signed event rewritten): signing it would launder a cut log.
   */
  private async graphHead(latest: StoredCheckpoint | null): Promise<{ graph_revision: number; graph_hash: string }> {
    const head = await this.store.read((tx) => tx.graph.chainHead());
    if (latest?.graph_hash !== undefined) {
      const at = latest.graph_revision ?? 0;
      const [signed] = head.hashed > at ? await this.store.read((tx) => tx.graph.rowsAfter(at - 1, 1)) : [{ revision: head.hashed, hash: head.hash }];
      if (at > 0 && (signed?.revision !== at || signed.hash !== latest.graph_hash)) {
        throw new WritError('UNPROCESSABLE', `the graph log went back on checkpoint ${latest.seq}: it signed graph event ${at}, which is ${head.hashed < at ? `past the log's hashed head ${head.hashed}` : 'not the same any more'}; no checkpoint is signed over it (run writ audit verify)`);
      }
    }
    return { graph_revision: head.hashed, graph_hash: head.hash };
  }

  /**
   * Checks that each chain's head went forward from the leaf checkpoint `seq` signed for it (none: a new
   * chain), and gives the new leaves of those that moved (their floors kept): a head below or beside the
   * signed one, a signed chain with no head, or a signed head entry gone or changed is UNPROCESSABLE.
   */
  private async wentForward(seq: number | undefined, pairs: readonly (readonly [CheckpointLeaf | undefined, ChainHead | undefined])[]): Promise<CheckpointLeaf[]> {
    const wentBack = (chain: string, what: string) =>
      new WritError('UNPROCESSABLE', `chain ${JSON.stringify(chain)} went back on checkpoint ${seq ?? '(legacy)'}: ${what}; no checkpoint is signed over it (run writ audit verify)`);
    const toCheck: CheckpointLeaf[] = [];
    const moved: CheckpointLeaf[] = [];
    await forEachYielding(pairs, ([leaf, h]) => {
      if (leaf && !h && leaf.pos > leaf.floor_pos) throw wentBack(leaf.chain, `it has no head any more, the checkpoint signed ${leaf.pos}`);
      if (!h) return;
      if (leaf && (h.pos < leaf.pos || (h.pos === leaf.pos && h.hash !== leaf.hash))) throw wentBack(leaf.chain, `its head is entry ${h.pos}, the checkpoint signed entry ${leaf.pos}${h.pos === leaf.pos ? ' with another hash' : ''}`);
      if (leaf && h.pos > leaf.pos && leaf.pos > leaf.floor_pos) toCheck.push(leaf);
      const next = { chain: h.chain, pos: h.pos, hash: h.hash, floor_pos: leaf?.floor_pos ?? 0, floor_hash: leaf?.floor_hash ?? GENESIS_HASH };
      if (!sameLeaf(next, leaf)) moved.push(next);
    });
    if (toCheck.length > 0) {
      const found = new Map((await this.store.read((tx) => tx.receipts.entriesAt(toCheck))).map((e) => [e.chain, e]));
      for (const leaf of toCheck) {
        if (found.get(leaf.chain)?.hash !== leaf.hash) throw wentBack(leaf.chain, `its entry ${leaf.pos} is not the head the checkpoint signed`);
      }
    }
    return moved;
  }

  /** The latest checkpoint, checked, with every chain's leaf; the legacy chain's floor from a version-1 checkpoint before the first. */
  private async signedState(): Promise<{ checkpoint: StoredCheckpoint | null; leaves: Map<string, CheckpointLeaf>; tree?: HeadsTree } | { checkpoint: StoredCheckpoint | null; problem: string }> {
    const checkpoint = await this.store.read((tx) => tx.receipts.latestCheckpoint());
    if (checkpoint) {
      const problem = this.signatureProblem(checkpoint, isHeadsCheckpoint);
      if (problem) return { checkpoint, problem: `checkpoint ${checkpoint.seq}: ${problem}` };
      const leaves = await this.store.read((tx) => tx.receipts.checkpointLeaves(checkpoint.seq));
      // The tree (for the next checkpoint to keep) when it may be kept, else the root alone: the same root.
      const tree = leaves.length <= this.keptChains ? await HeadsTree.build(leaves) : undefined;
      if (leaves.length !== checkpoint.chains || (tree ? tree.root() : await headsRootYielding(leaves)) !== checkpoint.root) {
        return { checkpoint, problem: `checkpoint ${checkpoint.seq}: its ${leaves.length} stored leaves do not add up to the root it signed over ${checkpoint.chains} chains (a chain's head or floor was altered, added or removed)` };
      }
      const byChain = new Map<string, CheckpointLeaf>();
      await forEachYielding(leaves, (l) => byChain.set(l.chain, l));
      return { checkpoint, leaves: byChain, tree };
    }
    const legacy = await this.store.read((tx) => tx.receipts.legacyCheckpoint());
    if (!legacy) return { checkpoint: null, leaves: new Map() };
    const problem = this.signatureProblem(legacy, isLegacyCheckpoint);
    if (problem) return { checkpoint: null, problem: `legacy checkpoint ${legacy.seq}: ${problem}` };
    const floor = { pos: legacy.archived_through, hash: legacy.hash };
    return { checkpoint: null, leaves: new Map([[LEGACY_CHAIN, { chain: LEGACY_CHAIN, ...floor, floor_pos: floor.pos, floor_hash: floor.hash }]]) };
  }

  private signatureProblem(stored: { jws: string }, is: (p: SignedPayload) => boolean): string | undefined {
    if (!this.checkpoints) return 'there is no key to check its signature with';
    const signed = this.checkpoints.verify(stored.jws);
    if ('problem' in signed) return signed.problem;
    if (!is(signed.payload) || !samePayload(stored, signed.payload)) return 'its row differs from what its signature covers (the checkpoint was altered)';
    return undefined;
  }

  private signer(what: string): CheckpointSigner {
    if (!this.checkpoints) throw new WritError('INTERNAL', `${what} needs a checkpoint signer`);
    return this.checkpoints;
  }

  /**
   * Archives the oldest receipts of every chain: in each chain, the longest run above its floor of whole
   * receipts (intent and settlement together), all settled, every entry older than `olderThanMs`, short
   * of the chain's head (never a PENDING receipt, nor anything after one). Writes those runs to `file`
   * (JSON lines: a header with the signed manifest of the chain ranges, then the entries), checking each
   * chain as it goes, syncs and renames it into place, then records a checkpoint whose leaves raise those
   * chains' floors and deletes the entries and their receipts' index rows, in one transaction. If that
   * transaction fails, the file exists but nothing was deleted (archiving again writes a new file).
   */
  async archive(options: { olderThanMs: number; file: string }): Promise<ArchiveResult> {
    const signer = this.signer('archiving');
    const now = this.clock.now();
    const before = now - options.olderThanMs;
    const signed = await this.signedState();
    // Never build on a checkpoint that does not verify: the new signature would vouch for it.
    if ('problem' in signed) throw new WritError('UNPROCESSABLE', `the latest checkpoint does not verify, so nothing is archived after it: ${signed.problem}`);
    const heads = new Map((await this.store.read((tx) => tx.receipts.heads())).map((h) => [h.chain, h]));
    const ranges = await this.archivableRanges(signed.leaves, heads, before);
    if (ranges.length === 0) return { archived: false, reason: `no chain has a settled receipt older than ${new Date(before).toISOString()} before its head` };
    const count = ranges.reduce((n, r) => n + r.to - r.from + 1, 0);
    const manifest: ArchivePayload = { v: 2, kind: 'archive', at: now, count, ranges_hash: rangesHash(ranges) };
    const writer = new ArchiveWriter(options.file, { writ_receipt_archive: 2, manifest: { ...manifest, jws: signer.sign(manifest) }, ranges });
    try {
      for (const r of ranges) {
        const v = new ChainVerifier(r.chain, r.from - 1, r.prev_hash);
        while (v.verified < r.to) {
          const chunk = await this.store.read((tx) => tx.receipts.entriesFrom({ chain: r.chain, pos: v.verified }, Math.min(VERIFY_CHUNK, r.to - v.verified)));
          const bad = v.feed(chunk) ?? (chunk.length === 0 ? v.bad(v.verified + 1, `chain ${JSON.stringify(r.chain)}: entry ${v.verified + 1} is missing`) : undefined);
          if (bad) throw new WritError('UNPROCESSABLE', `${bad.problem}; nothing was archived (run writ audit verify)`);
          writer.append(chunk);
        }
        if (v.headHash !== r.hash) throw new WritError('UNPROCESSABLE', `chain ${JSON.stringify(r.chain)}: entry ${r.to} changed while it was archived; nothing was archived`);
      }
      writer.commit();
    } catch (e) {
      writer.abort();
      throw e;
    }
    // The checkpoint that raises the floors is built on the latest one now (periodic ones may have been
    // taken meanwhile); only another archive of the same chains makes this one give up.
    for (let attempt = 0; ; attempt++) {
      const latest = await this.signedState();
      if ('problem' in latest) throw new WritError('UNPROCESSABLE', `${latest.problem}; ${options.file} was written but nothing was deleted`);
      const raced = ranges.find((r) => (latest.leaves.get(r.chain)?.floor_pos ?? 0) !== r.from - 1);
      if (raced) throw new WritError('UNPROCESSABLE', `another archive moved chain ${JSON.stringify(raced.chain)} meanwhile; ${options.file} holds entries it archived too, nothing more was deleted`);
      const next = await this.nextLeaves(latest, await this.store.read((tx) => tx.receipts.heads()));
      for (const r of ranges) next.set(r.chain, { ...next.get(r.chain)!, floor_pos: r.to, floor_hash: r.hash });
      const changed: CheckpointLeaf[] = [];
      await forEachYielding(next.values(), (l) => {
        if (!sameLeaf(l, latest.leaves.get(l.chain))) changed.push(l);
      });
      const checkpoint = this.signedCheckpoint(signer, (latest.checkpoint?.seq ?? 0) + 1, next.size, await headsRootYielding([...next.values()]), count, await this.graphHead(latest.checkpoint));
      const raised = new Set(ranges.map((r) => r.chain));
      const deleted = await this.store.readWrite((tx) => tx.receipts.recordCheckpoint(checkpoint, changed, raised));
      if (deleted) return { archived: true, file: options.file, checkpoint, ranges, ...deleted };
      if (attempt >= 4) throw new WritError('UNPROCESSABLE', `checkpoints kept being recorded meanwhile; ${options.file} was written but nothing was deleted`);
    }
  }

  /** Pass one of `archive`: per chain, the last position up to which every receipt is whole, settled and old. */
  private async archivableRanges(floors: ReadonlyMap<string, CheckpointLeaf>, heads: ReadonlyMap<string, ChainHead>, before: number): Promise<ArchiveRange[]> {
    const ranges: ArchiveRange[] = [];
    let chain: string | undefined;
    let open = new Set<string>();
    let stopped = false;
    let cut: { to: number; hash: string } | undefined;
    const close = () => {
      if (chain === undefined || !cut) return;
      const floor = floors.get(chain);
      ranges.push({ chain, from: (floor?.floor_pos ?? 0) + 1, prev_hash: floor?.floor_hash ?? GENESIS_HASH, to: cut.to, hash: cut.hash });
    };
    let after: { chain: string; pos: number } | null = null;
    for (;;) {
      const chunk: StoredEntry[] = await this.store.read((tx) => tx.receipts.entriesFrom(after, VERIFY_CHUNK));
      for (const e of chunk) {
        if (e.chain !== chain) {
          close();
          chain = e.chain;
          open = new Set();
          stopped = false;
          cut = undefined;
        }
        if (stopped || e.pos <= (floors.get(e.chain)?.floor_pos ?? 0)) continue;
        if (e.pos >= (heads.get(e.chain)?.pos ?? 0) || readEntryBody(e).at >= before) {
          stopped = true;
          continue;
        }
        if (e.kind === 'intent') open.add(e.receipt_id);
        else if (e.kind !== 'rejected') open.delete(e.receipt_id);
        if (open.size === 0) cut = { to: e.pos, hash: e.hash };
      }
      if (chunk.length < VERIFY_CHUNK) break;
      const last = chunk[chunk.length - 1]!;
      after = { chain: last.chain, pos: last.pos };
    }
    close();
    return ranges;
  }

  /**
   * Signs the chain heads again with the current key, as a new checkpoint (archiving nothing): after a
   * key rotation, before the old key leaves the JWKS, so that verification keeps working. The latest
   * checkpoint must verify first (a forged one is never re-signed). Null when there is nothing to sign.
   */
  async resignCheckpoint(): Promise<StoredCheckpoint | null> {
    const latest = await this.store.read(async (tx) => ((await tx.receipts.latestCheckpoint()) ?? (await tx.receipts.legacyCheckpoint())) !== null);
    if (!latest) return null;
    const taken = await this.checkpoint({ force: true });
    if (!taken) throw new WritError('UNPROCESSABLE', 'another checkpoint was recorded meanwhile: not signed again (run writ audit checkpoint)');
    return taken;
  }

  /**
   * One settling entry appended (`tx`: in the caller's transaction; without, in a transaction of its
   * own that is that one statement, so on PostgreSQL one round trip). The receipt is folded from the
   * entries the append returned; only a receipt settled before is read back (replayed).
   */
  private async settle(receiptId: string, entry: SettlingEntry, status: 'COMPLETED' | 'FAILED', at: number, tx?: ReceiptTx): Promise<Receipt> {
    const result = tx
      ? await tx.receipts.appendSettlement(entry, status, at)
      : await this.store.readWrite((t) => t.receipts.appendSettlement(entry, status, at), { oneStatement: true });
    if (result.appended) return foldReceipt([result.first, result.entry]);
    if (result.reason === 'unknown') throw new WritError('NOT_FOUND', `no receipt '${receiptId}'`);
    const receipt = tx ? await this.mustGet(tx, receiptId) : await this.store.read((t) => this.mustGet(t, receiptId));
    return { ...receipt, replayed: true };
  }

  private async mustGet(tx: ReceiptTx, receiptId: string): Promise<Receipt> {
    const receipt = await receiptOf(tx, receiptId);
    if (!receipt) throw new WritError('NOT_FOUND', `no receipt '${receiptId}'`);
    return receipt;
  }
}

async function receiptOf(tx: ReceiptTx, receiptId: string): Promise<Receipt | null> {
  const entries = await tx.receipts.entriesOf(receiptId);
  return entries.length === 0 ? null : foldReceipt(entries);
}

function normalizedIntent(i: Partial<ReceiptIntent> & Pick<ReceiptIntent, 'principal' | 'action' | 'resource_key'>) {
  return {
    principal: i.principal,
    action: i.action,
    resource_key: i.resource_key,
    fields: i.fields ?? [],
    owners: i.owners ?? [],
    authority_epoch: i.authority_epoch ?? null,
    ownership_epoch: i.ownership_epoch ?? null,
    decision_id: i.decision_id ?? null,
    policy_revision: i.policy_revision ?? null,
    graph_revision: i.graph_revision ?? null,
    chain: i.chain ?? [],
    lease_id: i.lease_id ?? null,
    lease_epoch: i.lease_epoch ?? null,
    expected_version: i.expected_version ?? null,
    idempotency_key: i.idempotency_key ?? null,
    request_hash: i.request_hash ?? null,
  };
}

function checkSameRequest(idempotencyKey: string, first: { receipt_id: string; request_hash: string | null }, requestHash: string): void {
  if (first.request_hash !== requestHash) {
    throw new WritError('IDEMPOTENCY_MISMATCH', `Idempotency-Key '${idempotencyKey}' was already used for a different request`, { receipt_id: first.receipt_id });
  }
}

/** `turn`: the periodic checkpoint's holder (checkpointInTurn), recorded only in its turn. */
interface CheckpointOptions {
  force?: boolean;
  turn?: string;
}

function sameLeaf(a: CheckpointLeaf, b: CheckpointLeaf | undefined): boolean {
  return b !== undefined && a.pos === b.pos && a.hash === b.hash && a.floor_pos === b.floor_pos && a.floor_hash === b.floor_hash;
}

function checkpointSummary(c: StoredCheckpoint): NonNullable<ReceiptChainVerdict['checkpoint']> {
  return { seq: c.seq, at: c.at, chains: c.chains, root: c.root, archived: c.archived, ...(c.graph_hash !== undefined ? { graph_revision: c.graph_revision ?? 0, graph_hash: c.graph_hash } : {}), jws: c.jws };
}
