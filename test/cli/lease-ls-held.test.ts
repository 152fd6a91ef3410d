import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { release, take } from '../store/conformance/helpers.js';
import { runWrit } from '../support/cli.js';
import { requireDist } from '../support/server-process.js';

/**
 * `writ lease ls --held`: the keys held now, from the store's read of held keys (as GET /v1/leases?state=HELD),
 * not every key ever leased; --resource and --holder narrow it as they do without it.
 */
let data: string;
beforeAll(async () => {
  requireDist();
  data = mkdtempSync(join(tmpdir(), 'writ-lease-ls-held-'));
  const store = await openSqliteStore(join(data, 'writ.sqlite'));
  try {
    await take(store, ['wp:post:1#title'], 'seo-agent-7', { ttlMs: 600_000 });
    await take(store, ['wp:post:2#title'], 'editor-alice', { ttlMs: 600_000 });
    await release(store, await take(store, ['wp:post:3#title'], 'seo-agent-7'));
    await take(store, ['wp:post:4#title'], 'seo-agent-7', { ttlMs: 1, now: Date.now() - 60_000 }); // lapsed a minute ago, never released
  } finally {
    await store.close();
  }
});
afterAll(() => rmSync(data, { recursive: true, force: true }));

const keysOf = (out: string) => out.trim().split('\n').map((line) => line.split(/\s+/)[0]);

describe('writ lease ls --held', () => {
  it('lists the keys held now only: not a released key nor one whose lease lapsed', async () => {
    const all = await runWrit(data, 'lease', 'ls');
    expect(all.code, all.output).toBe(0);
    expect(keysOf(all.stdout).sort()).toEqual(['wp:post:1#title', 'wp:post:2#title', 'wp:post:3#title', 'wp:post:4#title']);
    const held = await runWrit(data, 'lease', 'ls', '--held');
    expect(held.code, held.output).toBe(0);
    expect(keysOf(held.stdout).sort()).toEqual(['wp:post:1#title', 'wp:post:2#title']);
    expect(held.stdout).toMatch(/^wp:post:1#title\s+HELD\s+holder seo-agent-7\s+epoch 1/m);
  });

  it('is narrowed by --holder and --resource (a resource: its fields\' keys)', async () => {
    expect(keysOf((await runWrit(data, 'lease', 'ls', '--held', '--holder', 'editor-alice')).stdout)).toEqual(['wp:post:2#title']);
    expect(keysOf((await runWrit(data, 'lease', 'ls', '--held', '--resource', 'wp:post:1')).stdout)).toEqual(['wp:post:1#title']);
    expect((await runWrit(data, 'lease', 'ls', '--held', '--resource', 'wp:post:4')).stdout).toBe('(no leases)\n');
    const json = JSON.parse((await runWrit(data, 'lease', 'ls', '--held', '--holder', 'seo-agent-7', '--json')).stdout) as { leases: { key: string; state: string }[]; next: null };
    expect(json.leases.map((l) => [l.key, l.state])).toEqual([['wp:post:1#title', 'HELD']]);
    expect(json.next).toBeNull();
  });
});
