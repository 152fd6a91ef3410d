import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { canonicalJson } from '../audit/index.js';
import { writePrivateFile } from '../decision/index.js';
import { maskDatabaseUrl } from '../config/index.js';
import { WritError } from '../errors.js';
import type { WritStore } from '../store/contract.js';

/**
 * A replica's high-water mark of its PostgreSQL database, kept in its data directory: what it has seen
 * of the store, so that a database restored from a backup (pg_restore, point-in-time recovery) without
 * `writ lease bump-epochs` afterwards is noticed at the next start instead of handing out again, to other
 * holders, fencing epochs issued after the backup. Written at start, every MARK_INTERVAL_MS while serving
 * (off the request path) and at shutdown; atomically (a temporary file written, synced, renamed, and the
 * directory synced), so a crash leaves the old mark or the new one, never a torn one.
 *
 * Only for PostgreSQL: a SQLite store lives in the data directory itself, and the one way a backup goes
 * back there, `writ restore`, refuses to run without raising the epochs (--epoch-margin) or being told the
 * backup is the latest state (--trust-backup).
 */
export const STORE_MARK_FILE = 'store-mark.json';
export const MARK_INTERVAL_MS = 30_000;

/** What a replica saw of one store; each figure only grows while the store is not taken back in time. */
export interface StoreFigures {
  /** The store's identity: a hash of its first graph event (made once, when the store was made; kept by a dump and its restore). */
  store: string;
  /** Highest fencing epoch of any key. */
  max_epoch: number;
  /** The floor keys leased for the first time start above (the sum of every bump's margin). */
  floor: number;
  /** Receipt log entries over every chain (the sum of the chains' head positions). */
  receipt_entries: number;
  graph_revision: number;
  /** Every epoch bump and restore recorded (`lease_epoch_bumps`), as `seq@at`. */
  bumps: string[];
}

export interface MarkFile {
  version: 1;
  /** One mark per store this data directory's server ran on, by identity. */
  stores: Record<string, StoreFigures & { database: string; written_at: string }>;
}

/** The figures, read in one transaction; null for a store with no graph yet (a new database: nothing to compare). */
export async function measureStore(store: WritStore): Promise<StoreFigures | null> {
  return store.read(async (tx) => {
    const first = (await tx.graph.read(0, 1))[0];
    if (first === undefined) return null;
    const identity = createHash('sha256').update(canonicalJson({ revision: first.revision, at: first.at, actor: first.actor, event: first.event })).digest('hex').slice(0, 32);
    const bumps = await tx.leases.epochBumps();
    return {
      store: identity,
      max_epoch: await tx.leases.maxEpoch(),
      floor: bumps.reduce((m, b) => Math.max(m, Number(b.floor)), 0),
      receipt_entries: await tx.receipts.headsSum(),
      graph_revision: await tx.graph.head(),
      bumps: bumps.map((b) => `${b.seq}@${b.at}`),
    };
  });
}

/** The marks in `file`; none when it does not exist. One that cannot be read or parsed is UNPROCESSABLE, naming the file. */
export function readStoreMarks(file: string): MarkFile {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { version: 1, stores: {} };
    throw unreadable(file, (e as Error).message);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw unreadable(file, `not JSON (${(e as Error).message})`);
  }
  const stores = (parsed as { stores?: unknown } | null)?.stores;
  if ((parsed as { version?: unknown } | null)?.version !== 1 || stores === null || typeof stores !== 'object' || Array.isArray(stores)) {
    throw unreadable(file, 'not a store mark (version 1 with stores)');
  }
  for (const [id, m] of Object.entries(stores as Record<string, unknown>)) {
    const f = m as Partial<StoreFigures> | null;
    const numbers = ['max_epoch', 'floor', 'receipt_entries', 'graph_revision'] as const;
    if (f === null || typeof f !== 'object' || f.store !== id || numbers.some((k) => typeof f[k] !== 'number') || !Array.isArray(f.bumps) || f.bumps.some((b) => typeof b !== 'string')) {
      throw unreadable(file, `its mark of store ${id} is incomplete`);
    }
  }
  return parsed as MarkFile;
}

function unreadable(file: string, why: string): WritError {
  return new WritError('UNPROCESSABLE', `the store mark ${file} cannot be read: ${why}. It is this replica's record of how far it saw the database, to notice a database restored to an earlier point; restore it from a backup of the data directory, or move it aside (a new one is written, and what the old one saw is not compared); nothing was changed`);
}

