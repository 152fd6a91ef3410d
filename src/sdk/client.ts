import { decodeJwt, decodeProtectedHeader, type JWK, type JSONWebKeySet } from 'jose';
import { ERROR_CATALOGUE, WritError, type ErrorCode } from '../errors.js';
import { verifyDecision } from '../decision/decision-verify.js';
import type { DecisionClaims } from '../decision/decision-claims.js';
import type { Capabilities, Decision, DecisionRequest, DelegationBody, Edge, EdgeRevoked, EdgeWritten, ExplainRequest, Explanation, LeaseGrant, LeaseRelease, LeaseRenewal, Receipt, ScopeInput, WireTime } from '../wire/v1.js';
import { formatFencingEpochs } from '../wire/fencing-header.js';
import { createCallerAssertion } from './assertion.js';
import { backoffDelay, type BackoffOptions } from './backoff.js';
import { newLeaseToken } from '../wire/lease-token.js';
import { AlreadyExistsError, DelegationNotRevokedError, errorFromWritError, ForbiddenError, LeaseExpiredError, LeaseOutcomeUnknownError, UnprocessableError, WritApiError, WriteOutcomeUnknownError } from './errors.js';
import { LeaseStream, LeaseStreamClosedError, type LeaseHandle, type LeaseStreamOptions } from './lease-stream.js';
import { refusalError } from './refusal.js';
import { CallerSessions } from './session.js';

/**
 * The agent SDK: signs its own caller assertions, asks for decisions, takes leases and renews them
 * in the background, writes through the gateway with the right headers. Imports nothing of the server.
 */
export interface WritClientOptions {
  /** e.g. http://127.0.0.1:4000 */
  baseUrl: string;
  principal: string;
  /** The principal's private key (its public half is registered in Writ). */
  privateJwk: JWK;
  /** Audience of caller assertions (default 'writ') and of decisions (default 'writ-gateway'). */
  audience?: string;
  gatewayAudience?: string;
  fetch?: typeof fetch;
  /**
   * Sign requests with a caller session instead of one Ed25519/P-256 assertion each: the client opens a
   * session (`POST /v1/sessions`, with one assertion) on its first call, then signs each request with an
   * HMAC (HS256) token bound to its method and path; it opens the next one when a fifth of the session's
   * life is left, and once more when Writ refuses a session it no longer knows (CALLER_SESSION_INVALID:
   * that request had no effect, and is sent again). `ttlMs`: the session's life (default: Writ's maximum).
   * A Writ without sessions (404, or sessions off) is asked again after 5 min, then 10, 20, 40 and every hour
   * until a session opens (one probe at a time, in the background); assertions meanwhile. The lease stream
   * authenticates with an assertion.
   * Default on; `false` signs an assertion for every request.
   */
  sessions?: boolean | { ttlMs?: number };
}

export type { Capabilities, ChainEdge, ChainVerdict, Decision, DecisionRequest, DelegationBody, Edge, EdgeRevoked, EdgeWritten, ExplainRequest, Explanation, Incident, ScopeInput, LeaseGrant, LeaseRecord, LeaseRelease, LeaseRenewal, LeaseStreamReply, LeaseStreamRequest, Obligations, Receipt, ReceiptEntry, WireTime } from '../wire/v1.js';

/** A lease as POST /v1/leases grants it (what renew and release need); withLease keeps `expires_at` current. */
export type Lease = Omit<LeaseGrant, 'preempted'>;

export interface ActRequest {
  /** The allow that authorizes this write: the Decision, or its token. */
  decision: Decision | string;
  /** Default: the decision's (the gateway refuses a write that differs from its decision). */
  action?: string;
  /** Default: the decision's canonical key. */
  resource?: string;
  /** Default: the decision's fields; `payload` must carry exactly these. */
  fields?: string[];
  payload: Record<string, unknown>;
  expected_version?: number;
  lease?: Lease | null;
  idempotencyKey?: string;
}

/** A write in a lease's scope: `decision` may be left out when the scope was taken for one decision (it is that one). */
export type ScopedActRequest = Omit<ActRequest, 'lease' | 'decision'> & { decision?: Decision | string };

/** A delegation this client's principal gives (`delegate`, `withDelegation`). */
export interface DelegateRequest {
  /** Who receives it: a registered principal (a sub-agent, say). */
  to: string;
  /** What it gives: at most what this principal holds now, on every dimension (else AttenuationViolationError, naming each one). */
  scope: ScopeInput;
  /** Why, in words an auditor reads (`writ why` shows it). */
  reason: string;
  /** How long it lasts from now (by this machine's clock, rounded up to whole ms); or give `expires_at`. */
  ttlMs?: number;
  /** RFC 3339, or whole ms since the epoch. */
  expires_at?: WireTime | number;
  not_before?: WireTime | number;
  /** How many more hops the delegate may pass it on; default 0. */
  max_depth?: number;
  /**
   * The edge's id; default one Writ makes. The same id with the same request is answered with the edge
   * made before, so an `id` with an `expires_at` makes a retry safe (a `ttlMs` counts from each call: a
   * retry with one differs, and is AlreadyExistsError).
   */
  id?: string;
}

