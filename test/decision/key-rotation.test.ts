import { existsSync, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { KeyRing, signDecision, verifyDecision } from '../../src/decision/index.js';
import { AUDIENCE, claims, T0, tempDir } from './helpers.js';

const GRACE = 60_000;
// A retired key stays published this long: the longest decision lifetime, and the second in which a
// process sharing the directory may not have seen the rotation yet and still signs with it.
const PUBLISHED = GRACE + 1000;
// Long-lived decisions, so that only the key's removal can make them fail.
const longLived = () => claims({ expires_at: T0 + 3_600_000 });
const kids = (ring: KeyRing) => ring.jwks().keys.map((k) => k.kid);

describe('the key ring', () => {
  it('creates its directory (0700) and first key (a 0600 file) on open, and reuses the key on reopen', async () => {
    const keyDir = join(tempDir(), 'keys');
    const clock = new ManualClock(T0);
    const ring = await KeyRing.open(keyDir, clock);
    const { kid } = ring.current();
    expect(readdirSync(keyDir)).toEqual([`${kid}.json`]);
    expect(statSync(join(keyDir, `${kid}.json`)).mode & 0o777).toBe(0o600);
    expect(statSync(keyDir).mode & 0o777).toBe(0o700);
    const again = await KeyRing.open(keyDir, clock);
    expect(again.current().kid).toBe(kid);
    expect(readdirSync(keyDir)).toHaveLength(1);
  });

  it('a ring that only verifies (makeSigningKey false) creates no directory, and finds the key a server makes there later', async () => {
    const keyDir = join(tempDir(), 'keys');
    const clock = new ManualClock(T0);
    const reader = await KeyRing.open(keyDir, clock, { makeSigningKey: false });
    expect(existsSync(keyDir)).toBe(false);
    expect(reader.canSign).toBe(false);
    expect(kids(reader)).toEqual([]);
    const server = await KeyRing.open(keyDir, clock);
    const token = await signDecision(server, longLived());
    await expect(verifyDecision(token, { keys: reader, audience: AUDIENCE, now: T0 })).resolves.toMatchObject({ decision_id: 'dec-1' });
    expect(kids(reader)).toEqual([server.current().kid]);
  });

  it('rotates: new decisions use the new key, old ones verify during the grace period and not after it', async () => {
    const clock = new ManualClock(T0);
    const ring = await KeyRing.open(tempDir(), clock, { maxTokenTtlMs: GRACE });
    expect(ring.retiredKeyPublishedMs).toBe(PUBLISHED);
    const k1 = ring.current().kid;
    const old = await signDecision(ring, longLived());

    clock.advance(1000);
    const k2 = (await ring.rotate()).kid;
    const retiredAt = clock.now();
    expect(k2).not.toBe(k1);
    expect(ring.current().kid).toBe(k2);
    expect(kids(ring)).toEqual([k2, k1]);
    const fresh = await signDecision(ring, longLived());
    expect(JSON.parse(Buffer.from(fresh.split('.')[0]!, 'base64url').toString()).kid).toBe(k2);

    clock.set(retiredAt + PUBLISHED - 1);
    const jwks = ring.jwks();
    expect(kids(ring)).toEqual([k2, k1]);
    await expect(verifyDecision(old, { keys: ring, audience: AUDIENCE, now: clock.now() })).resolves.toMatchObject({ decision_id: 'dec-1' });
    await expect(verifyDecision(old, { keys: jwks, audience: AUDIENCE, now: clock.now() })).resolves.toBeDefined();

    clock.set(retiredAt + PUBLISHED);
    expect(kids(ring)).toEqual([k2]);
    await expect(verifyDecision(old, { keys: ring, audience: AUDIENCE, now: clock.now() })).rejects.toMatchObject({
      code: 'DECISION_INVALID',
      message: expect.stringMatching(/not a known Writ key/),
    });
    await expect(verifyDecision(old, { keys: ring.jwks(), audience: AUDIENCE, now: clock.now() })).rejects.toMatchObject({
      code: 'DECISION_INVALID',
    });
    await expect(verifyDecision(fresh, { keys: ring, audience: AUDIENCE, now: clock.now() })).resolves.toBeDefined();
  });

  it('deletes a retired private key once its grace period is over, at the next rotation', async () => {
    const keyDir = tempDir();
    const clock = new ManualClock(T0);
    const ring = await KeyRing.open(keyDir, clock, { maxTokenTtlMs: GRACE });
    const k1 = ring.current().kid;
    const k2 = (await ring.rotate()).kid;
    clock.advance(PUBLISHED - 1);
    const k3 = (await ring.rotate()).kid;
    expect(readdirSync(keyDir).sort()).toEqual([`${k1}.json`, `${k2}.json`, `${k3}.json`].sort());
    clock.advance(1);
    const k4 = (await ring.rotate()).kid;
    expect(readdirSync(keyDir).sort()).toEqual([`${k2}.json`, `${k3}.json`, `${k4}.json`].sort());
    expect(existsSync(join(keyDir, `${k1}.json`))).toBe(false);
  });

  it('is shared across processes: a ring opened on the same directory sees another one rotate', async () => {
    const keyDir = tempDir();
    const clock = new ManualClock(T0);
    const a = await KeyRing.open(keyDir, clock, { maxTokenTtlMs: GRACE });
    const b = await KeyRing.open(keyDir, clock, { maxTokenTtlMs: GRACE });
    const k1 = a.current().kid;
    expect(b.current().kid).toBe(k1);

    clock.advance(10);
    const k2 = (await b.rotate()).kid;
    const signedByB = await signDecision(b, longLived());
    await expect(verifyDecision(signedByB, { keys: a, audience: AUDIENCE, now: clock.now() })).resolves.toBeDefined();
    expect(a.current().kid).toBe(k2);
    expect(kids(a)).toEqual([k2, k1]);
    const c = await KeyRing.open(keyDir, clock, { maxTokenTtlMs: GRACE });
    expect(c.current().kid).toBe(k2);
  });


  it('signs without touching the directory: another process\'s rotation is seen within a second, and what was signed with the old key in that second verifies until it expires', async () => {
    const keyDir = tempDir();
    const clock = new ManualClock(T0);
    const a = await KeyRing.open(keyDir, clock, { maxTokenTtlMs: GRACE });
    const b = await KeyRing.open(keyDir, clock, { maxTokenTtlMs: GRACE });
    const k1 = a.current().kid;
    const k2 = (await b.rotate()).kid;
    const retiredAt = clock.now();

    clock.advance(999);
    expect(a.current().kid).toBe(k1); // the directory changed, but a looks at it once a second
    const late = await signDecision(a, claims({ decision_id: 'dec-late', issued_at: clock.now(), expires_at: clock.now() + GRACE }));
    clock.advance(1);
    expect(a.current().kid).toBe(k2);

    // Until the late decision expires, every verifier (b, a JWKS read from b) still accepts it.
    clock.set(retiredAt + 999 + GRACE - 1);
    await expect(verifyDecision(late, { keys: b, audience: AUDIENCE, now: clock.now() })).resolves.toMatchObject({ decision_id: 'dec-late' });
    await expect(verifyDecision(late, { keys: b.jwks(), audience: AUDIENCE, now: clock.now() })).resolves.toBeDefined();
    clock.set(retiredAt + PUBLISHED);
    expect(kids(b)).toEqual([k2]);
  });
  it('notices another process rotating even when the directory mtime did not move (same timestamp tick)', async () => {
    const keyDir = tempDir();
    const clock = new ManualClock(T0);
    const first = await KeyRing.open(keyDir, clock, { maxTokenTtlMs: GRACE });
    const k1 = first.current().kid;
    utimesSync(keyDir, 1000, 1000);
    const a = await KeyRing.open(keyDir, clock, { maxTokenTtlMs: GRACE });
    const b = await KeyRing.open(keyDir, clock, { maxTokenTtlMs: GRACE });
    expect(a.current().kid).toBe(k1);

    const k2 = (await b.rotate()).kid;
    utimesSync(keyDir, 1000, 1000); // as if the rename landed in the tick a already read
    const signedByB = await signDecision(b, longLived());
    // An unknown kid makes the ring list the directory.
    await expect(verifyDecision(signedByB, { keys: a, audience: AUDIENCE, now: clock.now() })).resolves.toBeDefined();

    const c = await KeyRing.open(keyDir, clock, { maxTokenTtlMs: GRACE });
    utimesSync(keyDir, 1000, 1000);
    const k3 = (await b.rotate()).kid;
    utimesSync(keyDir, 1000, 1000);
    expect(c.current().kid).toBe(k2); // within the re-list interval, the stale view may sign
    clock.advance(1000);
    expect(c.current().kid).toBe(k3); // at least once a second it re-lists before signing
  });

  // A file named as a key (<kid>.json) that is not one is damaged, not ignored (damaged-key-file.test.ts).
  it('ignores temp files and files not named as keys', async () => {
    const keyDir = tempDir();
    const clock = new ManualClock(T0);
    const ring = await KeyRing.open(keyDir, clock);
    writeFileSync(join(keyDir, 'notes.txt'), '{ not json');
    writeFileSync(join(keyDir, '.abc.tmp'), '{}');
    const again = await KeyRing.open(keyDir, clock);
    expect(again.current().kid).toBe(ring.current().kid);
    expect(again.jwks().keys).toHaveLength(1);
  });
});
