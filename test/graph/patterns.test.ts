import { describe, expect, it } from 'vitest';
import { matchesPattern, patternCovers, patternsOverlap, specificity, validatePattern, validateResourceKey } from '../../src/graph/patterns.js';

describe('resource patterns', () => {
  it.each([
    ['wp:post:*', 'wp:post:1024', true],
    ['wp:post:*', 'wp:post', false],
    ['wp:post:*', 'wp:post:1024:rev', false],
    ['wp:post:1024', 'wp:post:1024', true],
    ['wp:post:1024', 'wp:post:1025', false],
    ['wp:*:1024', 'wp:page:1024', true],
    ['site:example.com:**', 'site:example.com', true],
    ['site:example.com:**', 'site:example.com:robots', true],
    ['site:example.com:**', 'site:example.com:a:b:c', true],
    ['site:example.com:**', 'site:other.com:robots', false],
    ['**', 'anything:at:all', true],
    ['*:**', 'a', true],
    ['*', 'a:b', false],
    ['wp:post', 'wp:post:1', false],
  ])('%s matches %s: %s', (pattern, key, expected) => {
    expect(matchesPattern(pattern, key)).toBe(expected);
  });

  it.each([
    ['wp:post:*', 'wp:post:1024', true],
    ['wp:post:*', 'wp:post:*', true],
    ['wp:post:1024', 'wp:post:*', false],
    ['wp:**', 'wp:post:*', true],
    ['wp:**', 'wp:**', true],
    ['wp:**', 'wp', true],
    ['wp:post:**', 'wp:**', false],
    ['wp:*:**', 'wp:**', false],
    ['wp:*:**', 'wp:post:**', true],
    ['wp:post:*', 'wp:post:**', false],
    ['wp:*', 'wp:*:x', false],
    ['**', 'wp:**', true],
    ['*', '**', false],
    ['wp:*:1', 'wp:post:*', false],
    ['wp:post:*', 'wp:*:1', false],
  ])('%s covers %s: %s', (parent, child, expected) => {
    expect(patternCovers(parent, child)).toBe(expected);
  });

  it('covering agrees with matching for every key a child pattern matches', () => {
    const keys = ['wp', 'wp:post', 'wp:post:1', 'wp:page:1', 'wp:post:1:x', 'site:a'];
    const patterns = ['wp:**', 'wp:post:*', 'wp:*:1', 'wp:post:**', '**', 'wp:*', 'wp:post:1'];
    for (const parent of patterns) {
      for (const child of patterns) {
        if (!patternCovers(parent, child)) continue;
        for (const k of keys) if (matchesPattern(child, k)) expect(matchesPattern(parent, k), `${parent} ⊇ ${child} at ${k}`).toBe(true);
      }
    }
  });

  it.each([
    ['', 'empty'],
    ['wp::post', 'empty segment'],
    ['wp:post:', 'empty segment'],
    ['wp:**:post', '"**" may only be the last'],
    ['wp:po*t', 'whole segment'],
    ['wp:post 1', 'whitespace'],
  ])('rejects the pattern "%s" (%s)', (pattern, text) => {
    expect(validatePattern(pattern)).toContain(text);
  });

  it('accepts valid patterns and keys, and refuses wildcards in keys', () => {
    for (const p of ['wp:post:*', 'site:example.com:**', '**', 'wp:post:1024']) expect(validatePattern(p)).toBeNull();
    expect(validateResourceKey('wp:post:1024')).toBeNull();
    expect(validateResourceKey('wp:post:*')).toContain('wildcard');
    expect(validateResourceKey('wp::1')).toContain('resource key');
  });

  it('orders patterns from general to specific (more literals, then the later first wildcard, then fixed length)', () => {
    const ordered = ['**', 'wp:**', 'wp:*', 'wp:*:1024', 'wp:post:**', 'wp:post:*', 'wp:post:1024'];
    const scores = ordered.map(specificity);
    for (let i = 1; i < scores.length; i++) expect(scores[i], `${ordered[i]} > ${ordered[i - 1]}`).toBeGreaterThan(scores[i - 1]!);
  });

  it('two patterns overlap exactly when some key matches both (every pattern and key of up to 3 segments over a, b)', () => {
    const segments = ['a', 'b', '*', '**'];
    const patterns: string[] = [];
    const grow = (prefix: string[]): void => {
      if (prefix.length > 0) patterns.push(prefix.join(':'));
      if (prefix.length === 3 || prefix.at(-1) === '**') return;
      for (const s of segments) grow([...prefix, s]);
    };
    grow([]);
    const keys = patterns.filter((p) => !p.includes('*'));
    // A key longer than both patterns decides nothing a 3-segment key does not (** takes any rest).
    const longer = keys.map((k) => `${k}:a`);
    let pairs = 0;
    for (const a of patterns) {
      for (const b of patterns) {
        const some = [...keys, ...longer].some((k) => matchesPattern(a, k) && matchesPattern(b, k));
        expect(patternsOverlap(a, b), `${a} and ${b}`).toBe(some);
        pairs++;
      }
    }
    expect(pairs).toBeGreaterThan(1000);
    expect(patternsOverlap('wp:post:*', 'wp:**')).toBe(true);
    expect(patternsOverlap('wp:psot:*', 'wp:post:*')).toBe(false);
    expect(patternsOverlap('deploy:**', 'deploy')).toBe(true);
  });
});
