import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE, renderErrorTable } from '../../src/errors.js';
import { REPO } from '../support/harness.js';

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

describe('the error catalogue', () => {
  it('is documented in the README exactly as the catalogue says', () => {
    const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
    expect(readme).toContain(renderErrorTable());
  });

  it('every code thrown in src/ is in the catalogue', () => {
    const thrown = new Set<string>();
    for (const file of sources(join(REPO, 'src'))) {
      for (const m of readFileSync(file, 'utf8').matchAll(/WritError\(\s*'([A-Z_]+)'/g)) thrown.add(m[1]!);
    }
    expect(thrown.size).toBeGreaterThan(10);
    for (const code of thrown) expect(Object.keys(ERROR_CATALOGUE), `${code} is thrown but not catalogued`).toContain(code);
  });

  it('every code has a status in the 4xx/5xx range, a title and a meaning', () => {
    for (const [code, spec] of Object.entries(ERROR_CATALOGUE)) {
      expect(spec.status, code).toBeGreaterThanOrEqual(400);
      expect(spec.status, code).toBeLessThan(600);
      expect(spec.title.length, code).toBeGreaterThan(0);
      expect(spec.meaning.length, code).toBeGreaterThan(20);
    }
  });
});