export interface LeaseOptions {
  /** Lease duration; renewed in the background every third of it. Default 15 000 ms. */
  ttlMs?: number;
  /**
   * How long one acquisition may wait in Writ's queue (ordered by governed priority, then age) for a
   * busy key: the answer comes as soon as the holder releases (or its lease expires), not after the
   * holder's whole TTL. Default: the time left until `deadlineMs`, at most 60 000 ms per request
   * (Writ's default `max_wait`; the SDK asks again while the deadline allows). `0` asks once and
   * retries RESOURCE_BUSY on the client side instead, with full-jitter backoff over Retry-After.
   */
  waitMs?: number;
  /**
   * Overall deadline for taking the lease (ms from now); default 30 000 ms. Until then a busy key is waited
   * for, and so is a Writ that sheds load or is shutting down (OVERLOADED, RATE_LIMITED: after their
   * Retry-After) or cannot be reached (refused or dropped connections, as while it restarts). A Writ that
   * answers nothing (paused, partitioned) is given up 2 s past it (or past a longer `waitMs`): a
   * TimeoutError (DOMException), the acquisition's outcome unknown (a lease granted lapses at its TTL).
   */
  deadlineMs?: number;
  preempt?: boolean;
  backoff?: BackoffOptions;
  /** Called before each retry sleep after a refusal from Writ (for tests and logs); not for a connection that failed. */
  onRetry?: (attempt: number, delayMs: number, error: WritApiError) => void;
  /**
   * Take, renew and release over this lease stream (`openLeaseStream()`) instead of one HTTP request
   * each; if it closes meanwhile, renewals and the release go over HTTP.
   */
  stream?: LeaseStream;
}

export interface LeaseScope {
  /** The lease held; null when no decision needed one (`obligations.lease_required` false: e.g. a WRITE_OPTIMISTIC field). */
  lease: Lease | null;
  /**
   * Aborted when the lease is known lost: a renewal refused (preempted, expired, released), a write through
   * `act` refused because the lease is gone (at once), or renewals failing until it would have expired;
   * `signal.reason` is the typed error. Never aborts without a lease.
   */
  signal: AbortSignal;
  /** Sends a write under this lease (sets the lease and fencing headers). */
  act(request: ScopedActRequest): Promise<Receipt>;
}

/** What `runExclusive` hands the job. */
export interface JobScope {
  /** The job's coordination key (e.g. `job:daily-seo-publish`). */
  jobKey: string;
  lease: Lease;
  /** The fencing epoch of this run: pass it to anything the job writes that can check it (larger = newer run). */
  fencingEpoch: number;
  /** Aborted once the lease is known lost or preempted (as `LeaseScope.signal`): stop the job. */
  signal: AbortSignal;
  /** A write through the gateway under this run's lease (`decision` defaults to the run's). */
  act(request: ScopedActRequest): Promise<Receipt>;
}

export interface RunExclusiveOptions extends Omit<LeaseOptions, 'waitMs'> {
  /** Environment of the `run_job` decision; default 'production'. */
  environment?: string;
  /**
   * Context of the `run_job` decision: its risk, and the approval (`createApprovalAssertion`) a risky job
   * needs in production. Without an approval a job that needs one throws ForbiddenError with
   * `problem.approval_missing` true.
   */
  context?: DecisionRequest['context'];
  /**
   * Wait this long for a running job to finish (Writ's queue) and then run; default 0: when another
   * runner holds the job, return `{ ran: false }` at once, so a scheduled tick runs once, not once per runner.
   */
  waitMs?: number;
}

export type RunExclusiveResult<T> = { ran: true; value: T; fencingEpoch: number } | { ran: false; holder: string | null };

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
/** Refusals that did nothing and say to ask again after Retry-After (the error table's words). */
const ASK_AGAIN_LATER: ReadonlySet<ErrorCode> = new Set(['OVERLOADED', 'RATE_LIMITED']);
/** Connection errors (Node's, and undici's for a socket the server closed) of a Writ that is down or restarting. */
const CONNECTION_LOST = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET']);
/** How long past its deadline (or its wait) an acquisition's answer may still be on its way. */
const ANSWER_GRACE_MS = 2_000;
/** Writ's default `max_wait` for one queued acquisition. */
const SERVER_MAX_WAIT_MS = 60_000;


export class WritClient {
  private readonly base: string;
  private readonly doFetch: typeof fetch;
  private jwks: JSONWebKeySet | null = null;
  private readonly sessions: CallerSessions | null;

  constructor(private readonly options: WritClientOptions) {
    this.base = options.baseUrl.replace(/\/+$/, '');
    this.doFetch = options.fetch ?? fetch;
    const sessions = options.sessions ?? true;
    this.sessions = sessions
      ? new CallerSessions({
        base: this.base, principal: options.principal, privateJwk: options.privateJwk, audience: options.audience ?? 'writ', fetch: this.doFetch,
        ...(typeof sessions === 'object' && sessions.ttlMs !== undefined ? { ttlMs: sessions.ttlMs } : {}),
      })
      : null;
  }

  get principal(): string {
    return this.options.principal;
  }

