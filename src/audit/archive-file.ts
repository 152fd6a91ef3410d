import { closeSync, existsSync, fsyncSync, openSync, readSync, renameSync, rmSync, writeSync } from 'node:fs';
import { WritError } from '../errors.js';
import {
  isArchivePayload,
  isLegacyCheckpoint,
  rangesHash,
  samePayload,
  type ArchivePayload,
  type ArchiveRange,
  type SignedPayload,
  type StoredLegacyCheckpoint,
} from './checkpoint.js';
import { ChainVerifier, LEGACY_CHAIN, type ChainBreak } from './hash-chain.js';
import { ENTRY_KINDS, type StoredEntry } from './receipt.js';

/**
 * First line of an archive file: what it is, the signed manifest of its chain ranges, and the ranges (in
 * the order their entries follow). Version 1 files (the single global chain) hold a checkpoint instead.
 */
export type ArchiveHeader =
  | { writ_receipt_archive: 2; manifest: ArchivePayload & { jws: string }; ranges: ArchiveRange[] }
  | { writ_receipt_archive: 1; checkpoint: StoredLegacyCheckpoint };

/**
 * An archive file being written: JSON lines, the header first, then one entry per line exactly as
 * stored (seq, chain, pos, receipt_id, kind, body, prev_hash, hash), range after range. Written beside
 * its name and renamed into place once synced (`commit`), so a file under that name is always whole; an
 * existing file is refused.
 */
export class ArchiveWriter {
  private readonly partial: string;
  private fd: number | null;

  constructor(
    readonly file: string,
    header: ArchiveHeader,
  ) {
    if (existsSync(file)) throw new WritError('UNPROCESSABLE', `${file} exists: an archive is never written over another file`);
    this.partial = `${file}.partial`;
    try {
      this.fd = openSync(this.partial, 'wx', 0o600);
    } catch (e) {
      if ((e as { code?: unknown }).code !== 'EEXIST') throw e;
      // Another archive into the same file is running, or one was interrupted: its file is not this one's to remove.
      throw new WritError('UNPROCESSABLE', `${this.partial} exists: an archive into ${file} is being written, or one was interrupted (killed) before it finished; if none is running, remove it (nothing was deleted from the store for it) and archive again; nothing was archived`);
    }
    this.write(JSON.stringify(header));
  }

  append(entries: readonly StoredEntry[]): void {
    if (entries.length === 0) return;
    this.write(entries.map((e) => JSON.stringify({ seq: e.seq, chain: e.chain, pos: e.pos, receipt_id: e.receipt_id, kind: e.kind, body: e.body, prev_hash: e.prev_hash, hash: e.hash })).join('\n'));
  }

  commit(): void {
    fsyncSync(this.fd!);
    closeSync(this.fd!);
    this.fd = null;
    if (existsSync(this.file)) throw new WritError('UNPROCESSABLE', `${this.file} appeared while the archive was written`);
    renameSync(this.partial, this.file);
  }

  abort(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
    rmSync(this.partial, { force: true });
  }

  private write(line: string): void {
    writeSync(this.fd!, `${line}\n`);
  }
}

export interface ArchiveVerdict {
  ok: boolean;
  /** Entries checked and found sound. */
  entries: number;
  /** The chain ranges the file holds (as its header says), when the header could be read. */
  ranges?: ArchiveRange[];
  /** The manifest (or, in a version-1 file, the checkpoint) the header holds, and the key that signed it. */
  manifest?: { at: number; count: number; kid?: string };
  /** The file's format, when its header could be read: 1 holds a checkpoint of the single global chain, 2 a manifest of chain ranges. */
  version?: 1 | 2;
  chain?: string;
  firstBadPos?: number;
  problem?: string;
}

/**
 * Verifies an archive file offline: its header's signature (with `verifyJws`, e.g. the keys of a saved
 * /.well-known/jwks.json), that the header says what the JWS signs (the ranges by their hash), and that
 * the entries are, range after range, each chain linked from the range's prev_hash at `from` to its
 * hash at `to` (positions consecutive, hashes recomputed), `count` entries in all. A version-1 file is
 * one range of the legacy chain, ending at its checkpoint.
 */
