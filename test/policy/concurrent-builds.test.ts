import { spawnSync } from 'node:child_process';
import { chmod, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPolicyBundle, loadPolicyEngine } from '../../src/policy/index.js';
import { copyPolicies, opaPath, tempDir } from './support.js';

let dir: { path: string; remove: () => Promise<void> };
beforeAll(async () => {
  dir = await tempDir('policy-concurrent-builds');
});
afterAll(() => dir.remove());

/** policies/ with one domain rule whose message names `tag`: each tag builds to another revision. */
async function variant(tag: string): Promise<string> {
  const policies = await copyPolicies(join(dir.path, `src-${tag}`));
  await writeFile(
    join(policies, 'writ', 'authz', 'domain', 'variant.rego'),
    `package writ.authz.domain.variant\n\ndeny contains "variant ${tag}" if input.request.action == "variant-${tag}"\n`,
  );
  return policies;
}

/** An opa whose `build` waits, once it has built, until `parties` builds have: the builds go on in step. */
async function steppedOpa(barrier: string, parties: number): Promise<string> {
  const path = join(dir.path, `opa-stepped-${parties}`);
  await writeFile(
    path,
    `#!/bin/sh\nif [ "$1" = build ]; then\n  "${opaPath()}" "$@" || exit $?\n  echo built >> "${barrier}"\n  while [ "$(wc -l < "${barrier}")" -lt ${parties} ]; do sleep 0.005; done\n  exit 0\nfi\nexec "${opaPath()}" "$@"\n`,
  );
  await chmod(path, 0o755);
  return path;
}

describe('writ policy build, run twice at once into one bundle folder', () => {
  it('leaves the revision file naming a bundle that is there, and every build it reported loads', async () => {
    const [a, b, c] = await Promise.all(['a', 'b', 'c'].map(variant));
    const outDir = join(dir.path, 'out');
    for (let round = 0; round < 4; round++) {
      // A live bundle and one before it, as a folder that has been built into for a while has.
      await buildPolicyBundle({ opaPath: opaPath(), policiesDir: c!, outDir });
      const barrier = join(dir.path, `barrier-${round}`);
      await writeFile(barrier, '');
      const opa = await steppedOpa(barrier, 2);
      const built = await Promise.all([a!, b!].map((policiesDir) => buildPolicyBundle({ opaPath: opa, policiesDir, outDir })));
      const live = (await readFile(join(outDir, 'revision'), 'utf8')).trim();
      expect(built.map((r) => r.revision)).toContain(live);
      expect(await readdir(join(outDir, 'bundles'))).toContain(live.slice('sha256:'.length));
      // What a service (re)starting now would load.
      expect((await loadPolicyEngine(outDir)).revision).toBe(live);
    }
  }, 120_000);

  it('takes over the publish lock of a build that was killed while publishing', async () => {
    const a = await variant('killed-a');
    const outDir = join(dir.path, 'killed');
    const gone = spawnSync('true').pid!;
    await buildPolicyBundle({ opaPath: opaPath(), policiesDir: a, outDir });
    await writeFile(join(outDir, '.publish.lock'), `${gone}\n`);
    const c = await variant('killed-c');
    const built = await buildPolicyBundle({ opaPath: opaPath(), policiesDir: c, outDir });
    expect((await readFile(join(outDir, 'revision'), 'utf8')).trim()).toBe(built.revision);
    expect((await readdir(outDir)).sort()).toEqual(['bundles', 'revision']);
  }, 60_000);
});
