/**
 * Rego a policy author might write by mistake, for the tests of what Writ does with it: it compiles
 * (opa build cannot refuse it) and fails only on the inputs that reach it.
 */
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleRevision } from '../../src/policy/index.js';
import { readTarGz } from '../../src/policy/tar-gz.js';

/** Where this domain rule goes under a policies folder. */
export const TWO_VALUES_FILE = 'writ/authz/domain/two_values.rego';

/**
 * Two values for one complete rule when both bodies hold: a request in production with the title
 * field fails with `var assignment conflict`; others are judged (in production, denied "strict").
 */
export const TWO_VALUES_RULE = [
  'package writ.authz.domain.two_values',
  '',
  'level := "strict" if input.request.environment == "production"',
  '',
  'level := "loose" if "title" in input.request.fields',
  '',
  'deny contains "strict" if level == "strict"',
  '',
].join('\n');

/**
 * Compiles `policiesDir` with opa alone and publishes it to `outDir` as `writ policy build` would, but
 * without Writ's checks: a bundle put in a service's folder by other means (another tool, an older Writ).
 */
export async function publishUncheckedBundle(opa: string, policiesDir: string, outDir: string): Promise<string> {
  const work = await mkdtemp(join(tmpdir(), 'writ-unchecked-'));
  try {
    const archive = join(work, 'bundle.tar.gz');
    execFileSync(opa, ['build', '-t', 'wasm', '-e', 'writ/authz/decision', '-e', 'writ/authz/delegation', '--ignore', '*_test.rego', '-o', archive, '.'], { cwd: policiesDir });
    const files = readTarGz(await readFile(archive));
    const wasm = files.get('policy.wasm')!;
    const data = files.get('data.json') ?? Buffer.from('{}');
    const revision = bundleRevision(wasm, data);
    const folder = join(outDir, 'bundles', revision.slice('sha256:'.length));
    await mkdir(folder, { recursive: true });
    await writeFile(join(folder, 'policy.wasm'), wasm);
    await writeFile(join(folder, 'data.json'), data);
    // As a build publishes (a rename): a watcher never reads a half-written name.
    await writeFile(join(work, 'revision'), `${revision}\n`);
    await rename(join(work, 'revision'), join(outDir, 'revision'));
    return revision;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}
