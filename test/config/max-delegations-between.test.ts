import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';

describe('WRIT_MAX_DELEGATIONS_BETWEEN', () => {
  it('is 16 by default, at least 1: anything else is UNPROCESSABLE, naming it', () => {
    expect(loadConfig({}, {}).maxDelegationsBetween).toBe(16);
    expect(loadConfig({}, { WRIT_MAX_DELEGATIONS_BETWEEN: '1' }).maxDelegationsBetween).toBe(1);
    expect(() => loadConfig({}, { WRIT_MAX_DELEGATIONS_BETWEEN: '0' })).toThrow(/WRIT_MAX_DELEGATIONS_BETWEEN must be at least 1/);
    expect(() => loadConfig({}, { WRIT_MAX_DELEGATIONS_BETWEEN: 'many' })).toThrow(expect.objectContaining({ code: 'UNPROCESSABLE' }));
  });
});
