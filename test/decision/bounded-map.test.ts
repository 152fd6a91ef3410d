import { describe, expect, it } from 'vitest';
import { BoundedMap } from '../../src/decision/bounded-map.js';

describe('BoundedMap (the verifier\'s caches of tokens)', () => {
  it('holds at most its limit, and evicts the oldest-added first, round after round', () => {
    const m = new BoundedMap<number>(3);
    for (let i = 0; i < 10; i++) {
      m.set(`k${i}`, i);
      expect(m.size).toBe(Math.min(i + 1, 3));
      // The last three added are there, with their values; everything older is gone.
      for (let j = 0; j <= i; j++) expect(m.get(`k${j}`)).toBe(j > i - 3 ? j : undefined);
    }
  });

  it('setting a key already there replaces its value and keeps its place: nothing else is evicted', () => {
    const m = new BoundedMap<string>(2);
    m.set('a', '1');
    m.set('b', '1');
    m.set('a', '2');
    expect(m.size).toBe(2);
    expect([m.get('a'), m.get('b')]).toEqual(['2', '1']);
    m.set('c', '1'); // 'a' was added first: it goes, although it was set last
    expect([m.get('a'), m.get('b'), m.get('c')]).toEqual([undefined, '1', '1']);
  });

  it('a limit of one keeps the latest; a limit below one is refused', () => {
    const m = new BoundedMap<number>(1);
    m.set('a', 1);
    m.set('b', 2);
    expect([m.get('a'), m.get('b'), m.size]).toEqual([undefined, 2, 1]);
    expect(() => new BoundedMap(0)).toThrow(RangeError);
    expect(() => new BoundedMap(1.5)).toThrow(RangeError);
  });

  it('matches a reference model on a long random run', () => {
    const limit = 64;
    const m = new BoundedMap<number>(limit);
    const model: string[] = []; // keys, oldest first
    const values = new Map<string, number>();
    let seed = 7;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let i = 0; i < 20_000; i++) {
      const key = `k${Math.floor(rand() * 200)}`;
      if (!values.has(key)) {
        if (model.length === limit) values.delete(model.shift()!);
        model.push(key);
      }
      values.set(key, i);
      m.set(key, i);
      const probe = `k${Math.floor(rand() * 200)}`;
      expect(m.get(probe)).toBe(values.get(probe));
    }
    expect(m.size).toBe(values.size);
  });
});
