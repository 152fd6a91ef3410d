import { createPrivateKey, createPublicKey, type JsonWebKey, type KeyObject } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, type JSONWebKeySet, type JWK } from 'jose';
import type { Clock } from '../clock.js';
import { WritError } from '../errors.js';
import { deriveSealKey } from './caller-session.js';
import { DECISION_ALG } from './decision-claims.js';
import type { DecisionKeyResolver } from './decision-verify.js';
import { damagedKeysMessage, dirStamp, ensureKeyDir, listKids, readKeyFiles, removeKeyFile, writeKeyFile, type DamagedKeyFile, type KeyFile } from './key-files.js';

export interface KeyRingOptions {
  /**
   * How long a retired key stays in the JWKS. Give it at least the longest decision lifetime plus the
   * verifiers' clock tolerance, so every decision a key signed expires before its public key
   * disappears. Default 5 min.
   */
  maxTokenTtlMs?: number;
  /**
   * Make the signing key when the directory has none in use (default true: a server's first start). A
   * command that only reads passes false, so that it signs nothing with a key no server has.
   */
  makeSigningKey?: boolean;
}

export interface SigningKey {
  kid: string;
  privateKey: KeyObject;
  /** Its public half: the very object `verificationKey(kid)` returns while the key is published. */
  publicKey: KeyObject;
}

interface LoadedKey {
  file: KeyFile;
  privateKey: KeyObject;
  publicKey: KeyObject;
  publicJwk: JWK;
  /** Its caller-session seal key, derived at its first use (caller-session.ts deriveSealKey). */
  sealKey?: Buffer;
}

/**
 * How often (by the injected clock) the ring looks for another process's rotation: a stat of the
 * directory, and a re-list when its mtime looks unchanged. So a process may go on signing with a key
 * for up to this long after another one retired it, and a retired key stays published this much longer
 * than the longest decision lifetime.
 */
const RELIST_EVERY_MS = 1000;

/**
 * The decision signing keys (Ed25519), persisted as private JWK files in a directory (`<dataDir>/keys/`).
 *
 * Several processes may share the directory. Each keeps the keys in memory and re-reads the directory
 * when a `kid` it does not know is asked for (another process rotated), and otherwise looks at it (its
 * mtime, then its listing) at most once a second (by the clock) before signing or verifying: a signature
 * costs no file system call, and a retired key stays in the JWKS that second longer than the longest
 * decision lifetime, so a process that signs with it in that second still hands out a token that
 * verifies until it expires. The JWKS itself is read fresh (a stat) on every call.
 * The current key is the newest one not retired. Two processes rotating at the very same moment can
 * leave two unretired keys; both stay valid and the newest signs, and the next rotation retires both.
 */
export class KeyRing implements DecisionKeyResolver {
  private keys = new Map<string, LoadedKey>();
  /** The newest unretired key as of the last reload: what signs. */
  private signing: SigningKey | undefined;
  private stamp = -1;
  private kidList = '';
  private listedAt = Number.NEGATIVE_INFINITY;
  readonly maxTokenTtlMs: number;
  /**
   * How long a retired key stays published (in the JWKS, and verifying): the longest decision lifetime,
   * and the second in which a process sharing the directory may not have seen the rotation yet.
   */
  readonly retiredKeyPublishedMs: number;

  private constructor(
    readonly dir: string,
    private readonly clock: Clock,
    options: KeyRingOptions,
  ) {
    this.maxTokenTtlMs = options.maxTokenTtlMs ?? 300_000;
    this.retiredKeyPublishedMs = this.maxTokenTtlMs + RELIST_EVERY_MS;
  }

  /**
   * Opens the ring in `dir` (by convention `<dataDir>/keys`), creating the directory (0700) and the
   * first key when there is none (unless `makeSigningKey` is false: then neither).
   */
  static async open(dir: string, clock: Clock, options: KeyRingOptions = {}): Promise<KeyRing> {
    const ring = new KeyRing(dir, clock, options);
    // A ring that only verifies leaves a missing directory missing (it reads as no keys until one appears).
    if (options.makeSigningKey !== false) ensureKeyDir(ring.dir);
    ring.reload();
    // A ring that may sign refuses a damaged key file rather than sign beside it (or make a new key in its
    // place): what the lost key signed would stop verifying, unsaid. One that only verifies goes on
    // without it; its caller says so (`damaged`).
    if (ring.damaged.length > 0 && options.makeSigningKey !== false) throw new WritError('UNPROCESSABLE', damagedKeysMessage(ring.damaged), { damaged: ring.damaged.map((d) => d.path) });
    if (!ring.signing && options.makeSigningKey !== false) {
      await ring.rotate();
      ring.madeSigningKey = true;
    }
    return ring;
  }

  /** Files of the directory named as keys that cannot be read or parsed, as of the last reload (none are used). */
  damaged: readonly DamagedKeyFile[] = [];

  /** Whether opening it made the signing key (the directory had none in use). */
  madeSigningKey = false;

  /** Whether it has a key to sign with (one was opened with makeSigningKey false on a directory without one). */
  get canSign(): boolean {
    return this.signing !== undefined;
  }

