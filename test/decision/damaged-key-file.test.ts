import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { KeyRing } from '../../src/decision/index.js';
import { isWritError } from '../../src/errors.js';
import { T0, tempDir } from './helpers.js';

const DAMAGED = '{"kty":"OKP", broken';

describe('a damaged signing key file', () => {
  it('a ring that may sign refuses to open, naming the file and what to do, and makes no key beside it', async () => {
    const keyDir = join(tempDir(), 'keys');
    const clock = new ManualClock(T0);
    const kid = (await KeyRing.open(keyDir, clock)).current().kid;
    const path = join(keyDir, `${kid}.json`);
    writeFileSync(path, DAMAGED);
    const e = await KeyRing.open(keyDir, clock).then(() => undefined, (err: unknown) => err);
    expect(isWritError(e) && e.code).toBe('UNPROCESSABLE');
    expect((e as Error).message).toContain(path);
    expect((e as Error).message).toMatch(/not JSON/);
    expect((e as Error).message).toMatch(/restore .* from a backup.*move .* aside/i);
    expect(readdirSync(keyDir)).toEqual([`${kid}.json`]);
  });

  it('beside a good key too: a ring that may sign refuses', async () => {
    const keyDir = join(tempDir(), 'keys');
    const clock = new ManualClock(T0);
    const ring = await KeyRing.open(keyDir, clock);
    const old = ring.current().kid;
    clock.advance(1000);
    await ring.rotate();
    writeFileSync(join(keyDir, `${old}.json`), DAMAGED);
    await expect(KeyRing.open(keyDir, clock)).rejects.toThrow(join(keyDir, `${old}.json`));
  });

  it('a ring that only verifies opens without it and names it', async () => {
    const keyDir = join(tempDir(), 'keys');
    const clock = new ManualClock(T0);
    const kid = (await KeyRing.open(keyDir, clock)).current().kid;
    writeFileSync(join(keyDir, `${kid}.json`), DAMAGED);
    const reader = await KeyRing.open(keyDir, clock, { makeSigningKey: false });
    expect(reader.canSign).toBe(false);
    expect(reader.damaged).toEqual([{ path: join(keyDir, `${kid}.json`), reason: expect.stringMatching(/^not JSON/) }]);
    expect(readdirSync(keyDir)).toEqual([`${kid}.json`]);
  });
});
