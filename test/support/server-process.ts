/** Tests and benches start `writ serve` the same way; benches cannot import from test/ (not compiled), so it lives in scripts/. */
import { createTestDatabase } from '../../scripts/test-database.js';
import { startServerProcess as start, type ServerProcess as Server } from '../../scripts/server-process.js';

export { CLI, freePort, requireDist, startServerProcess, type ServerProcess, type ServerProcessOptions } from '../../scripts/server-process.js';

/**
 * Two `writ serve` processes on one store: one SQLite data directory, or (postgres) one new PostgreSQL
 * database named after `dbPrefix`, as two replicas. Each process is pushed on `servers` and the database's
 * drop on `drops`, for the caller's afterAll. `env` (returned with WRIT_DATABASE_URL added on PostgreSQL)
 * starts a process again on the same store.
 */
export async function twoServersOnOneStore(
  engine: 'sqlite' | 'postgres',
  dbPrefix: string,
  track: { servers: Server[]; drops: (() => Promise<void>)[] },
  baseEnv: Record<string, string> = {},
): Promise<{ a: Server; b: Server; env: Record<string, string> }> {
  let env = baseEnv;
  if (engine === 'postgres') {
    const db = await createTestDatabase(dbPrefix);
    track.drops.push(db.drop);
    env = { ...env, WRIT_DATABASE_URL: db.url };
  }
  const a = await start({ env });
  track.servers.push(a);
  const b = await start({ dataDir: a.dataDir, env });
  track.servers.push(b);
  return { a, b, env };
}
