import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../store/conformance/engines.js';
import { requireDist, startServerProcess, type ServerProcess } from '../support/server-process.js';

/**
 * README "Starting replicas on a new database": replicas must sign with the same key, which the store
 * does not hold; each server names the key it signs with at start, so an operator sees replicas that
 * made keys of their own (started together on empty data directories) before agents do.
 */
const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const signingKey = (server: ServerProcess) => /listening on \S+ {2}\(.*, signing key (\S+)\)$/m.exec(server.log())?.[1];
const dataDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'writ-signing-key-'));
  cleanups.push(() => rmSync(d, { recursive: true, force: true }));
  return d;
};

describe('`writ serve` names the key it signs with', () => {
  it('replicas on empty data directories name different keys; given the first one\'s keys/, the same', async () => {
    requireDist();
    const db = await createTestDatabase('writ_signing_key');
    cleanups.push(db.drop);
    const env = { WRIT_DATABASE_URL: db.url };
    const first = await startServerProcess({ dataDir: dataDir(), env });
    cleanups.push(() => first.stop());
    const kid = signingKey(first);
    expect(kid, first.log()).toBeDefined();
    expect(readdirSync(join(first.dataDir, 'keys'))).toEqual([`${kid}.json`]);
    const alone = await startServerProcess({ dataDir: dataDir(), env });
    cleanups.push(() => alone.stop());
    expect(signingKey(alone)).toBeDefined();
    expect(signingKey(alone)).not.toBe(kid);
    const shared = dataDir();
    cpSync(join(first.dataDir, 'keys'), join(shared, 'keys'), { recursive: true });
    const given = await startServerProcess({ dataDir: shared, env });
    cleanups.push(() => given.stop());
    expect(signingKey(given)).toBe(kid);
  }, 90_000);
});
