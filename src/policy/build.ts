/** Compiles policies/ to a wasm bundle with the OPA CLI and publishes it to a bundle folder. */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import { WritError } from '../errors.js';
import { bundleRevision, BUNDLES_DIR, DATA_FILE, POLICY_ENTRYPOINTS, readRevision, REVISION_FILE, revisionFolder, WASM_FILE } from './bundle-layout.js';
import { didYouMean } from '../json-schema.js';
import { opaCapabilities, opaMessage, wasmCapabilitiesOf } from './capabilities.js';
import { WASM_ALLOWED_BUILTINS } from './wasm-builtins.js';
import { checkPolicyData } from './data-check.js';
import { readTarGz } from './tar-gz.js';
import { createPolicyEngine } from './wasm-engine.js';

const run = promisify(execFile);

export { POLICY_ENTRYPOINTS };

export interface BuildPolicyOptions {
  opaPath: string;
  policiesDir: string;
  /** The bundle folder engines load from (see bundle-layout.ts). */
  outDir: string;
}

export interface BuiltPolicyBundle {
  revision: string;
  wasmPath: string;
  dataPath: string;
}

/**
 * `opa build -t wasm` with both entrypoints and the wasm-only capabilities, `*_test.rego` left out;
 * then policy.wasm and data.json go to a folder of their own and the `revision` file is switched to
 * it last, by rename. Throws POLICY_UNAVAILABLE with opa's own message when opa refuses, with every
 * problem of the data (data-check.ts) when the data has not the shape the policy relies on, and with
 * the outputs it lacks when the built bundle does not answer what Writ reads (result-check.ts).
 */
