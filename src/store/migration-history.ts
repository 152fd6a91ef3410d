import { WritError } from '../errors.js';

/** A numbered migration as the code lists it, or as a store records it applied (`schema_migrations`). */
export interface MigrationRecord {
  version: number;
  name: string;
}

/**
 * Refuses (SCHEMA_DIVERGED, nothing changed) a store whose applied migrations are not a prefix of this
 * Writ's list: one of this Writ's migrations missing below one the store has (a gap), a number this Writ
 * does not have among its own, or a number recorded under another name. Such a store was migrated by a
 * Writ whose migrations are numbered otherwise (a build of another branch, a fork): migrating it on by
 * its highest number would skip a schema change, or apply one over another that took its number.
 * Numbers above this Writ's last are not judged here: a newer Writ's (SCHEMA_TOO_NEW, the caller's),
 * provided all of this Writ's below them are there under their names. `store` names the store in the message;
 * `refused.remedy` says what to do instead of the default (start the Writ that migrated it, or put back a
 * backup), and `refused.file` names a file in the details (a backup being restored).
 */
export function refuseDivergedHistory(store: string, recorded: readonly MigrationRecord[], known: readonly MigrationRecord[], refused: { remedy?: string; file?: string } = {}): void {
  const knownBy = new Map(known.map((m) => [m.version, m.name]));
  const recordedBy = new Map(recorded.map((m) => [m.version, m.name]));
  const knownMax = Math.max(0, ...known.map((m) => m.version));
  const recordedMax = Math.max(0, ...recorded.map((m) => m.version));
  const missing = known.filter((m) => m.version < recordedMax && !recordedBy.has(m.version)).sort(byVersion);
  const unknown = recorded.filter((m) => m.version <= knownMax && !knownBy.has(m.version)).sort(byVersion);
  const renamed = recorded
    .filter((m) => knownBy.has(m.version) && knownBy.get(m.version) !== m.name)
    .sort(byVersion)
    .map((m) => ({ version: m.version, recorded_name: m.name, name: knownBy.get(m.version)! }));
  if (missing.length === 0 && unknown.length === 0 && renamed.length === 0) return;
  const later = (v: number) => recorded.filter((m) => m.version > v).map((m) => m.version).sort((a, b) => a - b);
  const what = [
    ...missing.map((m) => `it lacks this Writ's migration ${m.version} (${m.name}) though it has later ones (${later(m.version).join(', ')})`),
    ...unknown.map((m) => `it has a migration ${m.version} (${m.name}) that this Writ does not have`),
    ...renamed.map((m) => `its migration ${m.version} is "${m.recorded_name}" where this Writ's ${m.version} is "${m.name}"`),
  ];
  throw new WritError(
    'SCHEMA_DIVERGED',
    `the ${store}'s applied migrations are not this Writ's: ${what.join('; ')}. A Writ whose migrations are numbered otherwise (a build of another branch, or a fork) migrated it, and migrating it on would skip or misapply a schema change: ${refused.remedy ?? 'start the Writ that migrated it, or put back a backup of the store taken before that Writ ran and start this one on it'}; nothing was changed`,
    {
      schema_version: recordedMax,
      known_version: knownMax,
      missing: missing.map((m) => m.version),
      unknown: unknown.map((m) => m.version),
      renamed,
      ...(refused.file !== undefined ? { file: refused.file } : {}),
    },
  );
}

const byVersion = (a: MigrationRecord, b: MigrationRecord) => a.version - b.version;
