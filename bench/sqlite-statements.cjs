// Preloaded by bench/sqlite-statements.sh (node --require): counts every statement each better-sqlite3
// connection of the main thread runs (prepared statements' run/get/all/iterate, which pragmas and
// better-sqlite3's own BEGIN/SAVEPOINT use too, and Database.exec), by connection and SQL text, how
// many threw (by SQLite code), and WalSync's reads of the WAL-index header (no statement: not in the
// total). On SIGUSR2 it writes the counts since the last SIGUSR2 to $SQLITE_STATEMENTS_OUT and starts
// again. A measuring aid only: nothing in src/ loads it.
'use strict';
const { isMainThread } = require('node:worker_threads');
const { writeFileSync } = require('node:fs');
if (isMainThread) {
  const Database = require(require.resolve('better-sqlite3', { paths: [process.cwd()] }));
  const ids = new WeakMap();
  let next = 0;
  let counts = new Map();
  const bump = (db, kind, sql) => {
    let id = ids.get(db);
    if (id === undefined) ids.set(db, (id = next++));
    const key = `db${id} ${kind} ${sql.replace(/\s+/g, ' ').trim().slice(0, 140)}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  };
  const exec = Database.prototype.exec;
  Database.prototype.exec = function (sql) {
    bump(this, 'exec', sql);
    return exec.call(this, sql);
  };
  const prepare = Database.prototype.prepare;
  let wrapped = false;
  Database.prototype.prepare = function (sql) {
    const statement = prepare.call(this, sql);
    if (!wrapped) {
      wrapped = true;
      const proto = Object.getPrototypeOf(statement);
      for (const m of ['run', 'get', 'all', 'iterate']) {
        const original = proto[m];
        proto[m] = function (...args) {
          try {
            const r = original.apply(this, args);
            bump(this.database, m, this.source);
            return r;
          } catch (e) {
            bump(this.database, `${m} THREW ${e.code}`, this.source);
            throw e;
          }
        };
      }
    }
    return statement;
  };
  // WalSync's reads of the WAL-index header (48 bytes of -shm): no SQLite statement, but a call each.
  const fs = require('node:fs');
  const readSync = fs.readSync;
  fs.readSync = function (fd, buffer, offset, length, position) {
    if (length === 48 && position === 0) counts.set('pread WAL-index header (-shm)', (counts.get('pread WAL-index header (-shm)') ?? 0) + 1);
    return readSync.apply(this, arguments);
  };
  require('node:module').syncBuiltinESMExports();
  process.on('SIGUSR2', () => {
    const rows = [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    const total = rows.filter((r) => !r[0].startsWith('pread')).reduce((s, r) => s + r[1], 0);
    writeFileSync(process.env.SQLITE_STATEMENTS_OUT, rows.map(([k, v]) => `${v}\t${k}`).join('\n') + `\n${total}\ttotal\n`);
    counts = new Map();
  });
}
