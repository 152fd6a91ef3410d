/**
 * A PolicyEngine that follows its bundle folder: a rebuilt bundle (a new `revision` file) is loaded
 * in the background and swapped in between two evaluations, without a restart. A bundle that does
 * not load leaves the current one in place and is reported through `onError`.
 *
 * Nor is a bundle swapped in that fails on what the service is being asked now: the inputs of the last
 * evaluations the current bundle answered are evaluated on the new one first, and one that throws
 * (a Rego conflict such as two values for one complete rule, an incomplete result) keeps the current
 * bundle. A Rego error shows only on the inputs that reach it, so `opa build` cannot refuse it; without
 * this check every such request would be answered INTERNAL until the author noticed.
 */
import { type FSWatcher, readFileSync, statSync, watch } from 'node:fs';
import { join } from 'node:path';
import { type Clock, systemClock } from '../clock.js';
import { WritError } from '../errors.js';
import { type BundleFiles, DATA_FILE, readLiveBundle, readRevision, REVISION_FILE, revisionFolder, WASM_FILE } from './bundle-layout.js';
import type { DecisionInput, DelegationInput, PolicyData, PolicyEngine, PolicyReloads } from './types.js';
import { createPolicyEngine } from './wasm-engine.js';

export interface ReloadingPolicyEngine extends PolicyEngine {
  reloads(): PolicyReloads;
  /** Loads the live bundle now if it changed; resolves to true when a new revision was swapped in. */
  reload(): Promise<boolean>;
  /** Stops watching. */
  close(): void;
}

/** How many of the last answered inputs a new bundle must answer too before it is swapped in. */
export const RELOAD_CHECK_INPUTS = 32;

type Recent = { entrypoint: 'decide'; input: DecisionInput } | { entrypoint: 'checkDelegation'; input: DelegationInput };

export interface ReloadingOptions {
  clock?: Clock;
  /** fs.watch can miss events: the `revision` file is also stat'ed at most this often on use. */
  checkIntervalMs?: number;
  onError?: (message: string, error: unknown) => void;
  onReload?: (revision: string, previous: string) => void;
}

export async function openReloadingPolicyEngine(bundleDir: string, options: ReloadingOptions = {}): Promise<ReloadingPolicyEngine> {
  const clock = options.clock ?? systemClock;
  const interval = options.checkIntervalMs ?? 250;
  // A refused bundle (WritError) is the author's to fix, and its message says how: no stack trace.
  const onError =
    options.onError ?? ((message: string, error: unknown) => (error instanceof WritError ? console.error(`[policy] ${message}: ${error.code}: ${error.message}`) : console.error(`[policy] ${message}:`, error)));
  const revisionPath = join(bundleDir, REVISION_FILE);

  let stamp = revisionStamp(revisionPath);
  let current = await createPolicyEngine(await readLiveBundle(bundleDir));
  let lastCheck = clock.now();
  let inFlight: Promise<boolean> | null = null;
  // The files of the bundle the last look could not read, as they were when it began (filesStamp), and when it read them.
  let unreadFiles = '';
  let unreadAt = 0;
  const status: PolicyReloads = { taken: 0, refused: 0, last_refused: null };
  // Whether status.last_refused is a bundle that could not be read (looked at again on use).
  let refusedUnread = false;
  const recent: Recent[] = [];
  let nextSlot = 0;
  const remember = (r: Recent): void => {
    recent[nextSlot] = r;
    nextSlot = (nextSlot + 1) % RELOAD_CHECK_INPUTS;
  };

  const reload = (): Promise<boolean> => {
    inFlight ??= (async () => {
      const seen = revisionStamp(revisionPath);
      const seenFiles = filesStamp(bundleDir);
      let revision: string | null = null;
      let unreadable = false;
      try {
        let bundle: BundleFiles;
        try {
          revision = await readRevision(bundleDir);
          bundle = await readLiveBundle(bundleDir);
        } catch (e) {
          unreadable = true;
          throw e;
        }
        if (bundle.revision === current.revision) {
          // Back to the live bundle (a refused build reverted): nothing is refused any more.
          status.last_refused = null;
          return false;
        }
        revision = bundle.revision;
        const next = await createPolicyEngine(bundle);
        answersWhatWasAsked(next, recent, current.revision);
        const previous = current.revision;
        current = next;
        status.taken++;
        status.last_refused = null;
        options.onReload?.(next.revision, previous);
        return true;
      } catch (e) {
        const reason = e instanceof Error ? e.message : String(e);
        // Looked at again on use (below): a bundle that still cannot be read is reported and counted once, whatever
        // each look finds missing. A folder being copied in lacks its files, then has a truncated policy.wasm (it
        // does not match its revision), then reads: one refusal, not one per state the copy was seen in.
        if (unreadable && refusedUnread && status.last_refused !== null && status.last_refused.revision === revision) {
          // GET /readyz says what is wrong now; when it was first refused stays.
          status.last_refused = { ...status.last_refused, reason };
        } else {
          status.refused++;
          status.last_refused = { revision, reason, at: clock.now() };
          refusedUnread = unreadable;
          onError(`keeping policy ${current.revision}: the new bundle in ${bundleDir} was not taken`, e);
        }
        return false;
      } finally {
        // A bundle that could not be read may still be arriving (a folder copied in, its revision file first),
        // and its arrival changes no revision file: it is looked at again on use until it reads.
        stamp = unreadable ? UNREAD : seen;
        if (unreadable) {
          unreadFiles = seenFiles;
          unreadAt = clock.now();
        }
        inFlight = null;
      }
    })();
    return inFlight;
  };

  const checkNow = (): void => {
    if (stamp !== UNREAD) {
      if (revisionStamp(revisionPath) !== stamp) void reload();
      return;
    }
    // A bundle that could not be read is read again (all of it, hashed on the event loop: 25 ms for a 20 MB
    // data.json) only once one of its files changed. A file rewritten in place to the same size within one tick
    // of the file system's clock looks unchanged: it is read again anyway every UNREAD_RELOOK_MS.
    if (filesStamp(bundleDir) !== unreadFiles || clock.now() - unreadAt >= UNREAD_RELOOK_MS) void reload();
  };

  const maybeCheck = (): void => {
    const now = clock.now();
    if (now - lastCheck < interval) return;
    lastCheck = now;
    checkNow();
  };

  let watcher: FSWatcher | null = null;
  try {
    watcher = watch(bundleDir, (_event, file) => {
      if (file === null || file === REVISION_FILE) checkNow();
    });
    watcher.on('error', () => {});
    watcher.unref();
  } catch {
    // Without a watcher the stat check on use still notices a rebuild.
  }

  return {
    get revision(): string {
      return current.revision;
    },
    get data(): PolicyData {
      return current.data;
    },
    decide(input: DecisionInput) {
      maybeCheck();
      const result = current.decide(input);
      remember({ entrypoint: 'decide', input });
      return result;
    },
    checkDelegation(input: DelegationInput) {
      maybeCheck();
      const result = current.checkDelegation(input);
      remember({ entrypoint: 'checkDelegation', input });
      return result;
    },
    reloads: () => {
      // Whoever asks (GET /readyz) also has the folder looked at: a rebuild is noticed without fs.watch or a decision.
      maybeCheck();
      return { ...status };
    },
    reload,
    close() {
      watcher?.close();
      watcher = null;
    },
  };
}

