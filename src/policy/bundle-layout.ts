/**
 * Where a built bundle lives on disk. Each build goes to its own folder named after its revision
 * and the `revision` file, replaced by rename as the last step of a build, names the live one; so a
 * reader never sees the wasm of one build with the data of another.
 *
 *   <bundleDir>/revision                    sha256:<16 hex>
 *   <bundleDir>/bundles/<16 hex>/policy.wasm
 *   <bundleDir>/bundles/<16 hex>/data.json
 *
 * A folder holding just policy.wasm and data.json (no `revision` file) is read as well.
 */
import { createHash } from 'node:crypto';
import { access, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { WritError } from '../errors.js';

/** What a bundle must answer: the decision (DecisionInput → DecisionResult) and the delegation check (types.ts). */
export const POLICY_ENTRYPOINTS = ['writ/authz/decision', 'writ/authz/delegation'] as const;

export const REVISION_FILE = 'revision';
export const BUNDLES_DIR = 'bundles';
export const WASM_FILE = 'policy.wasm';
export const DATA_FILE = 'data.json';

/**
 * The bundle's revision: `sha256:` and the first 16 hex digits of SHA-256 over policy.wasm
 * followed by data.json. 64 bits are plenty to tell builds apart; it is not a security boundary.
 */
export function bundleRevision(wasm: Uint8Array, data: Uint8Array): string {
  return `sha256:${createHash('sha256').update(wasm).update(data).digest('hex').slice(0, 16)}`;
}

export function revisionFolder(bundleDir: string, revision: string): string {
  return join(bundleDir, BUNDLES_DIR, revision.replace(/^sha256:/, ''));
}

export interface BundleFiles {
  revision: string;
  wasm: Buffer;
  data: Buffer;
}

/** Reads the live bundle of `bundleDir` and checks its content against its revision. */
export async function readLiveBundle(bundleDir: string): Promise<BundleFiles> {
  const named = await readRevision(bundleDir);
  const folder = named === null ? bundleDir : revisionFolder(bundleDir, named);
  // Both reads settle before either failure is named, and policy.wasm's is named first: with Promise.all the
  // read that failed first on the thread pool was named, so the same missing folder was said to lack policy.wasm
  // on one look and data.json on the next (and a service looking again took that for another refusal).
  const [wasmRead, dataRead] = await Promise.allSettled([readFile(join(folder, WASM_FILE)), readFile(join(folder, DATA_FILE))]);
  if (wasmRead.status === 'rejected' || dataRead.status === 'rejected') {
    const e: unknown = wasmRead.status === 'rejected' ? wasmRead.reason : (dataRead as PromiseRejectedResult).reason;
    // policy.wasm and data.json copied beside a `revision` file by hand: say which layout is read.
    const flat = named !== null && (await Promise.all([WASM_FILE, DATA_FILE].map((f) => access(join(bundleDir, f)).then(() => true, () => false)))).every(Boolean);
    const hint = flat
      ? `; ${bundleDir} names its bundle in a \`${REVISION_FILE}\` file, so it is read from ${BUNDLES_DIR}/<revision>/ (the layout \`writ policy build\` writes), not from the ${WASM_FILE} and ${DATA_FILE} beside it: remove \`${REVISION_FILE}\` to read those`
      : '';
    throw new WritError('POLICY_UNAVAILABLE', `no policy bundle in ${folder} (build it with \`writ policy build\`): ${(e as Error).message}${hint}`);
  }
  const wasm = wasmRead.value;
  const data = dataRead.value;
  const revision = bundleRevision(wasm, data);
  if (named !== null && named !== revision) {
    throw new WritError('POLICY_UNAVAILABLE', `policy bundle in ${folder} does not match its revision ${named} (content is ${revision})`);
  }
  return { revision, wasm, data };
}

export async function readRevision(bundleDir: string): Promise<string | null> {
  try {
    return (await readFile(join(bundleDir, REVISION_FILE), 'utf8')).trim();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
}
