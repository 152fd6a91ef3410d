import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { take } from '../store/conformance/helpers.js';
import { runWrit } from '../support/cli.js';
import { requireDist } from '../support/server-process.js';

/**
 * `writ lease ls` without --held: every key ever leased, in key order, a page at a time as `writ
 * receipts` pages (--limit, --after; stderr says how to go on), not every key read at once.
 */
let data: string;
const KEYS = Array.from({ length: 105 }, (_, i) => `wp:post:${String(i).padStart(3, '0')}#title`);
beforeAll(async () => {
  requireDist();
  data = mkdtempSync(join(tmpdir(), 'writ-lease-ls-pages-'));
  const store = await openSqliteStore(join(data, 'writ.sqlite'));
  try {
    // editor-alice's lease first, and lapsed (its holder stays recorded): wp:post:007 is the resource whose
    // field wp:post:007#title seo-agent-7 then takes, which a live lease on the resource would refuse (key families).
    await take(store, ['wp:post:007', 'wp:post:007#body', 'wp:post:0070#title'], 'editor-alice', { ttlMs: 1 });
    await new Promise((r) => setTimeout(r, 10));
    for (let i = 0; i < KEYS.length; i += 50) await take(store, KEYS.slice(i, i + 50), 'seo-agent-7', { ttlMs: 600_000 });
  } finally {
    await store.close();
  }
});
afterAll(() => rmSync(data, { recursive: true, force: true }));

const keysOf = (out: string) => out.trim().split('\n').map((line) => line.split(/\s+/)[0]);

describe('writ lease ls pages', () => {
  it('shows 100 keys, then says on stderr how to get the next page', async () => {
    const first = await runWrit(data, 'lease', 'ls');
    expect(first.code, first.output).toBe(0);
    const shown = keysOf(first.stdout);
    expect(shown).toHaveLength(100);
    expect(shown.slice(0, 3)).toEqual(['wp:post:000#title', 'wp:post:001#title', 'wp:post:002#title']);
    expect(first.output.slice(first.stdout.length)).toContain(`(100 shown; more keys: add --after '${shown[99]}')`);
    const rest = await runWrit(data, 'lease', 'ls', '--after', shown[99]!);
    expect(rest.output).toBe(rest.stdout);
    expect([...shown, ...keysOf(rest.stdout)]).toEqual([...KEYS, 'wp:post:007', 'wp:post:007#body', 'wp:post:0070#title'].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b))));
  });

  it('--limit and --json: the page and its next, as GET /v1/leases gives them', async () => {
    const json = JSON.parse((await runWrit(data, 'lease', 'ls', '--limit', '2', '--json')).stdout) as { leases: { key: string }[]; next: string | null };
    expect(json.leases.map((l) => l.key)).toEqual(['wp:post:000#title', 'wp:post:001#title']);
    expect(json.next).toBe('wp:post:001#title');
    const last = JSON.parse((await runWrit(data, 'lease', 'ls', '--holder', 'editor-alice', '--json')).stdout) as { leases: { key: string }[]; next: string | null };
    expect(last).toMatchObject({ next: null });
    expect(last.leases.map((l) => l.key)).toEqual(['wp:post:007', 'wp:post:007#body', 'wp:post:0070#title']);
  });

  it('--resource: the resource\'s key and its fields\' keys, not the keys that only start like it', async () => {
    expect(keysOf((await runWrit(data, 'lease', 'ls', '--resource', 'wp:post:007')).stdout)).toEqual(['wp:post:007', 'wp:post:007#body', 'wp:post:007#title']);
  });

  it('a bad --limit or --after, or paging --held, is a usage error', async () => {
    for (const args of [['--limit', '0'], ['--limit', '1001'], ['--limit', 'x'], ['--after', ''], ['--held', '--limit', '5'], ['--held', '--after', 'wp:post:001#title']]) {
      const r = await runWrit(data, 'lease', 'ls', ...args);
      expect(r.code, `${args.join(' ')}: ${r.stdout}`).toBe(2);
      expect(r.output, args.join(' ')).toMatch(/--limit|--after|--held/);
    }
  });
});
