import { base64url, createLocalJWKSet, decodeJwt, jwtVerify, SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { KeyRing, signDecision, verifyDecision, type DecisionKeys } from '../../src/decision/index.js';
import { claimsToPayload } from '../../src/decision/decision-claims.js';
import { AUDIENCE, claims, T0, tempDir } from './helpers.js';

async function setup() {
  const clock = new ManualClock(T0);
  const ring = await KeyRing.open(tempDir(), clock);
  const jwks = JSON.parse(JSON.stringify(ring.jwks())); // as a client fetches it
  const token = await signDecision(ring, claims());
  return { clock, ring, jwks, token };
}

/** Every verifier flavour: the server's KeyRing and an offline client's fetched JWKS. */
async function verifyBoth(token: string, keysets: DecisionKeys[], now = T0 + 1000, audience = AUDIENCE) {
  return Promise.all(keysets.map((keys) => verifyDecision(token, { keys, audience, now })));
}

async function expectRejected(token: string, keysets: DecisionKeys[], code: string, message: RegExp, now = T0 + 1000) {
  for (const keys of keysets) {
    const err = await verifyDecision(token, { keys, audience: AUDIENCE, now }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code });
    expect((err as Error).message).toMatch(message);
  }
}

const encode = (o: unknown) => base64url.encode(JSON.stringify(o));