  /** Sends one request, signed over the caller session (or with a fresh caller assertion); problem+json answers become typed errors. */
  request<T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
    return this.send(method, path, body, headers);
  }

  /**
   * `request`, abandoned when `signal` aborts. With sessions, a request Writ refused for its session
   * (which it no longer knows, or sessions turned off) had no effect: it is sent once more, with a new
   * session or an assertion.
   */
  private async send<T>(method: string, path: string, body: unknown, headers: Record<string, string>, signal?: AbortSignal, unanswered?: (cause: unknown) => unknown): Promise<T> {
    const sessions = this.sessions;
    if (sessions === null) {
      const assertion = await createCallerAssertion({ principal: this.options.principal, privateJwk: this.options.privateJwk, audience: this.options.audience ?? 'writ' });
      return this.sendAs(`Bearer ${assertion}`, method, path, body, headers, signal, unanswered);
    }
    const session = await sessions.current();
    try {
      return await this.sendAs(await sessions.authorization(method, path, session), method, path, body, headers, signal, unanswered);
    } catch (e) {
      if (session === null || !sessions.refused(session, e)) throw e;
      const next = await sessions.current();
      return this.sendAs(await sessions.authorization(method, path, next), method, path, body, headers, signal, unanswered);
    }
  }

  /** One request with this `Authorization`; problem+json answers become typed errors. */
  private async sendAs<T>(authorization: string, method: string, path: string, body: unknown, headers: Record<string, string>, signal?: AbortSignal, unanswered?: (cause: unknown) => unknown): Promise<T> {
    let res: Response;
    let text: string;
    try {
      res = await this.doFetch(this.base + path, {
        method,
        headers: { authorization, ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        ...(signal ? { signal } : {}),
      });
      text = await res.text();
    } catch (e) {
      throw unanswered ? unanswered(e) : e;
    }
    // A proxy's HTML error page or a truncated body: still a typed error, never a SyntaxError.
    if (!res.ok) throw refusalError(res.status, text, res.headers.get('retry-after'));
    try {
      return (text ? JSON.parse(text) : {}) as T;
    } catch {
      throw new WritApiError('INTERNAL', res.status, `${method} ${path} answered ${res.status} with a body that is not JSON`);
    }
  }

  decide(request: DecisionRequest): Promise<Decision> {
    return this.request('POST', '/v1/decisions', request);
  }

  /**
   * Every candidate chain with the verdict on each edge, for a request (`principal`: another's, governance
   * only). Nothing is signed or spent: for a policy author's or an agent's "why not?".
   */
  explain(request: ExplainRequest): Promise<Explanation> {
    return this.request('POST', '/v1/explain', request);
  }

  /**
   * What this principal (or `principal`: governance, or a holder of audit_read on it, may ask) can do now
   * or `at` a past instant: every candidate chain to it with the policy's verdict and the scope it gives.
   * An orchestrator reads here what it holds before it delegates part of it.
   */
  capabilities(options: { principal?: string; at?: WireTime | Date } = {}): Promise<Capabilities> {
    const at = options.at instanceof Date ? options.at.toISOString() : options.at;
    const query = at === undefined ? '' : `?at=${encodeURIComponent(at)}`;
    return this.request('GET', `/v1/principals/${encodeURIComponent(options.principal ?? this.options.principal)}/capabilities${query}`);
  }

  /**
   * Gives part of this principal's authority to another (`POST /v1/delegations`), narrowed on every
   * dimension Writ checks; it counts for no more than this principal holds at each decision, and dies
   * with anything above it. → the edge (the one made before, when the same id and request existed).
   */
  async delegate(request: DelegateRequest): Promise<Edge> {
    return (await this.request<EdgeWritten>('POST', '/v1/delegations', delegationRequestBody(this.options.principal, request))).edge;
  }

  /** Revokes an edge this principal gave or created (`DELETE /v1/edges/{id}`): every chain through it stops counting at once. */
  revoke(edgeId: string, reason: string): Promise<EdgeRevoked> {
    return this.request('DELETE', `/v1/edges/${encodeURIComponent(edgeId)}`, { reason });
  }

  /**
   * Runs `fn` while `request.to` holds a delegation from this principal (a sub-agent's task): delegates,
   * runs `fn(edge)`, and revokes the delegation when `fn` settles. `ttlMs` or `expires_at` is required, so
   * that a delegation this process could not revoke (it died, or Writ was unreachable) still ends by
   * itself. An edge already revoked (an `id` used before) or already ended is refused before `fn` runs. An
   * `id` names one task: two tasks at once under one id share its edge, and the first to end revokes it.
   * When the revocation fails, DelegationNotRevokedError says so, with `fn`'s value or error.
   */
  async withDelegation<T>(request: DelegateRequest, fn: (edge: Edge) => Promise<T>): Promise<T> {
    if (request.ttlMs === undefined && request.expires_at === undefined) {
      throw new TypeError('withDelegation: give ttlMs or expires_at, so that the delegation ends by itself if it cannot be revoked');
    }
    if (request.not_before !== undefined) throw new TypeError('withDelegation: the task runs now, so the delegation has no not_before (delegate() takes one)');
    // An id revoked already is AlreadyExistsError from Writ, with {edge_id}; checked here too, for a Writ
    // from before that answered such a retry 200 with the revoked edge.
    const edge = await this.delegate(request);
    if (edge.revoked_at !== null) {
      throw new AlreadyExistsError(409, `edge ${edge.id} was revoked at ${edge.revoked_at}: a revoked edge stays revoked; make a new one under a new id`, { edge_id: edge.id });
    }
    // An edge made by an earlier call with this id (a retry) may have ended since: by Writ's clock when it made
    // the edge, else by this machine's.
    if (edge.expires_at !== null && Date.parse(edge.expires_at) <= Math.max(Date.parse(edge.created_at), Date.now())) {
      throw new UnprocessableError(422, `delegation ${edge.id} ended at ${edge.expires_at} (made at ${edge.created_at}): give a later expires_at or a longer ttlMs`, { edge_id: edge.id });
    }
    let outcome: { ok: true; value: T } | { ok: false; error: unknown };
    try {
      outcome = { ok: true, value: await fn(edge) };
    } catch (error) {
      outcome = { ok: false, error };
    }
    try {
      await this.revoke(edge.id, outcome.ok ? 'the task it was given for ended (withDelegation)' : 'the task it was given for failed (withDelegation)');
    } catch (cause) {
      throw new DelegationNotRevokedError(edge, outcome, cause);
    }
    if (!outcome.ok) throw outcome.error;
    return outcome.value;
  }

  /**
   * Checks a decision token offline against Writ's JWKS (fetched once, refetched when the token names
   * a key the cached set lacks). Throws DecisionInvalidError / DecisionExpiredError; DecisionInvalidError
   * too for a decision issued more than 5 s after `now` (this client's clock, or the signer's, is off).
   */
  async verifyDecision(token: string, now = Date.now()): Promise<DecisionClaims> {
    const kid = kidOf(token);
    if (!this.jwks || (kid !== null && !this.jwks.keys.some((k) => k.kid === kid))) this.jwks = await this.fetchJwks();
    try {
      // The caller's own copy: the verifier hands out one frozen object per token.
      // A decision issued after `now` by more than the default skew (5 s, as on the server) is refused:
      // offline too, a decision is good for its TTL and no longer, whichever replica's clock signed it.
      return structuredClone(await verifyDecision(token, { keys: this.jwks, audience: this.options.gatewayAudience ?? 'writ-gateway', now, clockOf: 'this client\'s' }));
    } catch (e) {
      throw e instanceof WritError ? errorFromWritError(e) : e;
    }
  }

  private async fetchJwks(): Promise<JSONWebKeySet> {
    const res = await this.doFetch(`${this.base}/.well-known/jwks.json`);
    if (!res.ok) throw new WritApiError('INTERNAL', res.status, `fetching the JWKS answered ${res.status}`);
    return (await res.json()) as JSONWebKeySet;
  }

  /**
   * Opens a lease stream: acquire, renew and release over one WebSocket authenticated once, for a
   * caller that takes many leases (see LeaseStream). Close it when done.
   */
  openLeaseStream(options: Pick<LeaseStreamOptions, 'handshakeTimeoutMs' | 'requestTimeoutMs'> = {}): Promise<LeaseStream> {
    return LeaseStream.open({
      baseUrl: this.base, principal: this.options.principal, privateJwk: this.options.privateJwk,
      ...(this.options.audience ? { audience: this.options.audience } : {}),
      ...options,
    });
  }

  /**
   * Takes leases for these decisions once (no retry). `token`: the lease's token, made with `newLeaseToken()`
   * (default: a new one). Sent and not answered (a failed or cut connection): LeaseOutcomeUnknownError with
   * the `token` to ask again with, which answers the lease if it was granted (`replayed` true) and never takes
   * a second one. `signal`: the call is abandoned when it aborts (the outcome then unknown, as above).
   */
  acquireLease(decisions: (Decision | string)[], options: { ttlMs?: number; waitMs?: number; preempt?: boolean; signal?: AbortSignal; token?: string } = {}): Promise<Lease> {
    const token = options.token ?? newLeaseToken();
    const signal = options.signal;
    return this.send('POST', '/v1/leases', {
      decisions: decisions.map(tokenOf),
      ...(options.ttlMs !== undefined ? { ttl_ms: options.ttlMs } : {}),
      ...(options.waitMs !== undefined ? { wait_ms: options.waitMs } : {}),
      ...(options.preempt ? { preempt: true } : {}),
      token,
    }, {}, signal, (cause) => (signal?.aborted ? cause : new LeaseOutcomeUnknownError(token, cause)));
  }

  /**
   * Renews for `ttlMs` (default: the lease's own TTL). `lease` needs only `lease_id` and `token` (a
   * `LeaseHandle`: what an agent kept across a restart). A `ttlMs` Writ does not take (0, say) is sent and
   * refused, as over the lease stream, not dropped for the lease's own. `signal`: as for `acquireLease`.
   */
  renewLease(lease: LeaseHandle, ttlMs?: number, options: { signal?: AbortSignal } = {}): Promise<LeaseRenewal> {
    return this.send('POST', `/v1/leases/${encodeURIComponent(lease.lease_id)}/renew`, { token: lease.token, ...(ttlMs !== undefined ? { ttl_ms: ttlMs } : {}) }, {}, options.signal);
  }

  /** Releases (`lease` needs only `lease_id` and `token`); the epochs stay as high-water marks. `signal`: as for `acquireLease`. */
  releaseLease(lease: LeaseHandle, options: { signal?: AbortSignal } = {}): Promise<LeaseRelease> {
    return this.send('DELETE', `/v1/leases/${encodeURIComponent(lease.lease_id)}`, { token: lease.token }, {}, options.signal);
  }

  /**
   * The write through the gateway; sets Writ-Decision, Writ-Lease-*, Writ-Fencing-Epoch and Idempotency-Key.
   * → the receipt, with `replayed` true when an Idempotency-Key retry wrote nothing and answers with the
   * first attempt's receipt (COMPLETED, or PENDING while that attempt is still under way), false when this call wrote.
   * Sent and not answered (a failed or cut connection, a `fetch` that gave up): WriteOutcomeUnknownError with
   * the `idempotencyKey` to act again with, which answers the first attempt's receipt and writes nothing twice.
   */
  async act(request: ActRequest): Promise<Receipt> {
    if (request.decision === undefined || request.decision === null) throw new TypeError('act: `decision` is required: the Decision (or its token) that allows this write');
    const idempotencyKey = request.idempotencyKey ?? crypto.randomUUID();
    const headers: Record<string, string> = { 'writ-decision': tokenOf(request.decision), 'idempotency-key': idempotencyKey };
    const decided = request.action !== undefined && request.resource !== undefined && request.fields !== undefined ? null : decidedWrite(request.decision);
    const resource = request.resource ?? decided!.resource;
    if (request.lease) {
      headers['writ-lease-token'] = request.lease.token;
      headers['writ-lease-id'] = request.lease.lease_id;
      headers['writ-fencing-epoch'] = formatFencingEpochs(request.lease.epochs);
    }
    // Sent and not answered: the write may have landed. The key is what lets the agent find out safely.
    const unanswered = (cause: unknown) => new WriteOutcomeUnknownError({ idempotencyKey, decisionId: decisionIdOf(request.decision), resource }, cause);
    const out = await this.send<{ receipt: Receipt; replayed?: boolean }>('POST', '/v1/actions', {
      action: request.action ?? decided!.action,
      resource,
      fields: request.fields ?? decided!.fields,
      payload: request.payload,
      ...(request.expected_version !== undefined ? { expected_version: request.expected_version } : {}),
    }, headers, undefined, unanswered);
    // Always a boolean here, so that an agent can tell a retry that wrote nothing from a new write (a Writ
    // from before the receipt carried it says so only beside the receipt).
    return { ...out.receipt, replayed: out.replayed === true || out.receipt.replayed === true };
  }

  /**
   * Runs `fn` while holding leases for `decisions`: takes them (waiting in Writ's queue for a busy key, and
   * retrying RESOURCE_BUSY, OVERLOADED, RATE_LIMITED and lost connections with full-jitter backoff that
   * honours Retry-After, up to the deadline), renews at a third of the TTL, aborts `fn`'s
   * signal once the lease is known lost (a refused renewal or write, or renewals failing until it would
   * expire), and releases in `finally`. A renewal Writ leaves
   * unanswered is given up when the lease would have expired, the release once the lease has lapsed.
   */
  withLease<T>(decisions: (Decision | string)[], fn: (scope: LeaseScope) => Promise<T>, options: LeaseOptions = {}): Promise<T> {
    return this.leased(decisions, fn, options, true);
  }

  /** withLease; `waitForBusy` false answers a busy key at once (runExclusive's skip) while still waiting out an unavailable Writ. */
  private async leased<T>(decisions: (Decision | string)[], fn: (scope: LeaseScope) => Promise<T>, options: LeaseOptions, waitForBusy: boolean): Promise<T> {
    for (const d of decisions) tokenOf(d); // a deny has no token: refuse it before anything runs
    const needing = decisions.filter(leaseRequired);
    if (needing.length === 0) {
      // Nothing to coordinate (e.g. WRITE_OPTIMISTIC fields: the version check is the guard): run the task as is.
      return fn({ lease: null, signal: new AbortController().signal, act: (req) => this.act({ ...req, decision: scopedDecision(req, decisions), lease: null }) });
    }
    const ttlMs = options.ttlMs ?? 15_000;
    const deadline = Date.now() + (options.deadlineMs ?? 30_000);
    let lease: Lease;
    let acquiredSentAt: number;
    let maxWaitMs = SERVER_MAX_WAIT_MS;
    // Every attempt asks with the same token: one whose answer was lost is answered with its lease when
    // asked again (replayed), instead of leaving it to lapse while the next attempt waits behind it.
    let token = newLeaseToken();
    for (let attempt = 0; ; attempt++) {
      const waitMs = options.waitMs ?? Math.max(0, Math.min(maxWaitMs, deadline - Date.now()));
      try {
        acquiredSentAt = Date.now();
        const asked = { ttlMs, waitMs, token, ...(options.preempt ? { preempt: true } : {}) };
        const stream = options.stream;
        // A Writ that answers nothing (paused, or behind a partition that drops packets) is given up at the
        // deadline (or after the wait asked for, if longer), plus time for an answer on its way: TimeoutError.
        // Like a dropped connection, that leaves the outcome unknown: a lease granted lapses at its TTL.
        const answerBy = Math.max(deadline - Date.now(), waitMs) + ANSWER_GRACE_MS;
        const granted = await within(answerBy, (signal) => stream
          // A stream closed before the request was sent: nothing was asked, so ask over HTTP. (One that
          // closed after sending leaves the outcome unknown, as a dropped HTTP connection does: asked again below.)
          ? streamElseHttp(() => stream.acquire(needing.map(tokenOf), asked), () => this.acquireLease(needing, { ...asked, signal }), (closed) => closed.requestId === null)
          : this.acquireLease(needing, { ...asked, signal }));
        if (granted.replayed) {
          // Granted to an earlier attempt whose answer was lost, at a time this client cannot know: renewed at
          // once, so that the local expiry counts from a request this client sent. (Lapsed meanwhile: LEASE_EXPIRED, a new token below.)
          acquiredSentAt = Date.now();
          const renewed = await within(answerBy, (signal) => stream
            ? streamElseHttp(() => stream.renew(granted, ttlMs), () => this.renewLease(granted, ttlMs, { signal }), () => true)
            : this.renewLease(granted, ttlMs, { signal }));
          lease = { ...granted, epochs: renewed.epochs, expires_at: renewed.expires_at };
          break;
        }
        lease = granted;
        // After a server-side wait the TTL started near the answer, not at the send.
        if (waitMs > 0) acquiredSentAt = Date.now();
        break;
      } catch (e) {
        const serverMax = e instanceof WritApiError && e.code === 'UNPROCESSABLE' ? e.problem.max_wait_ms : undefined;
        if (options.waitMs === undefined && typeof serverMax === 'number' && serverMax < maxWaitMs) {
          // This Writ allows shorter waits (WRIT_LEASE_MAX_WAIT_MS): ask again within its limit.
          maxWaitMs = serverMax;
          continue;
        }
        const refused = e instanceof WritApiError ? e : null;
        if (refused !== null && (refused.code === 'LEASE_EXPIRED' || refused.code === 'LEASE_PREEMPTED') && Date.now() < deadline) {
          // An earlier attempt, whose answer was lost, was granted a lease that has ended since: take a new one.
          token = newLeaseToken();
          continue;
        }
        const busy = refused !== null && (refused.code === 'RESOURCE_BUSY' || refused.code === 'LEASE_WAIT_TIMEOUT');
        // A Writ shedding load, shutting down or restarting answers later: the deadline is for that too. A
        // connection dropped after the request was sent leaves its outcome unknown; a lease granted then
        // lapses at its TTL, and the next request waits for it like any holder's.
        const unavailable = refused ? ASK_AGAIN_LATER.has(refused.code) : connectionLost(e);
        if (!(busy && waitForBusy) && !unavailable) throw e;
        // A queued wait that timed out asks again at once while the deadline allows; an immediate refusal backs off.
        const delay = busy && waitMs > 0 ? 0 : backoffDelay(attempt, refused?.retryAfterMs ?? null, options.backoff);
        if (Date.now() + delay >= deadline) throw e;
        if (refused) options.onRetry?.(attempt, delay, refused);
        await sleep(delay);
      }
    }
    return this.holding(lease, decisions, acquiredSentAt, ttlMs, fn, options.stream);
  }

  /**
   * Runs a scheduled job on at most one runner at a time: decides `run_job` on `jobKey` (a `job:…`
   * key), takes the job's lease, renews it while `fn` runs, hands `fn` the run's fencing epoch, and
   * releases it when `fn` settles. When another runner holds the job it returns `{ ran: false, holder }`
   * without running (unless `waitMs` lets it wait its turn). A denied decision throws ForbiddenError
   * (its `problem` holds decision_id, reasons and approval_missing).
   * Mutual exclusion is per key: for once-per-period semantics put the period in the key
   * (`job:daily-seo-publish:2026-06-01`).
   */
  async runExclusive<T>(jobKey: string, fn: (job: JobScope) => Promise<T>, options: RunExclusiveOptions = {}): Promise<RunExclusiveResult<T>> {
    const decision = await this.decide({ action: 'run_job', resource: jobKey, environment: options.environment ?? 'production', fields: [], ...(options.context ? { context: options.context } : {}) });
    if (!decision.allow) {
      const detail = decision.approval_missing
        ? `run_job on ${jobKey} needs an approval (decision ${decision.decision_id}): ask an approver to sign one and pass it as context.approval`
        : `run_job on ${jobKey} was denied: ${decision.reasons.join('; ')}`;
      throw new ForbiddenError(403, detail, { decision_id: decision.decision_id, reasons: decision.reasons, approval_missing: decision.approval_missing });
    }
    const { environment: _environment, context: _context, waitMs = 0, ...leaseOptions } = options;
    try {
      // Without a wait, a job another runner holds is skipped at once (not retried); an unavailable Writ is
      // still waited for, within deadlineMs.
      return await this.leased([decision], async ({ lease, signal, act }) => {
        if (!lease) throw new TypeError(`${jobKey} needs no lease (its class is ${decision.obligations.resource_class}): runExclusive cannot make it exclusive`);
        const fencingEpoch = lease.epochs[decision.resource]!;
        const value = await fn({ jobKey: decision.resource, lease, fencingEpoch, signal, act });
        return { ran: true as const, value, fencingEpoch };
      }, { ...leaseOptions, waitMs }, waitMs > 0);
    } catch (e) {
      if (e instanceof WritApiError && (e.code === 'RESOURCE_BUSY' || e.code === 'LEASE_WAIT_TIMEOUT')) return { ran: false, holder: e.holder };
      throw e;
    }
  }

  /**
   * Runs `fn` under a taken lease. Renewal is a chain of timers (never two renewals in flight). A
   * refusal from Writ (4xx: expired, released, preempted, token mismatch, …) aborts at once with that
   * error; a transport failure or 5xx is retried until the lease would have expired, and a watchdog
   * aborts with LeaseExpiredError at that instant, so `fn` never runs on a lease it can no longer prove.
   */
  private async holding<T>(held: Lease, decisions: readonly (Decision | string)[], acquiredSentAt: number, ttlMs: number, fn: (scope: LeaseScope) => Promise<T>, stream?: LeaseStream): Promise<T> {
    const controller = new AbortController();
    // Over the stream while it is open; over HTTP once it has closed (the lease itself is still good).
    let via = stream;
    // Renewing or releasing twice is harmless, so both fall back whether or not the stream sent the request.
    // A Writ that is paused or behind a partition that drops packets accepts connections and answers
    // nothing: a renewal is given up when the lease would have expired (the watchdog has aborted by then),
    // and the release when the lease has lapsed at the latest (at least 1 s), so withLease returns.
    const renewOnce = (): Promise<LeaseRenewal> => within(Math.max(1, localExpiry - Date.now()), (signal) => {
      const open = via;
      if (!open) return this.renewLease(held, ttlMs, { signal });
      return streamElseHttp(() => open.renew(held, ttlMs), () => this.renewLease(held, ttlMs, { signal }), () => {
        via = undefined;
        // The task may have ended meanwhile: no renewal then (the release follows over HTTP).
        return !stopped;
      });
    });
    const release = () => within(Math.max(1_000, lapsesBy - Date.now()), (signal) => {
      const open = via;
      return open ? streamElseHttp(() => open.release(held), () => this.releaseLease(held, { signal }), () => true) : this.releaseLease(held, { signal });
    });
    const renewEvery = Math.max(50, Math.floor(ttlMs / 3));
    // Writ starts the TTL when it handles the request, which is after we sent it: this bound is conservative.
    let localExpiry = acquiredSentAt + ttlMs;
    // And before the answer came: by then Writ's TTL has started.
    let lapsesBy = Date.now() + ttlMs;
    let stopped = false;
    let refusedByWrit = false;
    let renewTimer: ReturnType<typeof setTimeout> | undefined;
    let expiryTimer: ReturnType<typeof setTimeout> | undefined;
    let inflight: Promise<void> = Promise.resolve();

    const stop = () => {
      stopped = true;
      clearTimeout(renewTimer);
      clearTimeout(expiryTimer);
    };
    const lose = (reason: WritApiError) => {
      stop();
      if (!controller.signal.aborted) controller.abort(reason);
    };
    const armWatchdog = () => {
      clearTimeout(expiryTimer);
      expiryTimer = setTimeout(() => {
        lose(new LeaseExpiredError(ERROR_CATALOGUE.LEASE_EXPIRED.status, `lease ${held.lease_id} expired before it could be renewed`, { lease_id: held.lease_id }));
      }, Math.max(0, localExpiry - Date.now()));
    };
    const renew = () => {
      const sentAt = Date.now();
      inflight = renewOnce().then(
        (r) => {
          if (stopped) return;
          held.expires_at = r.expires_at;
          localExpiry = sentAt + ttlMs;
          lapsesBy = Date.now() + ttlMs;
          armWatchdog();
          renewTimer = setTimeout(renew, renewEvery);
        },
        (e: unknown) => {
          if (stopped) return;
          if (e instanceof WritApiError && e.status < 500 && e.status !== 429) {
            refusedByWrit = true;
            lose(e);
            return;
          }
          renewTimer = setTimeout(renew, Math.max(25, Math.min(renewEvery, (localExpiry - Date.now()) / 3)));
        },
      );
    };
    armWatchdog();
    renewTimer = setTimeout(renew, renewEvery);

    try {
      const scope: LeaseScope = {
        lease: held,
        signal: controller.signal,
        act: async (req) => {
          if (controller.signal.aborted) throw controller.signal.reason;
          const decision = scopedDecision(req, decisions);
          // A write whose decision needs no lease goes without one (its keys are not this lease's).
          const leased = leaseRequired(decision);
          try {
            return await this.act({ ...req, decision, lease: leased ? held : null });
          } catch (e) {
            // The gateway found this lease gone (preempted, expired, a newer holder's epoch): the task is
            // told now, not at the next renewal, and nothing is released (it is not this lease's to give back).
            if (leased && leaseGone(e, held)) {
              refusedByWrit = true;
              lose(e as WritApiError);
            }
            throw e;
          }
        },
      };
      return await fn(scope);
    } finally {
      stop();
      await inflight;
      if (!refusedByWrit) await release().catch(() => undefined);
    }
  }
}

