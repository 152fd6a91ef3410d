/**
 * The lease stream: `GET /v1/leases/stream`, a WebSocket on which a caller takes, renews and releases
 * leases without an HTTP request and a caller assertion per operation. The upgrade request carries
 * the caller assertion (verified and its jti spent, as for any request); from then on the connection
 * is the caller, as a PostgreSQL or Redis connection is its authenticated user. Each operation runs
 * the same use case as its HTTP route (src/service/leases.ts), with the same checks, answers and
 * error codes, and is answered only once what it did is durable.
 *
 * Messages are JSON text, one request or answer each (src/wire/v1.ts `LeaseStreamRequest`,
 * `LeaseStreamReply`). Requests may be pipelined: each is answered when it finishes, with its `id`.
 */
import AjvCompiler from '@fastify/ajv-compiler';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import WebSocket, { type RawData } from 'ws';
import { callerNoLongerValid, type AuthenticatedCaller } from '../../decision/index.js';
import { WritError, type ErrorCode } from '../../errors.js';
import { abandonGrant, acquireLeases, CallerNoLongerValid, forOneOperation, releaseLease, renewLease, type LeaseOutcome, type LeaseRequestInput, type WritContext } from '../../service/index.js';
import type { LeaseGrant, LeaseRelease, LeaseRenewal, LeaseStreamReply, LeaseStreamRequest } from '../../wire/v1.js';
import { AUTHENTICATED, errorResponses } from '../components.js';
import { assertWellFormedJson, jsonDepthExceeds } from '../input-guard.js';
import { problemOf } from '../problem.js';
import { STRICT_AJV_OPTIONS } from '../query-coercion.js';
import { leaseBody, releaseBody, renewBody } from '../schemas.js';
import { leaseGrantToWire, leaseRenewalToWire } from '../wire.js';

export const LEASE_STREAM_PATH = '/v1/leases/stream';
/** Requests one stream may have in flight at once; one more is answered OVERLOADED at once. */
export const LEASE_STREAM_MAX_INFLIGHT = 256;
/**
 * Answers a stream may have written and not yet sent (its peer not reading them) before it stops reading
 * messages: it reads again once they are sent. Every message is answered, a refusal too, so without it a
 * client that sends and never reads would have the server buffer an answer per message (some 200 bytes
 * for a 2-byte message) until the ping timeout cut it off.
 */
export const LEASE_STREAM_MAX_UNSENT_BYTES = 1024 * 1024;

declare module 'fastify' {
  interface FastifyRequest {
    /** The lease stream's caller, authenticated by the upgrade request. */
    leaseStreamCaller?: AuthenticatedCaller;
  }
}

export interface LeaseStreamOptions {
  /** Takes one message from the principal's rate (RATE_LIMITED otherwise), as an HTTP request would. */
  admit(principal: string): void;
  /** Counts one answered operation whose answer went out (metrics). */
  answered(op: LeaseStreamRequest['op'] | 'invalid', status: number): void;
}

const id = { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'the caller\'s, echoed in the answer' } as const;
const leaseId = { type: 'string', minLength: 1, maxLength: 256 } as const;
const opSchemas = {
  acquire: { ...leaseBody, required: ['id', 'op', ...leaseBody.required], properties: { id, op: { const: 'acquire' }, ...leaseBody.properties } },
  renew: { ...renewBody, required: ['id', 'op', 'lease_id', ...renewBody.required], properties: { id, op: { const: 'renew' }, lease_id: leaseId, ...renewBody.properties } },
  release: { ...releaseBody, type: 'object', required: ['id', 'op', 'lease_id', 'token'], properties: { id, op: { const: 'release' }, lease_id: leaseId, ...releaseBody.properties } },
} as const;
type Op = keyof typeof opSchemas;
const OPS = Object.keys(opSchemas) as Op[];

/** One validator per operation, compiled with the app's strict body options (no coercion, no defaults). */
function compileValidators() {
  const compile = AjvCompiler()({}, { customOptions: STRICT_AJV_OPTIONS });
  return Object.fromEntries(OPS.map((op) => [op, compile({ schema: opSchemas[op], method: 'GET', url: LEASE_STREAM_PATH, httpPart: 'body' })])) as Record<Op, ReturnType<typeof compile>>;
}

