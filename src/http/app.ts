import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import swagger from '@fastify/swagger';
import websocket, { type WebsocketPluginOptions } from '@fastify/websocket';
import { callerSessionsOf, countWorkInFlight, releaseAssertion, spendAssertion, verifyCallerAssertion, type AuthenticatedCaller, type CallerAuthDeps } from '../decision/index.js';
import { WritError } from '../errors.js';
import { GOVERNANCE_ID } from '../graph/index.js';
import { consoleSession, forOneOperation, isAuditor, type ConsoleSession, type WritContext } from '../service/index.js';
import { registerComponents } from './components.js';
import { guardInput } from './input-guard.js';
import { createMetrics } from './metrics.js';
import { boundInflightWrites, claimedPrincipal, drainGate, PrincipalRateLimiter, type Drain } from './overload.js';
import { queryCoercingValidator, STRICT_AJV_OPTIONS } from './query-coercion.js';
import { sendProblem } from './problem.js';
import { COORDINATION_READS, OWN_READS, sessionCookieOf, sessionMayCall, type Reader } from './console-auth.js';
import { registerConsoleRoutes } from './routes/console.js';
import { registerAuditReadRoutes } from './routes/audit-reads.js';
import { registerAuthzenRoutes } from './routes/authzen.js';
import { registerCoordinationRoutes } from './routes/coordination.js';
import { registerDecisionRoutes } from './routes/decisions.js';
import { registerGraphRoutes } from './routes/graph.js';
import { registerImpactRoutes } from './routes/impact.js';
import { LEASE_STREAM_PATH, registerLeaseStream, StreamSocket } from './routes/lease-stream.js';
import { registerOpsRoutes } from './routes/ops.js';
import { registerSessionRoutes } from './routes/sessions.js';

declare module 'fastify' {
  interface FastifyInstance {
    writ: WritContext;
    /**
     * The context of one request (forOneOperation): its authentication and its use case look at the
     * authority graph once between them. The same object for every call with the same request.
     */
    operation(request: FastifyRequest): WritContext;
    /** Authenticates the caller assertion (Bearer JWT), spends its jti and returns the principal id. */
    caller(request: FastifyRequest): Promise<string>;
    /** The same for a caller assertion only (no console session), returning the verified caller. */
    spentCaller(request: FastifyRequest): Promise<AuthenticatedCaller>;
    /** Verifies the caller assertion but leaves its jti for the use case to spend in its own transaction. */
    unspentCaller(request: FastifyRequest): Promise<AuthenticatedCaller>;
    /**
     * `unspentCaller` for a signed assertion only, opening a session: a caller session's request token is
     * refused, and the assertion must be bound to `sessionKey` (the body's) and to this request (cnf.jwk, htm, htu).
     */
    unspentAssertion(request: FastifyRequest, sessionKey: NonNullable<CallerAuthDeps['sessionKey']>): Promise<AuthenticatedCaller>;
    /**
     * Verifies the caller assertion and queues its durable spend without waiting for it: the use case
     * computes without waiting and awaits `spent` before anything leaves (see DecideOptions.spent).
     */
    callerSpending(request: FastifyRequest): Promise<{ principal: string; spent: Promise<void> }>;
    /** Graceful shutdown: refuse new requests (503 OVERLOADED), wait for the admitted ones. */
    writDrain: Drain;
  }
  interface FastifyRequest {
    /** Set when the request was authenticated by the console's session cookie (not a caller assertion). */
    consoleSession?: ConsoleSession;
    /**
     * Set by `caller` on a read (a GET, or any call of a console session): who reads, and whether it is an
     * auditor (governance, or audit_read on audit:principal:* in every environment), which reads everything. Anyone else reads
     * through the routes of OWN_READS, which narrow their answers to it (checkOwn), and, with a caller
     * assertion, COORDINATION_READS.
     */
    reader?: Reader;
    /** The request's context once `operation` made it (null until then): use `app.operation(request)`. */
    writOperation: WritContext | null;
  }
}

export interface AppOptions {
  logger?: boolean | object;
  /** Extra route plugins (the gateway's routes register here). */
  plugins?: ((app: FastifyInstance) => void | Promise<void>)[];
}

