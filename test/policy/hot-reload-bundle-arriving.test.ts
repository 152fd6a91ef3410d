import { cp, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { buildPolicyBundle, openReloadingPolicyEngine, type ReloadingPolicyEngine } from '../../src/policy/index.js';
import { copyPolicies, decisionInput, NOW, opaPath, tempDir } from './support.js';

let root: { path: string; remove: () => Promise<void> };
let engine: ReloadingPolicyEngine;
const clock = new ManualClock(NOW);
const errors: string[] = [];

beforeAll(async () => {
  root = await tempDir('policy-reload-arriving');
});
afterAll(async () => {
  engine?.close();
  await root.remove();
});

describe('a bundle folder copied in (a deploy), its revision file arriving before its bundle', () => {
  it('is refused while its bundle is missing, reported once, and taken once the bundle is there', async () => {
    const policies = await copyPolicies(root.path);
    const outDir = join(root.path, 'bundle');
    const live = await buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir });
    engine = await openReloadingPolicyEngine(outDir, { clock, onError: (message) => errors.push(message) });
    // The next bundle, built elsewhere (CI) and copied in with `cp -r`: `revision` first, then `bundles/`.
    await writeFile(join(policies, 'writ', 'authz', 'domain', 'freeze.rego'), 'package writ.authz.domain.freeze\n\ndeny contains "frozen" if true\n');
    const staged = join(root.path, 'staged');
    const next = await buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir: staged });
    await cp(join(staged, 'revision'), join(outDir, 'revision.tmp'));
    await rename(join(outDir, 'revision.tmp'), join(outDir, 'revision'));
    expect(await engine.reload()).toBe(false);
    expect(engine.revision).toBe(live.revision);
    expect(engine.reloads()).toMatchObject({ refused: 1, last_refused: { revision: next.revision, reason: expect.stringContaining('no policy bundle in') } });
    // Still missing: looked at again on use, not reported again.
    for (let i = 0; i < 3; i++) {
      clock.advance(250);
      engine.decide(decisionInput());
      await engine.reload();
    }
    expect(engine.reloads().refused).toBe(1);
    expect(errors).toHaveLength(1);
    expect(engine.decide(decisionInput()).allow).toBe(true);

    await cp(join(staged, 'bundles'), join(outDir, 'bundles'), { recursive: true });
    await vi.waitFor(
      () => {
        clock.advance(250);
        engine.decide(decisionInput());
        expect(engine.revision).toBe(next.revision);
      },
      { timeout: 5_000, interval: 20 },
    );
    expect(engine.reloads()).toMatchObject({ taken: 1, last_refused: null });
    expect(engine.decide(decisionInput())).toMatchObject({ allow: false, reasons: ['frozen'] });
  }, 60_000);
});
