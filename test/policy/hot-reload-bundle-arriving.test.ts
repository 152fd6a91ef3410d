import { execFileSync } from 'node:child_process';
import { cp, mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { buildPolicyBundle, openReloadingPolicyEngine, type ReloadingPolicyEngine } from '../../src/policy/index.js';
import { UNREAD_RELOOK_MS } from '../../src/policy/reloading-engine.js';
import { copyPolicies, decisionInput, NOW, opaPath, tempDir } from './support.js';

let root: { path: string; remove: () => Promise<void> };
const engines: ReloadingPolicyEngine[] = [];

beforeAll(async () => {
  root = await tempDir('policy-reload-arriving');
});
afterAll(async () => {
  for (const engine of engines) engine.close();
  await root.remove();
});

/**
 * A live bundle in `<case>/bundle` with an engine following it, and the next one (a domain rule denying
 * everything) built elsewhere into `<case>/staged`, as CI would, not yet copied in.
 */
async function deploy(name: string) {
  const dir = join(root.path, name);
  const policies = await copyPolicies(dir);
  const outDir = join(dir, 'bundle');
  const live = await buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir });
  const clock = new ManualClock(NOW);
  const errors: string[] = [];
  const engine = await openReloadingPolicyEngine(outDir, { clock, onError: (message, cause) => errors.push(`${message}: ${(cause as Error).message}`) });
  engines.push(engine);
  await writeFile(join(policies, 'writ', 'authz', 'domain', 'freeze.rego'), 'package writ.authz.domain.freeze\n\ndeny contains "frozen" if true\n');
  const staged = join(dir, 'staged');
  const next = await buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir: staged });
  /** The deploy's first step: the `revision` file naming the next bundle, before its `bundles/`. */
  const copyRevision = async (): Promise<void> => {
    await cp(join(staged, 'revision'), join(outDir, 'revision.tmp'));
    await rename(join(outDir, 'revision.tmp'), join(outDir, 'revision'));
  };
  /** A decision 250 ms later (the engine looks at the folder again on use), and that look finished. */
  const decideLater = async () => {
    clock.advance(250);
    const decision = engine.decide(decisionInput());
    await engine.reload();
    return decision;
  };
  return { outDir, staged, live, next, clock, errors, engine, copyRevision, decideLater };
}

