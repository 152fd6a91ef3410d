import { join } from 'node:path';
import { base64url, exportJWK, generateKeyPair, importJWK, SignJWT, type JWK } from 'jose';
import { describe, expect, it, onTestFinished } from 'vitest';
import { authenticateCaller, ReplayGuard, spendAssertion, verifyCallerAssertion, type CallerAuthDeps, type SingleUseTx } from '../../src/decision/index.js';
import type { PublicJwk } from '../../src/graph/model.js';
import { createCallerAssertion, generatePrincipalKeyPair } from '../../src/sdk/assertion.js';
import { openSqliteStore, type SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { T0, tempDir } from './helpers.js';

const AUD = 'writ';

async function world() {
  const dbFile = join(tempDir(), 'writ.db');
  const stores: SqliteStore[] = [];
  const open = async () => {
    const store = await openSqliteStore(dbFile, { checkpointer: false });
    stores.push(store);
    return new ReplayGuard(store);
  };
  const alice = await generatePrincipalKeyPair('alice-key-1');
  const bob = await generatePrincipalKeyPair('bob-key-1');
  const es = await generateKeyPair('ES256', { extractable: true });
  const carolPrivate: JWK = { ...(await exportJWK(es.privateKey)), kid: 'carol-p256' };
  const carolPublic: JWK = { ...(await exportJWK(es.publicKey)), kid: 'carol-p256' };
  const principals = new Map<string, { keys: PublicJwk[]; revoked_at: number | null }>([
    ['alice', { keys: [alice.publicJwk as PublicJwk], revoked_at: null }],
    ['bob', { keys: [bob.publicJwk as PublicJwk], revoked_at: null }],
    ['carol', { keys: [carolPublic as PublicJwk], revoked_at: null }],
    ['ex-agent', { keys: [alice.publicJwk as PublicJwk], revoked_at: T0 - 1 }],
  ]);
  let replay = await open();
  const deps = (over: Partial<CallerAuthDeps> = {}): CallerAuthDeps => ({
    principal: (id) => principals.get(id),
    replay,
    now: T0,
    audience: AUD,
    ...over,
  });
  const reopen = async () => {
    for (const store of stores.splice(0)) await store.close();
    replay = await open();
  };
  onTestFinished(async () => {
    for (const store of stores) await store.close();
  });
  return { alice, bob, carolPrivate, deps, reopen };
}

const bearer = (t: string) => `Bearer ${t}`;

async function refusal(header: string | undefined, deps: CallerAuthDeps): Promise<string> {
  const err = await authenticateCaller(header, deps).catch((e: unknown) => e);
  expect(err).toMatchObject({ code: 'UNAUTHENTICATED' });
  return (err as Error).message;
}

describe('caller authentication', () => {
  it('accepts a fresh assertion signed by a registered Ed25519 or P-256 key', async () => {
    const w = await world();
    const token = await createCallerAssertion({ principal: 'alice', privateJwk: w.alice.privateJwk, now: T0 });
    const who = await authenticateCaller(bearer(token), w.deps());
    expect(who).toMatchObject({ principal: 'alice', jti: expect.any(String), expiresAt: T0 + 60_000 });
    const es = await createCallerAssertion({ principal: 'carol', privateJwk: w.carolPrivate, now: T0, ttlSeconds: 300 });
    expect(JSON.parse(Buffer.from(es.split('.')[0]!, 'base64url').toString())).toMatchObject({ alg: 'ES256', kid: 'carol-p256' });
    await expect(authenticateCaller(bearer(es), w.deps())).resolves.toMatchObject({ principal: 'carol' });
  });

  it('refuses a missing, non-Bearer or malformed Authorization header', async () => {
    const w = await world();
    expect(await refusal(undefined, w.deps())).toBe('missing Authorization header');
    expect(await refusal('  ', w.deps())).toBe('missing Authorization header');
    expect(await refusal('Basic YWxpY2U6cHc=', w.deps())).toMatch(/not a Bearer token/);
    expect(await refusal('Bearer abc.def', w.deps())).toMatch(/^malformed assertion/);
    expect(await refusal('Bearer a.b.c', w.deps())).toMatch(/^malformed assertion/);
  });

  it('refuses an assertion that expired, exactly at exp + tolerance (5 s)', async () => {
    const w = await world();
    const token = await createCallerAssertion({ principal: 'alice', privateJwk: w.alice.privateJwk, now: T0, ttlSeconds: 60 });
    expect(await refusal(bearer(token), w.deps({ now: T0 + 65_000 }))).toMatch(/^assertion expired: /);
    await expect(authenticateCaller(bearer(token), w.deps({ now: T0 + 64_999 }))).resolves.toMatchObject({ principal: 'alice' });
  });

  it('where this replica\'s own clock is off its database\'s by more than the tolerance, a refusal for the caller\'s clock says the fault may be the replica\'s', async () => {
    const w = await world();
    // Writ (this replica) 10 s behind its database: a caller on the database's clock looks 10 s ahead.
    const right = await createCallerAssertion({ principal: 'alice', privateJwk: w.alice.privateJwk, now: T0 + 10_000 });
    const early = await refusal(bearer(right), w.deps({ clockOffsetMs: -10_000 }));
    expect(early).toMatch(/^assertion is issued in the future: .*the caller's clock is probably ahead: set it right \(NTP\) and send a new assertion; but this replica's own clock is 10\.0 s behind its database's \(GET \/readyz\), so if the caller's clock is right it is this replica's that is wrong: set it right \(NTP\)$/);
    // 70 s ahead of its database: a caller on the database's clock sends assertions that look expired.
    const old = await createCallerAssertion({ principal: 'alice', privateJwk: w.alice.privateJwk, now: T0 - 70_000 });
    expect(await refusal(bearer(old), w.deps({ clockOffsetMs: 70_000 }))).toMatch(/^assertion expired: .*; but this replica's own clock is 70\.0 s ahead of its database's/);
    // The other way round, or within the tolerance: the note is not given.
    const again = await createCallerAssertion({ principal: 'alice', privateJwk: w.alice.privateJwk, now: T0 + 10_000 });
    expect(await refusal(bearer(again), w.deps({ clockOffsetMs: 10_000 }))).not.toMatch(/this replica's own clock/);
    const within = await createCallerAssertion({ principal: 'alice', privateJwk: w.alice.privateJwk, now: T0 + 10_000 });
    expect(await refusal(bearer(within), w.deps({ clockOffsetMs: -4_000 }))).not.toMatch(/this replica's own clock/);
  });

  it('names the caller\'s clock when an assertion it just made is refused for its time: Writ\'s time, the skew and the 5 s tolerated', async () => {
    const w = await world();
    // The caller's clock 10 s ahead of Writ's: its fresh assertion is issued in the future.
    const ahead = await createCallerAssertion({ principal: 'alice', privateJwk: w.alice.privateJwk, now: T0 + 10_000 });
    const early = await refusal(bearer(ahead), w.deps());
    expect(early).toContain(`its iat ${new Date(T0 + 10_000).toISOString()} is 10.0 s after Writ's time ${new Date(T0).toISOString()}`);
    expect(early).toMatch(/more than the 5 s of clock skew tolerated; the caller's clock is probably ahead: set it right \(NTP\)/);
    // 65 s behind: a fresh 60 s assertion has expired by Writ's clock.
    const behind = await createCallerAssertion({ principal: 'alice', privateJwk: w.alice.privateJwk, now: T0 - 65_000, ttlSeconds: 60 });
    const late = await refusal(bearer(behind), w.deps());
    expect(late).toContain(`its exp ${new Date(T0 - 5_000).toISOString()} is 5.0 s before Writ's time ${new Date(T0).toISOString()}, beyond the 5 s of clock skew tolerated`);
    expect(late).toMatch(/if this one was just made, the caller's clock is behind: set it right \(NTP\)/);
    // A claim beyond what a Date can hold is still a refusal that says what it was, not a crash.
    const farFuture = await signJwt(await importPrivate(w.alice.privateJwk), { alg: 'EdDSA', kid: 'alice-key-1' }, { jti: 'far-1', iat: 1e15, exp: 1e15 + 60 });
    expect(await refusal(bearer(farFuture), w.deps())).toMatch(/^assertion (is issued in the future|lifetime)/);
    const farPast = await signJwt(await importPrivate(w.alice.privateJwk), { alg: 'EdDSA', kid: 'alice-key-1' }, { jti: 'far-2', iat: -1e15 - 60, exp: -1e15 });
    expect(await refusal(bearer(farPast), w.deps())).toMatch(/^assertion expired: its exp -1000000000000000 s after the epoch/);
  });

  it('never accepts a jti twice, also after the store is reopened', async () => {
    const w = await world();
    const token = await createCallerAssertion({ principal: 'alice', privateJwk: w.alice.privateJwk, now: T0 });
    await authenticateCaller(bearer(token), w.deps());
    expect(await refusal(bearer(token), w.deps({ now: T0 + 1000 }))).toMatch(/already used \(replayed\)/);
    await w.reopen();
    expect(await refusal(bearer(token), w.deps({ now: T0 + 2000 }))).toMatch(/already used \(replayed\)/);
    // The same jti in a new assertion is still a replay.
    const sameJti = await createCallerAssertion({ principal: 'alice', privateJwk: w.alice.privateJwk, now: T0, jti: JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).jti });
    expect(await refusal(bearer(sameJti), w.deps({ now: T0 + 3000 }))).toMatch(/replayed/);
  });

  it('an assertion never reads the request (only a caller session\'s request token is bound to its method and path)', async () => {
    const w = await world();
    const token = await createCallerAssertion({ principal: 'alice', privateJwk: w.alice.privateJwk, now: T0 });
    const untouched = { get method(): string { throw new Error('method read'); }, get url(): string { throw new Error('url read'); } };
    await expect(authenticateCaller(bearer(token), w.deps({ request: untouched }))).resolves.toMatchObject({ principal: 'alice' });
  });

  it('refuses a caller claiming to be another principal', async () => {
    const w = await world();
    // Bob signs with his own key but names Alice's kid: the signature does not verify with Alice's key.
    const aliceKid = await createCallerAssertion({ principal: 'alice', privateJwk: { ...w.bob.privateJwk, kid: 'alice-key-1' }, now: T0 });
    expect(await refusal(bearer(aliceKid), w.deps())).toBe('assertion signature does not verify with the named key');
    // Bob names his own kid: Alice has no such key.
    const bobKid = await createCallerAssertion({ principal: 'alice', privateJwk: w.bob.privateJwk, now: T0 });
    expect(await refusal(bearer(bobKid), w.deps())).toBe('principal alice has no key with kid bob-key-1');
    // iss and sub disagree.
    const mixed = await signJwt(await importPrivate(w.bob.privateJwk), { alg: 'EdDSA', kid: 'bob-key-1' }, { jti: 'x1', iss: 'bob', sub: 'alice' });
    expect(await refusal(bearer(mixed), w.deps())).toMatch(/iss and sub differ/);
  });

  it('refuses an unknown principal, a revoked principal, another audience, a too-long lifetime and a forbidden algorithm', async () => {
    const w = await world();
    const make = (o: Partial<Parameters<typeof createCallerAssertion>[0]> = {}) =>
      createCallerAssertion({ principal: 'alice', privateJwk: w.alice.privateJwk, now: T0, ...o });
    expect(await refusal(bearer(await make({ principal: 'nobody' })), w.deps())).toBe('unknown principal nobody');
    expect(await refusal(bearer(await make({ principal: 'ex-agent' })), w.deps())).toBe('principal ex-agent is revoked');
    expect(await refusal(bearer(await make({ audience: 'elsewhere' })), w.deps())).toBe('assertion is for another audience');
    expect(await refusal(bearer(await make({ ttlSeconds: 301 })), w.deps())).toBe('assertion lifetime is longer than 300 s');
    expect(await refusal(bearer(await make({ now: T0 + 60_000 })), w.deps())).toMatch(/^assertion is issued in the future: /);
    const hs = await signJwt(base64url.decode(w.alice.publicJwk.x!), { alg: 'HS256', kid: 'alice-key-1' }, { jti: 'h1' });
    expect(await refusal(bearer(hs), w.deps())).toMatch(/algorithm "HS256" is not allowed/);
    const noJti = await signJwt(await importPrivate(w.alice.privateJwk), { alg: 'EdDSA', kid: 'alice-key-1' }, { jti: undefined });
    expect(await refusal(bearer(noJti), w.deps())).toBe('malformed assertion: claim jti is missing');
  });

  it('says which check failed, with a distinct message per failure and no key material', async () => {
    const w = await world();
    const a = (o: Partial<Parameters<typeof createCallerAssertion>[0]> = {}) =>
      createCallerAssertion({ principal: 'alice', privateJwk: w.alice.privateJwk, now: T0, ...o });
    const replayed = await a();
    await authenticateCaller(bearer(replayed), w.deps());
    const messages = [
      await refusal(undefined, w.deps()),
      await refusal('Bearer nope', w.deps()),
      await refusal(bearer(await a({ principal: 'nobody' })), w.deps()),
      await refusal(bearer(await createCallerAssertion({ principal: 'alice', privateJwk: w.bob.privateJwk, now: T0 })), w.deps()),
      await refusal(bearer(await createCallerAssertion({ principal: 'alice', privateJwk: { ...w.bob.privateJwk, kid: 'alice-key-1' }, now: T0 })), w.deps()),
      await refusal(bearer(await a({ now: T0 - 120_000 })), w.deps()),
      await refusal(bearer(await a({ ttlSeconds: 600 })), w.deps()),
      await refusal(bearer(replayed), w.deps()),
      await refusal(bearer(await a({ principal: 'ex-agent' })), w.deps()),
    ];
    expect(new Set(messages).size).toBe(messages.length);
    for (const m of messages) {
      for (const secret of [w.alice.publicJwk.x!, w.alice.privateJwk.d!, w.bob.privateJwk.d!]) expect(m).not.toContain(secret);
    }
  });
});

describe('the assertion is verified as a strict compact JWS', () => {
  const claims = { iss: 'alice', sub: 'alice', aud: AUD, iat: T0 / 1000, exp: T0 / 1000 + 60, jti: 'j1' };
  const signed = async (w: Awaited<ReturnType<typeof world>>, header: Record<string, unknown>, payload: Record<string, unknown> = claims) =>
    new SignJWT(payload).setProtectedHeader({ alg: 'EdDSA', kid: 'alice-key-1', ...header } as never).sign(await importPrivate(w.alice.privateJwk));

  it('refuses a crit header (no extension is understood) and an unencoded payload', async () => {
    const w = await world();
    expect(await refusal(bearer(await byHand(w, { crit: ['x-writ'], 'x-writ': 1 })), w.deps())).toMatch(/^malformed assertion/);
    expect(await refusal(bearer(await byHand(w, { b64: false, crit: ['b64'] })), w.deps())).toMatch(/^malformed assertion/);
    // The same construction without those headers is accepted: the refusal is for the header alone.
    await expect(authenticateCaller(bearer(await byHand(w, {})), w.deps())).resolves.toMatchObject({ principal: 'alice' });
  });

  it('refuses a token that is not yet valid (nbf), an iat that is not a number, and a signature of the wrong size', async () => {
    const w = await world();
    expect(await refusal(bearer(await signed(w, {}, { ...claims, nbf: T0 / 1000 + 30 })), w.deps())).toMatch(/^assertion is not yet valid \(nbf\): its nbf .* is 30.0 s after Writ's time/);
    expect(await refusal(bearer(await signed(w, {}, { ...claims, iat: 'yesterday' })), w.deps())).toBe('assertion claim iat is invalid');
    const good = await signed(w, {});
    const [h, p, sig] = good.split('.');
    const longer = `${h}.${p}.${Buffer.concat([Buffer.from(sig!, 'base64url'), Buffer.alloc(1)]).toString('base64url')}`;
    expect(await refusal(bearer(longer), w.deps())).toBe('assertion signature does not verify with the named key');
    expect(await refusal(bearer(`${h}.${p}.`), w.deps())).toBe('assertion signature does not verify with the named key');
    expect(await refusal(bearer(`${h}.${p}.${sig}.x`), w.deps())).toMatch(/^malformed assertion/);
    // The good one passes.
    await expect(authenticateCaller(bearer(good), w.deps())).resolves.toMatchObject({ principal: 'alice', jti: 'j1' });
  });

  it('an Ed25519 key never verifies an ES256 header, nor a P-256 key an EdDSA one', async () => {
    const w = await world();
    // alice's key is Ed25519: a token claiming ES256 under her kid is refused before any verification.
    const es = await createCallerAssertion({ principal: 'alice', privateJwk: { ...w.carolPrivate, kid: 'alice-key-1' }, now: T0 });
    expect(await refusal(bearer(es), w.deps())).toBe('assertion algorithm ES256 does not match key alice-key-1 of principal alice');
    // carol's key is P-256: an EdDSA token under her kid likewise.
    const ed = await createCallerAssertion({ principal: 'carol', privateJwk: { ...w.alice.privateJwk, kid: 'carol-p256' }, now: T0 });
    expect(await refusal(bearer(ed), w.deps())).toBe('assertion algorithm EdDSA does not match key carol-p256 of principal carol');
  });
});

describe('the window between verifying an assertion and spending it', () => {
  it('an assertion verified but not yet spent is refused if shown again to the same process', async () => {
    const w = await world();
    const token = await createCallerAssertion({ principal: 'alice', privateJwk: w.alice.privateJwk, now: T0 });
    // The first request is still in flight (its jti not yet spent with its effect).
    await expect(verifyCallerAssertion(bearer(token), w.deps())).resolves.toMatchObject({ principal: 'alice' });
    expect(await refusal(bearer(token), w.deps({ now: T0 + 10 }))).toMatch(/already used \(replayed\)/);
  });

  it('a spend that comes after the assertion expired is refused (so two late spends cannot both pass)', async () => {
    const w = await world();
    const token = await createCallerAssertion({ principal: 'alice', privateJwk: w.alice.privateJwk, now: T0, ttlSeconds: 60 });
    const caller = await verifyCallerAssertion(bearer(token), w.deps());
    const late = caller.spendUntil;
    const replay = w.deps().replay;
    await expect(replay.store.readWrite((tx) => spendAssertion(replay, tx, caller, late))).rejects.toThrow(/expired/);
    await expect(replay.store.readWrite((tx) => spendAssertion(replay, tx, caller, late + 1))).rejects.toThrow(/expired/);
  });

  it('a spend that fails for another reason (the store) leaves the assertion usable, and a spent one leaves no mark in memory', async () => {
    const w = await world();
    const token = await createCallerAssertion({ principal: 'alice', privateJwk: w.alice.privateJwk, now: T0 });
    const caller = await verifyCallerAssertion(bearer(token), w.deps());
    const guard = w.deps().replay;
    const ioError = () => Promise.reject(new Error('SQLITE_IOERR'));
    const broken: SingleUseTx = { singleUse: { spend: ioError, spendOrRefuse: ioError, isSpent: () => Promise.resolve(false), wouldRefuse: () => Promise.resolve(null) } };
    await expect(spendAssertion(guard, broken, caller, T0)).rejects.toThrow('SQLITE_IOERR');
    // Nothing was spent: the same assertion verifies again and is then spent for good.
    const again = await verifyCallerAssertion(bearer(token), w.deps());
    await guard.store.readWrite((tx) => spendAssertion(guard, tx, again, T0));
    expect(await refusal(bearer(token), w.deps())).toMatch(/replayed/);
  });

  it('refuses a jti longer than 255 characters (each one is kept until its assertion expires)', async () => {
    const w = await world();
    const long = await createCallerAssertion({ principal: 'alice', privateJwk: w.alice.privateJwk, now: T0, jti: 'x'.repeat(256) });
    expect(await refusal(bearer(long), w.deps())).toBe('malformed assertion: jti is longer than 255 characters');
  });

  it('is never accepted once its spend would be forgotten (a fractional exp, whole-second checks)', async () => {
    const w = await world();
    const fractional = await signJwt(await importPrivate(w.alice.privateJwk), { alg: 'EdDSA', kid: 'alice-key-1' }, { jti: 'frac-1', exp: T0 / 1000 + 0.9 });
    // The default tolerance is 5 s: the spend is remembered until exp + 5 s = T0 + 5,900 ms.
    expect(await refusal(bearer(fractional), w.deps({ now: T0 + 5_950 }))).toMatch(/^assertion expired: /);
    await expect(authenticateCaller(bearer(fractional), w.deps({ now: T0 + 5_500 }))).resolves.toMatchObject({ jti: 'frac-1' });
  });
});

/** jose refuses to sign with an unknown crit parameter, so build such headers by hand (signed properly). */
async function byHand(w: Awaited<ReturnType<typeof world>>, extra: Record<string, unknown>): Promise<string> {
  const { createPrivateKey, sign } = await import('node:crypto');
  const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const input = `${enc({ alg: 'EdDSA', kid: 'alice-key-1', ...extra })}.${enc({ iss: 'alice', sub: 'alice', aud: AUD, iat: T0 / 1000, exp: T0 / 1000 + 60, jti: `c-${Object.keys(extra).join('-')}` })}`;
  const key = createPrivateKey({ key: w.alice.privateJwk as never, format: 'jwk' });
  return `${input}.${sign(null, Buffer.from(input), key).toString('base64url')}`;
}

const importPrivate = (jwk: JWK) => importJWK(jwk, 'EdDSA');

/** A JWT with alice's usual claims (iss = sub = alice, aud, iat T0, exp T0 + 60 s), any of them overridden (undefined drops it). */
function signJwt(key: Parameters<SignJWT['sign']>[0], header: { alg: string; kid: string }, claims: Record<string, unknown> = {}): Promise<string> {
  const all: Record<string, unknown> = { iss: 'alice', sub: 'alice', aud: AUD, iat: T0 / 1000, exp: T0 / 1000 + 60, ...claims };
  for (const k of Object.keys(all)) if (all[k] === undefined) delete all[k];
  return new SignJWT(all).setProtectedHeader(header).sign(key);
}
