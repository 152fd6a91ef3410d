import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { CLI, REPO } from '../../scripts/server-process.js';

const run = promisify(execFile);

/**
 * Runs the compiled `writ` command on a data directory; a non-zero exit is returned, not thrown.
 * `stdout` is the standard output (with stderr joined after it on a failure); `output` is both, always.
 */
export async function runWrit(dataDir: string, ...args: string[]): Promise<{ stdout: string; output: string; code: number }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, ...args, '--data-dir', dataDir], { cwd: REPO });
    return { stdout, output: stdout + stderr, code: 0 };
  } catch (e) {
    const err = e as { stdout: string; stderr: string; code: number };
    return { stdout: err.stdout + err.stderr, output: err.stdout + err.stderr, code: err.code };
  }
}