/** The body of POST /v1/delegations for `request`, given by `from`. */
function delegationRequestBody(from: string, request: DelegateRequest): DelegationBody {
  const { ttlMs, ...rest } = request;
  if (ttlMs !== undefined) {
    if (request.expires_at !== undefined) throw new TypeError('delegate: give ttlMs or expires_at, not both');
    if (!Number.isFinite(ttlMs) || ttlMs <= 0) throw new TypeError(`delegate: ttlMs must be a positive number of ms, got ${String(ttlMs)}`);
  }
  return { ...rest, from, ...(ttlMs !== undefined ? { expires_at: Date.now() + Math.ceil(ttlMs) } : {}) };
}

/**
 * `call`, given up after `ms`: its signal aborts (a fetch given it stops) and the answer rejects then,
 * even if `call` goes on (a lease stream's request, which its own timeout ends).
 */
function within<T>(ms: number, call: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      // fetch's own error for a timed-out signal (AbortSignal.timeout): an agent may already handle it.
      const reason = new DOMException(`no answer from Writ within ${Math.round(ms)} ms; the outcome is unknown`, 'TimeoutError');
      controller.abort(reason);
      reject(reason);
    }, ms);
    call(controller.signal).then(
      (v) => (clearTimeout(timer), resolve(v)),
      (e: unknown) => (clearTimeout(timer), reject(e)),
    );
  });
}

