import { WritError } from '../errors.js';
import { formatFencingEpochs, type FencingEpochs } from '../wire/fencing-header.js';
import { PlainHttpClient, type PlainResponse } from './http-request.js';
import { samplePostAdapter, type ResourceKeyAdapter } from './resource-key.js';

export interface UpstreamRead {
  exists: boolean;
  /** The resource's current version (the upstream's revision); 0 when it does not exist yet. */
  version: number;
  fields: Record<string, unknown>;
}

export interface UpstreamWrite {
  fields: Record<string, unknown>;
  /**
   * Sent as `If-Match: "<expectedVersion>"`: the version the writer read; 0 creates. The sample
   * upstream checks it per field: only the fields written must be unchanged since this version.
   */
  expectedVersion: number;
  /**
   * Fencing epoch per coordination key (`{ 'wp:post:1024#title': 5 }`), sent as `Writ-Fencing-Epoch`
   * `key=epoch` pairs sorted by key; omitted when null (an unfenced, optimistic write).
   */
  fencing: FencingEpochs | null;
  principal: string;
  /** Sent as `Writ-Receipt-Id`; the upstream's idempotency key and what `lookup` finds the write by. */
  receiptId: string;
  /** Defaults to the client's timeout. */
  timeoutMs?: number;
  /**
   * Sent as `Writ-Deadline` (ms since the epoch): the upstream must refuse the write if it arrives
   * later, so that after the deadline "not applied" is final (what reconciliation relies on).
   */
  deadline?: number;
}

/**
 * How a write ended, as far as the caller can know. `timeout` and `network_error` with
 * `maybeApplied: true` are the uncertain ones: leave the receipt PENDING and reconcile by receipt id.
 */
export type UpstreamWriteResult =
  | { kind: 'applied'; status: number; version: number; replayed: boolean }
  /** `changedFields`: the written fields someone changed after `expectedVersion` ([] if the upstream did not say). */
  | { kind: 'conflict'; status: 412; conflict: true; currentVersion: number; changedFields: string[] }
  /** `key`: the coordination key whose epoch was stale (null if the upstream did not say). */
  | { kind: 'stale_epoch'; status: 409; staleEpoch: true; key: string | null; highestEpoch: number }
  | { kind: 'refused'; status: number; code: string | null; message: string }
  /** A 5xx answer: the upstream (or a proxy before it) failed, which does not say whether the write was applied. */
  | { kind: 'server_error'; status: number; maybeApplied: true; message: string }
  | { kind: 'timeout'; status: null; maybeApplied: true; message: string }
  | { kind: 'network_error'; status: null; maybeApplied: boolean; message: string };

/** What the gateway needs from an upstream. `HttpUpstreamClient` implements it; tests may fake it. */
export interface UpstreamClient {
  /** Throws (UNKNOWN_RESOURCE) when this upstream cannot address the key; the gateway asks before it records an intent. */
  check(resourceKey: string): void;
  read(resourceKey: string): Promise<UpstreamRead>;
  write(resourceKey: string, write: UpstreamWrite): Promise<UpstreamWriteResult>;
  /** Whether the write with this receipt id was applied (reconciliation of PENDING receipts). */
  lookup(resourceKey: string, receiptId: string): Promise<{ applied: boolean; revision?: number }>;
}

export interface HttpUpstreamClientOptions {
  /** e.g. `http://127.0.0.1:4100` */
  baseUrl: string;
  /** Per request; default 5000 ms. */
  timeoutMs?: number;
  adapter?: ResourceKeyAdapter;
}

/**
 * An upstream over HTTP with the sample upstream's protocol (ETag / If-Match revisions, Writ-*
 * headers). `read` and `lookup` throw UPSTREAM_TIMEOUT / UPSTREAM_FAILED when the upstream cannot be
 * asked; `write` never throws for upstream trouble, it returns a result the gateway can switch on.
 */
export class HttpUpstreamClient implements UpstreamClient {
  private readonly baseUrl: string;
  /** The base URL's path, without a trailing slash ('' for an origin). */
  private readonly basePath: string;
  private readonly timeoutMs: number;
  private readonly adapter: ResourceKeyAdapter;
  private readonly http: PlainHttpClient;

  constructor(options: HttpUpstreamClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.basePath = new URL(this.baseUrl).pathname.replace(/\/+$/, '');
    this.http = new PlainHttpClient(this.baseUrl);
    this.timeoutMs = options.timeoutMs ?? 5000;
    this.adapter = options.adapter ?? samplePostAdapter;
  }

  check(resourceKey: string): void {
    this.urlOf(resourceKey);
  }

  /**
   * The resource's URL on this upstream, exactly as its adapter mapped it: a path the URL parser would
   * rewrite (a dot segment, a backslash, a `?` or `#`, percent-encoded dots) would send the write, or a
   * reconciliation lookup, somewhere else than the key names (`/posts/..` is `/`). UNKNOWN_RESOURCE.
   */
  private urlOf(resourceKey: string, suffix = ''): string {
    const path = this.adapter.pathOf(resourceKey) + suffix;
    const url = this.baseUrl + path;
    let parsed: URL | null = null;
    try {
      parsed = new URL(url);
    } catch {
      // refused below
    }
    const same = parsed !== null && parsed.search === '' && parsed.hash === '' && parsed.pathname === this.basePath + path;
    if (!same || !path.startsWith('/') || path.split('/').some(unsafeSegment)) {
      throw new WritError('UNKNOWN_RESOURCE', `this upstream cannot address '${resourceKey}': its path would not be the one its key names`);
    }
    return url;
  }