/** The fastify app: parse, call a use case from src/service, serialize. No domain logic here. */
export async function buildApp(ctx: WritContext, options: AppOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    logger: options.logger ?? false,
    // Draining answers in the house format (drainGate); by close() nothing admitted is left.
    return503OnClosing: false,
    bodyLimit: ctx.config.bodyLimitBytes,
    // Only the proxies named in WRIT_TRUST_PROXY are believed about the client's protocol and address.
    ...(ctx.config.trustProxy === null ? {} : { trustProxy: ctx.config.trustProxy }),
    ajv: { customOptions: STRICT_AJV_OPTIONS },
    schemaController: { compilersFactory: { buildValidator: queryCoercingValidator() } },
    // A path that is not valid percent-encoded UTF-8 never reaches a route: answer it in the house format.
    frameworkErrors: (error, request, reply) => sendProblem(new WritError('MALFORMED_REQUEST', error.message), request, reply),
  });
  // WebSocket routes (the lease stream). Registered before every other hook: its onRequest hook marks an
  // upgrade request (`request.ws`), and only a marked request's socket is destroyed after an HTTP answer,
  // so an upgrade refused by a hook added later (draining, rate limit) must already be marked.
  await app.register(websocket, {
    options: { maxPayload: ctx.config.bodyLimitBytes, WebSocket: StreamSocket as unknown as NonNullable<WebsocketPluginOptions['options']>['WebSocket'] },
    // close() drains first, as SIGTERM does (the streams take no new request; those in flight, which
    // hold the drain, are answered), for up to WRIT_DRAIN_TIMEOUT_MS; after writ serve's drain, no more.
    preClose(done) {
      const drained = app.hasDecorator('writDrain') ? app.writDrain.drain(app.writDrain.draining() ? 0 : ctx.config.drainTimeoutMs) : Promise.resolve();
      void drained.then(() => {
        for (const client of this.websocketServer.clients) client.close(1001, 'Writ is shutting down');
        done();
      });
    },
  });
  guardInput(app, { maxDepth: ctx.config.jsonMaxDepth, bodyLimit: ctx.config.bodyLimitBytes });
  const metrics = createMetrics(() => ctx.decisionLog.stats(), () => ctx.policy.reloads?.(), () => ctx.databaseClock?.latest() ?? null);
  ctx.observer = {
    ...metrics.observer,
    abandonedAcquisition(event) {
      metrics.observer.abandonedAcquisition(event);
      const what = {
        withdrawn: 'withdrawn from the queue',
        released: 'granted after the close and released at once (no caller token: no one can ever use it)',
        released_after_preemption: 'a takeover granted after the close and released at once (no caller token: no one can ever use it)',
        kept_for_replay: 'granted after the close and kept until its TTL for a replay with the caller\'s token',
      }[event.outcome];
      const message = `the caller went away (its lease stream or connection closed) before an acquisition of ${event.keys.join(', ')} by ${event.principal} was answered: ${what}`;
      // A wasted takeover fenced its displaced holders out for nothing: they must take the keys again.
      if (event.outcome === 'released_after_preemption') app.log.warn({ abandoned_acquisition: event }, `${message}; the holders it preempted stay fenced out and may take the keys again: ${event.preempted!.map((p) => `${p.holder} (${p.key}, lease ${p.lease_id})`).join(', ')}`);
      else app.log.info({ abandoned_acquisition: event }, message);
    },
  };
  app.decorate('writ', ctx);
  // On the request itself (a slot every request has from its start), not in a WeakMap: no hash table entry per request.
  app.decorateRequest('writOperation', null);
  const operation = (request: FastifyRequest): WritContext => (request.writOperation ??= forOneOperation(ctx));
  app.decorate('operation', operation);
  // Caller sessions (one object for every request): an HS256 request token is checked against its session's key.
  const sessions: NonNullable<CallerAuthDeps['sessions']> = { open: ctx.config.callerSessionMaxTtlMs > 0 ? callerSessionsOf(ctx.keys) : null, maxTtlMs: ctx.config.callerSessionMaxTtlMs };
  const noSession: NonNullable<CallerAuthDeps['sessions']> = { ...sessions, refused: 'a caller session cannot open another session; sign an assertion with the principal\'s key' };
  const authDeps = async (request: FastifyRequest, sessionsHere = sessions): Promise<CallerAuthDeps> => {
    const graph = await operation(request).graph.current();
    // Every route spends the jti (at once, or with the request's effect): that spend is the durable check.
    // The latest measurement of this replica's clock against the database's (no query): words for a refusal only.
    return {
      principal: (id: string) => graph.principal(id), replay: ctx.replay, now: ctx.clock.now(), audience: ctx.config.audience, maxTtlMs: ctx.config.maxAssertionTtlMs, readSpent: false, clockOffsetMs: ctx.databaseClock?.latest()?.offsetMs,
      // Read only for a caller session's request token (htm, htu).
      request, sessions: sessionsHere,
    };
  };
  const limiter = ctx.config.rateLimit.perSecond > 0 ? new PrincipalRateLimiter(ctx.clock, ctx.config.rateLimit.perSecond, ctx.config.rateLimit.burst) : null;
  /** Takes one request from the principal's rate (governance is not limited): RATE_LIMITED otherwise. */
  const admit = (principal: string) => {
    if (limiter && principal !== GOVERNANCE_ID) limiter.admit(principal);
  };
  /** A verified caller within its rate; a limited one's assertion is left unspent (usable once it may call again). */
  const admitted = async (request: FastifyRequest, deps: CallerAuthDeps): Promise<AuthenticatedCaller> => {
    const caller = await verifyCallerAssertion(request.headers.authorization, deps);
    try {
      admit(caller.principal);
    } catch (e) {
      releaseAssertion(deps.replay, caller);
      throw e;
    }
    return caller;
  };
  const spentCaller = async (request: FastifyRequest) => {
    const deps = await authDeps(request);
    const caller = await admitted(request, deps);
    await deps.replay.store.readWrite((tx) => spendAssertion(deps.replay, tx, caller, deps.now));
    return caller;
  };
  app.decorate('caller', async (request: FastifyRequest) => {
    const cookie = request.headers.authorization === undefined ? sessionCookieOf(request.headers.cookie) : undefined;
    // HEAD is the GET route's (fastify answers it with the GET handler).
    const route = `${request.method === 'HEAD' ? 'GET' : request.method} ${request.routeOptions.url ?? ''}`;
    if (cookie !== undefined) {
      const session = await consoleSession(ctx, cookie);
      if (!session.auditor && !OWN_READS.has(route)) {
        throw new WritError('FORBIDDEN', `${session.principal} holds no audit grant (audit_read on audit:principal:* in every environment): its console shows only its own receipts and capabilities`);
      }
      // A session is held to its principal's rate like the principal's signed calls.
      admit(session.principal);
      request.consoleSession = session;
      request.reader = { principal: session.principal, auditor: session.auditor };
      return session.principal;
    }
    const principal = (await spentCaller(request)).principal;
    // A signed read sees what a console session of the same principal sees, and the coordination state
    // besides: the graph, other principals and their receipts are an auditor's (the grant is checked only
    // where the route needs it, so an agent's lease and decision calls pay nothing for it).
    if (route.startsWith('GET ') && !COORDINATION_READS.has(route)) {
      const auditor = await isAuditor(ctx, principal);
      if (!auditor && !OWN_READS.has(route)) {
        throw new WritError('FORBIDDEN', `${principal} holds no audit grant (audit_read on audit:principal:* in every environment): it may read its own receipts and capabilities, the receipts and capabilities of the principals its audit_read covers in every environment, and the leases, lease queues and incidents`);
      }
      request.reader = { principal, auditor };
    }
    return principal;
  });
  app.decorate('spentCaller', spentCaller);
  app.decorate('unspentCaller', async (request: FastifyRequest) => admitted(request, await authDeps(request)));
  app.decorate('unspentAssertion', async (request: FastifyRequest, sessionKey: NonNullable<CallerAuthDeps['sessionKey']>) =>
    admitted(request, { ...(await authDeps(request, noSession)), sessionKey }));
  app.decorate('callerSpending', async (request: FastifyRequest) => {
    const deps = await authDeps(request);
    const caller = await admitted(request, deps);
    const spent = deps.replay.store.readWrite((tx) => spendAssertion(deps.replay, tx, caller, deps.now));
    // The use case awaits it; this only keeps a failure that comes before it does from going unhandled.
    spent.catch(() => {});
    return { principal: caller.principal, spent };
  });
  app.decorate('writDrain', drainGate(app));
  // Signature checks go to another thread only while other requests are in flight to overlap with (jws.ts).
  const uncount = countWorkInFlight(app.writDrain.inflight);
  app.addHook('onClose', async () => {
    uncount();
  });
  if (limiter) {
    // Shedding is cheap or it is no shedding: a request whose claimed principal is out of requests is
    // refused before its body is parsed or its signature checked (measured: bench/overload.ts). A peek
    // only; tokens are taken after verification (`admitted`).
    app.addHook('onRequest', (request, _reply, next) => {
      const security = (request.routeOptions.schema as { security?: unknown[] } | undefined)?.security;
      if (Array.isArray(security) && security.length === 0) return next();
      const claimed = claimedPrincipal(request.headers.authorization);
      if (claimed === null || claimed === GOVERNANCE_ID) return next();
      next(limiter.refusal(claimed) ?? undefined);
    });
  }
  // A console session reads: anything else is refused before its body is read or anything is done.
  // The hooks run on every request: callback-style, as an async one costs a promise and a microtask each.
  app.addHook('onRequest', (request, _reply, next) => {
    if (request.headers.authorization !== undefined || sessionCookieOf(request.headers.cookie) === undefined) return next();
    if (!sessionMayCall(request.method, request.routeOptions.url)) {
      return next(new WritError('SESSION_READ_ONLY', `a console session may only read (GET, and POST /v1/impact); ${request.method} ${request.routeOptions.url ?? request.url} needs a signed caller assertion`));
    }
    next();
  });
  boundInflightWrites(app, ctx.config.maxInflightWrites);
  app.setErrorHandler((error, request, reply) => sendProblem(error, request, reply));
  app.setNotFoundHandler((request, reply) =>
    reply.code(404).type('application/problem+json').send({
      type: 'https://writ.dev/errors/NOT_FOUND', title: 'Not found', status: 404, code: 'NOT_FOUND',
      detail: `no route ${request.method} ${request.url.split('?')[0]}`, instance: request.url,
    }),
  );
  app.addHook('onResponse', (request, reply, next) => {
    metrics.answered(request.routeOptions.url ?? 'unknown', reply.statusCode);
    next();
  });
  registerComponents(app);
  await app.register(swagger, {
    // Shared schemas appear under components.schemas by their $id (not def-N).
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Writ API', version: '1', description: 'Authority, ownership and coordination at the write boundary.',
        contact: { name: 'Writ', url: 'https://writ.dev' },
      },
      servers: [{ url: 'http://127.0.0.1:4000', description: 'a local Writ (`writ serve`)' }],
      tags: [
        { name: 'Graph', description: 'Principals and the edges of the authority graph (grants, delegations, ownerships, approvals, preemptions)' },
        { name: 'Decisions', description: 'Signed decisions and their explanations' },
        { name: 'Coordination', description: 'Leases, fencing epochs and the write through the gateway' },
        { name: 'Audit', description: 'Receipts and their hash chain; impact analysis' },
        { name: 'Incidents', description: 'Incidents, during which preemption is possible' },
        { name: 'Operations', description: 'Health, readiness, metrics, keys and this document' },
        { name: 'Console', description: 'The auditor\'s read-only web console at /console and its sign-in with a one-time link (`writ console`)' },
        { name: 'AuthZEN', description: 'The OpenID AuthZEN Authorization API 1.0 front door: evaluations and searches, answered by the same decision use case as POST /v1/decisions' },
      ],
      components: {
        securitySchemes: {
          consoleSession: {
            type: 'apiKey', in: 'cookie', name: 'writ_console',
            description: 'The console\'s session cookie (HttpOnly, SameSite=Strict; from POST /v1/console/session with a one-time link of `writ console`). Reads only: GET routes and POST /v1/impact; anything else answers SESSION_READ_ONLY. A principal without audit_read on audit:principal:* in every environment reads only its own receipts and capabilities, and those of the principals its audit_read covers in every environment (FORBIDDEN elsewhere).',
          },
          callerAssertion: {
            type: 'http', scheme: 'bearer', bearerFormat: 'JWT',
            description: 'A short-lived (at most 5 minutes), single-use JWT signed by one of the caller principal\'s registered keys (EdDSA or ES256): iss = sub = principal id, aud = the Writ audience (default `writ`), a unique jti. Or, from a caller session (POST /v1/sessions), an HS256 request token MACed with the session\'s key: kid = the session token, the same claims plus htm and htu (the request\'s method and path).',
          },
        },
      },
      security: [{ callerAssertion: [] }, { consoleSession: [] }],
    },
    // DELETE bodies are optional everywhere (fastify-swagger marks every body required).
    transformObject: (document) => {
      const api = 'openapiObject' in document ? document.openapiObject : document.swaggerObject;
      for (const item of Object.values((api.paths ?? {}) as Record<string, { delete?: { requestBody?: { required?: boolean } } }>)) {
        if (item.delete?.requestBody) item.delete.requestBody.required = false;
      }
      return api;
    },
  });
  registerOpsRoutes(app, metrics.registry);
  registerGraphRoutes(app);
  registerImpactRoutes(app);
  registerAuditReadRoutes(app);
  await registerConsoleRoutes(app);
  registerDecisionRoutes(app);
  registerSessionRoutes(app);
  registerCoordinationRoutes(app);
  registerLeaseStream(app, {
    admit,
    answered: (op, status) => metrics.answered(`${LEASE_STREAM_PATH} ${op}`, status),
  });
  await registerAuthzenRoutes(app);
  for (const plugin of options.plugins ?? []) await plugin(app);
  app.get('/openapi.json', { schema: { security: [], operationId: 'openapi', tags: ['Operations'], summary: 'This OpenAPI 3.1 document', response: { 200: { type: 'object', additionalProperties: true, description: 'OpenAPI 3.1' } } } }, async () => app.swagger());
  await app.ready();
  return app;
}
