import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

let cached: string | undefined;

/** Writ's version from its package.json (found upwards from this file, in src/ and in dist/ alike). */
export function writVersion(): string {
  if (cached !== undefined) return cached;
  let dir = import.meta.dirname;
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'writ' && typeof pkg.version === 'string') return (cached = pkg.version);
    } catch {
      /* not here */
    }
    const up = dirname(dir);
    if (up === dir) return (cached = 'unknown');
    dir = up;
  }
}
