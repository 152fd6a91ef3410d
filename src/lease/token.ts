import { hash } from 'node:crypto';
import { LEASE_TOKEN_SHAPE, LEASE_TOKEN_TIME_BYTES, newLeaseToken, pooledRandomBytes, type RandomBytes } from '../wire/lease-token.js';

export { pooledRandomBytes, type RandomBytes };

/** A new acquisition's bearer token, the SHA-256 hash that is all Writ stores of it, and its lease id. */
export interface LeaseCredentials {
  token: string;
  tokenHash: string;
  leaseId: string;
}

/**
 * A new token (src/wire/lease-token.ts: the time, then 26 fresh random bytes), its hash and its lease id.
 *
 * The lease id is derived from the token: `lease_` + base64url(the token's 6 time bytes, then the first
 * 10 bytes of SHA-256("writ lease id" + token)). So whoever holds a token can name its lease, and the
 * store finds the lease of a presented token by primary key (then compares the stored hash) instead of
 * keeping an index on token hashes, which cost one random page per acquisition. The id reveals nothing
 * usable about the token (a one-way hash, domain-separated from the stored token hash), and is no more
 * a secret than before. The time prefix keeps the ids of a burst of acquisitions close together in the
 * lease tables' primary keys, so a group commit writes a few shared pages instead of one page per lease.
 */
export function newLeaseCredentials(random: RandomBytes = pooledRandomBytes, nowMs = 0): LeaseCredentials {
  return credentialsOf(newLeaseToken(nowMs, random));
}

/**
 * The credentials of a token the caller made itself (an acquisition that may be asked again: see
 * AcquireRequest.token), or null if the string does not have a token's shape: 43 base64url characters
 * (32 bytes). Only the shape can be checked; the caller's random source is its own responsibility.
 */
export function leaseCredentialsOf(token: string): LeaseCredentials | null {
  return LEASE_TOKEN_SHAPE.test(token) ? credentialsOf(token) : null;
}

/** The lease id a token was issued with, or null if the string cannot be a token issued that way. */
export function leaseIdOfToken(token: string): string | null {
  return LEASE_TOKEN_SHAPE.test(token) ? leaseIdOf(token) : null;
}

function credentialsOf(token: string): LeaseCredentials {
  return { token, tokenHash: hashLeaseToken(token), leaseId: leaseIdOf(token) };
}

function leaseIdOf(token: string): string {
  const id = Buffer.alloc(16);
  Buffer.from(token, 'base64url').copy(id, 0, 0, LEASE_TOKEN_TIME_BYTES);
  hash('sha256', `writ lease id\0${token}`, 'buffer').copy(id, LEASE_TOKEN_TIME_BYTES, 0, 16 - LEASE_TOKEN_TIME_BYTES);
  return `lease_${id.toString('base64url')}`;
}

/** SHA-256, hex. Tokens carry 208 random bits, so an unsalted fast hash is enough. (`hash`, one call: no Hash object per token.) */
export function hashLeaseToken(token: string): string {
  return hash('sha256', token, 'hex');
}
