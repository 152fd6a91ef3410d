import { describe, expect, it } from 'vitest';
import { formatServerTiming, parseServerTiming } from '../../src/wire/server-timing.js';

describe('the Server-Timing header', () => {
  it('formats steps in order, to 0.01 ms, and parses them back', () => {
    const header = formatServerTiming({ auth: 0.281, intent: 0.6789, total: 3.2 });
    expect(header).toBe('auth;dur=0.28, intent;dur=0.68, total;dur=3.20');
    expect(parseServerTiming(header)).toEqual({ auth: 0.28, intent: 0.68, total: 3.2 });
  });

  it('reads what other servers send: descriptions, any spacing, entries without a duration left out', () => {
    expect(parseServerTiming('db;desc="Database";dur=53.2,cache;desc=hit ,  app ; dur = 7')).toEqual({ db: 53.2, app: 7 });
    expect(parseServerTiming('app;dur=7')).toEqual({ app: 7 });
    expect(parseServerTiming(undefined)).toEqual({});
    expect(parseServerTiming('x;dur=abc')).toEqual({});
  });
});
