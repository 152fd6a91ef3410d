import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { loadConfig, maskDatabaseUrl } from '../../src/config/index.js';

/** Each URL with the secret it holds: the masked URL must not contain any of it. */
const CASES: [url: string, secret: string, masked: string][] = [
  ['postgres://writ:s3cret@db:5432/writ', 's3cret', 'postgres://writ:…@db:5432/writ'],
  // An "@" left unencoded in the password: the driver reads the user part up to the last "@".
  ['postgres://writ:pre@fix-s3cret@db:5432/writ', 'fix-s3cret', 'postgres://writ:…@db:5432/writ'],
  ['postgres://writ:a:b@c@db/writ', 'b@c', 'postgres://writ:…@db/writ'],
  ['postgresql://:s3cret@db/writ', 's3cret', 'postgresql://:…@db/writ'],
  ['postgres://writ@db/writ?password=s3cret&sslmode=require', 's3cret', 'postgres://writ@db/writ?…'],
  ['postgres://writ:s3cret@[::1]:5432/writ', 's3cret', 'postgres://writ:…@[::1]:5432/writ'],
  // URLs the driver cannot read, or reads as a host and port: nothing before the last "@" is shown.
  ['postgres://writ:s3#cret@db/writ', 's3', 'postgres://…@db/writ'],
  ['postgres://writ:s3/cret@db/writ', 's3', 'postgres://…@db/writ'],
  ['postgres://writ:123?x@db/writ', '123', 'postgres://…@db/writ'],
  ['postgres://writ:s3cret@h1:5432,h2:5433/writ', 's3cret', 'postgres://…@h1:5432,h2:5433/writ'],
  // Not a URL (libpq's keywords): the password is hidden, quoted or not.
  ['host=db password=s3cret user=writ', 's3cret', 'host=db password=… user=writ'],
  ["host=db password='s3 cret' user=writ", 's3 cret', 'host=db password=… user=writ'],
];

describe('maskDatabaseUrl: a database URL fit to print', () => {
  it.each(CASES)('%s shows none of its password', (url, secret, masked) => {
    expect(maskDatabaseUrl(url)).toBe(masked);
    expect(maskDatabaseUrl(url)).not.toContain(secret);
  });

  it('hides the password the driver would send (checked against pg\'s own reading of each URL it reads)', () => {
    for (const [url] of CASES) {
      let password: string | undefined;
      try {
        password = new pg.Client({ connectionString: url }).password ?? undefined;
      } catch {
        continue; // the driver cannot read it at all
      }
      if (password) expect(maskDatabaseUrl(url), url).not.toContain(password);
    }
  });

  it('keeps a URL without a password as it is, and masking twice changes nothing', () => {
    for (const url of ['postgres://postgres@127.0.0.1:5432/writ_x', 'postgres://db/writ', 'postgresql://writ@db']) expect(maskDatabaseUrl(url)).toBe(url);
    for (const [url] of CASES) expect(maskDatabaseUrl(maskDatabaseUrl(url))).toBe(maskDatabaseUrl(url));
  });

  it('a configuration error naming a database URL that is not postgres:// shows no password', () => {
    expect(() => loadConfig({}, { WRIT_DATABASE_URL: 'host=db password=s3cret' })).toThrow('got "host=db password=…"');
    expect(() => loadConfig({}, { WRIT_DATABASE_URL: 'mysql://writ:pre@fix-s3cret@db/writ' })).toThrow('got "mysql://writ:…@db/writ"');
  });
});
