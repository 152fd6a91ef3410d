import { WritError } from '../errors.js';
import { AuthorityGraph } from './authority-graph.js';
import type { GraphEventStore } from './event-store.js';

/** Where the live graph reads the event log: each call in its own read of the store. */
export type GraphEventSource = Pick<GraphEventStore, 'head' | 'read' | 'revisionAt'>;

export interface LiveGraphOptions {
  /** How many rebuilt past graphs to keep (least recently used go first). Default 3. */
  pastGraphs?: number;
  /**
   * The head is fed (`feedHead`, from the store's change notifications and this process's own
   * appends) instead of read from the log on every `current()`: no query per request.
   */
  fed?: boolean;
}

/**
 * The current authority graph, kept up to date from the event log (which several processes may
 * append to), plus rebuilds of the graph as it was at a past revision or time (point-in-time audit).
 */
export class LiveGraph {
  private readonly graph = new AuthorityGraph();
  private readonly past = new Map<number, AuthorityGraph>();
  private readonly pastLimit: number;
  /** The catch-up in flight: concurrent callers share it, so no event is applied twice. */
  private catchingUp: Promise<void> | null = null;
  private readonly fed: boolean;
  /** In fed mode: the highest head revision this process has been told of. */
  private fedHead = 0;

  constructor(
    private readonly log: GraphEventSource,
    options: LiveGraphOptions = {},
  ) {
    this.pastLimit = Math.max(0, options.pastGraphs ?? 3);
    this.fed = options.fed === true;
  }

  /** The log's head is at least `head` (a store notification, or an append this process made). */
  feedHead(head: number): void {
    if (head > this.fedHead) this.fedHead = head;
  }

  /**
   * The graph at the log's head: asks the log for its head once per call (a cheap indexed MAX), or in
   * fed mode takes the head it was last told of, and applies the events it has not seen yet. The
   * returned object is updated in place by later calls.
   */
  async current(): Promise<AuthorityGraph> {
    while (this.catchingUp) await this.catchingUp;
    const head = this.fed ? Math.max(this.fedHead, this.graph.revision) : await this.log.head();
    if (head > this.graph.revision) {
      // Another caller may have started a catch-up while we read the head: the loop above waits for it.
      if (!this.catchingUp) {
        this.catchingUp = this.catchUp(head).finally(() => (this.catchingUp = null));
      }
      await this.catchingUp;
    } else if (head < this.graph.revision) {
      throw new WritError('INTERNAL', `graph event log head ${head} is behind the in-memory graph at ${this.graph.revision}`, {
        head,
        revision: this.graph.revision,
      });
    }
    return this.graph;
  }

  /**
   * current(), at least at `revision` (a decision's graph revision). In fed mode a decision made on
   * another replica a moment ago may rest on a change this process has not been told of yet, and judged
   * on the older graph it would be refused (its owners or its chain seemingly changed since): only then
   * is the log's head asked (one read) and the graph caught up to it. A revision beyond the head is never fed.
   */
  async atLeast(revision: number): Promise<AuthorityGraph> {
    const graph = await this.current();
    // Not fed: current() has just read the log's head.
    if (graph.revision >= revision || !this.fed) return graph;
    this.feedHead(await this.log.head());
    return this.current();
  }

  /** The graph as last caught up, without asking the log (for a log line or a metric). */
  get latest(): AuthorityGraph {
    return this.graph;
  }

  private async catchUp(head: number): Promise<void> {
    if (head <= this.graph.revision) return;
    for (const rec of await this.log.read(this.graph.revision, head)) this.graph.apply(rec);
  }

  /** A separate graph rebuilt as of `revision` (0 = empty). UNPROCESSABLE beyond the head. */
  async atRevision(revision: number): Promise<AuthorityGraph> {
    if (!Number.isSafeInteger(revision) || revision < 0) {
      throw new WritError('UNPROCESSABLE', `graph revision must be a non-negative integer, got ${revision}`, { revision });
    }
    if (revision > (await this.log.head())) {
      // The head read may answer before the commits it saw are durable: a refusal names the head of the
      // caught-up graph, whose events were read once durable.
      const head = (await this.current()).revision;
      if (revision > head) throw new WritError('UNPROCESSABLE', `graph revision ${revision} is beyond the head ${head}`, { revision, head });
    }
    const cached = this.past.get(revision);
    if (cached !== undefined) {
      this.past.delete(revision);
      this.past.set(revision, cached);
      return cached;
    }
    const rebuilt = AuthorityGraph.replay(await this.log.read(0, revision));
    if (this.pastLimit > 0) {
      this.past.set(revision, rebuilt);
      if (this.past.size > this.pastLimit) this.past.delete(this.past.keys().next().value!);
    }
    return rebuilt;
  }

  /** A separate graph rebuilt as it was at time `ms`: every event recorded at or before it. */
  async atTime(ms: number): Promise<AuthorityGraph> {
    if (!Number.isFinite(ms)) throw new WritError('UNPROCESSABLE', `graph time must be a number of milliseconds, got ${ms}`, { at: ms });
    return this.atRevision(await this.log.revisionAt(ms));
  }
}

/** What the use cases read the authority graph through: the live graph, or one operation's view of it. */
export type GraphReader = Pick<LiveGraph, 'current' | 'atLeast' | 'latest' | 'atRevision' | 'atTime' | 'feedHead'>;

/**
 * One operation's view of the live graph (e.g. one lease stream message: the caller re-checked, its
 * decision's chain, the principal's priority). Its first `current()` asks the log as
 * LiveGraph.current() does, so the operation sees every change committed before it began; later calls
 * within the operation reuse that answer instead of asking the log again (on SQLite each ask is a read
 * of `-shm`). Not a snapshot: what they return is the live graph, which other operations' catch-ups
 * update in place, so it is never older than at the first call, and may be newer. Told of a newer head
 * (`feedHead`: the operation's own append, or a head it ran into), the next call asks again. Make one
 * per operation (`OperationGraph.over`), never keep it longer.
 */
export class OperationGraph implements GraphReader {
  private checked: Promise<AuthorityGraph> | null = null;

  private constructor(private readonly live: GraphReader) {}

  /** A fresh view for one operation: over the live graph itself, also when given another operation's view. */
  static over(graph: GraphReader): OperationGraph {
    return new OperationGraph(graph instanceof OperationGraph ? graph.live : graph);
  }

  current(): Promise<AuthorityGraph> {
    return (this.checked ??= this.live.current());
  }

  /** This operation's graph if it is at `revision`, else the live graph caught up to it (LiveGraph.atLeast), kept for the operation's later calls. */
  async atLeast(revision: number): Promise<AuthorityGraph> {
    const graph = await this.current();
    return graph.revision >= revision ? graph : (this.checked = this.live.atLeast(revision));
  }

  get latest(): AuthorityGraph {
    return this.live.latest;
  }

  atRevision(revision: number): Promise<AuthorityGraph> {
    return this.live.atRevision(revision);
  }

  atTime(ms: number): Promise<AuthorityGraph> {
    return this.live.atTime(ms);
  }

  feedHead(head: number): void {
    this.live.feedHead(head);
    this.checked = null;
  }
}
