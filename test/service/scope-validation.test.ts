import { describe, expect, it } from 'vitest';
import { WritError } from '../../src/errors.js';
import { normalizeScope } from '../../src/service/validate.js';

const base = { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'] };

function refusal(input: Parameters<typeof normalizeScope>[0]): WritError {
  try {
    normalizeScope(input);
  } catch (e) {
    if (e instanceof WritError) return e;
    throw e;
  }
  throw new Error('accepted');
}

describe('a scope bounds its risk', () => {
  it('a missing risk_max is named as missing, with what to give', () => {
    const e = refusal(base);
    expect(e.code).toBe('UNPROCESSABLE');
    expect(e.message).toMatch(/scope\.risk_max is missing/);
    expect(e.message).toMatch(/"risk_max": 1/);
  });

  it('a wrong risk_max is shown as given', () => {
    const e = refusal({ ...base, risk_max: -1 });
    expect(e.message).toMatch(/must be a non-negative integer, got -1/);
    expect(refusal({ ...base, constraints: { risk_max: 1.5 } }).message).toMatch(/got 1\.5/);
  });

  it('a whole risk_max is kept, from either place', () => {
    expect(normalizeScope({ ...base, risk_max: 2 }).constraints.risk_max).toBe(2);
    expect(normalizeScope({ ...base, constraints: { risk_max: 0 } }).constraints.risk_max).toBe(0);
  });
});
