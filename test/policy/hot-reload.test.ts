import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { buildPolicyBundle, bundleRevision, loadPolicyEngine, openReloadingPolicyEngine, readLiveBundle, type ReloadingPolicyEngine } from '../../src/policy/index.js';
import { copyPolicies, decisionInput, NOW, opaPath, tempDir } from './support.js';
import { publishUncheckedBundle, TWO_VALUES_FILE, TWO_VALUES_RULE } from '../support/policy-mistakes.js';

let root: { path: string; remove: () => Promise<void> };
let policies: string;
let outDir: string;
let engine: ReloadingPolicyEngine;
const clock = new ManualClock(NOW);
const errors: string[] = [];
const causes: unknown[] = [];

beforeAll(async () => {
  root = await tempDir('policy-reload');
  policies = await copyPolicies(root.path);
  outDir = join(root.path, 'bundle');
  await buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir });
  engine = await openReloadingPolicyEngine(outDir, { clock, onError: (message, cause) => {
    errors.push(message);
    causes.push(cause);
  } });
});
afterAll(async () => {
  engine.close();
  await root.remove();
});

/** Decides until the engine runs `revision` (the watcher or the stat check on use picks it up). */
async function untilRevision(revision: string): Promise<void> {
  await vi.waitFor(
    () => {
      clock.advance(250);
      engine.decide(decisionInput());
      expect(engine.revision).toBe(revision);
    },
    { timeout: 10_000, interval: 20 },
  );
}

