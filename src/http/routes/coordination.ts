import type { FastifyInstance } from 'fastify';
import { WritError } from '../../errors.js';
import { DECISION_ID_FILTER, RECEIPT_PAGE, RECEIPT_STATUSES } from '../../audit/index.js';
import { performAction, type ActionInput } from '../../service/index.js';
import { abandonGrant, acquireLeases, declareIncident, listLeases, releaseLease, renewLease, resolveIncident, activeIncidents, type LeaseListQuery, type LeaseRequestInput } from '../../service/index.js';
import { LEASE_PAGE, MAX_KEY_LENGTH } from '../../lease/index.js';
import { formatServerTiming } from '../../wire/server-timing.js';
import { checkQuerySpelling, noReceipt, parseTime } from '../../service/index.js';
import { checkReceiptReadable, ownFilter } from './audit-reads.js';
import { toWireTime } from '../../wire/time.js';
import { AUTHENTICATED, errorResponses, ref, WITH_INPUT } from '../components.js';
import { incidentToWire, leaseGrantToWire, leaseRecordToWire, leaseRenewalToWire, receiptToWire } from '../wire.js';
import { actionBody, actionHeaders, incidentBody, leaseBody, reasonQuery, releaseBody, renewBody, revokeBody } from '../schemas.js';

const DECISION_CHECKS = ['DECISION_INVALID', 'DECISION_EXPIRED', 'DECISION_MISMATCH', 'AUTHORITY_REVOKED', 'OWNER_CHANGED'] as const;
const LEASE_REFUSALS = ['LEASE_NOT_FOUND', 'LEASE_TOKEN_MISMATCH', 'LEASE_EXPIRED', 'LEASE_PREEMPTED'] as const;
const epochs = { type: 'object', additionalProperties: { type: 'integer' } } as const;
const receiptReply = (description: string) => ({
  type: 'object', description, required: ['receipt', 'replayed'],
  headers: {
    'Server-Timing': { type: 'string', description: 'W3C Server-Timing: auth, checks, intent, upstream, settle, total (ms)' },
    'Idempotent-Replayed': { type: 'string', enum: ['true'], description: 'present when this answers a retried Idempotency-Key' },
  },
  properties: { receipt: ref('Receipt'), replayed: { type: 'boolean' } },
});

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

