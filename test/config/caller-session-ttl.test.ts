import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';

describe('WRIT_CALLER_SESSION_MAX_TTL_MS', () => {
  it('defaults to an hour; 0 turns sessions off; from 1 to 999, or not a whole number, refuses to start', () => {
    expect(loadConfig({}, {}).callerSessionMaxTtlMs).toBe(3_600_000);
    expect(loadConfig({}, { WRIT_CALLER_SESSION_MAX_TTL_MS: '0' }).callerSessionMaxTtlMs).toBe(0);
    expect(loadConfig({}, { WRIT_CALLER_SESSION_MAX_TTL_MS: '1000' }).callerSessionMaxTtlMs).toBe(1_000);
    for (const bad of ['1', '999', '-5', '1.5', 'soon']) {
      expect(() => loadConfig({}, { WRIT_CALLER_SESSION_MAX_TTL_MS: bad }), bad).toThrow(expect.objectContaining({ code: 'UNPROCESSABLE', message: expect.stringContaining('WRIT_CALLER_SESSION_MAX_TTL_MS') }));
    }
  });
});