/**
 * Refuses (STORE_BEHIND_MARK) a store that is behind this data directory's mark of it when no epoch bump
 * has been recorded since the mark was written (any bump: whether its margin was enough is not checked,
 * README "Backup and restore" lists what the mark does not catch): the message says which figures went back,
 * and the command to run. `databaseUrl` is printed (and, by writeStoreMark, kept) without its password.
 */
export function checkStoreMark(file: string, figures: StoreFigures, databaseUrl: string): void {
  const database = maskDatabaseUrl(databaseUrl);
  const mark = readStoreMarks(file).stores[figures.store];
  const back = wentBack(mark, figures);
  if (mark === undefined || back.length === 0) return;
  const by = Math.max(1, mark.max_epoch);
  const quoted = /^[\w@%+=:,./…-]+$/.test(database) ? database : `'${database.replaceAll("'", "'\\''")}'`;
  const masked = database.includes('…') ? ' (… stands for what is not shown, the password or the query: give the URL in full, or leave out --database where WRIT_DATABASE_URL is set as for this replica)' : '';
  throw new WritError(
    'STORE_BEHIND_MARK',
    `the database ${database} is behind what this replica saw of it at ${mark.written_at} (${file}): ${back.join(', ')}. It was restored from a backup or recovered to an earlier point, and no epoch bump has been recorded since: fencing epochs issued after the backup would be issued again to other holders. Run \`writ lease bump-epochs --by ${by} --reason "restored to an earlier point" --database ${quoted}\`${masked} (N at least ${by}, the highest epoch this replica saw; larger if another replica saw higher), then start again; nothing was changed`,
    { store_mark: file, went_back: back, bump_by: by },
  );
}

/** What of `figures` is behind `mark` (in words), none when nothing is or an epoch bump was recorded since the mark. */
function wentBack(mark: StoreFigures | undefined, figures: StoreFigures): string[] {
  if (mark === undefined) return [];
  const back: string[] = [];
  const compare = (label: string, was: number, now: number) => {
    if (now < was) back.push(`${label} from ${was} to ${now}`);
  };
  compare('the highest fencing epoch', mark.max_epoch, figures.max_epoch);
  compare('the epoch floor', mark.floor, figures.floor);
  compare('the receipt log', mark.receipt_entries, figures.receipt_entries);
  compare('the graph revision', mark.graph_revision, figures.graph_revision);
  const lost = mark.bumps.filter((b) => !figures.bumps.includes(b));
  if (lost.length > 0) back.push(`the epoch bumps from ${mark.bumps.length} to ${figures.bumps.length} (missing ${lost.join(', ')})`);
  // Bumped since the mark: the operator raised the epochs after the restore.
  if (figures.bumps.some((b) => !mark.bumps.includes(b))) return [];
  return back;
}

/**
 * Writes `figures` as the mark of its store (the others kept), atomically: a crash leaves the old file or
 * the new one. Never lowers it: figures behind the mark (the database went back while this replica ran,
 * or the mark was written meanwhile from a later measure) are not written, and answered false, unless a
 * bump was recorded since.
 */
export function writeStoreMark(file: string, figures: StoreFigures, databaseUrl: string, now: Date): boolean {
  const marks = readStoreMarks(file);
  if (wentBack(marks.stores[figures.store], figures).length > 0) return false;
  marks.stores[figures.store] = { ...figures, database: maskDatabaseUrl(databaseUrl), written_at: now.toISOString() };
  // Whole or not at all, durable, through a temporary file of this write's own (two replicas in containers
  // sharing a volume are often both pid 1), as the key ring writes its files.
  writePrivateFile(file, `${JSON.stringify(marks, null, 2)}\n`, { overwrite: true });
  return true;
}

/**
 * Measures `store` and writes the result as its mark: what a server does at start, while serving and at
 * shutdown. False when the database is behind the mark with no bump since (it went back while this
 * replica ran); the mark is then kept as it was.
 *
 * The mark is read before the store is measured, so the mark compared with was itself measured before
 * this measure began, and a database that only moves forward is never behind it. Measured first, a
 * mark written meanwhile from a later measure (a shutdown's write overtaking an interval's in flight)
 * made a database that never went back look behind. A mark found ahead of this measure when it is
 * written was written meanwhile: it is kept, and this is no going back.
 */
export async function markStore(file: string, store: WritStore, databaseUrl: string, now: () => Date = () => new Date()): Promise<boolean> {
  const seen = readStoreMarks(file);
  const figures = await measureStore(store);
  if (figures === null) return true;
  if (wentBack(seen.stores[figures.store], figures).length > 0) return false;
  writeStoreMark(file, figures, databaseUrl, now());
  return true;
}