/** Throws POLICY_UNAVAILABLE when `next` fails on any of the inputs the current bundle answered. */
function answersWhatWasAsked(next: PolicyEngine, recent: readonly Recent[], currentRevision: string): void {
  let failed = 0;
  let first: unknown = null;
  for (const r of recent) {
    try {
      if (r.entrypoint === 'decide') next.decide(r.input);
      else next.checkDelegation(r.input);
    } catch (e) {
      failed++;
      first ??= e;
    }
  }
  if (failed === 0) return;
  const why = first instanceof Error ? first.message : String(first);
  throw new WritError('POLICY_UNAVAILABLE', `policy bundle ${next.revision} fails on ${failed} of the last ${recent.length} inputs policy ${currentRevision} answered: ${why}`, { failed, checked: recent.length });
}

/** A stamp no `revision` file has: the bundle it named could not be read, so the folder is looked at again. */
const UNREAD = 'unread';

/** How often a bundle that could not be read is read again in full though none of its files changed. */
export const UNREAD_RELOOK_MS = 5_000;

/**
 * Changes whenever the live bundle's files may have: the `revision` file's stamp and what it names, and each
 * of the files of the folder it names (or of the folder itself, without one), replaced, written, resized,
 * created, removed or its rights changed (inode, size, mtime, ctime).
 */
function filesStamp(bundleDir: string): string {
  const revisionPath = join(bundleDir, REVISION_FILE);
  let named: string | null = null;
  try {
    named = readFileSync(revisionPath, 'utf8').trim();
  } catch {
    // No revision file (the flat layout), or one that cannot be read: the look says which.
  }
  const folder = named === null ? bundleDir : revisionFolder(bundleDir, named);
  return [revisionStamp(revisionPath), named, ...[WASM_FILE, DATA_FILE].map((f) => fileStamp(join(folder, f)))].join('|');
}

function fileStamp(path: string): string {
  try {
    const s = statSync(path, { bigint: true });
    return `${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}:${s.mode}`;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code ?? 'unknown';
  }
}

/** Changes whenever the `revision` file is replaced (a build renames a new file over it). */
function revisionStamp(path: string): string {
  try {
    const s = statSync(path, { bigint: true });
    return `${s.ino}:${s.mtimeNs}:${s.size}`;
  } catch {
    return 'absent';
  }
}
