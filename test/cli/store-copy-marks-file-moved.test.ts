import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../store/conformance/engines.js';
import { runWrit } from '../support/cli.js';
import { requireDist, startServerProcess } from '../support/server-process.js';

const dirs: string[] = [];
const drops: (() => Promise<void>)[] = [];
beforeAll(() => requireDist());
afterAll(async () => {
  for (const d of drops.splice(0)) await d();
  dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true }));
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'writ-moved-'));
  dirs.push(d);
  return d;
}

describe('after writ store copy, the SQLite file is marked as moved', () => {
  it('serve and commands that write refuse it naming the database (password masked); bump-epochs --lift-move-mark lifts the mark; the listening line names the store', { timeout: 180_000 }, async () => {
    const data = tempDir();
    let server = await startServerProcess({ dataDir: data });
    await server.stop();
    expect(server.log()).toMatch(/listening on http:\/\/127\.0\.0\.1:\d+ .*store: SQLite .*writ\.sqlite/);

    const db = await createTestDatabase('writ_moved');
    drops.push(db.drop);
    const url = new URL(db.url);
    url.password = 's3cret-pw'; // the server trusts local connections: the password is only there to be masked
    const masked = `postgres://${url.username}:…@${url.host}${url.pathname}`; // the user stays, for the reader to check
    const copy = await runWrit(data, 'store', 'copy', '--to', url.toString());
    expect(copy.code, copy.output).toBe(0);

    for (const args of [['serve', '--port', '4842', '--no-upstream'], ['graph', 'apply', 'graph/example.yaml'], ['store', 'copy', '--to', url.toString()]]) {
      const r = await runWrit(data, ...args);
      expect(r.code, `${args.join(' ')}: ${r.output}`).toBe(1);
      expect(r.output, args.join(' ')).toContain('writ: STORE_MOVED');
      expect(r.output, args.join(' ')).toContain(masked);
      expect(r.output, args.join(' ')).toContain('writ lease bump-epochs --by N --reason TEXT --lift-move-mark');
      expect(r.output, args.join(' ')).not.toContain('s3cret-pw');
    }

    const back = await runWrit(data, 'lease', 'bump-epochs', '--by', '1000', '--reason', 'back to the file', '--lift-move-mark');
    expect(back.code, back.output).toBe(0);
    server = await startServerProcess({ dataDir: data });
    await server.stop();

    const replica = await startServerProcess({ dataDir: tempDir(), env: { WRIT_DATABASE_URL: url.toString() } });
    await replica.stop();
    expect(replica.log()).toContain(`store: PostgreSQL ${masked}`);
    expect(replica.log()).not.toContain('s3cret-pw');
  });
});
