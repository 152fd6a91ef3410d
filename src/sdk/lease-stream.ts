import type { JWK } from 'jose';
import WebSocket from 'ws';
import { newLeaseToken } from '../wire/lease-token.js';
import type { LeaseGrant, LeaseRelease, LeaseRenewal, LeaseStreamReply, LeaseStreamRequest } from '../wire/v1.js';
import { createCallerAssertion } from './assertion.js';
import { problemError, refusalError } from './refusal.js';

export interface LeaseStreamOptions {
  /** e.g. http://127.0.0.1:4000 (the stream is ws:// or wss:// on the same host and port). */
  baseUrl: string;
  principal: string;
  privateJwk: JWK;
  audience?: string;
  /** How long opening may take (connect, upgrade, Writ's checks) before it fails; default 10 000 ms. */
  handshakeTimeoutMs?: number;
  /**
   * How long a call may go unanswered (on top of its own `waitMs`) before the connection is taken for
   * dead and cut: every call pending then rejects with LeaseStreamClosedError. Default 30 000 ms.
   */
  requestTimeoutMs?: number;
}

/** What renew and release need of a lease. */
export interface LeaseHandle {
  lease_id: string;
  token: string;
}

/** Distributes Omit over a union (each request without its `id`, which the stream assigns). */
type WithoutId<T> = T extends unknown ? Omit<T, 'id'> : never;

/**
 * Leases over one WebSocket (`GET /v1/leases/stream`), authenticated once when it opens: no HTTP
 * request and no caller assertion per operation, which is what a controller taking and giving back
 * many leases wants. Same answers and typed errors as the HTTP calls. Calls may overlap (they are
 * pipelined on the connection). If the connection ends before a call is answered, that call rejects
 * with LeaseStreamClosedError: its outcome is unknown, as after a dropped HTTP connection. An
 * acquisition may have been granted: its error carries the lease token it was sent with, and asked
 * again with that token (over a stream or HTTP) Writ answers with that lease, never a second one.
 */
