import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { assertWellFormed, jsonDepthExceeds, jsonTextWellFormed } from '../../src/http/input-guard.js';

/** The depth by its definition: the deepest object/array of the parsed value (the top level is 1). */
function depthOf(value: unknown): number {
  if (value === null || typeof value !== 'object') return 0;
  const children = Array.isArray(value) ? value : Object.values(value);
  return 1 + Math.max(0, ...children.map(depthOf));
}

/** Whether some string (value or key) of the parsed value holds a lone surrogate or a NUL. */
function holdsIllFormed(value: unknown): boolean {
  const bad = (s: string) => /[\uD800-\uDFFF]|\u0000/u.test(s);
  if (typeof value === 'string') return bad(value);
  if (value === null || typeof value !== 'object') return false;
  if (Array.isArray(value)) return value.some(holdsIllFormed);
  return Object.entries(value).some(([k, v]) => bad(k) || holdsIllFormed(v));
}

/** Whether `assertWellFormed` refuses the value. */
function walkRefuses(value: unknown): boolean {
  try {
    assertWellFormed(value, 'body');
    return false;
  } catch {
    return true;
  }
}

const nested = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);

describe('jsonDepthExceeds: the bracket count settles small texts, the scan the rest', () => {
  it('exactly max levels pass and max + 1 do not, on both sides of the count', () => {
    expect(jsonDepthExceeds(nested(8), 8)).toBe(false);
    expect(jsonDepthExceeds(nested(9), 8)).toBe(true);
    expect(jsonDepthExceeds(`[${nested(7)}]`, 8)).toBe(false);
    expect(jsonDepthExceeds(`[${nested(8)}]`, 8)).toBe(true);
  });

  it('more brackets than max, but shallow: siblings, and brackets inside strings, do not count', () => {
    expect(jsonDepthExceeds(`[${'{},'.repeat(50)}{}]`, 8)).toBe(false);
    expect(jsonDepthExceeds(`{"s":"${'[{'.repeat(50)}","t":"\\"[["}`, 8)).toBe(false);
  });

  it('agrees with the depth of what JSON.parse makes, for any JSON', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 12 }), fc.integer({ min: 1, max: 10 }), (value, max) => {
        const text = JSON.stringify(value);
        expect(jsonDepthExceeds(text, max)).toBe(depthOf(value) > max);
      }),
      { numRuns: 500 },
    );
  });
});

describe('jsonTextWellFormed: the text alone vouches for every parsed string, or sends them to the walk', () => {
  it('plain text, raw non-ASCII and a raw emoji pass; a \\u escape, a raw lone surrogate or a raw NUL do not', () => {
    expect(jsonTextWellFormed('{"a":"b","c":[1,2,{"d":"é 😀"}]}')).toBe(true);
    expect(jsonTextWellFormed('{"a":"\\u0041"}')).toBe(false);
    expect(jsonTextWellFormed('{"a":"\\\\u"}')).toBe(false); // an escaped backslash before u: walked too
    expect(jsonTextWellFormed('{"a":"\ud800"}')).toBe(false);
    expect(jsonTextWellFormed('{"a":"\u0000"}')).toBe(false);
  });

  it('never vouches for text whose parsed strings are ill-formed (any JSON, escapes included)', () => {
    const str = fc.string({ unit: fc.constantFrom('a', 'é', '😀', '\ud800', '\udfff', '\u0000', '"', '\\', 'u') });
    const json = fc.letrec((tie) => ({
      value: fc.oneof({ depthSize: 'small' }, str, fc.integer(), fc.array(tie('value'), { maxLength: 3 }), fc.dictionary(str, tie('value'), { maxKeys: 3 })),
    })).value;
    fc.assert(
      fc.property(json, (value) => {
        const text = JSON.stringify(value);
        if (jsonTextWellFormed(text)) expect(holdsIllFormed(JSON.parse(text))).toBe(false);
        // And the walk finds what is there, wherever the text was vouched for or not.
        expect(walkRefuses(JSON.parse(text))).toBe(holdsIllFormed(value));
      }),
      { numRuns: 1000 },
    );
  });

  it('nor for hand-written text: raw lone surrogates and NULs, escapes of every kind, an escaped backslash before u', () => {
    // JSON.stringify escapes what the test above generates; here the text is put together piece by piece.
    const piece = fc.constantFrom('a', 'é', '😀', '\ud800', '\udc00', '\u0000', '\\n', '\\/', '\\\\', '\\"', '\\u0041', '\\u00e9', '\\ud800', '\\udfff', '\\u0000', '\\ud83d\\ude00', '\\\\u0041');
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 3 }), fc.array(piece, { maxLength: 8 }), (key, value) => {
        const text = `{"${key.join('')}":["${value.join('')}", 1]}`;
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch {
          return; // a raw NUL: JSON.parse refuses the text, nothing reaches the check
        }
        if (jsonTextWellFormed(text)) expect(holdsIllFormed(parsed)).toBe(false);
        expect(walkRefuses(parsed)).toBe(holdsIllFormed(parsed));
      }),
      { numRuns: 2000 },
    );
  });

  it('the walk names where it found the first one, keys escaped', () => {
    expect(() => assertWellFormed({ a: [1, { b: 'x\u0000' }] }, 'body')).toThrow(/^body\/a\/1\/b: contains U\+0000/);
    expect(() => assertWellFormed({ t: { '\ud800': 1 } }, 'body')).toThrow(/^body\/t\/\\ud800: contains a lone UTF-16 surrogate/);
  });
});