describe('decision tokens', () => {
  it('verify against the key ring and against the published JWKS, returning the signed claims', async () => {
    const { ring, jwks, token } = await setup();
    const [viaRing, viaJwks] = await verifyBoth(token, [ring, jwks]);
    expect(viaRing).toEqual(claims());
    expect(viaJwks).toEqual(claims());
    const header = JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString());
    expect(header).toEqual({ alg: 'EdDSA', kid: ring.current().kid, typ: 'writ-decision+jwt' });
    const payload = decodeJwt(token);
    expect(payload).toMatchObject({ iss: 'writ', jti: 'dec-1', sub: 'seo-agent-7', aud: AUDIENCE, iat: T0 / 1000, exp: T0 / 1000 + 30 });
  });

  it('interoperate with jose, an independent implementation, both ways', async () => {
    const { ring, jwks, token } = await setup();
    // What signDecision makes, jose verifies against the published JWKS.
    const { payload, protectedHeader } = await jwtVerify(token, createLocalJWKSet(jwks), { audience: AUDIENCE, issuer: 'writ', typ: 'writ-decision+jwt', currentDate: new Date(T0 + 1000) });
    expect(protectedHeader.alg).toBe('EdDSA');
    expect(payload.jti).toBe('dec-1');
    // What jose signs with the ring's key, verifyDecision accepts (with the same claims).
    const byJose = await new SignJWT(claimsToPayload(claims())).setProtectedHeader({ alg: 'EdDSA', kid: ring.current().kid, typ: 'writ-decision+jwt' }).sign(ring.current().privateKey);
    expect(await verifyBoth(byJose, [ring, jwks])).toEqual([claims(), claims()]);
  });

  it('publish only public keys in the JWKS', async () => {
    const { ring } = await setup();
    const { keys } = ring.jwks();
    expect(keys).toHaveLength(1);
    expect(keys[0]).toEqual({ kty: 'OKP', crv: 'Ed25519', x: expect.any(String), kid: ring.current().kid, alg: 'EdDSA', use: 'sig' });
    expect(keys[0]).not.toHaveProperty('d');
  });

  it('reject a tampered payload', async () => {
    const { ring, jwks, token } = await setup();
    const [h, p, s] = token.split('.');
    const payload = JSON.parse(Buffer.from(p!, 'base64url').toString());
    payload.resource = 'wp:post:1';
    await expectRejected(`${h}.${encode(payload)}.${s}`, [ring, jwks], 'DECISION_INVALID', /signature does not verify/);
  });

  it('reject a decision signed by another key, whether it names its own kid or ours', async () => {
    const { ring, jwks } = await setup();
    const other = await KeyRing.open(tempDir(), new ManualClock(T0));
    const ownKid = await signDecision(other, claims());
    await expectRejected(ownKid, [ring, jwks], 'DECISION_INVALID', /not (a known Writ key|in the JWKS)/);
    const ourKid = await new SignJWT(claimsToPayload(claims()))
      .setProtectedHeader({ alg: 'EdDSA', kid: ring.current().kid, typ: 'writ-decision+jwt' })
      .sign(other.current().privateKey);
    await expectRejected(ourKid, [ring, jwks], 'DECISION_INVALID', /signature does not verify/);
  });

  it('reject alg none', async () => {
    const { ring, jwks, token } = await setup();
    const payload = token.split('.')[1];
    const unsigned = `${encode({ alg: 'none', kid: ring.current().kid, typ: 'writ-decision+jwt' })}.${payload}.`;
    await expectRejected(unsigned, [ring, jwks], 'DECISION_INVALID', /algorithm "none" is not allowed/);
    const noneNoKid = `${encode({ alg: 'none' })}.${payload}.`;
    await expectRejected(noneNoKid, [ring, jwks], 'DECISION_INVALID', /not allowed/);
  });

  it('reject HS256 signed with the public key as the HMAC secret', async () => {
    const { ring, jwks } = await setup();
    const pub = jwks.keys[0];
    const secrets = [base64url.decode(pub.x), new TextEncoder().encode(JSON.stringify(pub)), new TextEncoder().encode(pub.x)];
    for (const secret of secrets) {
      const forged = await new SignJWT(claimsToPayload(claims({ resource: 'wp:post:1' })))
        .setProtectedHeader({ alg: 'HS256', kid: pub.kid, typ: 'writ-decision+jwt' })
        .sign(secret);
      await expectRejected(forged, [ring, jwks], 'DECISION_INVALID', /algorithm "HS256" is not allowed/);
    }
  });

  it('expire exactly at expires_at, not a millisecond earlier', async () => {
    const { ring, jwks, token } = await setup();
    await expect(verifyBoth(token, [ring, jwks], T0 + 29_999)).resolves.toHaveLength(2);
    await expectRejected(token, [ring, jwks], 'DECISION_EXPIRED', /^decision \S+ expired at \S+: ask for a new decision/, T0 + 30_000);
    await expectRejected(token, [ring, jwks], 'DECISION_EXPIRED', /: ask for a new decision/, T0 + 3_600_000);
  });

  it('expire at a sub-second expires_at although exp (seconds) is rounded up', async () => {
    const { ring, jwks } = await setup();
    const token = await signDecision(ring, claims({ expires_at: T0 + 30_500 }));
    await expect(verifyBoth(token, [ring, jwks], T0 + 30_499)).resolves.toHaveLength(2);
    await expectRejected(token, [ring, jwks], 'DECISION_EXPIRED', /^decision \S+ expired at \S+: ask for a new decision/, T0 + 30_500);
  });

  it('honour an explicit clock tolerance', async () => {
    const { ring, token } = await setup();
    await expect(verifyDecision(token, { keys: ring, audience: AUDIENCE, now: T0 + 31_000, clockToleranceMs: 2000 })).resolves.toBeDefined();
    await expect(verifyDecision(token, { keys: ring, audience: AUDIENCE, now: T0 + 32_000, clockToleranceMs: 2000 })).rejects.toMatchObject({
      code: 'DECISION_EXPIRED',
    });
  });

  it('reject a decision made for another audience', async () => {
    const { ring, jwks, token } = await setup();
    for (const keys of [ring, jwks]) {
      await expect(verifyDecision(token, { keys, audience: 'other-gateway', now: T0 })).rejects.toMatchObject({
        code: 'DECISION_INVALID',
        message: expect.stringMatching(/another audience/),
      });
    }
    const listAudience = await new SignJWT({ ...claimsToPayload(claims()), aud: [AUDIENCE, 'other'] })
      .setProtectedHeader({ alg: 'EdDSA', kid: ring.current().kid, typ: 'writ-decision+jwt' })
      .sign(ring.current().privateKey);
    await expectRejected(listAudience, [ring, jwks], 'DECISION_INVALID', /single string/);
  });

  it('reject a token of another type, issuer or with missing claims even when properly signed', async () => {
    const { ring, jwks } = await setup();
    const { kid, privateKey } = ring.current();
    const sign = (payload: Record<string, unknown>, typ = 'writ-decision+jwt') =>
      new SignJWT(payload).setProtectedHeader({ alg: 'EdDSA', kid, typ }).sign(privateKey);
    await expectRejected(await sign(claimsToPayload(claims()), 'JWT'), [ring, jwks], 'DECISION_INVALID', /typ "JWT" is not writ-decision\+jwt/);
    await expectRejected(await sign({ ...claimsToPayload(claims()), iss: 'someone' }), [ring, jwks], 'DECISION_INVALID', /not issued by writ/);
    const { chain: _chain, ...noChain } = claimsToPayload(claims());
    await expectRejected(await sign(noChain), [ring, jwks], 'DECISION_INVALID', /"chain" is missing/);
    const { jti: _jti, ...noJti } = claimsToPayload(claims());
    await expectRejected(await sign(noJti), [ring, jwks], 'DECISION_INVALID', /"jti" is missing/);
    const badObligations = { ...claimsToPayload(claims()), obligations: { lease_required: 'yes' } };
    await expectRejected(await sign(badObligations), [ring, jwks], 'DECISION_INVALID', /obligations\.lease_required/);
  });

  it('reject a properly signed token with a crit header, and ignore JWKS keys not meant for EdDSA signatures', async () => {
    const { ring, jwks, token } = await setup();
    const { kid, privateKey } = ring.current();
    const [, payload] = token.split('.');
    const header = Buffer.from(JSON.stringify({ alg: 'EdDSA', kid, typ: 'writ-decision+jwt', crit: ['x-writ'], 'x-writ': 1 })).toString('base64url');
    const { sign } = await import('node:crypto');
    const crit = `${header}.${payload}.${sign(null, Buffer.from(`${header}.${payload}`), privateKey).toString('base64url')}`;
    await expectRejected(crit, [ring, jwks], 'DECISION_INVALID', /malformed/);
    // The same key published for encryption, or for another algorithm, does not verify decisions.
    for (const bad of [{ use: 'enc' }, { alg: 'ES256' }]) {
      const other = { keys: jwks.keys.map((k: Record<string, unknown>) => ({ ...k, ...bad })) };
      await expectRejected(token, [other], 'DECISION_INVALID', /not in the JWKS/);
    }
    // Two keys under one kid: ambiguous, refused.
    await expectRejected(token, [{ keys: [...jwks.keys, ...jwks.keys] }], 'DECISION_INVALID', /ambiguous/);
  });

  it('reject malformed tokens', async () => {
    const { ring, jwks, token } = await setup();
    for (const bad of ['', 'abc', 'a.b.c', token.slice(0, -3), `${token}.x`]) {
      await expectRejected(bad, [ring, jwks], 'DECISION_INVALID', /./);
    }
  });

  it('check the signature again for a token verified before when one byte differs, and when its key left the ring', async () => {
    const { clock, ring, jwks, token } = await setup();
    await verifyBoth(token, [ring, jwks]); // verified once: remembered with its key
    const [h, p, sig] = token.split('.') as [string, string, string];
    const payload = JSON.parse(Buffer.from(p, 'base64url').toString()) as Record<string, unknown>;
    await expectRejected(`${h}.${encode({ ...payload, sub: 'impostor-agent' })}.${sig}`, [ring, jwks], 'DECISION_INVALID', /signature/);
    // The remembered signature is not reused for another key under the same kid (a JWKS that changed it).
    const other = await KeyRing.open(tempDir(), clock);
    const swapped = { keys: [{ ...(other.jwks().keys[0] as object), kid: ring.current().kid }] };
    await expectRejected(token, [swapped as DecisionKeys], 'DECISION_INVALID', /signature/);
    // Retired past the grace period: unknown, although its signature was verified before.
    await ring.rotate();
    clock.advance(ring.retiredKeyPublishedMs + 1);
    await expectRejected(token, [ring], 'DECISION_INVALID', /not a known Writ key|expired/, clock.now());
  });
});