export function verifyArchiveFile(file: string, verifyJws: (jws: string) => { payload: SignedPayload } | { problem: string }): ArchiveVerdict {
  const lines = readLines(file);
  const broken = (problem: string, extra: Partial<ArchiveVerdict> = {}): ArchiveVerdict => ({ ok: false, entries: 0, problem, ...extra });
  let header: ArchiveHeader;
  try {
    header = JSON.parse(lines.next().value ?? '') as ArchiveHeader;
  } catch {
    return broken('the first line is not a JSON archive header');
  }
  let ranges: ArchiveRange[];
  let count: number;
  let manifest: ArchiveVerdict['manifest'];
  if (header?.writ_receipt_archive === 2 && typeof header.manifest?.jws === 'string' && Array.isArray(header.ranges)) {
    const signed = verifyJws(header.manifest.jws);
    manifest = { at: header.manifest.at, count: header.manifest.count };
    if ('problem' in signed) return broken(signed.problem, { manifest, version: 2 });
    if (!isArchivePayload(signed.payload) || !samePayload(header.manifest, signed.payload)) return broken('the header\'s manifest differs from what its signature covers (it was altered)', { manifest, version: 2 });
    if (rangesHash(header.ranges) !== signed.payload.ranges_hash) return broken('the header\'s chain ranges are not the ones its manifest signed (they were altered)', { manifest, version: 2 });
    ranges = header.ranges;
    count = signed.payload.count;
  } else if (header?.writ_receipt_archive === 1 && typeof header.checkpoint?.jws === 'string') {
    const signed = verifyJws(header.checkpoint.jws);
    manifest = { at: header.checkpoint.at, count: header.checkpoint.count };
    if ('problem' in signed) return broken(signed.problem, { manifest, version: 1 });
    if (!isLegacyCheckpoint(signed.payload) || !samePayload(header.checkpoint, signed.payload)) return broken('the header\'s checkpoint differs from what its signature covers (it was altered)', { manifest, version: 1 });
    const cp = signed.payload;
    ranges = [{ chain: LEGACY_CHAIN, from: cp.archived_through - cp.count + 1, prev_hash: cp.prev_hash, to: cp.archived_through, hash: cp.hash }];
    count = cp.count;
  } else {
    return broken('the first line is not a Writ receipt archive header');
  }
  const version = header.writ_receipt_archive;
  const legacy = version === 1;
  /** What signed the ranges, in the words of the file's own format. */
  const signedBy = legacy ? 'checkpoint' : 'manifest';
  let entries = 0;
  const out = (bad: ChainBreak | { problem: string }): ArchiveVerdict => ({ ok: false, entries, ranges, manifest, version, ...('chain' in bad ? { chain: bad.chain, firstBadPos: bad.pos } : {}), problem: bad.problem });
  let n = 1;
  for (const r of ranges) {
    const v = new ChainVerifier(r.chain, r.from - 1, r.prev_hash);
    while (v.verified < r.to) {
      const next = lines.next();
      if (next.done) return out(v.bad(v.verified + 1, `the archive ends before entry ${v.verified + 1} of chain ${JSON.stringify(r.chain)} (its ${signedBy} says the range ends at ${r.to}: entries were removed at its end)`));
      n += 1;
      const e = entryOf(next.value, legacy);
      if (!e) return out(v.bad(v.verified + 1, `line ${n} is not an entry`));
      const bad = v.feed([e]);
      if (bad) return out(bad);
      entries += 1;
    }
    if (v.headHash !== r.hash) return out(v.bad(r.to, `chain ${JSON.stringify(r.chain)}: the range ends at a hash other than its ${signedBy}'s`));
  }
  if (!lines.next().done) return out({ problem: `line ${n + 1}: the archive holds more than its ${signedBy}'s ranges (entries were added at its end)` });
  if (entries !== count) return out({ problem: `the archive holds ${entries} entries, its ${signedBy} says ${count}` });
  return { ok: true, entries, ranges, manifest, version };
}

/** The file's lines (without the last one when empty), read in 1 MiB pieces: an archive may be larger than a string can be. */
function* readLines(file: string): Generator<string, undefined> {
  const fd = openSync(file, 'r');
  try {
    const buf = Buffer.alloc(1 << 20);
    let rest = Buffer.alloc(0);
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      let chunk = Buffer.concat([rest, buf.subarray(0, n)]);
      for (let nl = chunk.indexOf(10); nl >= 0; nl = chunk.indexOf(10)) {
        yield chunk.subarray(0, nl).toString('utf8');
        chunk = chunk.subarray(nl + 1);
      }
      rest = Buffer.from(chunk);
    }
    if (rest.length > 0) yield rest.toString('utf8');
  } finally {
    closeSync(fd);
  }
  return undefined;
}

/** One entry line; a version-1 line has no chain and pos: it is in the legacy chain at its seq. */
function entryOf(line: string, legacy: boolean): StoredEntry | undefined {
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null) return undefined;
  const { seq, receipt_id, kind, body, prev_hash, hash } = v;
  const chain = legacy ? LEGACY_CHAIN : v.chain;
  const pos = legacy ? seq : v.pos;
  if (typeof seq !== 'number' || typeof chain !== 'string' || typeof pos !== 'number' || typeof receipt_id !== 'string' || typeof body !== 'string' || typeof prev_hash !== 'string' || typeof hash !== 'string') return undefined;
  if (!(ENTRY_KINDS as readonly unknown[]).includes(kind)) return undefined;
  return { seq, chain, pos, receipt_id, kind: kind as StoredEntry['kind'], body, prev_hash, hash };
}
