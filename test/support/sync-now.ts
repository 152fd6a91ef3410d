import { fdatasyncSync } from 'node:fs';
import type { SyncFn } from '../../src/store/sqlite/wal-sync.js';

/**
 * Syncs the WAL on the calling thread and answers at once: commits are as durable as with the
 * default (libuv) sync, but settle within the same turns of the event loop, as they did when COMMIT
 * synced. For tests that drive the store turn by turn (wait-queue order, backups between commits).
 */
export const syncNow: SyncFn = (fd, done) => {
  let error: NodeJS.ErrnoException | null = null;
  try {
    fdatasyncSync(fd);
  } catch (e) {
    error = e as NodeJS.ErrnoException;
  }
  done(error);
};
