import { describe, expect, it } from 'vitest';
import { backoffCeiling, backoffDelay } from '../../src/sdk/index.js';

const constant = (v: number) => () => v;

describe('backoffDelay: full jitter over a Retry-After floor', () => {
  it('the jitter window is min(cap, base·2^attempt): it doubles per attempt, then stays at the cap', () => {
    const opts = { baseMs: 100, capMs: 2_000 };
    expect([0, 1, 2, 3, 4, 5, 6, 40].map((n) => backoffCeiling(n, opts))).toEqual([100, 200, 400, 800, 1_600, 2_000, 2_000, 2_000]);
    expect(backoffCeiling(0)).toBe(100);
    expect(backoffCeiling(10)).toBe(2_000);
  });

  it('without Retry-After the delay is uniform in [0, ceiling]: random 0 → 0, random 1 → the ceiling, in between proportionally', () => {
    for (const attempt of [0, 1, 3, 7]) {
      const ceiling = backoffCeiling(attempt);
      expect(backoffDelay(attempt, null, { random: constant(0) })).toBe(0);
      expect(backoffDelay(attempt, null, { random: constant(1) })).toBe(ceiling);
      expect(backoffDelay(attempt, null, { random: constant(0.25) })).toBe(ceiling / 4);
    }
  });

  it('samples with Math.random stay within [0, ceiling] and are spread over it (mean near the middle)', () => {
    const ceiling = backoffCeiling(3);
    const samples = Array.from({ length: 10_000 }, () => backoffDelay(3, null));
    expect(Math.min(...samples)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...samples)).toBeLessThanOrEqual(ceiling);
    const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
    expect(Math.abs(mean - ceiling / 2)).toBeLessThan(ceiling * 0.05);
    // Not a point mass: a quarter of the window each side of the middle holds about half the samples.
    const middle = samples.filter((s) => Math.abs(s - ceiling / 2) < ceiling / 4).length / samples.length;
    expect(middle).toBeGreaterThan(0.4);
    expect(middle).toBeLessThan(0.6);
  });

  it('Retry-After is a floor: the delay is Retry-After plus a full-jitter draw, never less', () => {
    for (const attempt of [0, 2, 6]) {
      const ceiling = backoffCeiling(attempt);
      expect(backoffDelay(attempt, 900, { random: constant(0) })).toBe(900);
      expect(backoffDelay(attempt, 900, { random: constant(1) })).toBe(900 + ceiling);
      for (let i = 0; i < 1_000; i++) {
        const d = backoffDelay(attempt, 900);
        expect(d).toBeGreaterThanOrEqual(900);
        expect(d).toBeLessThanOrEqual(900 + ceiling);
      }
    }
  });

  it('a tiny Retry-After does not shrink the jitter window (clients told "1 ms" must not all come back within 2 ms)', () => {
    expect(backoffDelay(0, 1, { random: constant(1) })).toBe(1 + backoffCeiling(0));
    const spread = Array.from({ length: 200 }, () => backoffDelay(0, 1));
    expect(Math.max(...spread) - Math.min(...spread)).toBeGreaterThan(backoffCeiling(0) / 2);
  });

  it('a missing, zero or nonsensical Retry-After means no floor', () => {
    expect(backoffDelay(1, 0, { random: constant(0.5) })).toBe(backoffCeiling(1) / 2);
    expect(backoffDelay(1, Number.NaN, { random: constant(0.5) })).toBe(backoffCeiling(1) / 2);
    expect(backoffDelay(1, -5, { random: constant(0.5) })).toBe(backoffCeiling(1) / 2);
  });
});
