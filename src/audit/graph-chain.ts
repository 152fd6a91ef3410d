import { createHash } from 'node:crypto';
import { GENESIS_HASH } from './hash-chain.js';

/**
 * Tamper evidence for the authority graph's event log: every event row carries the hash of the one
 * before it and of itself (revision, time, actor, type and payload as stored), so an event rewritten (an
 * edge's reason or creator, who revoked it and why), removed, or renumbered breaks the chain from there
 * on, and `writ audit verify` names the revision. The graph log is one chain (appends are serialized on
 * every engine); its head (last hashed revision and hash) is kept beside the log's head so an append
 * links without reading back, and the signed receipt checkpoint (version 3) signs it, so cutting the
 * newest events is detected once a checkpoint covered them.
 *
 * Events appended by a Writ from before the chain (a rolling upgrade: an older replica still running
 * on a migrated store) arrive without a hash; the next append of this version hashes them first (the
 * append-only triggers let a missing hash be filled in, nothing else), and until then verify reports
 * them as unhashed, not as broken. A missing hash with hashed events after it was removed: broken.
 */

/** One row of the graph event log as stored. */
export interface GraphEventRow {
  revision: number;
  at: number;
  actor: string;
  type: string;
  payload: string;
  /** Null: appended by a Writ from before the chain, not hashed yet. */
  hash: string | null;
}

/** What the engine keeps beside the log: its head revision, and the last hashed revision with its hash (0 and the genesis hash when none). */
export interface GraphChainHead {
  revision: number;
  hashed: number;
  hash: string;
}

/** The part of the graph log's storage tamper evidence reads (each engine's graph event store). */
export interface GraphLogChain {
  chainHead(): Promise<GraphChainHead>;
  /** Up to `limit` rows with revision > `after`, in revision order. */
  rowsAfter(after: number, limit: number): Promise<GraphEventRow[]>;
}

/**
 * hash = sha256_hex("writ-graph-v1" \n prev_hash \n revision \n at \n actor \n type \n payload), actor and
 * type JSON-quoted (a newline in them cannot shift a field), payload exactly as stored: the receipts'
 * hashing (hash-chain.ts), with its own tag. PostgreSQL's `writ_graph_event_hash` computes the same bytes.
 */
export function graphEventHash(prevHash: string, e: { revision: number; at: number; actor: string; type: string; payload: string }): string {
  return createHash('sha256').update(`writ-graph-v1\n${prevHash}\n${e.revision}\n${e.at}\n${JSON.stringify(e.actor)}\n${JSON.stringify(e.type)}\n${e.payload}`).digest('hex');
}

/** Hashes `rows` (consecutive revisions after `head.hashed`) onto the chain; returns the new head's hash. Fills `hash` in place. */
export function linkGraphEvents(prevHash: string, rows: { revision: number; at: number; actor: string; type: string; payload: string; hash?: string | null }[]): string {
  let prev = prevHash;
  for (const r of rows) {
    r.hash = graphEventHash(prev, r);
    prev = r.hash;
  }
  return prev;
}

/** The graph log's part of `writ audit verify`. */
export interface GraphLogVerdict {
  ok: boolean;
  /** Events checked and found sound (hashed). */
  events: number;
  /** The last sound hashed revision and its hash (what a checkpoint signs). */
  revision: number;
  hash: string;
  /** Events after it appended by an older Writ, not hashed yet (not a break). */
  unhashed: number;
  /** The revision at fault, when the log breaks. */
  firstBadRevision?: number;
  problem?: string;
}

/** The graph head a checkpoint signed. */
export interface SignedGraphHead {
  revision: number;
  hash: string;
  /** The checkpoint's seq, for the problem's words. */
  checkpoint: number;
}

/**
 * Checks the graph log as its rows are fed in revision order, in as many parts as the caller likes:
 * revisions consecutive from 1, each hash the recomputed one over the previous, no hashed row after an
 * unhashed one, the signed head passed through with its hash; at the end, the kept head (read before
 * the walk) and the signed head reached. `requireHashes` (WRIT_GRAPH_REQUIRE_HASHES, once no Writ from
 * before the chain runs): an unhashed event is a break too.
 */
export class GraphLogWalk {
  private prev = GENESIS_HASH;
  private expected = 1;
  private hashedThrough = 0;
  private unhashedFrom: number | undefined;
  private bad: { revision: number; problem: string } | undefined;
  /** The break is a hashed event after an unhashed one: also what an append filling in hashes between two chunks looks like. */
  hashAfterUnhashed = false;

