import { randomFillSync } from 'node:crypto';

/**
 * The lease token's format, shared by the server (which makes a token for an acquisition that brings
 * none) and its clients (which may make their own: POST /v1/leases `token`, so that asking again after
 * a lost answer is safe).
 *
 * A token is 32 bytes, base64url (43 characters): the acquisition time (ms, 6 bytes) then 26 fresh
 * random bytes (208 bits: the bearer secret; Writ stores only the token's hash). The time prefix keeps
 * the lease ids of a burst of acquisitions close together in the store's primary keys (see
 * src/lease/token.ts); it is no secret, and a client's clock is as good as the server's for it.
 */
export const LEASE_TOKEN_BYTES = 32;
export const LEASE_TOKEN_TIME_BYTES = 6;
export const LEASE_TOKEN_SHAPE = /^[A-Za-z0-9_-]{43}$/;

export type RandomBytes = (size: number) => Buffer;

/** A new lease token, from a cryptographically secure random source. One per lease, never reused. */
export function newLeaseToken(nowMs: number = Date.now(), random: RandomBytes = pooledRandomBytes): string {
  const raw = Buffer.alloc(LEASE_TOKEN_BYTES);
  raw.writeUIntBE(Math.max(0, Math.floor(nowMs)) % 2 ** 48, 0, LEASE_TOKEN_TIME_BYTES);
  random(LEASE_TOKEN_BYTES - LEASE_TOKEN_TIME_BYTES).copy(raw, LEASE_TOKEN_TIME_BYTES);
  return raw.toString('base64url');
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