export class LeaseStream {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve(v: unknown): void; reject(e: unknown): void; token: string | null }>();
  /** Resolves when the connection has ended, with its close code and reason. */
  readonly closed: Promise<{ code: number; reason: string }>;

  private constructor(
    private readonly socket: WebSocket,
    private readonly requestTimeoutMs: number,
  ) {
    this.closed = new Promise((resolve) => {
      socket.on('close', (code, reason) => {
        const why = reason.toString('utf8');
        for (const [id, p] of this.pending) p.reject(new LeaseStreamClosedError(code, why, id, p.token));
        this.pending.clear();
        resolve({ code, reason: why });
      });
    });
    socket.on('message', (data) => this.answer(data.toString()));
  }

  /** Opens a stream; a refused upgrade (e.g. 401 UNAUTHENTICATED) rejects with its typed error. */
  static async open(options: LeaseStreamOptions): Promise<LeaseStream> {
    const assertion = await createCallerAssertion({ principal: options.principal, privateJwk: options.privateJwk, audience: options.audience ?? 'writ' });
    const url = `${options.baseUrl.replace(/\/+$/, '').replace(/^http/, 'ws')}/v1/leases/stream`;
    const socket = new WebSocket(url, { headers: { authorization: `Bearer ${assertion}` }, perMessageDeflate: false, handshakeTimeout: options.handshakeTimeoutMs ?? 10_000 });
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('unexpected-response', (_req, res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => {
          const retryAfter = res.headers['retry-after'];
          reject(refusalError(res.statusCode ?? 0, body, Array.isArray(retryAfter) ? retryAfter[0] : retryAfter));
          socket.terminate();
        });
      });
      socket.once('error', reject);
    });
    socket.on('error', () => undefined); // the 'close' that follows rejects what is pending
    return new LeaseStream(socket, options.requestTimeoutMs ?? 30_000);
  }

  /**
   * Takes leases for these decision tokens (the body of POST /v1/leases, without `id`). `token`: the
   * lease's token, as for WritClient.acquireLease (a new one, newLeaseToken(), by default): every
   * acquisition carries one, so that one whose answer the connection lost (LeaseStreamClosedError,
   * whose `token` it is) can be asked again with it and is answered with the lease granted.
   */
  acquire(decisions: string[], options: { ttlMs?: number; waitMs?: number; preempt?: boolean; token?: string } = {}): Promise<LeaseGrant> {
    return this.call({
      op: 'acquire', decisions,
      ...(options.ttlMs !== undefined ? { ttl_ms: options.ttlMs } : {}),
      ...(options.waitMs !== undefined ? { wait_ms: options.waitMs } : {}),
      ...(options.preempt ? { preempt: true } : {}),
      token: options.token ?? newLeaseToken(),
    }) as Promise<LeaseGrant>;
  }

  renew(lease: LeaseHandle, ttlMs?: number): Promise<LeaseRenewal> {
    return this.call({ op: 'renew', lease_id: lease.lease_id, token: lease.token, ...(ttlMs !== undefined ? { ttl_ms: ttlMs } : {}) }) as Promise<LeaseRenewal>;
  }

  release(lease: LeaseHandle): Promise<LeaseRelease> {
    return this.call({ op: 'release', lease_id: lease.lease_id, token: lease.token }) as Promise<LeaseRelease>;
  }

  /** Closes the connection; calls still unanswered reject with LeaseStreamClosedError. */
  async close(): Promise<void> {
    if (this.socket.readyState !== WebSocket.CLOSED) this.socket.close(1000);
    await this.closed;
  }

  private call(request: WithoutId<LeaseStreamRequest>): Promise<unknown> {
    const token = request.op === 'acquire' ? request.token ?? null : null;
    if (this.socket.readyState !== WebSocket.OPEN) {
      // Closing or closed: refused with the code the connection ends with (1001 when Writ shuts down).
      return this.closed.then(({ code, reason }) => Promise.reject(new LeaseStreamClosedError(code, reason, null, token)));
    }
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      // A connection that stopped answering without closing (half-open after a partition) is cut, so
      // that its calls end (and withLease goes on over HTTP) instead of waiting for TCP to give up.
      const timer = setTimeout(() => this.socket.terminate(), this.requestTimeoutMs + ('wait_ms' in request ? request.wait_ms ?? 0 : 0));
      const settle = () => clearTimeout(timer);
      this.pending.set(id, { resolve: (v) => (settle(), resolve(v)), reject: (e) => (settle(), reject(e)), token });
      this.socket.send(JSON.stringify({ id, ...request }));
    });
  }

  private answer(text: string): void {
    let reply: LeaseStreamReply;
    try {
      reply = JSON.parse(text) as LeaseStreamReply;
    } catch {
      return;
    }
    // Not an answer (a proxy's or a broken peer's message), or one to a message Writ could not read
    // (this SDK never sends one): nothing to settle.
    if (typeof reply !== 'object' || reply === null || typeof reply.id !== 'number') return;
    const p = this.pending.get(reply.id);
    if (!p) return;
    this.pending.delete(reply.id);
    if (reply.ok) p.resolve(reply.result);
    else {
      const problem = typeof reply.problem === 'object' && reply.problem !== null ? reply.problem : ({} as Record<string, unknown>);
      p.reject(problemError(typeof problem.status === 'number' ? problem.status : 0, problem));
    }
  }
}

/**
 * The stream ended before this call was answered (a connection error, like fetch's on a dropped HTTP
 * connection; not a WritApiError, since Writ answered nothing). `closeCode` 1001: Writ shut down
 * (open a stream again, to another replica or once it has restarted). `requestId` null: the call was
 * never sent. `token`: an acquisition's lease token (null for a renewal or a release; a bearer secret:
 * keep it out of logs): ask again with it, and the answer is the lease if this call was granted one.
 */
export class LeaseStreamClosedError extends Error {
  constructor(readonly closeCode: number, readonly closeReason: string, readonly requestId: number | null, readonly token: string | null = null) {
    super(`the lease stream closed (${closeCode}${closeReason ? `: ${closeReason}` : ''})${requestId === null ? '' : ` before request ${requestId} was answered; its outcome is unknown`}`);
    this.name = 'LeaseStreamClosedError';
  }
}
