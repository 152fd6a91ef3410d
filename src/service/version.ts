import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

let cached: { version: string; dir: string | null } | undefined;

/** Writ's own package.json, found upwards from this file (in src/ and in dist/ alike): its version and folder. */
function writPackage(): { version: string; dir: string | null } {
  if (cached !== undefined) return cached;
  let dir = import.meta.dirname;
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'writ' && typeof pkg.version === 'string') return (cached = { version: pkg.version, dir });
    } catch {
      /* not here */
    }
    const up = dirname(dir);
    if (up === dir) return (cached = { version: 'unknown', dir: null });
    dir = up;
  }
}

/** Writ's version from its package.json. */
export function writVersion(): string {
  return writPackage().version;
}

/** The folder Writ is installed in (its package.json's), whatever the working directory; null when it cannot be found. */
export function writInstallDir(): string | null {
  return writPackage().dir;
}
