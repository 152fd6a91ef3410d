import { describe, expect, it } from 'vitest';
import { toWireTime, toWireTimeOrNull } from '../../src/wire/time.js';

describe('toWireTime', () => {
  it('writes an instant as RFC 3339 in UTC with ms', () => {
    expect(toWireTime(Date.UTC(2026, 10, 30, 12))).toBe('2026-11-30T12:00:00.000Z');
    expect(toWireTimeOrNull(null)).toBeNull();
  });

  it('clamps an instant beyond years 0000–9999 to the last (or first) one RFC 3339 names, instead of throwing RangeError or writing +275760-…', () => {
    expect(toWireTime(1e20)).toBe('9999-12-31T23:59:59.999Z');
    expect(toWireTime(8.64e15)).toBe('9999-12-31T23:59:59.999Z');
    expect(toWireTime(Date.parse('9999-12-31T23:59:59.999Z'))).toBe('9999-12-31T23:59:59.999Z');
    expect(toWireTime(-1e20)).toBe('0000-01-01T00:00:00.000Z');
    expect(toWireTimeOrNull(1e20)).toBe('9999-12-31T23:59:59.999Z');
  });
});