  /**
   * The key that signs new decisions. No file system call on the hot path: the directory is looked at
   * once every RELIST_EVERY_MS (this process's own rotation is seen at once).
   */
  current(): SigningKey {
    if (this.clock.now() - this.listedAt >= RELIST_EVERY_MS) this.refresh();
    if (!this.signing) throw new WritError('INTERNAL', `no unretired signing key in ${this.dir}`);
    return this.signing;
  }

  /**
   * The public keys that verify decisions: every unretired key, and each retired key until
   * `maxTokenTtlMs` after its retirement. Newest first.
   */
  jwks(): JSONWebKeySet {
    if (dirStamp(this.dir) !== this.stamp) this.reload();
    const now = this.clock.now();
    return {
      keys: [...this.keys.values()]
        .filter((k) => this.published(k, now))
        .sort(newestFirst)
        .map((k) => ({ ...k.publicJwk })),
    };
  }

  /** The public key for `kid` if it is published now; re-reads the directory once for an unknown kid. */
  verificationKey(kid: string): KeyObject | undefined {
    const now = this.clock.now();
    // A known kid too, once a second (no stat per verification): another process's rotation retires
    // it (and its grace period then ends) for a server that only verifies, never signs.
    if (!this.keys.has(kid) || now - this.listedAt >= RELIST_EVERY_MS) this.refresh();
    const key = this.keys.get(kid);
    return key && this.published(key, now) ? key.publicKey : undefined;
  }

  /**
   * The key that seals and opens caller session tokens for the signing key `kid` (derived once from its
   * private bytes, then kept), while that key is published: undefined once it has left the ring.
   */
  sessionSealKey(kid: string): Buffer | undefined {
    if (this.verificationKey(kid) === undefined) return undefined;
    const key = this.keys.get(kid)!;
    key.sealKey ??= deriveSealKey(Buffer.from(key.file.jwk.d!, 'base64url'), kid);
    return key.sealKey;
  }

  /**
   * Makes a new key current and retires every other unretired key now (they stay in the JWKS for the
   * grace period). Private keys retired longer than the grace period are deleted.
   */
  async rotate(): Promise<SigningKey> {
    const now = this.clock.now();
    const { privateKey } = await generateKeyPair('Ed25519', { extractable: true });
    const jwk = await exportJWK(privateKey);
    const kid = await calculateJwkThumbprint(jwk);
    ensureKeyDir(this.dir);
    this.reload();
    // spread-then-add: once per key generated
    writeKeyFile(this.dir, { kid, alg: 'EdDSA', created_at: now, retired_at: null, jwk: { ...jwk, kid } });
    for (const key of this.keys.values()) {
      const { file } = key;
      if (file.kid === kid) continue;
      if (file.retired_at === null) writeKeyFile(this.dir, { ...file, retired_at: now });
      else if (!this.published(key, now)) removeKeyFile(this.dir, file.kid);
    }
    this.reload();
    return this.current();
  }

  private published(key: LoadedKey, now: number): boolean {
    return key.file.retired_at === null || now < key.file.retired_at + this.retiredKeyPublishedMs;
  }

  /** Re-reads the keys if the directory changed: its mtime moved, or (same mtime tick) its listing. */
  private refresh(): void {
    if (dirStamp(this.dir) !== this.stamp) return this.reload();
    this.listedAt = this.clock.now();
    if (listKids(this.dir).join(',') !== this.kidList) this.reload();
  }

  private reload(): void {
    // Stamp first: a change racing with the read below moves the mtime again and is seen next time.
    this.stamp = dirStamp(this.dir);
    this.listedAt = this.clock.now();
    this.kidList = listKids(this.dir).join(',');
    const next = new Map<string, LoadedKey>();
    const { files, damaged } = readKeyFiles(this.dir);
    for (const file of files) {
      const known = this.keys.get(file.kid);
      if (known) {
        next.set(file.kid, { ...known, file });
        continue;
      }
      let privateKey: KeyObject;
      try {
        privateKey = createPrivateKey({ key: file.jwk as JsonWebKey, format: 'jwk' });
      } catch (e) {
        damaged.push({ path: `${this.dir}/${file.kid}.json`, reason: `its jwk is not a usable Ed25519 key (${(e as Error).message})` });
        continue;
      }
      const { kty, crv, x } = file.jwk;
      next.set(file.kid, {
        file,
        privateKey,
        publicKey: createPublicKey(privateKey),
        publicJwk: { kty, crv, x, kid: file.kid, alg: DECISION_ALG, use: 'sig' },
      });
    }
    this.keys = next;
    this.damaged = damaged;
    const newest = [...next.values()].filter((k) => k.file.retired_at === null).sort(newestFirst)[0];
    this.signing = newest && { kid: newest.file.kid, privateKey: newest.privateKey, publicKey: newest.publicKey };
  }
}

function newestFirst(a: LoadedKey, b: LoadedKey): number {
  return b.file.created_at - a.file.created_at || (a.file.kid < b.file.kid ? 1 : a.file.kid > b.file.kid ? -1 : 0);
}
