import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { JWK } from 'jose';

/**
 * The on-disk form of the key ring: one file `<kid>.json` (mode 0600) per signing key in a directory
 * (mode 0700) shared by every process of one deployment. Files are replaced atomically (temp + rename)
 * so a reader never sees half a key.
 */
export interface KeyFile {
  kid: string;
  alg: 'EdDSA';
  created_at: number;
  retired_at: number | null;
  /** Private Ed25519 JWK (kty OKP, crv Ed25519, x, d). */
  jwk: JWK;
}

const KEY_FILE = /^([A-Za-z0-9_-]{8,128})\.json$/;

export function ensureKeyDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
}

/** The kids present in the directory, sorted (cheap: names only); none where there is no directory. */
export function listKids(dir: string): string[] {
  const kids: string[] = [];
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return kids;
    throw e;
  }
  for (const name of names) {
    const m = KEY_FILE.exec(name);
    if (m) kids.push(m[1]!);
  }
  return kids.sort();
}

/** Directory mtime: a rename into the directory changes it, so it is a cheap "something changed" hint (-1: no directory). */
export function dirStamp(dir: string): number {
  try {
    return statSync(dir).mtimeMs;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return -1;
    throw e;
  }
}

/** A file in the key directory named as a key (`<kid>.json`) that cannot be read or is not a key: what signed with it no longer verifies. */
export interface DamagedKeyFile {
  path: string;
  /** Why it cannot be used, e.g. "not JSON (Unexpected token …)". */
  reason: string;
}

/**
 * The key files of the directory, and those named as keys that cannot be read or parsed (`damaged`):
 * never dropped in silence, since the decisions and checkpoints a lost key signed stop verifying.
 */
export function readKeyFiles(dir: string): { files: KeyFile[]; damaged: DamagedKeyFile[] } {
  const files: KeyFile[] = [];
  const damaged: DamagedKeyFile[] = [];
  for (const kid of listKids(dir)) {
    const path = join(dir, `${kid}.json`);
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue; // pruned by another process meanwhile
      damaged.push({ path, reason: `cannot be read (${(e as Error).message})` });
      continue;
    }
    const file = parseKeyFile(text, kid);
    if (typeof file === 'string') damaged.push({ path, reason: file });
    else files.push(file);
  }
  return { files, damaged };
}

/** The key file, or why it is none. */
function parseKeyFile(text: string, kid: string): KeyFile | string {
  let v: Partial<KeyFile>;
  try {
    v = JSON.parse(text) as Partial<KeyFile>;
  } catch (e) {
    return `not JSON (${(e as Error).message})`;
  }
  if (typeof v !== 'object' || v === null) return 'not a key file (not a JSON object)';
  const jwk = v.jwk;
  // A file that is not an Ed25519 private key named by its own kid is not ours to use.
  if (v.kid !== kid || v.alg !== 'EdDSA' || typeof v.created_at !== 'number') return `not a key file of this name (kid ${JSON.stringify(v.kid)}, alg ${JSON.stringify(v.alg)}, created_at ${JSON.stringify(v.created_at)})`;
  if (!jwk || jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string' || typeof jwk.d !== 'string') return 'its jwk is not an Ed25519 private key (kty OKP, crv Ed25519, x, d)';
  return { kid, alg: 'EdDSA', created_at: v.created_at, retired_at: typeof v.retired_at === 'number' ? v.retired_at : null, jwk };
}

/** What to say of damaged key files: which, why, and what to do. */
export function damagedKeysMessage(damaged: readonly DamagedKeyFile[]): string {
  const which = damaged.map((d) => `${d.path} ${d.reason}`).join('; ');
  return `${damaged.length === 1 ? 'a signing key file is' : 'signing key files are'} damaged: ${which}. Restore ${damaged.length === 1 ? 'it' : 'them'} from a backup of the data directory (or the keys/ of another replica); or, if lost for good, move ${damaged.length === 1 ? 'it' : 'them'} aside out of the keys directory: a new key is then made, and what the lost key signed (decisions, receipt checkpoints) no longer verifies`;
}

export function writeKeyFile(dir: string, file: KeyFile): void {
  // A key the ring has handed out must survive a crash, and a reader never sees half a file.
  writePrivateFile(join(dir, `${file.kid}.json`), JSON.stringify(file, null, 2) + '\n', { overwrite: true });
}

/**
 * Writes a secret (a private key) to `path`: mode 0600 exactly, whatever the umask; whole or not at all,
 * through a temporary file in the same directory that is renamed over `path`, or, with `overwrite:
 * false`, linked to it, so an existing file is never replaced (EEXIST); durable (the file and then its
 * directory are fsynced). On a filesystem without hard links the new file is created with O_EXCL
 * instead. The key ring's files, the governance admin credential and `writ keys new` go through here.
 */
export function writePrivateFile(path: string, text: string, options: { overwrite: boolean }): void {
  const temp = join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    writeSynced(temp, text);
    if (options.overwrite) renameSync(temp, path);
    else {
      try {
        linkSync(temp, path);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS') throw e;
        writeSynced(path, text); // no hard links here: O_EXCL on the file itself
      }
    }
  } finally {
    rmSync(temp, { force: true }); // renamed away already, or the link's spare name, or a failed write
  }
  const dir = openSync(dirname(path), 'r');
  try {
    fsyncSync(dir); // the new name survives a crash too
  } finally {
    closeSync(dir);
  }
}

/** Creates `file` (O_EXCL, 0600 exactly) holding `text`, fsynced. */
function writeSynced(file: string, text: string): void {
  const fd = openSync(file, 'wx', 0o600);
  try {
    writeFileSync(fd, text); // loops until every byte is written
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  chmodSync(file, 0o600); // the umask may have narrowed it further, never widened: make it exact
}

export function removeKeyFile(dir: string, kid: string): void {
  rmSync(join(dir, `${kid}.json`), { force: true });
}
