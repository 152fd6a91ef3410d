import { describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE, WritError, type ErrorCode } from '../../src/errors.js';
import * as sdk from '../../src/sdk/index.js';
import { ERROR_CLASSES, errorFromProblem, errorFromWritError, WritApiError } from '../../src/sdk/index.js';
import { typeErrors } from './type-check.js';

const codes = Object.keys(ERROR_CATALOGUE) as ErrorCode[];
/** VERSION_CONFLICT → VersionConflictError */
const className = (code: string) => code.toLowerCase().replace(/(^|_)([a-z])/g, (_, __, c: string) => c.toUpperCase()) + 'Error';

describe('typed SDK errors', () => {
  it('every catalogued code has its own class, exported under its name, and no class serves two codes', () => {
    // Fails when a code is added to src/errors.ts without a class here.
    expect(Object.keys(ERROR_CLASSES).sort()).toEqual([...codes].sort());
    for (const code of codes) {
      const cls = ERROR_CLASSES[code];
      expect(cls, code).toBeTypeOf('function');
      expect((sdk as Record<string, unknown>)[className(code)], `sdk exports ${className(code)}`).toBe(cls);
    }
    expect(new Set(Object.values(ERROR_CLASSES)).size).toBe(codes.length);
  });

  it('every class is also a type (`let e: VersionConflictError`), as the README promises: a code whose class has no type export fails here', () => {
    const names = codes.map(className);
    const source = [
      `import type { ${names.join(', ')} } from '@writ/sdk';`,
      ...names.map((name, i) => `export const e${i}: ${name} | undefined = undefined;`),
    ].join('\n');
    expect(typeErrors({ 'error-types': source })).toEqual([]);
  });

  it.each(codes)('errorFromProblem turns a %s problem into its class, with code, status, detail, problem and Retry-After', (code) => {
    const status = ERROR_CATALOGUE[code].status;
    const problem = { type: `https://writ.dev/errors/${code}`, title: ERROR_CATALOGUE[code].title, status, code, detail: `a ${code} happened`, holder: 'someone' };
    const e = errorFromProblem(status, problem, 1_234);
    expect(e).toBeInstanceOf(ERROR_CLASSES[code]);
    expect(e).toBeInstanceOf(WritApiError);
    expect(e).toBeInstanceOf(Error);
    expect(e.code).toBe(code);
    expect(e.status).toBe(status);
    expect(e.detail).toBe(`a ${code} happened`);
    expect(e.problem.holder).toBe('someone');
    expect(e.retryAfterMs).toBe(1_234);
    expect(e.name).toBe(className(code));
    expect(e.message).toBe(`${code}: a ${code} happened`);
  });

  it('a code this SDK does not know (a newer server) still becomes a WritApiError, with code INTERNAL and the original code in the detail', () => {
    const e = errorFromProblem(418, { code: 'TEAPOT', detail: 'short and stout' }, null);
    expect(e).toBeInstanceOf(WritApiError);
    expect(e.code).toBe('INTERNAL');
    expect(e.status).toBe(418);
    expect(e.detail).toContain('TEAPOT');
  });

  it('a locally thrown WritError (offline verification) maps onto the same classes', () => {
    const e = errorFromWritError(new WritError('DECISION_EXPIRED', 'too late', { decision_id: 'd1' }));
    expect(e).toBeInstanceOf(ERROR_CLASSES.DECISION_EXPIRED);
    expect(e).toMatchObject({ code: 'DECISION_EXPIRED', status: 403, detail: 'too late', problem: { decision_id: 'd1' } });
  });
});