/**
 * A write's refusal that proves `held` is lost: LEASE_PREEMPTED or LEASE_EXPIRED naming this lease, or
 * STALE_FENCING_EPOCH for one of its keys at a newer epoch than it holds. (Not LEASE_EXPIRED without a
 * lease id: the gateway's "too little of it left, renew first", nor an epoch missing for a key it lacks.)
 */
function leaseGone(e: unknown, held: Lease): boolean {
  if (!(e instanceof WritApiError)) return false;
  const { code, problem } = e;
  if (code === 'LEASE_PREEMPTED' || code === 'LEASE_EXPIRED') return problem.lease_id === held.lease_id;
  if (code !== 'STALE_FENCING_EPOCH' || typeof problem.key !== 'string' || typeof problem.current_epoch !== 'number') return false;
  const mine = held.epochs[problem.key];
  return mine !== undefined && problem.current_epoch > mine;
}

/** A request that failed for want of a connection (refused, reset, closed by Writ): a fetch's, or the lease stream's. */
function connectionLost(e: unknown): boolean {
  if (e instanceof LeaseStreamClosedError) return true;
  // fetch's TypeError carries the socket's error as its cause (an AggregateError when each address refused).
  for (let cause = e, depth = 0; cause instanceof Error && depth < 5; cause = cause.cause, depth++) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === 'string' && CONNECTION_LOST.has(code)) return true;
    if (cause instanceof AggregateError && cause.errors.some(connectionLost)) return true;
  }
  return false;
}