describe('a rebuilt bundle is picked up without re-creating the engine', () => {
  it('changes decisions and names the new revision', async () => {
    const before = engine.revision;
    expect(engine.decide(decisionInput())).toMatchObject({ allow: true, risk: 1 });

    const dataFile = join(policies, 'data.json');
    const data = JSON.parse(await readFile(dataFile, 'utf8'));
    data.writ.actions.update_post.risk = 5;
    await writeFile(dataFile, JSON.stringify(data));
    const rebuilt = await buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir });
    expect(rebuilt.revision).not.toBe(before);

    await untilRevision(rebuilt.revision);
    const after = engine.decide(decisionInput());
    expect(after.allow).toBe(false);
    expect(after.risk).toBe(5);
    expect(after.reasons).toContain('chain 0: risk: 5 exceeds the risk_max 1 of edge d-orch-seo');
    expect(engine.data.writ.actions.update_post?.risk).toBe(5);
  });

  it('keeps the live bundle when the new one does not load, and reports it', async () => {
    const live = engine.revision;
    // Published as a build publishes (a rename): a plain write could be read half done, empty, by the watcher.
    await writeFile(join(outDir, 'revision.tmp'), 'sha256:0000000000000000\n');
    await rename(join(outDir, 'revision.tmp'), join(outDir, 'revision'));
    await vi.waitFor(
      () => {
        clock.advance(250);
        engine.decide(decisionInput());
        expect(errors.length).toBeGreaterThan(0);
      },
      { timeout: 10_000, interval: 20 },
    );
    expect(errors.at(-1)).toContain(`keeping policy ${live}`);
    expect(engine.revision).toBe(live);
    expect(engine.decide(decisionInput()).risk).toBe(5);
    // The refusal names the revision the folder named, though its bundle could not be read.
    expect(engine.reloads()).toMatchObject({ taken: 1, last_refused: { revision: 'sha256:0000000000000000', reason: expect.stringContaining('no policy bundle in') } });
    // The folder names the live bundle again (the bad build reverted): nothing is refused any more.
    await writeFile(join(outDir, 'revision.tmp'), `${live}\n`);
    await rename(join(outDir, 'revision.tmp'), join(outDir, 'revision'));
    // (A reload the watcher started before the rename may still read the old name: ask until one reads the new.)
    await vi.waitFor(async () => {
      await engine.reload();
      expect(engine.reloads().last_refused).toBeNull();
    }, { timeout: 10_000, interval: 20 });
    expect(engine.revision).toBe(live);

    const dataFile = join(policies, 'data.json');
    const data = JSON.parse(await readFile(dataFile, 'utf8'));
    data.writ.actions.update_post.risk = 1;
    await writeFile(dataFile, JSON.stringify(data));
    const fixed = await buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir });
    await untilRevision(fixed.revision);
    expect(engine.decide(decisionInput()).allow).toBe(true);
  });

  it('keeps the live bundle when the new one holds data the policy would misread (a bundle not made by this build)', async () => {
    const live = engine.revision;
    const { wasm, data } = await readLiveBundle(outDir);
    const bad = JSON.parse(data.toString());
    bad.writ.approval_threshold.production = '2';
    const badData = Buffer.from(JSON.stringify(bad));
    const revision = bundleRevision(wasm, badData);
    const folder = join(outDir, 'bundles', revision.slice('sha256:'.length));
    await mkdir(folder, { recursive: true });
    await writeFile(join(folder, 'policy.wasm'), wasm);
    await writeFile(join(folder, 'data.json'), badData);
    const reported = errors.length;
    // As a build publishes (a rename): the folder's watcher must not read a half-written file.
    await writeFile(join(outDir, 'revision.tmp'), `${revision}\n`);
    await rename(join(outDir, 'revision.tmp'), join(outDir, 'revision'));
    expect(await engine.reload()).toBe(false);
    expect(errors.length).toBeGreaterThan(reported);
    expect(errors.at(-1)).toContain(`keeping policy ${live}`);
    expect((causes.at(-1) as Error).message).toContain('data.writ.approval_threshold.production must be integer (found "2")');
    expect(engine.revision).toBe(live);
    expect(engine.data.writ.approval_threshold.production).toBe(2);
  });

  it('keeps the live bundle when the new one fails on an input the live one answered (a Rego conflict opa build cannot see)', async () => {
    const live = engine.revision;
    expect(engine.decide(decisionInput()).allow).toBe(true);
    const rule = join(policies, TWO_VALUES_FILE);
    // Two values for one complete rule when both bodies hold: compiles, and fails on such inputs only.
    await writeFile(rule, TWO_VALUES_RULE);
    const conflicting = await buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir });
    expect(conflicting.revision).not.toBe(live);
    const reported = errors.length;
    expect(await engine.reload()).toBe(false);
    expect(engine.revision).toBe(live);
    // (The folder's watcher may have tried it first: each try is reported.)
    expect(errors.length).toBeGreaterThan(reported);
    expect(new Set(errors.slice(reported))).toEqual(new Set([`keeping policy ${live}: the new bundle in ${outDir} was not taken`]));
    expect(causes.at(-1)).toMatchObject({
      code: 'POLICY_UNAVAILABLE',
      message: expect.stringMatching(new RegExp(`^policy bundle ${conflicting.revision} fails on \\d+ of the last \\d+ inputs policy ${live} answered: .*var assignment conflict`)),
    });
    expect(engine.decide(decisionInput()).allow).toBe(true);

    // Fixed (the second value only where the first does not hold): taken.
    await writeFile(rule, ['package writ.authz.domain.two_values', '', 'level := "strict" if input.request.environment == "production"', '', 'level := "loose" if input.request.environment != "production"', '', 'deny contains "strict" if level == "strict"', ''].join('\n'));
    const fixed = await buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir });
    await untilRevision(fixed.revision);
    expect(engine.decide(decisionInput()).reasons).toContain('strict');
  });

  it('a domain rule whose deny message is not a string is the policy\'s mistake: INTERNAL naming it, so the bundle is not taken', async () => {
    const live = engine.revision;
    engine.decide(decisionInput());
    const rule = join(policies, 'writ', 'authz', 'domain', 'numbers.rego');
    // Only on requests naming a title: the build's probe (no fields) cannot see it, the inputs answered last do.
    await writeFile(rule, 'package writ.authz.domain.numbers\n\ndeny contains 42 if "title" in input.request.fields\n');
    const built = await buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir });
    const reported = causes.length;
    await engine.reload();
    expect(engine.revision).toBe(live);
    expect(causes.length).toBeGreaterThan(reported);
    expect((causes.at(-1) as Error).message).toMatch(/fails on \d+ of the last \d+ inputs/);
    expect((causes.at(-1) as Error).message).toContain(`answered: policy ${built.revision} returned no complete result for writ/authz/decision: reasons must be strings, one is 42 (a \`deny\` message of a domain rule?)`);
    await rm(rule);
    await untilRevision((await buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir })).revision);
  });

  it('keeps the live bundle when the new one lacks an output Writ reads (put in place without writ policy build), naming it; a start refuses it', async () => {
    const live = engine.revision;
    engine.decide(decisionInput());
    const entrypoint = join(policies, 'writ', 'authz', 'decision.rego');
    const original = await readFile(entrypoint, 'utf8');
    await writeFile(entrypoint, original.replace(/^risk := .*$/m, ''));
    const lacking = await publishUncheckedBundle(opaPath(), policies, outDir);
    await writeFile(entrypoint, original);
    expect(await engine.reload()).toBe(false);
    expect(engine.revision).toBe(live);
    expect(engine.reloads().last_refused).toMatchObject({
      revision: lacking,
      reason: `policy bundle ${lacking} cannot be used: its writ/authz/decision result lacks or mistypes what Writ reads (the entrypoint must define each for every input; policies/README.md): risk is missing (an integer)`,
    });
    expect(engine.decide(decisionInput()).risk).toBe(1);
    // A service starting on that folder refuses the bundle the same way (before any request).
    await expect(loadPolicyEngine(outDir)).rejects.toMatchObject({ code: 'POLICY_UNAVAILABLE', message: expect.stringContaining('risk is missing (an integer)') });
    await expect(openReloadingPolicyEngine(outDir)).rejects.toMatchObject({ code: 'POLICY_UNAVAILABLE', message: expect.stringContaining('risk is missing (an integer)') });
    await untilRevision((await buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir })).revision);
  });

  it('asking for its reloads (GET /readyz) looks at the folder: a rebuild is taken without a watcher or a decision', async () => {
    const quiet = await openReloadingPolicyEngine(outDir, { clock, onError: () => {} });
    quiet.close(); // no watcher from here on
    const dataFile = join(policies, 'data.json');
    const data = JSON.parse(await readFile(dataFile, 'utf8'));
    data.writ.actions.update_post.risk = data.writ.actions.update_post.risk === 2 ? 3 : 2;
    await writeFile(dataFile, JSON.stringify(data));
    const rebuilt = await buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir });
    await vi.waitFor(() => {
      clock.advance(250);
      expect(quiet.reloads().taken).toBe(1);
    }, { timeout: 10_000, interval: 20 });
    expect(quiet.revision).toBe(rebuilt.revision);
  });
});
