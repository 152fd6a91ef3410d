import type { SqliteDatabase } from '../database.js';

export interface Migration {
  version: number;
  name: string;
  sql: string;
  /** Run after `sql`, in the same transaction: what SQL alone cannot do (hashing). */
  run?: (db: SqliteDatabase) => void;
}
