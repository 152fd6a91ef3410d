import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createSampleUpstream } from '../../src/upstream/index.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'writ-upstream-'));
  dirs.push(dir);
  return join(dir, 'upstream.sqlite');
}

describe('sample upstream persistence', () => {
  it('keeps per-key fences and field revisions across a restart', async () => {
    const dbFile = tempFile();
    const first = createSampleUpstream({ dbFile });
    await first.inject({ method: 'PUT', url: '/posts/8', headers: { 'if-match': '"0"', 'writ-fencing-epoch': 'wp:post:8#title=4, domain:SEO=2' }, payload: { fields: { title: 'a', body: 'b' } } });
    await first.inject({ method: 'PUT', url: '/posts/8', headers: { 'if-match': '"1"' }, payload: { fields: { body: 'c' } } });
    await first.close();

    const second = createSampleUpstream({ dbFile });
    try {
      expect((await second.inject({ method: 'GET', url: '/posts/8' })).json()).toMatchObject({
        fences: { 'wp:post:8#title': 4, 'domain:SEO': 2 },
        field_revisions: { title: 1, body: 2 },
      });
      const stale = await second.inject({ method: 'PUT', url: '/posts/8', headers: { 'if-match': '"2"', 'writ-fencing-epoch': 'domain:SEO=1' }, payload: { fields: { title: 'late' } } });
      expect(stale.json()).toMatchObject({ code: 'STALE_FENCING_EPOCH', key: 'domain:SEO', highest: 2 });
      const blind = await second.inject({ method: 'PUT', url: '/posts/8', headers: { 'if-match': '"1"' }, payload: { fields: { body: 'blind' } } });
      expect(blind.json()).toMatchObject({ code: 'PRECONDITION_FAILED', changed_fields: ['body'] });
    } finally {
      await second.close();
    }
  });

  it('upgrades a file from before per-key fences: its epoch becomes key *, its field revisions come from history', async () => {
    const dbFile = tempFile();
    const old = new Database(dbFile);
    old.exec(`
      CREATE TABLE posts (id TEXT PRIMARY KEY, revision INTEGER NOT NULL, fields TEXT NOT NULL, updated_by TEXT, last_receipt TEXT, highest_epoch INTEGER, updated_at INTEGER NOT NULL);
      CREATE TABLE revisions (post_id TEXT NOT NULL, revision INTEGER NOT NULL, operation TEXT NOT NULL, fields TEXT NOT NULL, changed TEXT NOT NULL,
        written_by TEXT, fencing_epoch INTEGER, receipt_id TEXT, at INTEGER NOT NULL, PRIMARY KEY (post_id, revision));
      INSERT INTO posts VALUES ('3', 2, '{"title":"b","tags":["x"]}', 'B', 'r2', 6, 0);
      INSERT INTO revisions VALUES ('3', 1, 'put', '{"title":"a","tags":[]}', '{"title":"a","tags":[]}', 'A', 5, 'r1', 0);
      INSERT INTO revisions VALUES ('3', 2, 'merge', '{"title":"b","tags":["x"]}', '{"tags":{"add":["x"],"remove":[]}}', 'B', 6, 'r2', 0);
    `);
    old.close();

    const app = createSampleUpstream({ dbFile });
    try {
      expect((await app.inject({ method: 'GET', url: '/posts/3' })).json()).toMatchObject({ fences: { '*': 6 }, fencing_epoch: 6, field_revisions: { title: 1, tags: 2 } });
      expect((await app.inject({ method: 'PUT', url: '/posts/3', headers: { 'if-match': '"2"', 'writ-fencing-epoch': '5' }, payload: { fields: { title: 'c' } } })).statusCode).toBe(409);
      expect((await app.inject({ method: 'PUT', url: '/posts/3', headers: { 'if-match': '"1"' }, payload: { fields: { tags: [] } } })).json().changed_fields).toEqual(['tags']);
      expect((await app.inject({ method: 'GET', url: '/posts/3/history' })).json().revisions.map((r: { fencing: string }) => r.fencing)).toEqual(['5', '6']);
    } finally {
      await app.close();
    }
  });

  it('keeps posts, history, the fencing high-water mark and receipt ids across a restart', async () => {
    const dbFile = tempFile();

    const first = createSampleUpstream({ dbFile });
    await first.inject({ method: 'PUT', url: '/posts/42', headers: { 'if-match': '"0"', 'writ-fencing-epoch': '7', 'writ-receipt-id': 'r1' }, payload: { fields: { title: 'kept' } } });
    await first.close();

    const second = createSampleUpstream({ dbFile });
    try {
      const post = (await second.inject({ method: 'GET', url: '/posts/42' })).json();
      expect(post).toMatchObject({ revision: 1, fields: { title: 'kept' }, fencing_epoch: 7 });
      const stale = await second.inject({ method: 'PUT', url: '/posts/42', headers: { 'if-match': '"1"', 'writ-fencing-epoch': '6' }, payload: { fields: { title: 'late' } } });
      expect(stale.statusCode).toBe(409);
      expect((await second.inject({ method: 'GET', url: '/posts/42/writes/r1' })).json()).toEqual({ applied: true, revision: 1 });
      expect((await second.inject({ method: 'GET', url: '/posts/42/history' })).json().revisions).toHaveLength(1);
    } finally {
      await second.close();
    }
  });
});
