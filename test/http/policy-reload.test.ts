import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findOpa } from '../../src/cli/opa.js';
import { buildPolicyBundle } from '../../src/policy/index.js';
import { REPO, startHarness, type Harness } from '../support/harness.js';
import { TWO_VALUES_FILE, TWO_VALUES_RULE } from '../support/policy-mistakes.js';

let h: Harness;
let policiesDir: string;
let bundleDir: string;
beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'writ-reload-'));
  policiesDir = join(dir, 'policies');
  bundleDir = join(dir, 'bundle');
  cpSync(join(REPO, 'policies'), policiesDir, { recursive: true });
  await buildPolicyBundle({ opaPath: findOpa(REPO), policiesDir, outDir: bundleDir });
  h = await startHarness({ config: { bundleDir, policiesDir } });
}, 60_000);
afterAll(async () => h?.close());

const ask = () => h.call('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['title'] } });

describe('a rebuilt policy bundle is picked up without a restart', () => {
  it('raising update_post to risk 5 in data.json and rebuilding turns allow into deny, under the new revision', async () => {
    const before = await ask();
    expect(before.body.allow).toBe(true);
    const oldRevision = before.body.policy_revision as string;

    const dataFile = join(policiesDir, 'data.json');
    const data = JSON.parse(readFileSync(dataFile, 'utf8'));
    data.writ.actions.update_post.risk = 5;
    writeFileSync(dataFile, JSON.stringify(data));
    const built = await buildPolicyBundle({ opaPath: findOpa(REPO), policiesDir, outDir: bundleDir });
    expect(built.revision).not.toBe(oldRevision);

    let after = await ask();
    for (let i = 0; i < 50 && after.body.policy_revision === oldRevision; i++) {
      await new Promise((r) => setTimeout(r, 100));
      after = await ask();
    }
    expect(after.body.policy_revision).toBe(built.revision);
    expect(after.body.allow).toBe(false);
    expect(after.body.reasons.join('\n')).toMatch(/risk: 5 exceeds/);
    const ready = await h.call(null, { method: 'GET', url: '/readyz' });
    expect(ready.body.policy_revision).toBe(built.revision);
  }, 60_000);

  it('a rebuilt bundle that is not taken shows in /readyz (revision, why, when) and in /metrics, until one is taken', async () => {
    const live = (await ask()).body.policy_revision as string;
    const count = async (result: 'taken' | 'refused') => Number(new RegExp(`^writ_policy_reloads_total\\{result="${result}"\\} (\\d+)$`, 'm').exec((await h.call(null, { method: 'GET', url: '/metrics' })).raw)![1]);
    const taken = await count('taken');
    const refused = await count('refused');
    writeFileSync(join(policiesDir, TWO_VALUES_FILE), TWO_VALUES_RULE);
    const conflicting = await buildPolicyBundle({ opaPath: findOpa(REPO), policiesDir, outDir: bundleDir });
    let ready = await h.call(null, { method: 'GET', url: '/readyz' });
    for (let i = 0; i < 50 && ready.body.policy_refused === undefined; i++) {
      await new Promise((r) => setTimeout(r, 100));
      await ask();
      ready = await h.call(null, { method: 'GET', url: '/readyz' });
    }
    expect(ready.status).toBe(200);
    expect(ready.body).toMatchObject({ status: 'ready', policy_revision: live, policy_refused: { revision: conflicting.revision, reason: expect.stringContaining('var assignment conflict') } });
    expect(ready.body.policy_refused.at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(await count('taken')).toBe(taken);
    expect(await count('refused')).toBeGreaterThan(refused);

    rmSync(join(policiesDir, TWO_VALUES_FILE));
    // Another policy than the live one, so that it is a new revision (run alone, this test starts from the shipped one).
    const data = JSON.parse(readFileSync(join(policiesDir, 'data.json'), 'utf8'));
    data.writ.actions.update_post.risk = data.writ.actions.update_post.risk === 3 ? 4 : 3;
    writeFileSync(join(policiesDir, 'data.json'), JSON.stringify(data));
    const fixed = await buildPolicyBundle({ opaPath: findOpa(REPO), policiesDir, outDir: bundleDir });
    let after = await ask();
    for (let i = 0; i < 50 && after.body.policy_revision !== fixed.revision; i++) {
      await new Promise((r) => setTimeout(r, 100));
      after = await ask();
    }
    expect(after.body.policy_revision).toBe(fixed.revision);
    ready = await h.call(null, { method: 'GET', url: '/readyz' });
    expect(ready.body.policy_revision).toBe(fixed.revision);
    expect(ready.body.policy_refused).toBeUndefined();
    expect(await count('taken')).toBe(taken + 1);
  }, 60_000);
});
