import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { WritError } from '../../src/errors.js';
import { DatabaseClock, describeOffset } from '../../src/service/database-clock.js';

/** A database whose clock is `offsetMs` ahead of `clock`, answering after `roundTripMs` of the replica's clock. */
function database(clock: ManualClock, offsetMs: () => number, roundTripMs = 0) {
  let reads = 0;
  return {
    reads: () => reads,
    async read() {
      reads += 1;
      clock.advance(roundTripMs / 2);
      const t = clock.now() + offsetMs();
      clock.advance(roundTripMs / 2);
      return t;
    },
  };
}

describe('DatabaseClock: this replica\'s clock against the database\'s', () => {
  it('measures the replica minus the database against the midpoint of the round trip, with half of it as the uncertainty', async () => {
    const clock = new ManualClock(Date.UTC(2026, 11, 7));
    const db = database(clock, () => 120_000, 40);
    const watch = new DatabaseClock(db.read, clock, { warnMs: 1_000, maxMs: 60_000 });
    expect(watch.latest()).toBeNull();
    const o = await watch.sample();
    expect(o).toEqual({ offsetMs: -120_000, uncertaintyMs: 20, at: clock.now() });
    expect(watch.latest()).toBe(o);
    expect(describeOffset(o)).toBe('120.0 s behind');
    expect(describeOffset({ offsetMs: 3_000, uncertaintyMs: 250, at: 0 })).toBe('3.0 s (± 0.3 s) ahead of');
  });

  it('ok within warnMs, warn past it, skewed past maxMs, each only once past the limit by more than the uncertainty; maxMs 0 is never skewed', () => {
    const watch = new DatabaseClock(async () => 0, new ManualClock(), { warnMs: 1_000, maxMs: 60_000 });
    const at = (offsetMs: number, uncertaintyMs = 0) => watch.stateOf({ offsetMs, uncertaintyMs, at: 0 });
    expect(at(-900)).toBe('ok');
    expect(at(-1_500)).toBe('warn');
    expect(at(-1_500, 600)).toBe('ok');
    expect(at(1_500)).toBe('warn');
    expect(at(-61_000)).toBe('skewed');
    expect(at(61_000)).toBe('skewed');
    expect(at(-61_000, 2_000)).toBe('warn');
    const never = new DatabaseClock(async () => 0, new ManualClock(), { warnMs: 1_000, maxMs: 0 });
    expect(never.stateOf({ offsetMs: -3_600_000, uncertaintyMs: 0, at: 0 })).toBe('warn');
  });

  it('says what is wrong and what to do; check throws CLOCK_SKEW past maxMs only', () => {
    const watch = new DatabaseClock(async () => 0, new ManualClock(), { warnMs: 1_000, maxMs: 60_000 });
    expect(watch.problem({ offsetMs: -200, uncertaintyMs: 1, at: 0 })).toBeNull();
    expect(watch.problem({ offsetMs: -3_000, uncertaintyMs: 1, at: 0 })).toMatch(/^this replica's clock is 3\.0 s behind the database's, more than WRIT_CLOCK_OFFSET_WARN_MS \(1000 ms\): callers whose clocks follow the database's have their assertions refused as issued in the future.*set the clock right \(NTP\)/);
    expect(watch.problem({ offsetMs: 90_000, uncertaintyMs: 1, at: 0 })).toMatch(/^this replica's clock is 90\.0 s ahead of the database's, more than WRIT_CLOCK_OFFSET_MAX_MS \(60000 ms\): .*decisions this replica signs live longer than their lifetime on the other replicas/);
    expect(() => watch.check({ offsetMs: -3_000, uncertaintyMs: 1, at: 0 })).not.toThrow();
    let thrown: unknown;
    try {
      watch.check({ offsetMs: -120_400.4, uncertaintyMs: 1, at: 0 });
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(WritError);
    expect(thrown).toMatchObject({ code: 'CLOCK_SKEW', details: { clock_offset_ms: -120_400 } });
  });

  it('fresh answers the latest measurement while it is young, measures again once it is old; measurements asked for at once share one statement', async () => {
    const clock = new ManualClock(Date.UTC(2026, 11, 7));
    let offset = -5_000;
    const db = database(clock, () => -offset);
    const watch = new DatabaseClock(db.read, clock, { warnMs: 1_000, maxMs: 60_000 });
    const [a, b] = await Promise.all([watch.sample(), watch.sample()]);
    expect(a).toBe(b);
    expect(db.reads()).toBe(1);
    clock.advance(5_000);
    offset = 2_000;
    expect((await watch.fresh(10_000)).offsetMs).toBe(-5_000);
    expect(db.reads()).toBe(1);
    clock.advance(5_000);
    expect((await watch.fresh(10_000)).offsetMs).toBe(2_000);
    expect(db.reads()).toBe(2);
    // A replica clock stepped back before the latest measurement measures again.
    clock.advance(-60_000);
    await watch.fresh(10_000);
    expect(db.reads()).toBe(3);
  });
});