  constructor(
    private readonly kept: GraphChainHead,
    private readonly signed?: SignedGraphHead,
    private readonly requireHashes = false,
  ) {}

  /** False once a break was found (feed no more). */
  feed(rows: readonly GraphEventRow[]): boolean {
    for (const r of rows) {
      if (this.bad) return false;
      if (r.revision !== this.expected) {
        this.bad = r.revision > this.expected
          ? { revision: this.expected, problem: `graph event ${this.expected} is missing (the next event is ${r.revision}): an event was deleted` }
          : { revision: r.revision, problem: `graph event ${r.revision} is out of order (expected ${this.expected})` };
        return false;
      }
      this.expected += 1;
      if (r.hash === null) {
        if (this.requireHashes) {
          this.bad = { revision: r.revision, problem: `graph event ${r.revision} has no hash, and every event must have one (WRIT_GRAPH_REQUIRE_HASHES): a Writ from before the graph log's hash chain appended it (a replica not upgraded), or its hash was removed` };
          return false;
        }
        this.unhashedFrom ??= r.revision;
        continue;
      }
      if (this.unhashedFrom !== undefined) {
        this.hashAfterUnhashed = true;
        this.bad = { revision: this.unhashedFrom, problem: `graph event ${this.unhashedFrom} has no hash but event ${r.revision} after it has one (its hash was removed: it was rewritten)` };
        return false;
      }
      if (graphEventHash(this.prev, r) !== r.hash) {
        this.bad = { revision: r.revision, problem: `graph event ${r.revision} does not match its hash: its content (actor, time, type, payload) was altered, or an event before it was removed, inserted or renumbered` };
        return false;
      }
      if (this.signed && r.revision === this.signed.revision && r.hash !== this.signed.hash) {
        this.bad = { revision: r.revision, problem: `graph event ${r.revision} is not the one checkpoint ${this.signed.checkpoint} signed (the log was rewritten up to it and re-hashed)` };
        return false;
      }
      this.prev = r.hash;
      this.hashedThrough = r.revision;
    }
    return true;
  }

  /** The verdict once every row was fed (or a break was found). */
  finish(): GraphLogVerdict {
    const sound = { events: this.hashedThrough, revision: this.hashedThrough, hash: this.prev, unhashed: this.unhashedFrom === undefined ? 0 : this.expected - this.unhashedFrom };
    const broken = (revision: number, problem: string): GraphLogVerdict => ({ ok: false, ...sound, firstBadRevision: revision, problem });
    if (this.bad) return broken(this.bad.revision, this.bad.problem);
    const last = this.expected - 1;
    if (this.kept.revision > last) return broken(last + 1, `${span(last + 1, this.kept.revision)} missing (the log's head row says it reaches ${this.kept.revision}: its newest events were cut)`);
    if (this.kept.hashed > this.hashedThrough) return broken(this.hashedThrough + 1, `${span(this.hashedThrough + 1, this.kept.hashed)} missing or unhashed (the chain's head row says they were hashed: the newest events were cut or rewritten)`);
    if (this.kept.hashed === this.hashedThrough && this.kept.hashed > 0 && this.kept.hash !== this.prev) return broken(this.hashedThrough, `graph event ${this.hashedThrough} is not the head the chain's head row keeps (the log or its head was rewritten)`);
    if (this.signed && this.signed.revision > this.hashedThrough) {
      return broken(this.hashedThrough + 1, `${span(this.hashedThrough + 1, this.signed.revision)} missing or unhashed (checkpoint ${this.signed.checkpoint} signed the log up to ${this.signed.revision}: its newest events were cut)`);
    }
    return { ok: true, ...sound };
  }
}

/** "graph event 5 is" or "graph events 5..7 are". */
const span = (from: number, to: number) => (from === to ? `graph event ${from} is` : `graph events ${from}..${to} are`);

/** Rows read per step of the graph log's verification. */
export const GRAPH_VERIFY_CHUNK = 1_000;

