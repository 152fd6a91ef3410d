import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO } from '../support/harness.js';

/** Every module the SDK pulls in, following relative imports from src/sdk/index.ts (type-only imports are erased). */
function closure(entry: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string) => {
    if (files.has(file)) return;
    files.add(file);
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/^(?:import|export)\s+(?!type\b)(?:[^'"]*?\sfrom\s+)?['"]([^'"]+)['"]/gm)) {
      const spec = m[1]!;
      if (spec.startsWith('.')) visit(resolve(dirname(file), spec.replace(/\.js$/, '.ts')));
      else packages.add(spec);
    }
  };
  visit(entry);
  return { files, packages };
}

describe('the SDK', () => {
  it('imports no server code: no fastify, SQLite, graph, policy engine, nor server folders', () => {
    const { files, packages } = closure(join(REPO, 'src/sdk/index.ts'));
    expect([...packages].sort()).toEqual(expect.arrayContaining(['jose']));
    for (const p of packages) expect(['jose', 'node:crypto', 'ws']).toContain(p);
    for (const f of files) expect(f, f).not.toMatch(/src\/(http|service|store|graph|policy|lease|gateway|audit|upstream|cli)\//);
  });

  it('is importable as the package subpath writ/sdk', async () => {
    const sdk = await import(/* @vite-ignore */ join(REPO, JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')).exports['./sdk']));
    expect(typeof sdk.WritClient).toBe('function');
    expect(typeof sdk.createCallerAssertion).toBe('function');
    expect(typeof sdk.VersionConflictError).toBe('function');
  });
});
