import { createHash, randomBytes as cryptoRandomBytes } from 'node:crypto';

export type RandomBytes = (size: number) => Buffer;

/** A lease token: 32 random bytes, base64url. The bearer secret; only its hash is stored. */
export function newLeaseToken(random: RandomBytes = cryptoRandomBytes): string {
  return random(32).toString('base64url');
}

/**
 * A lease id: the acquisition time (ms, 6 bytes) then 10 random bytes, base64url. Not a secret (the
 * token is); the time prefix keeps the ids of a burst of acquisitions close together in the lease
 * tables' indexes, so a group commit writes a few shared index pages instead of one page per lease.
 */
export function newLeaseId(random: RandomBytes = cryptoRandomBytes, nowMs = 0): string {
  const id = Buffer.alloc(16);
  id.writeUIntBE(Math.max(0, Math.floor(nowMs)) % 2 ** 48, 0, 6);
  random(10).copy(id, 6);
  return `lease_${id.toString('base64url')}`;
}

/** SHA-256, hex. Tokens carry 256 bits of entropy, so an unsalted fast hash is enough. */
export function hashLeaseToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}
