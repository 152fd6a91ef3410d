import { createHash, randomBytes as cryptoRandomBytes } from 'node:crypto';

export type RandomBytes = (size: number) => Buffer;

/** A lease token: 32 random bytes, base64url. The bearer secret; only its hash is stored. */
export function newLeaseToken(random: RandomBytes = cryptoRandomBytes): string {
  return random(32).toString('base64url');
}

export function newLeaseId(random: RandomBytes = cryptoRandomBytes): string {
  return `lease_${random(16).toString('base64url')}`;
}

/** SHA-256, hex. Tokens carry 256 bits of entropy, so an unsalted fast hash is enough. */
export function hashLeaseToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}