function kidOf(token: string): string | null {
  try {
    const kid = decodeProtectedHeader(token).kid;
    return typeof kid === 'string' ? kid : null;
  } catch {
    return null;
  }
}

/** False only when the decision says so (a token's unverified payload is read for it; Writ decides anyway). */
function leaseRequired(d: Decision | string): boolean {
  if (typeof d !== 'string') return d.obligations.lease_required !== false;
  try {
    const obligations = decodeJwt(d).obligations as { lease_required?: unknown } | undefined;
    return obligations?.lease_required !== false;
  } catch {
    return true;
  }
}

/** The decision a scoped write names, else the scope's only one (a TypeError when it was taken for several). */
function scopedDecision(req: ScopedActRequest, decisions: readonly (Decision | string)[]): Decision | string {
  if (req.decision !== undefined && req.decision !== null) return req.decision;
  if (decisions.length === 1) return decisions[0]!;
  throw new TypeError(`act: this lease was taken for ${decisions.length} decisions: name the one that allows this write (\`decision\`)`);
}

/** The action, key and fields a decision allows: from the Decision, or from its token's claims. */
function decidedWrite(d: Decision | string): { action: string; resource: string; fields: string[] } {
  if (typeof d !== 'string') return { action: d.action, resource: d.resource, fields: d.fields };
  let claims: Record<string, unknown>;
  try {
    claims = decodeJwt(d);
  } catch (e) {
    throw new TypeError(`act: the decision token cannot be read (${(e as Error).message}): pass action, resource and fields`);
  }
  const { action, resource, fields } = claims;
  if (typeof action !== 'string' || typeof resource !== 'string' || !Array.isArray(fields)) throw new TypeError('act: the decision token names no action, resource and fields: pass them');
  return { action, resource, fields: fields as string[] };
}

/** The decision's id: the Decision's, or its token's claim; null when the token cannot be read. */
function decisionIdOf(d: Decision | string): string | null {
  if (typeof d !== 'string') return d.decision_id;
  try {
    const id = decodeJwt(d).decision_id;
    return typeof id === 'string' ? id : null;
  } catch {
    return null;
  }
}

function tokenOf(d: Decision | string): string {
  if (typeof d === 'string') return d;
  if (!d.token) {
    throw new TypeError(d.approval_missing
      ? `decision ${d.decision_id} needs an approval: ask an approver to sign one, pass it as context.approval and decide again; a deny has no token`
      : `decision ${d.decision_id} is a deny (${d.reasons.join('; ')}); it has no token`);
  }
  return d.token;
}

/**
 * A lease call on the stream, made over HTTP instead when the stream turns out closed
 * (LeaseStreamClosedError) and `fallBack` agrees; any other error is the answer.
 */
function streamElseHttp<T>(onStream: () => Promise<T>, overHttp: () => Promise<T>, fallBack: (closed: LeaseStreamClosedError) => boolean): Promise<T> {
  return onStream().catch((e: unknown) => {
    if (e instanceof LeaseStreamClosedError && fallBack(e)) return overHttp();
    throw e;
  });
}
