import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { act, decideLeaseWrite } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';
import { requireDist } from '../support/server-process.js';
import { runWrit } from '../support/cli.js';
import { misplacedTimes } from '../support/wire-times.js';

let h: Harness;

const writ = (...args: string[]) => runWrit(h.dataDir, ...args);

async function write(title: string, version: number) {
  await decideLeaseWrite(h, 'seo-agent-7', { resource: 'wp:post:1024', payload: { title }, expected_version: version });
}

beforeAll(async () => {
  requireDist();
  h = await startHarness({ upstream: true, clock: new ManualClock(Date.now() - 60_000) });
  await write('one', 0);
  await act(h, 'content-agent-3', { resource: 'wp:post:1024', fields: ['body'], payload: { body: 'no decision' }, expected_version: 1 }, {});
  (h.clock as ManualClock).advance(10_000);
  await write('two', 1);
}, 60_000);
afterAll(async () => h?.close());

describe('writ audit archive and writ audit verify --archive', () => {
  it('the partial file of an archive that was interrupted (killed) is left alone and named, with a code and no stack trace; nothing is archived', async () => {
    const file = join(h.dataDir, 'interrupted.jsonl');
    writeFileSync(`${file}.partial`, '{"writ_receipt_archive":2');
    const r = await writ('audit', 'archive', '--older-than', '30s', '--out', file);
    expect(r.code, r.output).toBe(1);
    expect(r.output).toContain(`writ: UNPROCESSABLE (Unprocessable): ${file}.partial exists`);
    expect(r.output).not.toMatch(/\n\s+at /);
    expect(readFileSync(`${file}.partial`, 'utf8')).toBe('{"writ_receipt_archive":2');
    expect(existsSync(file)).toBe(false);
    expect((await writ('audit', 'verify')).stdout).toMatch(/^OK: 5 entries in 1 chains \(no checkpoint yet\)/);
  });

  it('archives the old settled receipts behind a signed checkpoint; the store and the file both verify', async () => {
    const file = join(h.dataDir, 'receipts-archive.jsonl');
    expect((await writ('audit', 'archive', '--older-than', 'soon', '--out', file)).code).not.toBe(0);
    const a = await writ('audit', 'archive', '--older-than', '30s', '--out', file, '--json');
    expect(a.code).toBe(0);
    const archived = JSON.parse(a.stdout);
    expect(archived).toMatchObject({ archived: true, entries: 3, receipts: 2, ranges: [{ chain: 'wp:post:1024', from: 1, to: 3 }], checkpoint: { seq: 1, archived: 3, chains: 1 } });
    expect(misplacedTimes(archived)).toEqual([]);

    const v = await writ('audit', 'verify');
    expect(v.code).toBe(0);
    expect(v.stdout).toMatch(/^OK: 2 entries in 1 chains against checkpoint 1 of .* \(1 chains\), heads root [0-9a-f]{64}/);
    const http = await h.call('governance', { method: 'GET', url: '/v1/audit/verify' }); // an auditor's read
    expect(http.body).toMatchObject({ ok: true, entries: 2, chains: 1, checkpoint: { seq: 1, archived: 3, chains: 1 } });
    expect(typeof http.body.checkpoint.at).toBe('string');

    // Offline: with the data directory's keys, or with a saved JWKS.
    expect((await writ('audit', 'verify', '--archive', file)).stdout).toMatch(/^OK: .* holds 3 entries of 1 chain\(s\), its signed manifest verified/);
    const jwks = join(h.dataDir, 'jwks.json');
    writeFileSync(jwks, JSON.stringify((await h.call(null, { method: 'GET', url: '/.well-known/jwks.json' })).body));
    expect((await writ('audit', 'verify', '--archive', file, '--jwks', jwks)).code).toBe(0);
    writeFileSync(join(h.dataDir, 'empty-jwks.json'), '{"keys":[]}');
    const unknownKey = await writ('audit', 'verify', '--archive', file, '--jwks', join(h.dataDir, 'empty-jwks.json'));
    expect(unknownKey).toMatchObject({ code: 1, stdout: expect.stringContaining('not among the published keys') });
    // A saved JWKS whose key under that kid is the identity point (small order): refused as a problem, not a crash.
    const published = JSON.parse(readFileSync(jwks, 'utf8')) as { keys: { x: string }[] };
    const weak = { keys: published.keys.map((k) => ({ ...k, x: Buffer.from([1, ...Array(31).fill(0)]).toString('base64url') })) };
    writeFileSync(join(h.dataDir, 'weak-jwks.json'), JSON.stringify(weak));
    const weakKey = await writ('audit', 'verify', '--archive', file, '--jwks', join(h.dataDir, 'weak-jwks.json'));
    expect(weakKey).toMatchObject({ code: 1, stdout: expect.stringContaining('published but unusable (its x is a point of small order') });

    // A key rotation signs the checkpoint again with the new key.
    const rotated = await writ('keys', 'rotate');
    expect(rotated).toMatchObject({ code: 0, stdout: expect.stringContaining('receipt chain heads signed again with the new key as checkpoint 2') });
    expect((await writ('audit', 'verify')).stdout).toMatch(/^OK: 2 entries in 1 chains against checkpoint 2 /);

    // Tampered: one entry's body changed.
    const lines = readFileSync(file, 'utf8').split('\n');
    const second = JSON.parse(lines[2]!);
    expect(second.body).toContain('"COMPLETED"');
    lines[2] = JSON.stringify({ ...second, body: second.body.replace('"COMPLETED"', '"FAILED"') });
    writeFileSync(file, lines.join('\n'));
    const broken = await writ('audit', 'verify', '--archive', file);
    expect(broken).toMatchObject({ code: 1, stdout: expect.stringMatching(/^BROKEN in chain "wp:post:1024" at 2: chain "wp:post:1024": entry 2 does not match its hash/) });
    // A dozen CLI processes in a row (~14 s on a quiet machine): the suite's 30 s is too little when the 2 cores are busy.
  }, 90_000);

  it('an archive checked where there are neither the data directory\'s keys nor --jwks: NOT_FOUND, nothing checked, not BROKEN', async () => {
    const file = join(h.dataDir, 'receipts-archive.jsonl'); // the archive the test above wrote
    expect(existsSync(file)).toBe(true);
    const noKeys = mkdtempSync(join(tmpdir(), 'writ-no-keys-'));
    try {
      const unchecked = await runWrit(noKeys, 'audit', 'verify', '--archive', file);
      expect(unchecked).toMatchObject({ code: 3, output: expect.stringContaining(`writ: NOT_FOUND (Not found): no keys to check the archive's signature with: ${noKeys}/keys holds none; pass --jwks FILE`) });
      expect(unchecked.output).not.toContain('BROKEN');
    } finally {
      rmSync(noKeys, { recursive: true, force: true });
    }
  });

  it('a directory named as the archive is refused (UNPROCESSABLE), not reported BROKEN: that verdict means an archive was altered', async () => {
    const r = await writ('audit', 'verify', '--archive', h.dataDir);
    expect(r.code, r.output).toBe(3); // could not check; 1 is BROKEN
    expect(r.output).toContain(`writ: UNPROCESSABLE (Unprocessable): ${h.dataDir} is a directory, not an archive`);
    expect(r.output).not.toContain('BROKEN');
    expect(r.output).not.toMatch(/\n\s+at /);
  });
});
