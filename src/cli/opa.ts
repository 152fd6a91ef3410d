import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, join, resolve } from 'node:path';
import { WritError } from '../errors.js';
import { writInstallDir } from '../service/version.js';

/**
 * The OPA CLI: $WRIT_OPA, then `opa` on PATH, then the pinned build in tools/bin of this Writ install
 * (scripts/ensure-opa.sh installs it there), wherever the command runs from. POLICY_UNAVAILABLE, in one
 * line, when there is none: every `writ policy …` command (and --policy on a Rego folder) needs it.
 */
export function findOpa(installDir: string | null = writInstallDir()): string {
  const named = process.env.WRIT_OPA;
  if (named) {
    if (executable(named)) return resolve(named);
    throw new WritError('POLICY_UNAVAILABLE', `WRIT_OPA is ${JSON.stringify(named)}, which is not an executable file: point it at an opa binary, or unset it to use opa on PATH or ${installDir === null ? 'tools/bin/opa' : join(installDir, 'tools/bin/opa')}`);
  }
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir !== '' && executable(join(dir, 'opa'))) return join(dir, 'opa');
  }
  const pinned = installDir === null ? null : join(installDir, 'tools/bin/opa');
  if (pinned !== null && executable(pinned)) return pinned;
  throw new WritError(
    'POLICY_UNAVAILABLE',
    `the OPA CLI was not found (not on PATH${pinned === null ? '' : `, not at ${pinned}`}): run \`bash scripts/ensure-opa.sh\` in the Writ checkout (installs opa v1.22.3 with Go into tools/bin) or set WRIT_OPA`,
  );
}

/** A file that may be run (a folder passes X_OK too: a folder named opa on PATH is passed over). */
function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