export async function buildPolicyBundle(options: BuildPolicyOptions): Promise<BuiltPolicyBundle> {
  const policiesDir = resolve(options.policiesDir);
  const outDir = resolve(options.outDir);
  // opa runs with policiesDir as its working directory, so a relative path to it must be made absolute.
  const opaPath = options.opaPath.includes('/') ? resolve(options.opaPath) : options.opaPath;
  if (!(await stat(policiesDir).catch(() => null))?.isDirectory()) {
    throw new WritError('POLICY_UNAVAILABLE', `opa build failed:\nthe policies folder ${policiesDir} does not exist`, { policiesDir });
  }
  const inside = relative(policiesDir, outDir);
  if (inside === '' || (inside.split(sep)[0] !== '..' && !isAbsolute(inside))) {
    // opa reads every .json below the policies folder as data: each build would take the bundles built before it in.
    throw new WritError(
      'POLICY_UNAVAILABLE',
      `the bundle folder ${outDir} (WRIT_BUNDLE_DIR) is ${inside === '' ? 'the policies folder' : `inside the policies folder ${policiesDir}`} (WRIT_POLICIES_DIR): opa would read the bundles built there as policy data; put it elsewhere (the default is ./build/policy beside ./policies)`,
      { policiesDir, outDir },
    );
  }
  await mkdir(outDir, { recursive: true });
  const work = await mkdtemp(join(outDir, '.build-'));
  try {
    const capabilitiesPath = join(work, 'capabilities.json');
    const capabilities = await opaCapabilities(opaPath);
    await writeFile(capabilitiesPath, JSON.stringify(wasmCapabilitiesOf(capabilities)));
    const archivePath = join(work, 'bundle.tar.gz');
    const entrypoints = POLICY_ENTRYPOINTS.flatMap((e) => ['-e', e]);
    try {
      // Run from inside policiesDir and name it `.`: opa embeds the source paths in the wasm, and the
      // revision (a hash of the content) must not change with the folder the policies were built from. Hidden
      // files and folders (an editor's .vscode/settings.json) are not the policy's: opa would load their JSON as data.
      await run(opaPath, ['build', '-t', 'wasm', ...entrypoints, '--capabilities', capabilitiesPath, '--ignore', '*_test.rego', '--ignore', '.*', '-o', archivePath, '.'], {
        cwd: policiesDir,
        maxBuffer: 64 * 1024 * 1024,
      });
    } catch (e) {
      const message = opaMessage(e);
      throw new WritError('POLICY_UNAVAILABLE', explainBuildFailure(message, new Set(capabilities.builtins.map((b) => b.name))) + (await jsonErrorPlaces(message, policiesDir)), { policiesDir });
    }
    const files = readTarGz(await readFile(archivePath));
    const wasm = files.get(WASM_FILE);
    const data = files.get(DATA_FILE) ?? Buffer.from('{}');
    if (!wasm) throw new WritError('POLICY_UNAVAILABLE', `opa build produced no ${WASM_FILE}`);
    // Nothing is published, so a running service keeps its bundle.
    checkPolicyData(JSON.parse(data.toString('utf8')), policiesDir);
    const revision = bundleRevision(wasm, data);
    // As a service loading it would: a bundle it would refuse is not published.
    await createPolicyEngine({ revision, wasm, data });
    const folder = revisionFolder(outDir, revision);
    await mkdir(join(outDir, BUNDLES_DIR), { recursive: true });
    const staged = join(work, 'bundle');
    await mkdir(staged);
    await writeFile(join(staged, WASM_FILE), wasm);
    await writeFile(join(staged, DATA_FILE), data);
    await writeFile(join(work, REVISION_FILE), `${revision}\n`);
    // One build at a time from here: another one's prune would delete this folder before or after it is named.
    await whilePublishing(outDir, async () => {
      await publishFolder(staged, folder);
      const previous = await readRevision(outDir);
      await rename(join(work, REVISION_FILE), join(outDir, REVISION_FILE));
      await pruneBundles(outDir, [revision, previous]);
    });
    return { revision, wasmPath: join(folder, WASM_FILE), dataPath: join(folder, DATA_FILE) };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** Held while a build publishes into a bundle folder (milliseconds): its process id. */
const PUBLISH_LOCK = '.publish.lock';
/** How long a build waits for another one to publish before it gives up. */
const PUBLISH_LOCK_WAIT_MS = 30_000;

/**
 * Runs `publish` holding the bundle folder's publish lock, a file created exclusively that names this
 * process. A lock whose process is gone (killed while publishing) is taken over; one still held after
 * PUBLISH_LOCK_WAIT_MS is a refusal that names it, and nothing is published.
 */
async function whilePublishing(outDir: string, publish: () => Promise<void>): Promise<void> {
  const lock = join(outDir, PUBLISH_LOCK);
  const deadline = Date.now() + PUBLISH_LOCK_WAIT_MS;
  for (;;) {
    try {
      await writeFile(lock, `${process.pid}\n`, { flag: 'wx' });
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    const holder = Number.parseInt(await readFile(lock, 'utf8').catch(() => ''), 10);
    if (Number.isInteger(holder) && !isRunning(holder)) {
      await rm(lock, { force: true });
      continue;
    }
    if (Date.now() >= deadline) {
      throw new WritError(
        'POLICY_UNAVAILABLE',
        `another writ policy build${Number.isInteger(holder) ? ` (process ${holder})` : ''} has been publishing into ${outDir} for ${PUBLISH_LOCK_WAIT_MS / 1000} s; nothing was published: run the build again, or remove ${lock} if no build is running`,
        { lock },
      );
    }
    await delay(20);
  }
  try {
    await publish();
  } finally {
    await rm(lock, { force: true });
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A revision folder appears only by rename, so one that exists is complete (same content, same name). */
async function publishFolder(staged: string, folder: string): Promise<void> {
  try {
    await rename(staged, folder);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== 'EEXIST' && code !== 'ENOTEMPTY') throw e;
  }
}

/** Keeps the live bundle and the one before it (an engine may still be loading it). */
async function pruneBundles(outDir: string, keep: (string | null)[]): Promise<void> {
  const kept = new Set(keep.filter((r): r is string => r !== null).map((r) => r.replace(/^sha256:/, '')));
  for (const name of await readdir(join(outDir, BUNDLES_DIR))) {
    if (!kept.has(name)) await rm(join(outDir, BUNDLES_DIR, name), { recursive: true, force: true });
  }
}

/**
 * opa names a data file it cannot parse but not where (`data.json: invalid character ',' looking for beginning
 * of object key string`): the line and column, as JSON.parse finds them, each on a line of its own.
 */
async function jsonErrorPlaces(message: string, policiesDir: string): Promise<string> {
  const files = [...new Set([...message.matchAll(/(?:^|\s)([^\s:]+\.json): /gm)].map((m) => m[1]!))];
  const places: string[] = [];
  for (const file of files) {
    const text = await readFile(resolve(policiesDir, file), 'utf8').catch(() => null);
    if (text === null) continue;
    try {
      JSON.parse(text);
    } catch (e) {
      const at = /at position (\d+)/.exec((e as Error).message);
      if (!at) continue;
      const before = text.slice(0, Number(at[1]));
      const line = before.split('\n').length;
      const column = Number(at[1]) - before.lastIndexOf('\n');
      places.push(`\n${file}:${line}:${column}: ${(e as Error).message.replace(/ in JSON at position \d+$/, '')}`);
    }
  }
  return places.join('');
}

/**
 * opa says `undefined function X` both for a builtin the wasm capabilities leave out and for a name that
 * is no builtin at all (a typo, a policy function misnamed or not imported): each is told as what it is.
 */
function explainBuildFailure(message: string, opaBuiltins: ReadonlySet<string>): string {
  const undefinedFunctions = [...new Set([...message.matchAll(/undefined function ([\w.]+)/g)].map((m) => m[1]!))];
  const allowed = [...WASM_ALLOWED_BUILTINS];
  const hints = undefinedFunctions.map((name) => {
    if (opaBuiltins.has(name) && !WASM_ALLOWED_BUILTINS.has(name)) {
      return `${name}: not available to policies, which run as wasm in-process through @open-policy-agent/opa-wasm (allowed builtins: src/policy/wasm-builtins.ts)`;
    }
    if (name.startsWith('data.')) return `${name}: no function of the policies has this name`;
    return `${name}: neither a builtin nor a function of the policies (misspelt, or its package not imported?)${didYouMean(name, allowed)}`;
  });
  return `opa build failed:\n${message}${hints.map((h) => `\n${h}`).join('')}`;
}
