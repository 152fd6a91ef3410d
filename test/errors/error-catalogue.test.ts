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

  it('every catalogued code is produced somewhere in src/ (no promises the server never keeps)', () => {
    const produced = new Set<string>();
    const catalogueFiles = [join(REPO, 'src/errors.ts'), join(REPO, 'src/sdk/errors.ts')];
    for (const file of sources(join(REPO, 'src'))) {
      if (catalogueFiles.includes(file)) continue;
      for (const m of readFileSync(file, 'utf8').matchAll(/'([A-Z][A-Z_]+)'/g)) produced.add(m[1]!);
    }
    const unused = Object.keys(ERROR_CATALOGUE).filter((code) => !produced.has(code));
    expect(unused, 'catalogued but never produced').toEqual([]);
  });
});