export function registerLeaseStream(app: FastifyInstance, options: LeaseStreamOptions): void {
  const ctx = app.writ;
  const validators = compileValidators();
  const streams = new Set<{ drain(): void; socket: WebSocket }>();
  /** Streams open (or opening) per principal. */
  const openPerPrincipal = new Map<string, number>();
  app.writDrain.onDrain(() => {
    for (const s of streams) s.drain();
  });
  // A peer is pinged every interval, and cut off when two intervals in a row passed with no pong read
  // from it (its leases lapse at their TTL, as they would anyway). Two, not one: timers run before I/O in
  // a turn of the event loop, so after one stall longer than the interval a pong that did arrive may not
  // have been read yet.
  const missed = new WeakMap<WebSocket, number>();
  const pinger = setInterval(() => {
    for (const { socket } of streams) {
      const n = missed.get(socket) ?? 0;
      if (n >= 2) {
        socket.terminate();
        continue;
      }
      missed.set(socket, n + 1);
      socket.ping();
    }
  }, ctx.config.leaseStreamPingMs);
  pinger.unref();
  app.addHook('onClose', async () => clearInterval(pinger));

  /** Refused before the upgrade (the answer is an HTTP problem): not a WebSocket, or no valid assertion. */
  const authenticate = async (request: FastifyRequest) => {
    if (!request.ws) throw new WritError('MALFORMED_REQUEST', `${LEASE_STREAM_PATH} is a WebSocket: open it with an upgrade request (Connection: Upgrade, Upgrade: websocket)`);
    // The upgrade's answer is hijacked: the request stops counting for the drain when the stream opens,
    // or when its socket closes without one (a handshake `ws` refuses, a client gone during the checks).
    // (An upgrade injected in a test, @fastify/websocket's injectWS, has no socket.)
    const socket = (request.raw.socket as typeof request.raw.socket | undefined) ?? null;
    socket?.once('close', () => app.writDrain.upgraded(request));
    if (request.headers.authorization === undefined) throw new WritError('UNAUTHENTICATED', 'the lease stream is opened with a caller assertion (Authorization: Bearer …); a console session cannot open it');
    const caller = await app.spentCaller(request);
    // Gone while it was checked (its 'close' has fired already): nothing to count, no one to answer.
    if (socket?.destroyed) throw new WritError('OVERLOADED', 'the client closed the connection before the lease stream opened');
    request.leaseStreamCaller = caller;
    // A principal's streams are bounded (each holds a socket): one is counted from here until its socket
    // closes (an upgrade injected in a test has none, and is not counted).
    if (!socket) return;
    const open = openPerPrincipal.get(caller.principal) ?? 0;
    if (open >= ctx.config.maxLeaseStreamsPerPrincipal) {
      throw new WritError('RATE_LIMITED', `${caller.principal} has ${open} lease streams open, the most one principal may have (WRIT_LEASE_STREAMS_PER_PRINCIPAL); close one, or use the ones it has`, { retry_after_ms: 1000 });
    }
    openPerPrincipal.set(caller.principal, open + 1);
    socket.once('close', () => {
      const n = (openPerPrincipal.get(caller.principal) ?? 1) - 1;
      if (n > 0) openPerPrincipal.set(caller.principal, n);
      else openPerPrincipal.delete(caller.principal);
    });
  };

  app.route({
    method: 'GET',
    url: LEASE_STREAM_PATH,
    schema: {
      operationId: 'leaseStream', tags: ['Coordination'],
      // A caller assertion only: a console session cannot open it.
      security: [{ callerAssertion: [] }],
      summary: 'Lease operations over one WebSocket, authenticated once by the upgrade request',
      description: [
        'Upgrade to a WebSocket with a caller assertion in `Authorization` (verified, its jti spent).',
        'Then send JSON text messages, one request each: `{"id": 1, "op": "acquire", "decisions": […], "ttl_ms"?, "wait_ms"?, "preempt"?, "token"?}`,',
        '`{"id": 2, "op": "renew", "lease_id": …, "token": …, "ttl_ms"?}` or `{"id": 3, "op": "release", "lease_id": …, "token": …}`.',
        'Each is answered `{"id", "ok": true, "result"}` with the body of POST /v1/leases, POST /v1/leases/{id}/renew or DELETE /v1/leases/{id},',
        'or `{"id", "ok": false, "problem"}` with the same problem and code, once what it did is durable. Requests may be pipelined;',
        `answers come as each finishes (at most ${LEASE_STREAM_MAX_INFLIGHT} in flight, one more is OVERLOADED). The stream stays authenticated while`,
        'its principal and the key that signed the assertion stay registered and unrevoked (checked at every request, and again when a queued acquire\'s',
        'turn comes, which is then not granted; otherwise UNAUTHENTICATED and the stream closes with 1008). A shutting-down server answers new requests OVERLOADED and closes with 1001 once the ones in flight are answered.',
      ].join(' '),
      response: {
        101: { description: 'Switching Protocols: the stream is open', type: 'null' },
        ...errorResponses(['MALFORMED_REQUEST', ...AUTHENTICATED, 'OVERLOADED']),
      },
    },
    preHandler: authenticate,
    // Reached only when the request was not an upgrade, which `authenticate` refuses first.
    handler: async () => {
      throw new WritError('MALFORMED_REQUEST', `${LEASE_STREAM_PATH} is a WebSocket`);
    },
    wsHandler: (socket: WebSocket, request: FastifyRequest) => {
      app.writDrain.upgraded(request);
      const caller = request.leaseStreamCaller!;
      let inflight = 0;
      let closing = false;
      const tcp = (request.raw.socket as typeof request.raw.socket | undefined) ?? null;
      /** Set once the stream's authentication ended: every later request gets it, and the stream closes. */
      let ended: WritError | null = null;
      /**
       * Sends `reply` (the answer to an `op` with HTTP `status`), counted in the metrics once it goes out, as
       * an HTTP answer is (fastify counts it at 'finish'): one handed to an open socket, a grant once written.
       * `undelivered` runs instead when it cannot go out: the socket is no longer OPEN, or its write failed
       * (a grant given up is counted as abandoned, not as answered).
       */
      const send = (reply: LeaseStreamReply, op: Op | 'invalid', status: number, undelivered?: () => void) => {
        if (socket.readyState !== socket.OPEN) {
          undelivered?.();
          return;
        }
        // A write callback only where there is something to give up (a grant): ws and the socket take the
        // plain path for every other answer.
        if (undelivered === undefined) {
          options.answered(op, status);
          socket.send(JSON.stringify(reply));
        } else socket.send(JSON.stringify(reply), (err) => {
          if (err) undelivered();
          else options.answered(op, status);
        });
        if (tcp && !socket.isPaused && socket.bufferedAmount > LEASE_STREAM_MAX_UNSENT_BYTES) {
          // Back-pressure: no more messages are read (so none answered) until the answers written are sent.
          // What is read meanwhile is bounded: the messages of the chunk being parsed, and the requests in flight.
          socket.pause();
          tcp.once('drain', () => socket.resume());
        }
      };
      const refuse = (requestId: number | null, op: Op | 'invalid', e: unknown) => {
        const error = e instanceof WritError ? e : new WritError('INTERNAL', 'internal error');
        if (error.code === 'INTERNAL') request.log.error({ err: e }, 'lease stream: internal error');
        const problem = problemOf(error.code, error.message, error.details);
        problem.instance = LEASE_STREAM_PATH;
        send({ id: requestId, ok: false, problem }, op, problem.status);
      };
      const endIfIdle = () => {
        if (closing && !ended && inflight === 0) socket.close(1001, 'Writ is shutting down');
      };
      const stream = {
        socket,
        drain() {
          closing = true;
          endIfIdle();
        },
      };
      streams.add(stream);
      // Aborted when the stream closes (as POST /v1/leases does when its connection closes): its acquisitions still waiting leave the queue, and one granted
      // after the close is given back (or kept for its caller's token): see acquireLeases' callerGone.
      const gone = new AbortController();
      socket.on('pong', () => missed.set(socket, 0));
      socket.on('close', () => {
        streams.delete(stream);
        gone.abort();
      });
      // ws's 'close' fires only once the closing handshake is over and the TCP connection has ended: up to
      // its 30 s close timer after a close frame from a peer that then hangs. From the moment the socket
      // leaves OPEN no answer goes out, so the caller is gone from then: when a close frame arrives (ws
      // answers it by calling close() on the socket), when Writ closes or cuts the stream, when the peer
      // ends or breaks the connection. (An answer that still fails to go out is given up by `send`'s caller.)
      if (socket instanceof StreamSocket) socket.leavingOpen = () => gone.abort();
      for (const event of ['end', 'error', 'close'] as const) tcp?.once(event, () => gone.abort());
      if (app.writDrain.draining()) stream.drain();

      /** The principal and the key its stream was opened with, still registered and unrevoked. */
      const stillAuthenticated = async (op: WritContext) => {
        const graph = await op.graph.current();
        const why = callerNoLongerValid(caller, (id) => graph.principal(id));
        if (why) {
          closing = true;
          ended ??= new WritError('UNAUTHENTICATED', `${why}: the lease stream is closed`);
          throw ended;
        }
      };

      // Every answer the same shape (grant null but for an acquisition): one hidden class where it is read.
      const run = async (req: LeaseStreamRequest): Promise<{ result: LeaseGrant | LeaseRenewal | LeaseRelease; grant: { grant: LeaseOutcome; input: LeaseRequestInput } | null }> => {
        // The caller's re-check and the use case ask the graph for changes once between them (OperationGraph).
        const op = forOneOperation(ctx);
        await stillAuthenticated(op);
        switch (req.op) {
          case 'acquire': {
            const input: LeaseRequestInput = { decisions: req.decisions };
            if (req.ttl_ms !== undefined) input.ttl_ms = req.ttl_ms;
            if (req.wait_ms !== undefined) input.wait_ms = req.wait_ms;
            if (req.preempt !== undefined) input.preempt = req.preempt;
            if (req.token !== undefined) input.token = req.token;
            let grant: LeaseOutcome;
            try {
              grant = await acquireLeases(op, caller.principal, input, { callerGone: gone.signal, authenticated: caller });
            } catch (e) {
              // Refused as it was granted, its caller no longer valid (it waited in the queue): the stream ends as at a request.
              if (e instanceof CallerNoLongerValid) {
                closing = true;
                ended ??= new WritError('UNAUTHENTICATED', `${e.message}; the lease stream is closed`);
                throw ended;
              }
              throw e;
            }
            return { result: leaseGrantToWire(grant), grant: { grant, input } };
          }
          case 'renew':
            return { result: leaseRenewalToWire(await renewLease(op, caller.principal, req.lease_id, req.token, req.ttl_ms)), grant: null };
          case 'release':
            return { result: await releaseLease(op, caller.principal, req.lease_id, req.token), grant: null };
        }
      };

      /** A grant whose answer did not go out: given up as one granted after the stream closed (see abandonGrant). */
      const abandon = ({ grant, input }: { grant: LeaseOutcome; input: LeaseRequestInput }) => {
        const release = app.writDrain.hold();
        abandonGrant(ctx, caller.principal, input, grant)
          .catch((e: unknown) => request.log.error({ err: e, lease_id: grant.lease_id }, 'lease stream: a grant whose answer did not go out could not be given back (it lapses at its TTL)'))
          .finally(release);
      };

      socket.on('message', (data: RawData, isBinary: boolean) => {
        // Every message counts against the principal's rate, one that cannot be read too.
        let limited: unknown = null;
        try {
          options.admit(caller.principal);
        } catch (e) {
          limited = e;
        }
        let req: LeaseStreamRequest;
        try {
          req = parseRequest(data, isBinary, ctx.config.jsonMaxDepth, validators);
        } catch (e) {
          refuse(e instanceof StreamRequestError ? e.requestId : null, 'invalid', limited ?? (e instanceof StreamRequestError ? e.error : e));
          return;
        }
        if (limited) {
          refuse(req.id, req.op, limited);
          return;
        }
        if (closing) {
          refuse(req.id, req.op, ended ?? new WritError('OVERLOADED', 'this Writ is shutting down: the lease stream closes once its requests in flight are answered; open another (another replica, or this one once restarted)', { retry_after_ms: 1000 }));
          return;
        }
        if (inflight >= LEASE_STREAM_MAX_INFLIGHT) {
          refuse(req.id, req.op, new WritError('OVERLOADED', `${inflight} requests are in flight on this lease stream, the most it takes at once; wait for answers`, { retry_after_ms: 100 }));
          return;
        }
        inflight++;
        const release = app.writDrain.hold();
        run(req).then(
          ({ result, grant }) => {
            send({ id: req.id, ok: true, result }, req.op, 200, grant === null ? undefined : () => abandon(grant));
          },
          (e: unknown) => refuse(req.id, req.op, e),
        ).finally(() => {
          inflight--;
          release();
          // An authentication that ended closes the stream once its answer is out.
          if (ended && inflight === 0) socket.close(1008, 'the stream\'s authentication ended');
          else endIfIdle();
        });
      });
    },
  });
}