  async read(resourceKey: string): Promise<UpstreamRead> {
    const url = this.urlOf(resourceKey);
    const { status, body } = await this.ask(url);
    if (status === 404) return { exists: false, version: 0, fields: {} };
    if (status !== 200) throw new WritError('UPSTREAM_FAILED', `upstream answered ${status} to GET ${url}`, { status });
    const post = body as { revision: number; fields: Record<string, unknown> };
    return { exists: true, version: post.revision, fields: post.fields };
  }

  async write(resourceKey: string, write: UpstreamWrite): Promise<UpstreamWriteResult> {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'if-match': `"${write.expectedVersion}"`,
      'writ-principal': write.principal,
      'writ-receipt-id': write.receiptId,
      ...(write.deadline !== undefined ? { 'writ-deadline': String(write.deadline) } : {}),
    };
    if (write.fencing) headers['writ-fencing-epoch'] = formatFencingEpochs(write.fencing);
    // Outside the try: a key this upstream cannot address is a refusal, not an unknown outcome.
    const url = this.urlOf(resourceKey);
    let response: PlainResponse;
    try {
      response = await this.http.request(url, { method: 'PUT', headers, body: JSON.stringify({ fields: write.fields }), timeoutMs: write.timeoutMs ?? this.timeoutMs });
    } catch (e) {
      return failure(e);
    }
    const { status, body } = response;
    if (status === 200 || status === 201) {
      // An answer that says "applied" without a version Writ can record (a non-negative safe integer) is not
      // understood: the outcome is unknown, as for an answer cut off, and settled from the upstream's record.
      if (!isVersion(body.revision)) {
        return { kind: 'network_error', status: null, maybeApplied: true, message: `the upstream answered ${status} without a revision (a non-negative integer)` };
      }
      return { kind: 'applied', status, version: body.revision, replayed: response.headers['writ-replayed'] === 'true' };
    }
    if (status === 412) {
      const changed = Array.isArray(body.changed_fields) ? body.changed_fields.filter((f): f is string => typeof f === 'string') : [];
      return { kind: 'conflict', status, conflict: true, currentVersion: Number(body.current_revision), changedFields: changed };
    }
    if (status === 409 && body.code === 'STALE_FENCING_EPOCH') {
      const key = typeof body.key === 'string' ? body.key : null;
      return { kind: 'stale_epoch', status, staleEpoch: true, key, highestEpoch: Number(body.highest) };
    }
    if (status >= 500) {
      return { kind: 'server_error', status, maybeApplied: true, message: typeof body.message === 'string' ? body.message : `upstream answered ${status}` };
    }
    return {
      kind: 'refused',
      status,
      code: typeof body.code === 'string' ? body.code : null,
      message: typeof body.message === 'string' ? body.message : `upstream answered ${status}`,
    };
  }

  async lookup(resourceKey: string, receiptId: string): Promise<{ applied: boolean; revision?: number }> {
    const url = this.urlOf(resourceKey, `/writes/${encodeURIComponent(receiptId)}`);
    const { status, body } = await this.ask(url);
    if (status !== 200) throw new WritError('UPSTREAM_FAILED', `upstream answered ${status} to GET ${url}`, { status });
    const found = body as { applied?: unknown; revision?: unknown };
    if (found.applied === false) return { applied: false };
    if (found.applied === true && isVersion(found.revision)) return { applied: true, revision: found.revision };
    throw new WritError('UPSTREAM_FAILED', `upstream answered GET ${url} with neither {applied: false} nor {applied: true, revision: <non-negative integer>}`, { status });
  }

  private async ask(url: string): Promise<PlainResponse> {
    try {
      return await this.http.request(url, { method: 'GET', timeoutMs: this.timeoutMs });
    } catch (e) {
      const f = failure(e);
      throw new WritError(f.kind === 'timeout' ? 'UPSTREAM_TIMEOUT' : 'UPSTREAM_FAILED', `GET ${url}: ${f.message}`);
    }
  }
}

/** A resource version an upstream may report: a non-negative safe integer. */
function isVersion(v: unknown): v is number {
  return Number.isSafeInteger(v) && (v as number) >= 0;
}

/** A path segment that is, or decodes to, a dot segment or holds a (back)slash: a server may route it elsewhere. */
function unsafeSegment(segment: string): boolean {
  let decoded: string;
  try {
    decoded = decodeURIComponent(segment);
  } catch {
    return true;
  }
  return decoded === '.' || decoded === '..' || decoded.includes('/') || decoded.includes('\\');
}

/** Refused connections never reached the upstream; anything else may have been applied. */
function failure(e: unknown): Extract<UpstreamWriteResult, { kind: 'timeout' | 'network_error' }> {
  const err = e as { message?: string; kind?: string; code?: string };
  if (err.kind === 'timeout') return { kind: 'timeout', status: null, maybeApplied: true, message: 'upstream timed out' };
  const code = err.code;
  const message = `${err.message ?? String(e)}${code && !String(err.message).includes(code) ? ` (${code})` : ''}`;
  const neverSent = code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EAI_AGAIN';
  return { kind: 'network_error', status: null, maybeApplied: !neverSent, message };
}
