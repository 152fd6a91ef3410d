import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { generatePrincipalKeyPair } from '../../src/wire/principal-keys.js';
import { startHarness, type Harness } from '../support/harness.js';
import { runWrit } from '../support/cli.js';
import { requireDist } from '../support/server-process.js';

/**
 * `writ audit verify --jwks FILE` checks the store's signed checkpoint with the public keys of a saved
 * /.well-known/jwks.json: an auditor checking a store from another machine (`--database` on
 * PostgreSQL) needs no copy of the servers' keys/, which hold their private signing keys. Without
 * either, the checkpoint cannot be checked.
 */
const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('writ audit verify --jwks FILE', () => {
  it('checks the latest checkpoint with the JWKS\'s public keys, not the data directory\'s key files', async () => {
    requireDist();
    const h: Harness = await startHarness();
    cleanups.push(() => h.close());
    const aside = mkdtempSync(join(tmpdir(), 'writ-verify-jwks-'));
    cleanups.push(() => rmSync(aside, { recursive: true, force: true }));
    await h.ctx.receipts.recordRejection({ principal: 'seo-agent-7', action: 'update_post', resource_key: 'wp:post:7', error: { code: 'FORBIDDEN', message: 'no' } });
    expect((await runWrit(h.dataDir, 'audit', 'checkpoint')).code).toBe(0);
    const jwks = join(aside, 'jwks.json');
    writeFileSync(jwks, JSON.stringify(h.ctx.keys.jwks()));
    const other = join(aside, 'other-jwks.json');
    writeFileSync(other, JSON.stringify({ keys: [(await generatePrincipalKeyPair()).publicJwk] }));
    renameSync(join(h.dataDir, 'keys'), join(aside, 'keys')); // the auditor's machine: no private keys
    const ok = await runWrit(h.dataDir, 'audit', 'verify', '--jwks', jwks);
    expect([ok.code, ok.output]).toEqual([0, expect.stringMatching(/^OK: 1 entries in 1 chains against checkpoint 1 /)]);
    const wrongKeys = await runWrit(h.dataDir, 'audit', 'verify', '--jwks', other);
    expect([wrongKeys.code, wrongKeys.output]).toEqual([1, expect.stringContaining(`which is not among the published keys: the keys of ${other}`)]);
    // Nothing to check the checkpoint with (no keys/, no --jwks), and a JWKS that cannot be read: could not check (3), not BROKEN (1).
    const none = await runWrit(h.dataDir, 'audit', 'verify');
    expect(none.code).toBe(3);
    const notJwks = await runWrit(h.dataDir, 'audit', 'verify', '--jwks', join(aside, 'missing.json'));
    expect([notJwks.code, notJwks.output]).toEqual([3, expect.stringContaining('MALFORMED_REQUEST')]);
  }, 60_000);
});
