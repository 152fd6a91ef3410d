import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Vitest global set-up: the run's temporary files go under one directory of its own (TMPDIR, which
 * os.tmpdir() reads and every test worker and spawned server inherits), removed when the run ends. A test
 * that leaves its temporary directory behind (a killed server's data directory, a set-up without a
 * tear-down; a whole suite left about 60) then leaves nothing in the machine's /tmp.
 */
export default function setup(): () => void {
  const dir = mkdtempSync(join(tmpdir(), 'writ-suite-'));
  // Open to every user, sticky, as /tmp is: a test's private PostgreSQL runs as the user postgres in a directory made here.
  chmodSync(dir, 0o1777);
  const before = process.env.TMPDIR;
  process.env.TMPDIR = dir;
  return () => {
    if (before === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = before;
    rmSync(dir, { recursive: true, force: true });
  };
}
