/**
 * PostgreSQL single-use spend, not deferred (console login links; every spend when
 * beginWithFirstStatement is off, or after a deferred refusal). "old": the statement Writ uses (INSERT …
 * ON CONFLICT … RETURNING 1, writ_now_ms() evaluated in place; a refusal then reads the database's clock
 * in a statement of its own). "new": the one-statement form helper 106 tried first (the same INSERT in a
 * CTE that reads writ_now_ms() once and answers it with the verdict), which a refusal would not need a
 * second statement for. Measured two ways, rounds alternated old/new in the same run: by pgbench (one
 * connection, prepared, each spend its own transaction, synchronous_commit off for that session only),
 * and inside the database (a PL/pgSQL loop: the statements' execution alone). A fresh id per spend.
 *
 *   npx tsc -p tsconfig.json && node dist/bench/single-use-spend-sql.js [spends per round, default 20000] [rounds, default 7]
 */
import { execFileSync } from 'node:child_process';
import pg from 'pg';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase } from '../scripts/test-database.js';
import { openPostgresStore } from '../src/store/postgres/index.js';

const OLD = `INSERT INTO single_use_ids AS s (namespace, id, expires_at)
  SELECT $1, $2, $3 WHERE $3 > greatest($4::bigint, writ_now_ms())
  ON CONFLICT (namespace, id) DO UPDATE SET expires_at = excluded.expires_at
  WHERE s.expires_at <= greatest($4::bigint, writ_now_ms())
  RETURNING 1`;
const NEW = `WITH t AS MATERIALIZED (SELECT writ_now_ms() AS db_now),
  spent AS (
    INSERT INTO single_use_ids AS s (namespace, id, expires_at)
    SELECT $1, $2, $3 FROM t WHERE $3 > greatest($4::bigint, t.db_now)
    ON CONFLICT (namespace, id) DO UPDATE SET expires_at = excluded.expires_at
    WHERE s.expires_at <= greatest($4::bigint, (SELECT db_now FROM t))
    RETURNING 1)
  SELECT db_now, (SELECT count(*) FROM spent)::int AS spent FROM t`;

const N = Number(process.argv[2] ?? 20_000);
const ROUNDS = Number(process.argv[3] ?? 7);

/** pgbench (C, prepared statements, one connection): each spend its own transaction, synchronous_commit off for this session only (no sync per spend). */
function pgbench(url: string, statement: string, label: string): number {
  const dir = mkdtempSync(join(tmpdir(), 'writ-bench-spend-'));
  try {
    const script = join(dir, `${label}.sql`);
    // A fresh id per spend (every spend inserts): the client id and a random number, as pgbench offers.
    const sql = statement.replace('$1', "'assertion'").replace(/\$2/g, ":id").replace(/\$3/g, ':exp').replace(/\$4/g, ':now');
    writeFileSync(script, `\\set id random(1, 1000000000000)\n\\set now ${Date.now()}\n\\set exp ${Date.now() + 3_600_000}\n${sql.replace(/\s+/g, ' ')};\n`);
    const out = execFileSync('pgbench', ['-n', '-M', 'prepared', '-c', '1', '-t', String(N), '-f', script, url], { encoding: 'utf8', env: { ...process.env, PGOPTIONS: '-c synchronous_commit=off' } });
    const m = /latency average = ([\d.]+) ms/.exec(out);
    if (!m) throw new Error(`pgbench said:\n${out}`);
    return Number(m[1]) * 1000;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The same statements run inside the database (a PL/pgSQL loop, its statements prepared once): their
 * execution alone, in µs per spend, without a client, a network or a commit.
 */
const IN_DATABASE = `
CREATE FUNCTION bench_spend(variant int, n int, tag text) RETURNS float8 LANGUAGE plpgsql AS $f$
DECLARE t0 timestamptz; v_now bigint; v_spent int; exp bigint := writ_now_ms() + 3600000; i int;
BEGIN
  t0 := clock_timestamp();
  FOR i IN 1..n LOOP
    IF variant = 0 THEN
      INSERT INTO single_use_ids AS s (namespace, id, expires_at)
        SELECT 'assertion', tag || i, exp WHERE exp > greatest(0::bigint, writ_now_ms())
        ON CONFLICT (namespace, id) DO UPDATE SET expires_at = excluded.expires_at
        WHERE s.expires_at <= greatest(0::bigint, writ_now_ms())
        RETURNING 1 INTO v_spent;
    ELSE
      WITH t AS MATERIALIZED (SELECT writ_now_ms() AS db_now),
        spent AS (
          INSERT INTO single_use_ids AS s (namespace, id, expires_at)
          SELECT 'assertion', tag || i, exp FROM t WHERE exp > greatest(0::bigint, t.db_now)
          ON CONFLICT (namespace, id) DO UPDATE SET expires_at = excluded.expires_at
          WHERE s.expires_at <= greatest(0::bigint, (SELECT db_now FROM t))
          RETURNING 1)
        SELECT db_now, (SELECT count(*) FROM spent)::int INTO v_now, v_spent FROM t;
    END IF;
  END LOOP;
  RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6 / n;
END $f$`;

function summary(what: string, ratios: number[]): void {
  const sorted = [...ratios].sort((a, b) => a - b);
  console.log(`${what}: new/old median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(3)}, range ${sorted[0]!.toFixed(3)}–${sorted.at(-1)!.toFixed(3)} (${ROUNDS} rounds of ${N} spends)`);
}

const db = await createTestDatabase('writ_bench_spend');
try {
  await (await openPostgresStore(db.url, { poolSize: 1 })).close(); // the schema
  const url = db.url;
  pgbench(url, OLD, 'warm-old');
  pgbench(url, NEW, 'warm-new');
  const ratios: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const old = pgbench(url, OLD, 'old');
    const neu = pgbench(url, NEW, 'new');
    ratios.push(neu / old);
    console.log(`round ${r + 1}: old ${old.toFixed(1)} µs/spend, new ${neu.toFixed(1)} µs/spend, new/old ${(neu / old).toFixed(3)}`);
  }
  summary('pgbench', ratios);
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query(IN_DATABASE);
  const inDb = async (variant: number, tag: string) => (await c.query<{ us: number }>('SELECT bench_spend($1, $2, $3) AS us', [variant, N, tag])).rows[0]!.us;
  await inDb(0, 'warm-old-');
  await inDb(1, 'warm-new-');
  const inside: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const old = await inDb(0, `old-${r}-`);
    const neu = await inDb(1, `new-${r}-`);
    inside.push(neu / old);
    console.log(`in the database, round ${r + 1}: old ${old.toFixed(1)} µs/spend, new ${neu.toFixed(1)} µs/spend, new/old ${(neu / old).toFixed(3)}`);
  }
  summary('in the database', inside);
  await c.end();
} finally {
  await db.drop();
}
