import { ManualClock } from '../../src/clock.js';
import { ReceiptLog, requestHash, type ReceiptIntent } from '../../src/audit/index.js';
import { openDatabase, type SqliteDatabase } from '../../src/store/sqlite/database.js';
import { sqliteStoreOn } from '../../src/store/sqlite/sqlite-store.js';

export function newLog(db: SqliteDatabase = openDatabase(':memory:')) {
  const clock = new ManualClock();
  let n = 0;
  const store = sqliteStoreOn(db);
  const log = new ReceiptLog({ store, clock, newId: () => `rcpt_${++n}` });
  return { db, clock, log, store };
}

export function intent(over: Partial<ReceiptIntent> = {}): ReceiptIntent {
  const request = { action: 'post.update', resource: over.resource_key ?? 'wp:post:100', fields: over.fields ?? ['title'], payload: { title: 'x' } };
  return {
    principal: 'seo-agent-7',
    action: 'post.update',
    resource_key: 'wp:post:100',
    fields: ['title'],
    owners: ['content-team'],
    authority_epoch: 12,
    ownership_epoch: 3,
    decision_id: 'dec_1',
    policy_revision: 'sha256:abc',
    graph_revision: 12,
    chain: ['e_grant', 'e_delegate'],
    lease_id: 'lease_1',
    lease_epoch: 4,
    expected_version: 31,
    request_hash: requestHash(request),
    ...over,
  };
}

/** Tampering as someone with write access to the file would: the append-only guards go first. */
export function dropGuards(db: SqliteDatabase): void {
  db.exec(`
    DROP TRIGGER receipt_entries_no_update;
    DROP TRIGGER receipt_entries_no_delete;
    DROP TRIGGER receipt_entries_extend_chain;
  `);
}
