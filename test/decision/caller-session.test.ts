import { createCipheriv, createDecipheriv, createHmac, createPrivateKey, createPublicKey, createSecretKey, diffieHellman, hkdfSync, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { agreeSessionKey, CallerSessions, deriveSealKey, deriveSessionKey, KeyRing } from '../../src/decision/index.js';
import { sessionMacVerifies, type CallerSession } from '../../src/decision/caller-session.js';
import { decodeCompactJws } from '../../src/decision/jws.js';
import { VECTOR } from '../support/caller-session-vector.js';

// The protocol's test vector (README, "Caller sessions").
const { CLIENT_D, SERVER_D, CLIENT_X, SERVER_X, SHARED, K, TOKEN } = VECTOR;

describe('caller sessions: the key agreement and the request token MAC, against the protocol\'s test vector', () => {
  it('X25519 public keys and the shared secret', () => {
    expect(x25519PublicX(CLIENT_D)).toBe(CLIENT_X);
    expect(x25519PublicX(SERVER_D)).toBe(SERVER_X);
    expect(x25519Shared(SERVER_D, CLIENT_X).toString('base64url')).toBe(SHARED);
    expect(x25519Shared(CLIENT_D, SERVER_X).toString('base64url')).toBe(SHARED);
  });

  it('K = HKDF-SHA256(shared, no salt, "writ caller session v1|client_x|server_x", 32)', () => {
    expect(deriveSessionKey(Buffer.from(SHARED, 'base64url'), CLIENT_X, SERVER_X).toString('base64url')).toBe(K);
  });

  it('the request token\'s header and payload are the vector\'s, and its MAC verifies with K only', () => {
    const header = { alg: 'HS256', kid: 'ws1.example-kid.AAAA' };
    const payload = { iss: 'seo-agent-7', sub: 'seo-agent-7', aud: 'writ', iat: 1796000000, exp: 1796000060, jti: 'j-1', htm: 'POST', htu: '/v1/leases' };
    const input = `${Buffer.from(JSON.stringify(header)).toString('base64url')}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`;
    const mac = createHmac('sha256', Buffer.from(K, 'base64url')).update(input).digest('base64url');
    expect(`${input}.${mac}`).toBe(TOKEN);
    const jws = decodeCompactJws(TOKEN);
    expect(sessionMacVerifies(probe(K), jws.signingInput, jws.signature)).toBe(true);
    expect(sessionMacVerifies(probe(Buffer.alloc(32, 7).toString('base64url')), jws.signingInput, jws.signature)).toBe(false);
    expect(sessionMacVerifies(probe(K), jws.signingInput, jws.signature.subarray(0, 31))).toBe(false);
  });

  it('the server\'s agreement yields a K the client derives alike; a low-order point and a bad length are refused', () => {
    const { serverX, key } = agreeSessionKey(CLIENT_X);
    expect(deriveSessionKey(x25519Shared(CLIENT_D, serverX), CLIENT_X, serverX).equals(key)).toBe(true);
    expect(() => agreeSessionKey(Buffer.alloc(32).toString('base64url'))).toThrow(expect.objectContaining({ code: 'UNPROCESSABLE' }));
    expect(() => agreeSessionKey(Buffer.concat([Buffer.from([1]), Buffer.alloc(31)]).toString('base64url'))).toThrow(expect.objectContaining({ code: 'UNPROCESSABLE' }));
    expect(() => agreeSessionKey(Buffer.alloc(31, 9).toString('base64url'))).toThrow(expect.objectContaining({ code: 'MALFORMED_REQUEST' }));
    expect(() => agreeSessionKey(Buffer.alloc(33, 9).toString('base64url'))).toThrow(expect.objectContaining({ code: 'MALFORMED_REQUEST' }));
  });
});

/** The public x of an X25519 private scalar d (both base64url), through PKCS#8 (a JWK needs x beside d). */
function x25519PublicX(privateD: string): string {
  const pkcs8 = Buffer.concat([Buffer.from('302e020100300506032b656e04220420', 'hex'), Buffer.from(privateD, 'base64url')]);
  return createPublicKey(createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' })).export({ format: 'jwk' }).x!;
}

/** X25519(private d, public x), both base64url. */
function x25519Shared(privateD: string, publicX: string): Buffer {
  const privateKey = createPrivateKey({ key: { kty: 'OKP', crv: 'X25519', d: privateD, x: x25519PublicX(privateD) }, format: 'jwk' });
  return diffieHellman({ privateKey, publicKey: createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: publicX }, format: 'jwk' }) });
}

/** A session whose K is `k` (base64url): only its key matters to the MAC. */
function probe(k: string): CallerSession {
  return { principal: 'p', kid: 'k', key: 'm', iatMs: 0, expMs: 1, sealKid: 'x', hmacKey: createSecretKey(Buffer.from(k, 'base64url')) };
}