export function registerCoordinationRoutes(app: FastifyInstance): void {
  const ctx = app.writ;

  app.post<{ Body: LeaseRequestInput }>('/v1/leases', {
    schema: {
      body: leaseBody,
      operationId: 'acquireLease', tags: ['Coordination'], summary: 'Take leases (keys derived from allow decisions); RESOURCE_BUSY answers 423 with Retry-After and the holder; wait_ms waits in the queue until the lease is released',
      response: {
        200: {
          ...ref('LeaseGrant'), description: 'Asked again with the `token` of a lease already granted: that lease (`replayed`; nothing was taken now)',
          headers: { 'Idempotent-Replayed': { type: 'string', enum: ['true'], description: 'this answers an acquisition asked again with its own token' } },
        },
        201: { ...ref('LeaseGrant'), description: 'Granted' },
        ...errorResponses([
          ...WITH_INPUT, ...AUTHENTICATED, ...DECISION_CHECKS, 'UNPROCESSABLE', 'UNKNOWN_PRINCIPAL', 'NO_UPSTREAM', 'NO_INCIDENT', 'FORBIDDEN', 'RESOURCE_BUSY', 'LEASE_WAIT_TIMEOUT',
          'LEASE_EXPIRED', 'LEASE_PREEMPTED', 'IDEMPOTENCY_MISMATCH',
        ]),
      },
    },
  }, async (request, reply) => {
    const res = reply.raw;
    // The connection closed before the answer was sent (from now on, its authentication included): the
    // caller went away (see acquireLeases' callerGone).
    const gone = new AbortController();
    // Set once a grant is answered over a connection still open: what to do if it closes before that answer is flushed.
    let unanswered: (() => void) | null = null;
    let flushed = false;
    // One listener for the whole request ('on': a response closes once, and `once` would wrap it in a bound function).
    res.on('close', () => {
      if (res.writableFinished) return;
      gone.abort();
      if (unanswered !== null && !flushed) unanswered();
    });
    // Lease calls spend the assertion's jti in the lease's own transaction (or after a refusal).
    const caller = await app.unspentCaller(request);
    const grant = await acquireLeases(app.operation(request), caller, request.body, { callerGone: gone.signal });
    // Gone after acquireLeases looked (the connection broke in the turn that granted it, its 'close' not
    // yet told), or the answer not flushed when it closed: the answer reaches no one, and the grant is
    // given up as acquireLeases gives up one granted after its caller went (once: see abandonGrant).
    const lost = () => {
      const hold = app.writDrain.hold();
      abandonGrant(ctx, caller.principal, request.body, grant)
        .catch((e: unknown) => request.log.error({ err: e, lease_id: grant.lease_id }, 'a grant whose answer did not go out could not be given back (it lapses at its TTL)'))
        .finally(hold);
    };
    // ('finish' as well as writableFinished: an injected response, light-my-request's, emits one and not the other.)
    res.on('finish', () => (flushed = true));
    if (res.destroyed || request.raw.socket.destroyed) lost();
    else unanswered = lost;
    if (grant.replayed) void reply.header('Idempotent-Replayed', 'true');
    return reply.code(grant.replayed ? 200 : 201).send(leaseGrantToWire(grant));
  });

  app.post<{ Params: { id: string }; Body: { token: string; ttl_ms?: number } }>('/v1/leases/:id/renew', {
    schema: {
      body: renewBody, operationId: 'renewLease', tags: ['Coordination'], summary: 'Renew a lease (token required); refused once the authority it was taken with is revoked',
      response: {
        200: { type: 'object', description: 'Renewed', required: ['lease_id', 'epochs', 'expires_at'], properties: { lease_id: { type: 'string' }, epochs, expires_at: { type: 'string', format: 'date-time', description: 'RFC 3339 time' } } },
        ...errorResponses([...WITH_INPUT, ...AUTHENTICATED, ...LEASE_REFUSALS, 'AUTHORITY_REVOKED', 'OWNER_CHANGED', 'UNPROCESSABLE']),
      },
    },
  }, async (request) => {
    const caller = await app.unspentCaller(request);
    return leaseRenewalToWire(await renewLease(app.operation(request), caller, request.params.id, request.body.token, request.body.ttl_ms));
  });

  app.delete<{ Params: { id: string }; Body: { token?: string } | null }>('/v1/leases/:id', {
    schema: {
      body: releaseBody,
      headers: { type: 'object', properties: { 'writ-lease-token': { type: 'string', minLength: 1, maxLength: 256, description: 'the lease token, when the (optional) body does not carry it' } } },
      operationId: 'releaseLease', tags: ['Coordination'], summary: 'Release a lease; the token goes in the optional body or the Writ-Lease-Token header. The epoch is kept',
      response: {
        200: { type: 'object', description: 'Released; the epochs stay as high-water marks', required: ['lease_id', 'epochs'], properties: { lease_id: { type: 'string' }, epochs } },
        ...errorResponses([...WITH_INPUT, ...AUTHENTICATED, ...LEASE_REFUSALS]),
      },
    },
  }, async (request) => {
    const caller = await app.unspentCaller(request);
    const token = request.body?.token ?? header(request.headers['writ-lease-token']);
    if (!token) throw new WritError('MALFORMED_REQUEST', 'releasing a lease needs its token: in the body ({"token": …}) or the Writ-Lease-Token header');
    return releaseLease(app.operation(request), caller, request.params.id, token);
  });

  app.get<{ Querystring: { resource?: string; holder?: string; state?: 'HELD'; after?: string; limit?: number } }>('/v1/leases', {
    schema: {
      operationId: 'listLeases', tags: ['Coordination'],
      summary: `Leases in the Kubernetes Lease vocabulary: every key ever leased, in key order, ${LEASE_PAGE.defaultLimit} at a time (limit, at most ${LEASE_PAGE.maxLimit}; after: the \`next\` of the previous page), or with state=HELD only the keys held now, in one answer`,
      querystring: {
        type: 'object', additionalProperties: false,
        properties: {
          resource: { type: 'string', description: 'a coordination key' }, holder: { type: 'string', description: 'a principal id' },
          state: { type: 'string', enum: ['HELD'], description: 'HELD: only the keys held now (read as such: without it every key ever leased is read, a page at a time); not paged, so neither after nor limit goes with it (UNPROCESSABLE)' },
          after: { type: 'string', minLength: 1, maxLength: MAX_KEY_LENGTH, description: 'the `next` of the previous page: the keys after this one (bytewise order)' },
          limit: { type: 'integer', minimum: 1, maximum: LEASE_PAGE.maxLimit, description: `default ${LEASE_PAGE.defaultLimit}` },
        },
      },
      response: {
        200: {
          type: 'object', description: 'A page of records, one per coordination key, in key order (bytewise)', required: ['leases', 'next'],
          properties: {
            leases: { type: 'array', items: ref('LeaseRecord') },
            next: { type: ['string', 'null'], description: 'pass as `after` for the next page; null on the last (always with state=HELD)' },
          },
        },
        ...errorResponses([...WITH_INPUT, ...AUTHENTICATED, 'UNPROCESSABLE']),
      },
    },
  }, async (request) => {
    await app.caller(request);
    const { resource, holder, state, after, limit } = request.query;
    const query: LeaseListQuery = {};
    if (resource) {
      checkQuerySpelling(ctx.policy.data, resource, 'resource');
      query.key = resource;
    }
    if (holder) query.holder = holder;
    if (state) query.state = state;
    if (after !== undefined) query.after = after;
    if (limit !== undefined) query.limit = limit;
    const page = await listLeases(ctx, query);
    return { leases: page.leases.map(leaseRecordToWire), next: page.next };
  });

  app.post<{ Body: ActionInput }>('/v1/actions', {
    schema: {
      body: actionBody, headers: actionHeaders, operationId: 'performAction', tags: ['Coordination'], summary: 'The write: verified, fenced, forwarded, receipted',
      response: {
        200: receiptReply('An idempotent replay of a completed write (same Idempotency-Key, same request)'),
        201: receiptReply('Written: the receipt is COMPLETED'),
        202: receiptReply('A replay while the first attempt is still PENDING'),
        ...errorResponses([
          ...WITH_INPUT, ...AUTHENTICATED, ...DECISION_CHECKS, 'DECISION_REPLAYED', 'UNPROCESSABLE', 'UNKNOWN_RESOURCE', 'LEASE_REQUIRED', 'LEASE_EXPIRED', 'LEASE_TOKEN_MISMATCH',
          'LEASE_NOT_FOUND', 'LEASE_PREEMPTED', 'STALE_FENCING_EPOCH', 'VERSION_CONFLICT', 'VERSION_REQUIRED', 'IDEMPOTENCY_MISMATCH', 'NO_UPSTREAM', 'UPSTREAM_FAILED', 'UPSTREAM_TIMEOUT', 'RECEIPT_DAMAGED',
        ]),
      },
    },
  }, async (request, reply) => {
    // The assertion's jti is spent in the same transaction as the write's intent (or its rejection).
    const authStarted = performance.now();
    const caller = await app.unspentCaller(request);
    const auth = performance.now() - authStarted;
    const h = request.headers;
    const out = await performAction(app.operation(request), caller, request.body, {
      decision: header(h['writ-decision']),
      leaseToken: header(h['writ-lease-token']),
      leaseId: header(h['writ-lease-id']),
      fencingEpoch: header(h['writ-fencing-epoch']),
      idempotencyKey: header(h['idempotency-key']),
    });
    if (out.replayed) reply.header('Idempotent-Replayed', 'true');
    reply.header('Server-Timing', formatServerTiming({ auth, ...out.timings, total: reply.elapsedTime }));
    // 201 a new write; 200 an idempotent replay of a completed one; 202 while the first attempt is still PENDING.
    const status = out.receipt.status === 'PENDING' ? 202 : out.replayed ? 200 : 201;
    const receipt = receiptToWire(out.receipt);
    // The Receipt schema's `replayed` is set whenever the call wrote nothing, not only when a racing
    // retry found the intent already recorded (a retry that finds the receipt first read it as stored).
    return reply.code(status).send({ receipt: out.replayed ? { ...receipt, replayed: true } : receipt, replayed: out.replayed });
  });

  app.get<{ Params: { id: string } }>('/v1/receipts/:id', {
    schema: { operationId: 'getReceipt', tags: ['Audit'], summary: 'One receipt', response: { 200: { type: 'object', description: 'The receipt', required: ['receipt'], properties: { receipt: ref('Receipt') } }, ...errorResponses([...AUTHENTICATED, 'NOT_FOUND', 'RECEIPT_DAMAGED']) } },
  }, async (request) => {
    await app.caller(request);
    await checkReceiptReadable(ctx, request, request.params.id);
    const r = await ctx.receipts.get(request.params.id);
    if (!r) throw noReceipt(request.params.id);
    return { receipt: receiptToWire(r) };
  });

  app.get<{ Querystring: { resource?: string; principal?: string; status?: string; decision_id?: string; after?: number; before?: number; order?: 'oldest' | 'newest'; limit?: number; since?: string; until?: string } }>('/v1/receipts', {
    schema: {
      operationId: 'listReceipts', tags: ['Audit'], summary: 'Receipts by resource, principal, status, decision and creation time, oldest or newest first. A console session without an audit grant sees only its own',
      querystring: {
        type: 'object', additionalProperties: false,
        properties: {
          resource: { type: 'string' }, principal: { type: 'string' }, status: { type: 'string', enum: [...RECEIPT_STATUSES] },
          decision_id: { type: 'string', ...DECISION_ID_FILTER, description: 'receipts of the writes and refusals that presented this decision (a decision authorizes one write: at most one receipt that is not REJECTED)' },
          after: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'the `next` of the previous page' }, limit: { type: 'integer', minimum: 1, maximum: RECEIPT_PAGE.maxLimit, description: `default ${RECEIPT_PAGE.defaultLimit}` },
          order: { type: 'string', enum: ['oldest', 'newest'], description: 'oldest first (chain order, the default; page with `after`) or newest first (page with `before`)' },
          before: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'with order=newest: the `next` of the previous page' },
          since: { type: 'string', format: 'date-time', description: 'receipts created at or after this RFC 3339 time' },
          until: { type: 'string', format: 'date-time', description: 'receipts created at or before this RFC 3339 time' },
        },
      },
      response: {
        200: { type: 'object', description: 'A page of receipts, in the order asked (oldest first by default)', required: ['receipts', 'next'], properties: { receipts: { type: 'array', items: ref('Receipt') }, next: { type: ['integer', 'null'], description: 'pass as `after` (as `before` with order=newest) for the next page; null on the last' } } },
        ...errorResponses([...WITH_INPUT, ...AUTHENTICATED, 'UNKNOWN_PRINCIPAL', 'UNPROCESSABLE', 'NOT_FOUND', 'RECEIPT_DAMAGED']),
      },
    },
  }, async (request) => {
    await app.caller(request);
    const { since, until, order, ...q } = request.query;
    if (order === 'newest' && q.after !== undefined) throw new WritError('UNPROCESSABLE', 'order=newest pages with `before`, not `after`');
    if (order !== 'newest' && q.before !== undefined) throw new WritError('UNPROCESSABLE', '`before` pages receipts newest first: add order=newest');
    if (q.resource !== undefined) checkQuerySpelling(ctx.policy.data, q.resource, 'resource');
    const principal = await ownFilter(ctx, request, q.principal, 'receipts');
    if (principal !== undefined) q.principal = principal;
    const page = await ctx.receipts.query({
      ...(q as Omit<Parameters<typeof ctx.receipts.query>[0], 'since' | 'until'>),
      ...(order === 'newest' ? { newestFirst: true } : {}),
      ...(since !== undefined ? { since: parseTime(since, 'since')! } : {}),
      ...(until !== undefined ? { until: parseTime(until, 'until')! } : {}),
    });
    return { ...page, receipts: page.receipts.map(receiptToWire) };
  });

  app.get('/v1/audit/verify', {
    schema: {
      operationId: 'verifyAuditChain', tags: ['Audit'], summary: 'Check every receipt hash chain, the receipts index, the graph event log\'s hash chain and the latest signed checkpoint',
      response: {
        200: {
          type: 'object', description: 'The verdict on the receipt log in the store: one hash chain per coordination key, checked from its archive floor against the latest signed checkpoint over all chain heads', required: ['ok', 'entries', 'chains', 'head'],
          properties: {
            ok: { type: 'boolean' }, entries: { type: 'integer', description: 'entries checked and found sound (above the archive floors)' },
            chains: { type: 'integer', description: 'chains checked' },
            head: { type: 'string', description: 'Merkle root over the chain heads as verified (publish it to detect a later rewrite)' },
            chain: { type: 'string', description: 'the chain (coordination key) where the log breaks; absent when the break is in no chain (the latest checkpoint, or a receipts index row naming no entry of its own)' },
            firstBadPos: { type: 'integer', description: 'the position in that chain' }, firstBadSeq: { type: 'integer', description: 'the store-wide seq of the entry at fault, when one is' }, problem: { type: 'string' },
            checkpoint: {
              type: 'object', description: 'the latest signed checkpoint over all chain heads, which the log was verified against (and archived chains from)',
              required: ['seq', 'at', 'chains', 'root', 'archived', 'jws'],
              properties: {
                seq: { type: 'integer' }, at: { type: 'string', format: 'date-time', description: 'RFC 3339 time' }, chains: { type: 'integer' }, root: { type: 'string' }, archived: { type: 'integer', description: 'entries this checkpoint archived' },
                graph_revision: { type: 'integer', description: 'the graph event log\'s revision the checkpoint signed (version 3 checkpoints)' }, graph_hash: { type: 'string', description: 'that event\'s hash' },
                jws: { type: 'string', description: 'the checkpoint as signed and stored: a compact JWS (EdDSA, typ writ-checkpoint+jws, kid of a key in /.well-known/jwks.json) whose payload is {v, seq, at (ms), chains, root, archived, graph_revision, graph_hash}; save this answer and the JWKS to check the graph head offline (writ audit verify --graph-events FILE --checkpoint FILE --jwks FILE)' },
              },
            },
            graph: {
              type: 'object', description: 'the graph event log\'s hash chain (ok is false when it breaks too)', required: ['ok', 'events', 'revision', 'hash', 'unhashed'],
              properties: {
                ok: { type: 'boolean' }, events: { type: 'integer', description: 'events checked and found sound' },
                revision: { type: 'integer', description: 'the last sound hashed revision' }, hash: { type: 'string', description: 'its hash' },
                unhashed: { type: 'integer', description: 'events after it appended by a Writ from before the chain (a rolling upgrade), hashed by the next append of this one: not a break' },
                firstBadRevision: { type: 'integer', description: 'the revision at fault' }, problem: { type: 'string' },
              },
            },
          },
        },
        ...errorResponses([...AUTHENTICATED]),
      },
    },
  }, async (request) => {
    await app.caller(request);
    // In chunks, letting writes through between them: a long log must not stall the gateway.
    const verdict = await ctx.receipts.verifyChain();
    return verdict.checkpoint ? { ...verdict, checkpoint: { ...verdict.checkpoint, at: toWireTime(verdict.checkpoint.at) } } : verdict;
  });

  app.post<{ Body: { id: string; reason: string; ttl_ms?: number; decision: string } }>('/v1/incidents', {
    schema: {
      body: incidentBody, operationId: 'declareIncident', tags: ['Incidents'], summary: 'Declare an incident (needs an allow decision for declare_incident on incident:<id>)',
      response: {
        201: { type: 'object', description: 'Declared', required: ['incident'], properties: { incident: ref('Incident') } },
        ...errorResponses([...WITH_INPUT, ...AUTHENTICATED, ...DECISION_CHECKS, 'DECISION_REPLAYED', 'ALREADY_EXISTS', 'FORBIDDEN', 'UNPROCESSABLE']),
      },
    },
  }, async (request, reply) => {
    const caller = await app.caller(request);
    return reply.code(201).send({ incident: incidentToWire(await declareIncident(ctx, caller, request.body)) });
  });

  app.delete<{ Params: { id: string }; Body: { reason?: string } | null; Querystring: { reason?: string } }>('/v1/incidents/:id', {
    schema: {
      body: revokeBody, querystring: reasonQuery, operationId: 'resolveIncident', tags: ['Incidents'], summary: 'Resolve an incident. Like every DELETE it takes an optional body; a `reason` (body or query) is accepted but incidents record no resolution reason',
      response: { 200: { type: 'object', description: 'Resolved', required: ['incident'], properties: { incident: ref('Incident') } }, ...errorResponses([...WITH_INPUT, ...AUTHENTICATED, 'NOT_FOUND', 'FORBIDDEN']) },
    },
  }, async (request) => {
    const caller = await app.caller(request);
    return { incident: incidentToWire(await resolveIncident(ctx, caller, request.params.id)) };
  });

  app.get('/v1/incidents', {
    schema: { operationId: 'listIncidents', tags: ['Incidents'], summary: 'Active incidents', response: { 200: { type: 'object', description: 'Incidents not resolved nor ended', required: ['incidents'], properties: { incidents: { type: 'array', items: ref('Incident') } } }, ...errorResponses([...AUTHENTICATED]) } },
  }, async (request) => {
    await app.caller(request);
    return { incidents: (await activeIncidents(ctx)).map(incidentToWire) };
  });
}
