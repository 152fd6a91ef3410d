import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { WritError } from '../../src/errors.js';
import { checkStoreMark, writeStoreMark, type StoreFigures } from '../../src/service/index.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function markFile(): string {
  const d = mkdtempSync(join(tmpdir(), 'writ-mark-unit-'));
  dirs.push(d);
  return join(d, 'store-mark.json');
}

const DB = 'postgres://writ@db:5432/writ';
const seen: StoreFigures = { store: 'a1', max_epoch: 40, floor: 0, receipt_entries: 12, graph_revision: 9, bumps: [] };
const refusal = (f: () => void): WritError | undefined => {
  try {
    f();
  } catch (e) {
    return e as WritError;
  }
  return undefined;
};

describe('a replica\'s mark of its database (service/store-mark)', () => {
  it('a database behind the mark with no bump since is refused, naming what went back; the mark is not lowered', () => {
    const file = markFile();
    expect(writeStoreMark(file, seen, DB, new Date())).toBe(true);
    const back = { ...seen, max_epoch: 31, graph_revision: 7 };
    const e = refusal(() => checkStoreMark(file, back, DB));
    expect(e?.code).toBe('STORE_BEHIND_MARK');
    expect(e?.message).toContain('the highest fencing epoch from 40 to 31, the graph revision from 9 to 7');
    expect(e?.message).toContain(`writ lease bump-epochs --by 40 --reason "restored to an earlier point" --database ${DB}`);
    const before = readFileSync(file, 'utf8');
    expect(writeStoreMark(file, back, DB, new Date())).toBe(false);
    expect(readFileSync(file, 'utf8')).toBe(before);
  });

  it('a lost bump is going back too', () => {
    const file = markFile();
    writeStoreMark(file, { ...seen, floor: 1000, bumps: ['1@100'] }, DB, new Date());
    expect(refusal(() => checkStoreMark(file, { ...seen, floor: 0, bumps: [] }, DB))?.message).toContain('the epoch bumps from 1 to 0 (missing 1@100)');
  });

  it('after a bump the database may be behind: it starts, and the mark follows it', () => {
    const file = markFile();
    writeStoreMark(file, { ...seen, bumps: ['1@100'] }, DB, new Date());
    const bumped = { ...seen, max_epoch: 30, graph_revision: 7, bumps: ['1@50', '2@200'] };
    expect(refusal(() => checkStoreMark(file, bumped, DB))).toBeUndefined();
    expect(writeStoreMark(file, bumped, DB, new Date())).toBe(true);
    expect(JSON.parse(readFileSync(file, 'utf8')).stores.a1.max_epoch).toBe(30);
  });

  it('a mark of another database is not compared, and both are kept; no temporary file is left', () => {
    const file = markFile();
    writeStoreMark(file, seen, DB, new Date());
    const other = { ...seen, store: 'b2', max_epoch: 1, receipt_entries: 0, graph_revision: 1 };
    expect(refusal(() => checkStoreMark(file, other, DB))).toBeUndefined();
    writeStoreMark(file, other, DB, new Date());
    expect(Object.keys(JSON.parse(readFileSync(file, 'utf8')).stores).sort()).toEqual(['a1', 'b2']);
    expect(readdirSync(join(file, '..'))).toEqual(['store-mark.json']);
  });

  it('never prints or keeps the password of the database URL (nor a query), even one with an "@" in it', () => {
    const file = markFile();
    const url = 'postgres://writ:pre@fix-s3cret@db:5432/writ?sslpassword=k3y';
    expect(writeStoreMark(file, seen, url, new Date())).toBe(true);
    expect(readFileSync(file, 'utf8')).not.toMatch(/s3cret|k3y/);
    const e = refusal(() => checkStoreMark(file, { ...seen, max_epoch: 31 }, url));
    expect(e?.code).toBe('STORE_BEHIND_MARK');
    expect(e?.message).not.toMatch(/s3cret|k3y/);
    expect(e?.message).toContain("--database 'postgres://writ:…@db:5432/writ?…'` (… stands for what is not shown, the password or the query: give the URL in full, or leave out --database where WRIT_DATABASE_URL is set as for this replica)");
  });
});
