import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';

/** The OPA CLI: $WRIT_OPA, then `opa` on PATH, then the pinned build in tools/bin (scripts/ensure-opa.sh installs it). */
export function findOpa(repoRoot = process.cwd()): string {
  if (process.env.WRIT_OPA && existsSync(process.env.WRIT_OPA)) return process.env.WRIT_OPA;
  try {
    return execFileSync('bash', ['-c', 'command -v opa'], { encoding: 'utf8' }).trim() || fallback(repoRoot);
  } catch {
    return fallback(repoRoot);
  }
}

function fallback(repoRoot: string): string {
  const local = resolve(repoRoot, 'tools/bin/opa');
  if (existsSync(local)) return local;
  throw new Error('the OPA CLI was not found: run `bash scripts/ensure-opa.sh` (installs opa v1.22.3 with Go into tools/bin) or set WRIT_OPA');
}
