import { closeSync, existsSync, fsyncSync, openSync, readSync, renameSync, rmSync, writeSync } from 'node:fs';
import { WritError } from '../errors.js';
import { checkpointPayloadOf, sameCheckpoint, type CheckpointPayload, type StoredCheckpoint } from './checkpoint.js';
import { ChainVerifier, type ReceiptChainVerdict } from './hash-chain.js';
import { ENTRY_KINDS, type StoredEntry } from './receipt.js';

/** First line of an archive file: what it is, and the signed checkpoint it ends at. */
export interface ArchiveHeader {
  writ_receipt_archive: 1;
  checkpoint: StoredCheckpoint;
}

/**
 * An archive file being written: JSON lines, the header first, then one entry per line exactly as
 * stored (seq, receipt_id, kind, body, prev_hash, hash). Written beside its name and renamed into place
 * once synced (`commit`), so a file under that name is always whole; an existing file is refused.
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
    this.fd = openSync(this.partial, 'wx', 0o600);
    this.write(JSON.stringify(header));
  }

  append(entries: readonly StoredEntry[]): void {
    if (entries.length === 0) return;
    this.write(entries.map((e) => JSON.stringify({ seq: e.seq, receipt_id: e.receipt_id, kind: e.kind, body: e.body, prev_hash: e.prev_hash, hash: e.hash })).join('\n'));
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

export interface ArchiveVerdict extends ReceiptChainVerdict {
  /** The checkpoint the file says it ends at (when its header could be read). */
  checkpoint?: StoredCheckpoint & { kid?: string };
  /** seq of the archive's first entry. */
  from?: number;
}

/**
 * Verifies an archive file offline: its header's checkpoint signature (with `verifyJws`, e.g. the keys of
 * a saved /.well-known/jwks.json), that the header's columns are what the JWS signs, that the entries
 * form a chain from the checkpoint's prev_hash (seq consecutive, each hash recomputed), and that it ends
 * exactly at the checkpoint's archived_through with its hash, holding `count` entries.
 */
export function verifyArchiveFile(file: string, verifyJws: (jws: string) => { payload: CheckpointPayload } | { problem: string }): ArchiveVerdict {
  const lines = readLines(file);
  const broken = (problem: string, extra: Partial<ArchiveVerdict> = {}): ArchiveVerdict => ({ ok: false, entries: 0, head: '', problem, ...extra });
  let header: ArchiveHeader;
  try {
    header = JSON.parse(lines.next().value ?? '') as ArchiveHeader;
  } catch {
    return broken('the first line is not a JSON archive header');
  }
  if (header?.writ_receipt_archive !== 1 || typeof header.checkpoint?.jws !== 'string') return broken('the first line is not a Writ receipt archive header');
  const stored = header.checkpoint;
  const signed = verifyJws(stored.jws);
  if ('problem' in signed) return broken(signed.problem, { checkpoint: stored });
  const columns = checkpointPayloadOf(stored as unknown as Record<string, unknown>);
  if (!columns || !sameCheckpoint(columns, signed.payload)) return broken('the header\'s checkpoint differs from what its signature covers (it was altered)', { checkpoint: stored });
  const cp = signed.payload;
  const from = cp.archived_through - cp.count + 1;
  const verifier = new ChainVerifier(from - 1, cp.prev_hash);
  let n = 1;
  for (const line of lines) {
    n += 1;
    const e = entryOf(line);
    if (!e) return { ...verifier.broken(verifier.verified + 1, `line ${n} is not an entry`), checkpoint: stored, from };
    const bad = verifier.feed([e]);
    if (bad) return { ...bad, checkpoint: stored, from };
  }
  const end = verifier.finish(0);
  if (verifier.verified !== cp.archived_through || end.head !== cp.hash) {
    return { ...verifier.broken(verifier.verified + 1, `the archive ends at entry ${verifier.verified}, its checkpoint says ${cp.archived_through} (entries were removed or added at its end)`), checkpoint: stored, from };
  }
  return { ...end, checkpoint: stored, from };
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

function entryOf(line: string): StoredEntry | undefined {
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null) return undefined;
  const { seq, receipt_id, kind, body, prev_hash, hash } = v;
  if (typeof seq !== 'number' || typeof receipt_id !== 'string' || typeof body !== 'string' || typeof prev_hash !== 'string' || typeof hash !== 'string') return undefined;
  if (!(ENTRY_KINDS as readonly unknown[]).includes(kind)) return undefined;
  return { seq, receipt_id, kind: kind as StoredEntry['kind'], body, prev_hash, hash };
}