/** Walks the whole graph log in chunks (bounded memory), pausing between them; `requireHashes`: GraphLogWalk's. */
export async function verifyGraphLog(read: <T>(f: (g: GraphLogChain) => Promise<T>) => Promise<T>, signed: SignedGraphHead | undefined, pause: () => Promise<void>, requireHashes = false): Promise<GraphLogVerdict> {
  for (let attempt = 0; ; attempt++) {
    // The kept head before the rows: they are written together, so the walk sees at least this much.
    const kept = await read((g) => g.chainHead());
    const walk = new GraphLogWalk(kept, signed, requireHashes);
    let after = 0;
    for (;;) {
      const rows = await read((g) => g.rowsAfter(after, GRAPH_VERIFY_CHUNK));
      if (!walk.feed(rows) || rows.length < GRAPH_VERIFY_CHUNK) break;
      after = rows[rows.length - 1]!.revision;
      await pause();
    }
    const verdict = walk.finish();
    // An old writer's events read unhashed in one chunk, and hashed in the next by an append between the
    // two (a rolling upgrade), look like a hash removed: once more, then it is one.
    if (verdict.ok || !walk.hashAfterUnhashed || attempt > 0) return verdict;
  }
}

/** One graph event as `GET /v1/graph/events` answers it, `at` in ms: what an auditor holds without the database. */
export interface GraphEventLink {
  revision: number;
  at: number;
  actor: string;
  type: string;
  payload: string;
  prev_hash: string | null;
  hash: string | null;
}

/** The verdict on a run of graph events checked offline (`writ audit verify --graph-events`). */
export interface GraphEventsVerdict {
  ok: boolean;
  /** Hashed events found sound. */
  events: number;
  /** The revisions the run spans (0 and 0 when empty). */
  first: number;
  last: number;
  /** Events at its end not hashed yet (appended by a Writ from before the chain). */
  unhashed: number;
  /** The signed head checked: every event from `first` up to its revision is the one it signed. */
  signed?: { revision: number; hash: string };
  firstBadRevision?: number;
  problem?: string;
}

/**
 * Checks a run of consecutive graph events from their answer alone: each hash recomputes (graphEventHash)
 * over the event before's hash, each `prev_hash` is that hash (64 zeros before revision 1), no hashed event
 * follows an unhashed one, and the event at `signed.revision` (a checkpoint's graph_revision, which the run
 * must hold) has `signed.hash`. The run's first `prev_hash` is taken as given: only a signed head in the
 * run, or a first event at revision 1, anchors it.
 */
export function verifyGraphEvents(events: readonly GraphEventLink[], signed?: { revision: number; hash: string }): GraphEventsVerdict {
  const first = events[0]?.revision ?? 0;
  const last = events[events.length - 1]?.revision ?? 0;
  let sound = 0;
  let unhashedFrom: number | undefined;
  let prev: string | null = events[0]?.revision === 1 ? GENESIS_HASH : (events[0]?.prev_hash ?? null);
  const broken = (revision: number, problem: string): GraphEventsVerdict => ({ ok: false, events: sound, first, last, unhashed: 0, firstBadRevision: revision, problem });
  for (const [i, e] of events.entries()) {
    if (i > 0 && e.revision !== events[i - 1]!.revision + 1) return broken(e.revision, `graph event ${e.revision} follows ${events[i - 1]!.revision}: the events must be consecutive, oldest first (an event was removed, or the pages do not join)`);
    if (e.hash === null) {
      unhashedFrom ??= e.revision;
      continue;
    }
    if (unhashedFrom !== undefined) return broken(unhashedFrom, `graph event ${unhashedFrom} has no hash but event ${e.revision} after it has one (its hash was removed: it was rewritten)`);
    if (prev === null) return broken(e.revision, `graph event ${e.revision} has a hash but the event before it has none (its prev_hash is null): that one's hash was removed`);
    if (e.prev_hash !== prev) {
      return broken(e.revision, e.revision === 1
        ? `graph event 1's prev_hash is not the genesis hash (64 zeros)`
        : `graph event ${e.revision}'s prev_hash is not the hash of event ${e.revision - 1}: an event between them was removed, inserted or altered, or the pages do not join`);
    }
    if (graphEventHash(prev!, e) !== e.hash) return broken(e.revision, `graph event ${e.revision} does not match its hash: its content (actor, time, type, payload) was altered`);
    if (signed && e.revision === signed.revision && e.hash !== signed.hash) return broken(e.revision, `graph event ${e.revision} is not the one the checkpoint signed (hash ${signed.hash}): the log was rewritten up to it and re-hashed`);
    prev = e.hash;
    sound += 1;
  }
  if (signed && unhashedFrom !== undefined && signed.revision >= unhashedFrom) return broken(signed.revision, `graph event ${signed.revision} has no hash, but the checkpoint signed it (its hash was removed)`);
  return { ok: true, events: sound, first, last, unhashed: unhashedFrom === undefined ? 0 : last - unhashedFrom + 1, ...(signed ? { signed } : {}) };
}
