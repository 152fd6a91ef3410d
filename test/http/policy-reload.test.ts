import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findOpa } from '../../src/cli/opa.js';
import { buildPolicyBundle } from '../../src/policy/index.js';
import { REPO, startHarness, type Harness } from '../support/harness.js';

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
});