describe('a bundle folder copied in (a deploy), its revision file arriving before its bundle', () => {
  it('is refused while its bundle is missing, reported once, and taken once the bundle is there', async () => {
    const { outDir, staged, live, next, clock, errors, engine, copyRevision, decideLater } = await deploy('whole');
    await copyRevision();
    expect(await engine.reload()).toBe(false);
    expect(engine.revision).toBe(live.revision);
    expect(engine.reloads()).toMatchObject({ refused: 1, last_refused: { revision: next.revision, reason: expect.stringContaining('no policy bundle in') } });
    // Still missing: looked at again on use, not reported again.
    for (let i = 0; i < 3; i++) await decideLater();
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
    expect(engine.reloads()).toMatchObject({ taken: 1, refused: 1, last_refused: null });
    expect(errors).toHaveLength(1);
    expect(engine.decide(decisionInput())).toMatchObject({ allow: false, reasons: ['frozen'] });
  }, 60_000);

  // A copy is seen in whichever state it is in when a decision comes: each look below finds something else
  // wrong with the same bundle. Before, each new reason was another refusal and another error report (and
  // which of two missing files a look named depended on the thread pool, so even a missing folder was
  // sometimes reported again: the flake of the test above on a loaded machine).
  it('is one refusal, reported once, while seen half copied (a file missing, then truncated), and never taken before it reads', async () => {
    const { outDir, staged, live, next, errors, engine, copyRevision, decideLater } = await deploy('partial');
    const hex = next.revision.replace(/^sha256:/, '');
    const from = join(staged, 'bundles', hex);
    const to = join(outDir, 'bundles', hex);
    const wasm = await readFile(join(from, 'policy.wasm'));
    const data = await readFile(join(from, 'data.json'));
    await copyRevision();

    const steps: [string, () => Promise<void>, string][] = [
      ['nothing of the folder yet', async () => {}, `open '${join(to, 'policy.wasm')}'`],
      ['its folder, empty', () => mkdir(to, { recursive: true }).then(() => {}), `open '${join(to, 'policy.wasm')}'`],
      ['half of policy.wasm', () => writeFile(join(to, 'policy.wasm'), wasm.subarray(0, wasm.length >> 1)), `open '${join(to, 'data.json')}'`],
      ['policy.wasm, no data.json', () => writeFile(join(to, 'policy.wasm'), wasm), `open '${join(to, 'data.json')}'`],
      ['half of data.json', () => writeFile(join(to, 'data.json'), data.subarray(0, data.length >> 1)), `does not match its revision ${next.revision}`],
    ];
    for (const [state, step, reason] of steps) {
      await step();
      const decision = await decideLater();
      expect({ state, allow: decision.allow, revision: engine.revision, reloads: engine.reloads(), errors: errors.length }).toMatchObject({
        state,
        allow: true,
        revision: live.revision,
        // What is wrong now shows in the status (GET /readyz), but it is the one refusal reported first.
        reloads: { taken: 0, refused: 1, last_refused: { revision: next.revision, reason: expect.stringContaining(reason) } },
        errors: 1,
      });
    }
    expect(errors[0]).toContain(`no policy bundle in ${to}`);

    await writeFile(join(to, 'data.json'), data);
    expect(await decideLater()).toMatchObject({ allow: true });
    expect(engine.revision).toBe(next.revision);
    expect(engine.reloads()).toMatchObject({ taken: 1, refused: 1, last_refused: null });
    expect(errors).toHaveLength(1);
    expect(engine.decide(decisionInput())).toMatchObject({ allow: false, reasons: ['frozen'] });
  }, 60_000);

  // A bundle that stays unreadable (a copy that stopped halfway) was read in full and hashed on every look, every
  // 250 ms while decisions came: 25 ms of the event loop each for a 20 MB data.json. It is read again when one of
  // its files changes, and every UNREAD_RELOOK_MS in case a rewrite left no trace in its files' stat.
  it('that stays unreadable is not read again on use until one of its files changes, and at most every UNREAD_RELOOK_MS', async () => {
    const { outDir, live, next, clock, errors, engine, copyRevision } = await deploy('unchanged');
    const hex = next.revision.replace(/^sha256:/, '');
    await copyRevision();
    expect(await engine.reload()).toBe(false);
    const reason = engine.reloads().last_refused?.reason;
    expect(reason).toContain(`no policy bundle in ${join(outDir, 'bundles', hex)}`);
    // policy.wasm and data.json copied beside the revision file, not where it names: a look that reads the bundle
    // says so in its reason (the layout hint). Nothing of the bundle it names changed: the looks on use do not read.
    const liveDir = join(outDir, 'bundles', live.revision.replace(/^sha256:/, ''));
    await cp(join(liveDir, 'policy.wasm'), join(outDir, 'policy.wasm'));
    await cp(join(liveDir, 'data.json'), join(outDir, 'data.json'));
    for (let i = 0; i < 3; i++) {
      clock.advance(250);
      expect(engine.decide(decisionInput()).allow).toBe(true);
      await sleep(300); // a look started now would have read two small files by then
      expect(engine.reloads()).toMatchObject({ refused: 1, last_refused: { revision: next.revision, reason } });
    }
    // Read again all the same after UNREAD_RELOOK_MS.
    clock.advance(UNREAD_RELOOK_MS);
    engine.decide(decisionInput());
    await vi.waitFor(() => expect(engine.reloads().last_refused?.reason).toContain('is read from bundles/<revision>/'), { timeout: 5_000, interval: 20 });
    expect(engine.reloads()).toMatchObject({ taken: 0, refused: 1 });
    expect(errors).toHaveLength(1);
  }, 60_000);

  it('left with a damaged data.json is taken once it is rewritten in place, at the same size and with its mtime put back', async () => {
    const { outDir, staged, next, clock, errors, engine, copyRevision, decideLater } = await deploy('in-place');
    const hex = next.revision.replace(/^sha256:/, '');
    const to = join(outDir, 'bundles', hex);
    const data = await readFile(join(staged, 'bundles', hex, 'data.json'));
    await copyRevision();
    await mkdir(to, { recursive: true });
    await cp(join(staged, 'bundles', hex, 'policy.wasm'), join(to, 'policy.wasm'));
    await writeFile(join(to, 'data.json'), Buffer.alloc(data.length, 0x20)); // the right size, the wrong bytes
    await decideLater();
    expect(engine.reloads()).toMatchObject({ refused: 1, last_refused: { reason: expect.stringContaining(`does not match its revision ${next.revision}`) } });
    // Its times kept to the nanosecond (touch -r; fs.utimes rounds them) on another file, and put back after.
    execFileSync('touch', ['-r', join(to, 'data.json'), join(outDir, 'times')]);
    const ino = (await stat(join(to, 'data.json'))).ino;
    await writeFile(join(to, 'data.json'), data); // the same file (inode), the same size
    execFileSync('touch', ['-r', join(outDir, 'times'), join(to, 'data.json')]);
    expect((await stat(join(to, 'data.json'))).ino).toBe(ino);
    // One decision 250 ms later (well within UNREAD_RELOOK_MS): its look sees the file changed (its ctime) and takes it.
    clock.advance(250);
    engine.decide(decisionInput());
    await vi.waitFor(() => expect(engine.revision).toBe(next.revision), { timeout: 5_000, interval: 20 });
    expect(engine.reloads()).toMatchObject({ taken: 1, refused: 1, last_refused: null });
    expect(errors).toHaveLength(1);
  }, 60_000);
});