/** A refusal of a message, with the id it named when that could be read. */
class StreamRequestError extends Error {
  constructor(readonly requestId: number | null, readonly error: WritError) {
    super(error.message);
  }
}

function malformed(requestId: number | null, message: string, code: ErrorCode = 'MALFORMED_REQUEST', details?: Record<string, unknown>): StreamRequestError {
  return new StreamRequestError(requestId, new WritError(code, message, details));
}

/** One message → one valid request, or a StreamRequestError saying what is wrong with it. */
function parseRequest(data: RawData, isBinary: boolean, maxDepth: number, validators: ReturnType<typeof compileValidators>): LeaseStreamRequest {
  if (isBinary) throw malformed(null, 'lease stream messages are JSON text, not binary');
  const text = (Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data)).toString('utf8');
  if (jsonDepthExceeds(text, maxDepth)) throw malformed(null, `the message nests objects and arrays more than ${maxDepth} deep`, 'NESTING_TOO_DEEP', { max_depth: maxDepth });
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    throw malformed(null, 'the message is not valid JSON');
  }
  if (typeof message !== 'object' || message === null || Array.isArray(message)) throw malformed(null, 'the message must be a JSON object');
  const m = message as Record<string, unknown>;
  const requestId = Number.isSafeInteger(m.id) && (m.id as number) >= 0 ? (m.id as number) : null;
  if (requestId === null) throw malformed(null, 'message/id: must be a non-negative integer (the caller\'s, echoed in the answer)');
  if (typeof m.op !== 'string' || !(OPS as string[]).includes(m.op)) throw malformed(requestId, `message/op: must be one of ${OPS.join(', ')}`);
  try {
    assertWellFormedJson(text, m, 'message');
  } catch (e) {
    throw new StreamRequestError(requestId, e as WritError);
  }
  const validate = validators[m.op as Op];
  if (!validate(m)) {
    const first = (validate as unknown as { errors?: { instancePath: string; message?: string; params?: Record<string, unknown> }[] }).errors?.[0];
    const extra = first?.params && 'additionalProperty' in first.params ? ` "${String(first.params.additionalProperty)}"` : '';
    throw malformed(requestId, `message${first?.instancePath ?? ''}: ${first?.message ?? 'invalid'}${extra}`);
  }
  return m as unknown as LeaseStreamRequest;
}

/**
 * The lease stream's WebSocket (ws's `WebSocket` option of its server, src/http/app.ts): ws's, telling
 * `leavingOpen` when close() or terminate() is called, which is when a socket leaves OPEN (ws calls close()
 * itself when a peer's close frame arrives). One class for every socket, with the field made in its
 * constructor, so that setting it changes no socket's shape: the first version of this hook replaced the
 * two methods on each socket, and the stream's pair cost 3–6% more instructions (bench/instructions.sh).
 */
export class StreamSocket extends WebSocket {
  leavingOpen: (() => void) | undefined = undefined;

  override close(code?: number, data?: string | Buffer): void {
    this.leavingOpen?.();
    super.close(code, data);
  }

  override terminate(): void {
    this.leavingOpen?.();
    super.terminate();
  }
}
