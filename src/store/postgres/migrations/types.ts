/** One numbered step of the PostgreSQL schema; applied once, in its own transaction, never edited after it ships. */
export interface PostgresMigration {
  version: number;
  name: string;
  sql: string;
}
