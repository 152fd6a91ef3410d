import pg from 'pg';

/** Where tests and benchmarks create their own PostgreSQL databases (never the shared data). */
export const ADMIN_URL = process.env.WRIT_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

const HOW_TO_START =
  'Start it with `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start` (or point WRIT_TEST_DATABASE_URL at a PostgreSQL ' +
  'where this user may CREATE DATABASE). The conformance suite never skips PostgreSQL.';

/** A PostgreSQL database of its own (writ_conf_<random>), dropped afterwards. Fails loudly when PostgreSQL cannot be reached. */
export async function createTestDatabase(prefix = 'writ_conf'): Promise<{ url: string; drop(): Promise<void> }> {
  const admin = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 5_000 });
  try {
    await admin.connect();
  } catch (e) {
    throw new Error(`PostgreSQL is not reachable at ${ADMIN_URL} (${(e as Error).message}). ${HOW_TO_START}`);
  }
  const name = `${prefix}_${Math.random().toString(36).slice(2, 10)}`;
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: ADMIN_URL });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

