/**
 * A bounded buffer in front of one destination (a file, an HTTP collector). `push` never waits and
 * never throws, so a slow or dead destination can neither block nor fail a decision: events are sent
 * in batches from the background, a failed batch goes back to the front and is retried with
 * exponential backoff (full jitter), and when the buffer is full the oldest events are dropped and
 * counted.
 */
import type { DecisionLogEvent } from './event.js';

export interface SinkOptions {
  bufferEvents: number;
  batchEvents: number;
  flushMs: number;
  retryMinMs: number;
  retryMaxMs: number;
}

export interface SinkStats {
  sink: string;
  /** Events the destination accepted. */
  sent: number;
  /** Events lost because the buffer was full (oldest first) or the sink closed with events unsent. */
  dropped: number;
  /** Failed attempts (each is retried). */
  failures: number;
  /** Events waiting now (including a batch in flight). */
  buffered: number;
}

export type SendBatch = (batch: DecisionLogEvent[]) => Promise<void>;

export class BatchingSink {
  private queue: DecisionLogEvent[] = [];
  private inFlight: DecisionLogEvent[] = [];
  private timer: NodeJS.Timeout | null = null;
  private draining: Promise<void> | null = null;
  private consecutiveFailures = 0;
  private closed = false;
  private readonly counts = { sent: 0, dropped: 0, failures: 0 };

  constructor(
    readonly name: string,
    private readonly send: SendBatch,
    private readonly options: SinkOptions,
    private readonly onError: (sink: string, error: unknown) => void = () => {},
  ) {}

  push(event: DecisionLogEvent): void {
    if (this.closed) {
      this.counts.dropped++;
      return;
    }
    this.queue.push(event);
    this.trim();
    if (this.queue.length >= this.options.batchEvents && this.consecutiveFailures === 0) this.schedule(0);
    else this.schedule(this.options.flushMs);
  }

  stats(): SinkStats {
    return { sink: this.name, ...this.counts, buffered: this.queue.length + this.inFlight.length };
  }

  /** Sends what is buffered now; resolves when all went out or a batch failed (the background retries it). */
  async flush(): Promise<void> {
    this.clearTimer();
    await this.drain();
  }

  /** One last flush attempt; whatever is still unsent then is counted as dropped. */
  async close(): Promise<void> {
    this.closed = true;
    this.clearTimer();
    await this.drain();
    const left = this.queue.length + this.inFlight.length;
    this.counts.dropped += left;
    this.queue = [];
  }

  /** Keeps the buffer bound: the oldest waiting events go first. */
  private trim(): void {
    const over = this.queue.length + this.inFlight.length - this.options.bufferEvents;
    if (over > 0) {
      const n = Math.min(over, this.queue.length);
      this.queue.splice(0, n);
      this.counts.dropped += n;
    }
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private schedule(delayMs: number): void {
    if (this.draining) return; // the drain loop picks new events up itself
    if (this.timer) {
      if (delayMs > 0) return;
      this.clearTimer();
    }
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.drain();
    }, delayMs);
    this.timer.unref();
  }

  private drain(): Promise<void> {
    if (this.draining) return this.draining;
    if (this.queue.length === 0) return Promise.resolve();
    this.draining = this.sendAll().then((retryInMs) => {
      this.draining = null;
      if (retryInMs !== null) this.schedule(retryInMs);
    });
    return this.draining;
  }

  /** Sends batch after batch until the queue is empty (null) or a batch fails (the retry delay; null once closed). */
  private async sendAll(): Promise<number | null> {
    while (this.queue.length > 0) {
      this.inFlight = this.queue.splice(0, this.options.batchEvents);
      try {
        await this.send(this.inFlight);
        this.counts.sent += this.inFlight.length;
        this.inFlight = [];
        this.consecutiveFailures = 0;
      } catch (e) {
        this.counts.failures++;
        this.consecutiveFailures++;
        this.queue = [...this.inFlight, ...this.queue];
        this.inFlight = [];
        this.trim();
        this.onError(this.name, e);
        return this.closed ? null : this.backoffMs();
      }
    }
    return null;
  }

  /** Full jitter: a random delay up to min * 2^(failures-1), capped at max, never below min. */
  private backoffMs(): number {
    const ceiling = Math.min(this.options.retryMaxMs, this.options.retryMinMs * 2 ** Math.min(this.consecutiveFailures - 1, 30));
    return Math.max(this.options.retryMinMs, Math.round(Math.random() * ceiling));
  }
}
