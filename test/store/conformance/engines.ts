import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe } from 'vitest';
import type { StoreEngine, WritStore } from '../../../src/store/contract.js';
import { openPostgresStore, type PostgresStoreOptions } from '../../../src/store/postgres/index.js';
import { openSqliteStore } from '../../../src/store/sqlite/sqlite-store.js';

/**
 * The engines the conformance suite runs against. Each test gets a fresh, empty place (a new SQLite
 * file, a new PostgreSQL database) and may open several stores on it (`open()` again: another pool or
 * handle on the same data, as another replica or process would have).
 */
export interface EngineUnderTest {
  name: StoreEngine;
  /** How the suite titles it (several configurations of one engine may run). */
  label: string;
  /** A fresh, empty place; `drop` removes it. */
  create(): Promise<{ open(): Promise<WritStore>; drop(): Promise<void> }>;
}

export { ADMIN_URL, createTestDatabase } from '../../../scripts/test-database.js';
import { createTestDatabase } from '../../../scripts/test-database.js';

export function postgresEngine(options: PostgresStoreOptions = {}, label = 'postgres'): EngineUnderTest {
  return {
    name: 'postgres',
    label,
    async create() {
      const db = await createTestDatabase();
      return { open: () => openPostgresStore(db.url, { poolSize: 4, ...options }), drop: db.drop };
    },
  };
}

export const sqliteEngine: EngineUnderTest = {
  name: 'sqlite',
  label: 'sqlite',
  async create() {
    const dir = mkdtempSync(join(tmpdir(), 'writ-conf-'));
    const file = join(dir, 'writ.db');
    return { open: () => openSqliteStore(file), drop: async () => rmSync(dir, { recursive: true, force: true }) };
  },
};

/**
 * PostgreSQL runs twice: as configured by default (BEGIN travels with the first statement, whose values
 * are inlined as literals) and with BEGIN apart and every statement bound, so that both ways each
 * statement can reach the server are exercised.
 */
export const ENGINES: EngineUnderTest[] = [
  sqliteEngine,
  postgresEngine(),
  postgresEngine({ beginWithFirstStatement: false }, 'postgres, BEGIN apart'),
];

export interface Fresh {
  store: WritStore;
  /** Another store on the same data (another replica / process would have its own). */
  another(): Promise<WritStore>;
}

/**
 * `describe(title)` once per engine; `fresh()` inside a test gives a store on an empty place, closed
 * and removed after the test.
 */
export function describeEngines(title: string, body: (fresh: () => Promise<Fresh>, engine: EngineUnderTest) => void): void {
  for (const engine of ENGINES) {
    describe(`${title} [${engine.label}]`, () => {
      const cleanups: (() => Promise<void>)[] = [];
      afterEach(async () => {
        for (const c of cleanups.splice(0).reverse()) await c();
      });
      const fresh = async (): Promise<Fresh> => {
        const place = await engine.create();
        cleanups.push(place.drop);
        const open = async () => {
          const s = await place.open();
          cleanups.push(() => s.close());
          return s;
        };
        return { store: await open(), another: open };
      };
      body(fresh, engine);
    });
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** One statement on its own connection to `url` (a test's look at the database behind the store). */
export async function sql<R extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []): Promise<R[]> {
  const c = new pg.Client(url);
  await c.connect();
  try {
    return (await c.query<R>(text, values)).rows;
  } finally {
    await c.end();
  }
}
