import type { Clock } from '../clock.js';
import { WritError } from '../errors.js';

/** One measurement of this replica's clock against the database's. */
export interface ClockOffset {
  /** This replica's clock minus the database's, ms (negative: this replica is behind). */
  offsetMs: number;
  /** Half the round trip of the measurement, ms: the true offset is within offsetMs ± this. */
  uncertaintyMs: number;
  /** When it was measured, by this replica's clock (ms). */
  at: number;
}

export interface DatabaseClockOptions {
  /** Past this (|offset| beyond the uncertainty, ms), `state` is `warn`. */
  warnMs: number;
  /** Past this, `state` is `skewed` and GET /readyz answers 503 CLOCK_SKEW; 0: never. */
  maxMs: number;
}

export type ClockState = 'ok' | 'warn' | 'skewed';

/**
 * This replica's clock against the database's (PostgreSQL), measured by one cheap statement now and then
 * (`writ serve` every SAMPLE_INTERVAL_MS, GET /readyz when the last is older), never by a request. On
 * PostgreSQL lease time is the database's clock and single-use ids (caller assertions, decisions,
 * console login links) expire by the later of the two clocks, so a replica whose clock is behind the
 * database's refuses what was made to its own clock, and one ahead signs decisions that outlive their
 * lifetime on the other replicas; callers whose clocks follow the database's are refused by one that is
 * off by more than the skew tolerated (5 s). Nothing is accepted or refused by this measurement: it says
 * what is wrong (the metric writ_clock_offset_seconds, GET /readyz, `writ serve`'s warnings) and, past
 * `maxMs`, takes the replica out of its load balancer's rotation.
 *
 * The offset is the database's time against the midpoint of this replica's clock before and after the
 * statement; a state changes only once the offset is past a limit by more than the round trip's half,
 * so a slow database does not make a replica look skewed.
 */
export class DatabaseClock {
  private last: ClockOffset | null = null;
  private sampling: Promise<ClockOffset> | null = null;

  constructor(
    private readonly readClock: () => Promise<number>,
    private readonly clock: Clock,
    readonly options: DatabaseClockOptions,
  ) {}

  /** The latest measurement, or null before the first. */
  latest(): ClockOffset | null {
    return this.last;
  }

  /** Measures now (one statement); measurements asked for while one runs share it. */
  sample(): Promise<ClockOffset> {
    this.sampling ??= this.measure().finally(() => (this.sampling = null));
    return this.sampling;
  }

  /** The latest measurement if it is younger than `maxAgeMs`, else a new one. */
  async fresh(maxAgeMs: number): Promise<ClockOffset> {
    const last = this.last;
    const now = this.clock.now();
    if (last !== null && now >= last.at && now - last.at < maxAgeMs) return last;
    return this.sample();
  }

  /** What a measurement says: within `warnMs`, past it, or past `maxMs`. */
  stateOf(o: ClockOffset): ClockState {
    const certain = Math.abs(o.offsetMs) - o.uncertaintyMs;
    if (this.options.maxMs > 0 && certain > this.options.maxMs) return 'skewed';
    return certain > this.options.warnMs ? 'warn' : 'ok';
  }

  /** Null when within the limits, else the sentence an operator acts on. */
  problem(o: ClockOffset): string | null {
    const state = this.stateOf(o);
    if (state === 'ok') return null;
    const limit = state === 'skewed' ? `WRIT_CLOCK_OFFSET_MAX_MS (${this.options.maxMs} ms)` : `WRIT_CLOCK_OFFSET_WARN_MS (${this.options.warnMs} ms)`;
    return `this replica's clock is ${describeOffset(o)} the database's, more than ${limit}: ${consequence(o.offsetMs)}; set the clock right (NTP) on this replica, or on the database if it is the one that is off`;
  }

  /** Throws CLOCK_SKEW when the measurement is past `maxMs` (for GET /readyz). */
  check(o: ClockOffset): void {
    if (this.stateOf(o) === 'skewed') throw new WritError('CLOCK_SKEW', this.problem(o)!, { clock_offset_ms: Math.round(o.offsetMs) });
  }

  private async measure(): Promise<ClockOffset> {
    const before = this.clock.now();
    const database = await this.readClock();
    const after = this.clock.now();
    const sample = { offsetMs: (before + after) / 2 - database, uncertaintyMs: Math.max(0, (after - before) / 2), at: after };
    this.last = sample;
    return sample;
  }
}

/** How often `writ serve` measures (the metric and the warnings are this fresh). */
export const CLOCK_SAMPLE_INTERVAL_MS = 10_000;

/** "12.3 s behind" / "4.0 s ahead of" (± the uncertainty when it is not negligible). */
export function describeOffset(o: ClockOffset): string {
  const s = (Math.abs(o.offsetMs) / 1000).toFixed(1);
  const pm = o.uncertaintyMs >= 50 ? ` (± ${(o.uncertaintyMs / 1000).toFixed(1)} s)` : '';
  return o.offsetMs < 0 ? `${s} s${pm} behind` : `${s} s${pm} ahead of`;
}

function consequence(offsetMs: number): string {
  return offsetMs < 0
    ? 'callers whose clocks follow the database\'s have their assertions refused as issued in the future, and once the gap is more than an assertion\'s lifetime, assertions, decisions and login links made to this replica\'s own clock are refused as expired by the database\'s'
    : 'callers whose clocks follow the database\'s have their assertions refused as expired once the gap is more than an assertion\'s lifetime, and decisions this replica signs live longer than their lifetime on the other replicas';
}