describe('session tokens are sealed by the decision signing key', () => {
  const setup = async () => {
    const dir = mkdtempSync(join(tmpdir(), 'writ-sessions-'));
    const clock = new ManualClock(Date.UTC(2026, 5, 1));
    const ring = await KeyRing.open(dir, clock);
    return { dir, clock, ring, sessions: new CallerSessions(ring) };
  };
  const plain = { principal: 'seo-agent-7', kid: 'seo-agent-7-k1', key: 'OKP|Ed25519|abc|', iatMs: 1, expMs: 2, k: Buffer.alloc(32, 5) };

  it('seal key = HKDF-SHA256(the signing key\'s d, salt "writ", "writ caller session seal v1|" + kid, 32)', async () => {
    const { dir, ring } = await setup();
    const kid = ring.current().kid;
    const file = JSON.parse(readFileSync(join(dir, readdirSync(dir).find((f) => f.endsWith('.json'))!), 'utf8')) as { jwk: { d: string } };
    const expected = Buffer.from(hkdfSync('sha256', Buffer.from(file.jwk.d, 'base64url'), 'writ', `writ caller session seal v1|${kid}`, 32));
    expect(deriveSealKey(Buffer.from(file.jwk.d, 'base64url'), kid).equals(expected)).toBe(true);
    expect(ring.sessionSealKey(kid)!.equals(expected)).toBe(true);
    expect(ring.sessionSealKey('no-such-kid')).toBeUndefined();
  });

  it('a sealed token opens (ws1.<kid>.<nonce|ct|tag>), in this ring and in another on the same directory; altered, it does not', async () => {
    const { dir, clock, ring, sessions } = await setup();
    const token = sessions.seal(plain);
    const [prefix, kid, body] = token.split('.');
    expect(prefix).toBe('ws1');
    expect(kid).toBe(ring.current().kid);
    expect(sessions.unseal(token)).toMatchObject({ principal: 'seo-agent-7', kid: 'seo-agent-7-k1', key: plain.key, iatMs: 1, expMs: 2 });
    expect(sessions.unseal(token)).toBe(sessions.unseal(token)); // cached
    const twin = new CallerSessions(await KeyRing.open(dir, clock));
    expect(twin.unseal(token).principal).toBe('seo-agent-7');
    const bytes = Buffer.from(body!, 'base64url');
    for (const i of [0, 12, bytes.length - 1]) {
      const altered = Buffer.from(bytes);
      altered[i]! ^= 1;
      expect(() => new CallerSessions(ring).unseal(`ws1.${kid}.${altered.toString('base64url')}`)).toThrow(expect.objectContaining({ code: 'CALLER_SESSION_INVALID' }));
    }
    for (const bad of ['ws1.', `ws1.${kid}`, `ws1.${kid}.`, `ws1.${kid}.AAAA`, `ws1.${kid}.${body}.x`, `ws1.other-kid.${body}`]) {
      expect(() => new CallerSessions(ring).unseal(bad), bad).toThrow(expect.objectContaining({ code: 'CALLER_SESSION_INVALID' }));
    }
    // Another deployment's ring (another directory) opens nothing of this one's.
    const other = await setup();
    expect(() => other.sessions.unseal(token)).toThrow(expect.objectContaining({ code: 'CALLER_SESSION_INVALID' }));
  });

  it('the sealed plaintext holds what a session needs and nothing more; one sealed with a sid (before it was dropped) still opens', async () => {
    const { ring, sessions } = await setup();
    const kid = ring.current().kid;
    const sealKey = ring.sessionSealKey(kid)!;
    const body = Buffer.from(sessions.seal(plain).split('.')[2]!, 'base64url');
    const decipher = createDecipheriv('aes-256-gcm', sealKey, body.subarray(0, 12));
    decipher.setAAD(Buffer.from(`ws1.${kid}`, 'ascii'));
    decipher.setAuthTag(body.subarray(body.length - 16));
    const opened = JSON.parse(Buffer.concat([decipher.update(body.subarray(12, body.length - 16)), decipher.final()]).toString('utf8')) as Record<string, unknown>;
    expect(opened).toEqual({ principal: plain.principal, kid: plain.kid, key: plain.key, iat_ms: 1, exp_ms: 2, k: plain.k.toString('base64url') });
    // A replica of this build opens a session an older one sealed (a rolling upgrade ends no session).
    const nonce = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', sealKey, nonce);
    cipher.setAAD(Buffer.from(`ws1.${kid}`, 'ascii'));
    const older = Buffer.concat([nonce, cipher.update(JSON.stringify({ sid: 'c2lk', ...opened }), 'utf8'), cipher.final(), cipher.getAuthTag()]);
    expect(sessions.unseal(`ws1.${kid}.${older.toString('base64url')}`)).toMatchObject({ principal: 'seo-agent-7', kid: 'seo-agent-7-k1', key: plain.key, iatMs: 1, expMs: 2 });
  });

  it('a rotation keeps sessions open while the old key is published, and ends them once it leaves the ring (cached or not)', async () => {
    const { clock, ring, sessions } = await setup();
    const token = sessions.seal(plain);
    sessions.unseal(token);
    await ring.rotate();
    expect(sessions.unseal(token).principal).toBe('seo-agent-7');
    expect(new CallerSessions(ring).unseal(token).principal).toBe('seo-agent-7');
    clock.advance(ring.retiredKeyPublishedMs + 1);
    expect(() => sessions.unseal(token)).toThrow(expect.objectContaining({ code: 'CALLER_SESSION_INVALID' }));
    expect(() => new CallerSessions(ring).unseal(token)).toThrow(expect.objectContaining({ code: 'CALLER_SESSION_INVALID' }));
  });
});
