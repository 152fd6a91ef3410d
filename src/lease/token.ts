import { createHash, randomFillSync } from 'node:crypto';

export type RandomBytes = (size: number) => Buffer;

/** A new acquisition's bearer token, the SHA-256 hash that is all Writ stores of it, and its lease id. */
export interface LeaseCredentials {
  token: string;
  tokenHash: string;
  leaseId: string;
}

const TOKEN_BYTES = 32;
const TIME_BYTES = 6;
const TOKEN_SHAPE = /^[A-Za-z0-9_-]{43}$/;

/**
 * A lease token is 32 bytes, base64url: the acquisition time (ms, 6 bytes) then 26 fresh random bytes
 * (208 bits: the bearer secret; only the token's hash is stored).
 *
 * The lease id is derived from the token: `lease_` + base64url(the same 6 time bytes, then the first
 * 10 bytes of SHA-256("writ lease id" + token)). So whoever holds a token can name its lease, and the
 * store finds the lease of a presented token by primary key (then compares the stored hash) instead of
 * keeping an index on token hashes, which cost one random page per acquisition. The id reveals nothing
 * usable about the token (a one-way hash, domain-separated from the stored token hash), and is no more
 * a secret than before. The time prefix keeps the ids of a burst of acquisitions close together in the
 * lease tables' primary keys, so a group commit writes a few shared pages instead of one page per lease.
 */
export function newLeaseCredentials(random: RandomBytes = pooledRandomBytes, nowMs = 0): LeaseCredentials {
  const raw = Buffer.alloc(TOKEN_BYTES);
  raw.writeUIntBE(Math.max(0, Math.floor(nowMs)) % 2 ** 48, 0, TIME_BYTES);
  random(TOKEN_BYTES - TIME_BYTES).copy(raw, TIME_BYTES);
  const token = raw.toString('base64url');
  return { token, tokenHash: hashLeaseToken(token), leaseId: leaseIdOf(token, raw) };
}

/** The lease id a token was issued with, or null if the string cannot be a token issued that way. */
export function leaseIdOfToken(token: string): string | null {
  return TOKEN_SHAPE.test(token) ? leaseIdOf(token, Buffer.from(token, 'base64url')) : null;
}

function leaseIdOf(token: string, raw: Buffer): string {
  const id = Buffer.alloc(16);
  raw.copy(id, 0, 0, TIME_BYTES);
  createHash('sha256').update('writ lease id\0').update(token, 'utf8').digest().copy(id, TIME_BYTES, 0, 16 - TIME_BYTES);
  return `lease_${id.toString('base64url')}`;
}

/** SHA-256, hex. Tokens carry 208 random bits, so an unsalted fast hash is enough. */
export function hashLeaseToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let poolOffset = 0;

/**
 * node:crypto random bytes, drawn from a 4 KiB buffer refilled by randomFillSync when used up (as
 * Node does for randomUUID): one call into OpenSSL per ~150 acquisitions instead of one per call.
 * Each byte is handed out once; the caller gets its own copy.
 */
export function pooledRandomBytes(size: number): Buffer {
  if (size > POOL_BYTES) return randomFillSync(Buffer.alloc(size));
  if (poolOffset + size > pool.length) {
    pool = randomFillSync(Buffer.allocUnsafe(POOL_BYTES));
    poolOffset = 0;
  }
  const out = Buffer.from(pool.subarray(poolOffset, poolOffset + size));
  poolOffset += size;
  return out;
}
