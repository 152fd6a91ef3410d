/**
 * The auditor's reads that the CLI had and the API lacked (`writ can --at`, `why`, `expiring`,
 * `orphans`), plus the graph's event log and a diff between two points of it, and the lease wait
 * queues. The console calls these, and nothing else but the public API.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { WritError } from '../../errors.js';
import {
  capabilitiesOf, checkMayAskAbout, EVERY_ENVIRONMENT, expiringEdges, mayAskAbout, graphDiff, graphEvents, noReceipt, orphanedDelegations, parseTime, waitQueues, whyReceipt,
} from '../../service/index.js';
import type { WritContext } from '../../service/index.js';
import { toWireTime } from '../../wire/time.js';
import type { Capabilities } from '../../wire/v1.js';
import { AUTHENTICATED, errorResponses, ref, WITH_INPUT } from '../components.js';
import { chainEdgeToWire, edgeToWire, principalToWire, whyToWire } from '../wire.js';

const iso = { type: 'string', format: 'date-time', description: 'RFC 3339 time' } as const;
/** A revocation since a decision: when, by whom and why (null when the graph log no longer holds its event). */
const revocation = {
  type: 'object', required: ['revoked_at', 'graph_revision', 'revoked_by', 'reason'],
  properties: { revoked_at: iso, graph_revision: { type: ['integer', 'null'], description: 'The graph revision that recorded the revocation (null when the log no longer holds it): decisions made at this revision or later see it' }, revoked_by: { type: ['string', 'null'] }, reason: { type: ['string', 'null'] } },
} as const;
const strings = { type: 'array', items: { type: 'string' } } as const;
const edges = (description: string) => ({ type: 'array', items: ref('Edge'), description });

/**
 * Whether the reader of this request may read what is `principal`'s: always when the request is no read
 * (request.reader unset) or its reader is an auditor; otherwise when it is the reader's own, or its
 * audit_read on audit:principal:<principal> lets it ask about that principal in every environment. None
 * of the reads narrowed here is tied to one environment (a principal, its edges and capabilities, its
 * receipts, which record none), so an audit_read limited to `staging` reads none of them.
 */
export async function readsAbout(ctx: WritContext, request: FastifyRequest, principal: string): Promise<boolean> {
  const r = request.reader;
  return !r || r.auditor || r.principal === principal || mayAskAbout(ctx, r.principal, principal, EVERY_ENVIRONMENT);
}

/**
 * Whether the reader may read a thing that is `owner`'s, `owner` null when there is no such thing (then
 * false). The check is made for an unknown thing too, about `asked` (the id asked for), so that the
 * work it takes does not tell a thing that does not exist from one the reader may not read.
 */
export async function readsIfAny(ctx: WritContext, request: FastifyRequest, owner: string | null, asked: string): Promise<boolean> {
  const may = await readsAbout(ctx, request, owner ?? asked);
  return owner !== null && may;
}

/**
 * NOT_FOUND, as for an unknown id, unless the reader may read receipt `id`. Whose it is comes from the
 * receipts index before the receipt is read: a reader is told it may not read one before anything of
 * it is known (not even that it is damaged) or computed (its why chain).
 */
export async function checkReceiptReadable(ctx: WritContext, request: FastifyRequest, id: string): Promise<void> {
  const r = request.reader;
  if (!r || r.auditor) return;
  if (!(await readsIfAny(ctx, request, await ctx.receipts.ownerOf(id), id))) throw noReceipt(id);
}

/** readsAbout, or NOT_FOUND: a reader learns nothing of what it may not read, not even that it exists. */
export async function checkOwn(ctx: WritContext, request: FastifyRequest, principal: string, what: string): Promise<void> {
  if (!(await readsAbout(ctx, request, principal))) throw new WritError('NOT_FOUND', `no ${what} of ${request.reader!.principal}'s own here`);
}

/** The `principal` filter of a list: a non-auditor reader asks about itself when it names nobody, and may name another only as checkOwn allows. */
export async function ownFilter(ctx: WritContext, request: FastifyRequest, principal: string | undefined, what: string): Promise<string | undefined> {
  const r = request.reader;
  if (!r || r.auditor) return principal;
  if (principal === undefined) return r.principal;
  await checkOwn(ctx, request, principal, what);
  return principal;
}

export function registerAuditReadRoutes(app: FastifyInstance): void {
  const ctx = app.writ;

  app.get<{ Params: { id: string }; Querystring: { at?: string } }>('/v1/principals/:id/capabilities', {
    schema: {
      operationId: 'principalCapabilities', tags: ['Audit'],
      summary: 'What a principal can do now or at a past time (`writ can --at`): every candidate chain to it, judged by the policy. The principal itself, governance, or a holder of audit_read on audit:principal:<id> in every environment may ask',
      querystring: { type: 'object', additionalProperties: false, properties: { at: { ...iso, description: 'RFC 3339 time (default now): the graph as it was then, judged at that instant' } } },
      response: {
        200: {
          type: 'object', description: 'The chains and whether each counts', required: ['principal', 'at', 'graph_revision', 'truncated', 'capabilities'],
          properties: {
            principal: { type: 'string' }, at: iso, graph_revision: { type: 'integer', description: 'the revision the graph had at `at`' },
            truncated: { type: 'boolean', description: 'true: the principal may hold more than is listed (more chains adding to the valid ones than Writ judges for one principal, 64, or chain resolution stopped short); false: every authority it holds is given by a listed valid chain' },
            capabilities: {
              type: 'array',
              items: {
                type: 'object', required: ['chain', 'valid', 'scope', 'problems'],
                properties: { chain: { type: 'array', items: ref('ChainEdge'), description: 'governance first' }, valid: { type: 'boolean' }, scope: ref('Scope'), problems: { ...strings, description: 'why the chain does not count (empty when valid)' } },
              },
            },
          },
        },
        ...errorResponses([...WITH_INPUT, ...AUTHENTICATED, 'UNKNOWN_PRINCIPAL', 'UNPROCESSABLE', 'POLICY_UNAVAILABLE', 'BUDGET_EXCEEDED']),
      },
    },
  }, async (request) => {
    const caller = await app.caller(request);
    // Chains in every environment: asking needs audit_read in every environment too.
    await checkMayAskAbout(ctx, caller, request.params.id, EVERY_ENVIRONMENT);
    const at = request.query.at === undefined ? undefined : parseTime(request.query.at, 'at') ?? undefined;
    const r = await capabilitiesOf(ctx, request.params.id, at);
    return {
      principal: request.params.id, at: toWireTime(r.at), graph_revision: r.graph_revision, truncated: r.truncated,
      capabilities: r.capabilities.map((c) => ({ chain: c.chain.map(chainEdgeToWire), valid: c.valid, scope: c.scope, problems: c.problems })),
    } satisfies Capabilities;
  });

  app.get<{ Params: { id: string } }>('/v1/receipts/:id/why', {
    schema: {
      operationId: 'explainReceipt', tags: ['Audit'], summary: 'Why this write was allowed (`writ why`): the receipt, and each edge of its chain as it was when the decision was made, with what became of it since',
      response: {
        200: {
          type: 'object', description: 'The receipt and its chain', required: ['receipt', 'graph_revision', 'chain', 'principals_revoked'],
          properties: {
            receipt: ref('Receipt'), graph_revision: { type: ['integer', 'null'], description: 'the revision the decision was made at' },
            chain: {
              type: 'array', description: 'governance first',
              items: {
                type: 'object', required: ['edge', 'now'],
                properties: { edge: ref('ChainEdge'), now: { ...revocation, type: ['object', 'null'], description: 'the edge now, when it was revoked since the decision (null: unchanged)' } },
              },
            },
            principals_revoked: {
              type: 'array', description: 'principals of the chain (governance aside) revoked since the decision, each of which ends the chain too',
              items: { ...revocation, required: ['principal', ...revocation.required], properties: { principal: { type: 'string' }, ...revocation.properties } },
            },
          },
        },
        ...errorResponses([...AUTHENTICATED, 'NOT_FOUND', 'RECEIPT_DAMAGED']),
      },
    },
  }, async (request) => {
    await app.caller(request);
    await checkReceiptReadable(ctx, request, request.params.id);
    return whyToWire(await whyReceipt(ctx, request.params.id));
  });

  app.get<{ Querystring: { after?: number; limit?: number } }>('/v1/graph/events', {
    schema: {
      operationId: 'graphEvents', tags: ['Graph'], summary: 'The graph\'s event log (every change, with its revision, time, actor and reason, and its link in the log\'s hash chain), oldest first: the stops of a time slider, and what an auditor checks against a signed checkpoint',
      querystring: {
        type: 'object', additionalProperties: false,
        properties: { after: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'events after this revision (default 0)' }, limit: { type: 'integer', minimum: 1, maximum: 5000, description: 'default 1000' } },
      },
      response: {
        200: {
          type: 'object', description: 'A page of events', required: ['events', 'next', 'head'],
          properties: {
            events: {
              type: 'array',
              items: {
                type: 'object', required: ['revision', 'at', 'actor', 'type', 'subject', 'kind', 'from', 'to', 'reason', 'payload', 'prev_hash', 'hash'],
                properties: {
                  revision: { type: 'integer' }, at: iso, actor: { type: 'string' },
                  type: { type: 'string', enum: ['principal.created', 'principal.keys_set', 'principal.revoked', 'edge.created', 'edge.revoked'] },
                  subject: { type: 'string', description: 'the principal or edge id' },
                  kind: { type: ['string', 'null'] }, from: { type: ['string', 'null'] }, to: { type: ['string', 'null'] }, reason: { type: ['string', 'null'] },
                  payload: { type: 'string', description: 'the event exactly as stored (JSON text): the bytes its hash covers' },
                  prev_hash: { type: ['string', 'null'], description: 'the hash of the event before (64 zeros for revision 1); null when that one is not hashed' },
                  hash: {
                    type: ['string', 'null'],
                    description: 'sha256 hex of "writ-graph-v1\\n" prev_hash "\\n" revision "\\n" at (milliseconds since the epoch, in decimal) "\\n" JSON(actor) "\\n" JSON(type) "\\n" payload; null while unhashed (appended by a Writ from before the graph chain: the next append hashes it). A signed checkpoint\'s graph_revision and graph_hash name one of these',
                  },
                },
              },
            },
            next: { type: ['integer', 'null'], description: 'pass as `after` for the next page; null on the last' },
            head: { type: 'integer', description: 'the graph\'s head revision' },
          },
        },
        ...errorResponses([...WITH_INPUT, ...AUTHENTICATED]),
      },
    },
  }, async (request) => {
    await app.caller(request);
    const page = await graphEvents(ctx, request.query.after ?? 0, request.query.limit ?? 1000);
    return { ...page, events: page.events.map((e) => ({ ...e, at: toWireTime(e.at) })) };
  });

  app.get<{ Querystring: { from: string; to?: string } }>('/v1/graph/diff', {
    schema: {
      operationId: 'graphDiff', tags: ['Graph'], summary: 'What changed in the authority graph between two revisions or times: edges added, revoked and expired; principals added and revoked',
      querystring: {
        type: 'object', additionalProperties: false, required: ['from'],
        properties: { from: { type: 'string', description: 'a graph revision or an RFC 3339 time' }, to: { type: 'string', description: 'a graph revision or an RFC 3339 time (default: now)' } },
      },
      response: {
        200: {
          type: 'object', description: 'The difference, each list sorted by id', required: ['from', 'to', 'added', 'revoked', 'expired', 'principals_added', 'principals_revoked'],
          properties: {
            from: { type: 'object', required: ['revision', 'at'], properties: { revision: { type: 'integer' }, at: iso } },
            to: { type: 'object', required: ['revision', 'at'], properties: { revision: { type: 'integer' }, at: iso } },
            added: edges('edges created between the two points'), revoked: edges('edges revoked between them'),
            expired: edges('edges not revoked whose window closed between them'),
            principals_added: { type: 'array', items: ref('Principal') }, principals_revoked: { type: 'array', items: ref('Principal') },
          },
        },
        ...errorResponses([...WITH_INPUT, ...AUTHENTICATED, 'UNPROCESSABLE']),
      },
    },
  }, async (request) => {
    await app.caller(request);
    const d = await graphDiff(ctx, request.query.from, request.query.to);
    return {
      from: { ...d.from, at: toWireTime(d.from.at) }, to: { ...d.to, at: toWireTime(d.to.at) },
      added: d.added.map(edgeToWire), revoked: d.revoked.map(edgeToWire), expired: d.expired.map(edgeToWire),
      principals_added: d.principals_added.map(principalToWire), principals_revoked: d.principals_revoked.map(principalToWire),
    };
  });

  app.get<{ Querystring: { within_ms?: number; principal?: string } }>('/v1/audit/expiring', {
    schema: {
      operationId: 'expiringEdges', tags: ['Audit'], summary: 'Live grants and delegations that expire soon (`writ expiring`), soonest first',
      querystring: {
        type: 'object', additionalProperties: false,
        properties: { within_ms: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'the window, default 7 days' }, principal: { type: 'string', description: 'only edges from or to this principal' } },
      },
      response: { 200: { type: 'object', description: 'The edges', required: ['edges'], properties: { edges: edges('soonest first') } }, ...errorResponses([...WITH_INPUT, ...AUTHENTICATED, 'NOT_FOUND']) },
    },
  }, async (request) => {
    await app.caller(request);
    const p = await ownFilter(ctx, request, request.query.principal, 'delegations');
    const found = await expiringEdges(ctx, request.query.within_ms ?? 7 * 86_400_000);
    return { edges: found.filter((e) => p === undefined || e.from === p || e.to === p).map(edgeToWire) };
  });

  app.get<{ Querystring: { principal?: string } }>('/v1/audit/orphans', {
    schema: {
      operationId: 'orphanedDelegations', tags: ['Audit'], summary: 'Live edges that count for nothing or for less than they say (`writ orphans`): delegations whose delegator no longer holds what it gave, with the policy\'s reasons, and edges part of whose scope can never apply under the policy\'s registry, with why',
      querystring: { type: 'object', additionalProperties: false, properties: { principal: { type: 'string', description: 'only edges from or to this principal' } } },
      response: {
        200: {
          type: 'object', description: 'The orphans, by edge id', required: ['orphans'],
          properties: { orphans: { type: 'array', items: { type: 'object', required: ['edge', 'violations'], properties: { edge: ref('Edge'), violations: strings } } } },
        },
        ...errorResponses([...WITH_INPUT, ...AUTHENTICATED, 'POLICY_UNAVAILABLE', 'BUDGET_EXCEEDED', 'NOT_FOUND']),
      },
    },
  }, async (request) => {
    await app.caller(request);
    const p = await ownFilter(ctx, request, request.query.principal, 'delegations');
    // Only the edges asked about are judged (a delegation's check is a policy evaluation). An ownership's
    // `to` is a resource pattern: asking for that pattern as a principal finds it too (harmless).
    const found = await orphanedDelegations(ctx, p === undefined ? undefined : (edge) => edge.from === p || edge.to === p);
    return { orphans: found.map((o) => ({ edge: edgeToWire(o.edge), violations: o.violations })) };
  });

  app.get('/v1/leases/queues', {
    schema: {
      operationId: 'leaseQueues', tags: ['Coordination'], summary: 'The lease wait queues: every coordination key with live waiters, each in service order (governed priority, then age)',
      response: {
        200: {
          type: 'object', description: 'Keys with waiters, in key order', required: ['queues'],
          properties: {
            queues: {
              type: 'array',
              items: {
                type: 'object', required: ['key', 'waiters'],
                properties: {
                  key: { type: 'string' },
                  waiters: {
                    type: 'array',
                    items: {
                      type: 'object', required: ['ticket', 'holder', 'instance', 'priority', 'enqueued_at', 'deadline'],
                      properties: { ticket: { type: 'integer' }, holder: { type: 'string' }, instance: { type: ['string', 'null'] }, priority: { type: 'integer' }, enqueued_at: iso, deadline: iso },
                    },
                  },
                },
              },
            },
          },
        },
        ...errorResponses([...AUTHENTICATED]),
      },
    },
  }, async (request) => {
    await app.caller(request);
    const queues = await waitQueues(ctx);
    return { queues: queues.map((q) => ({ key: q.key, waiters: q.waiters.map((w) => ({ ...w, enqueued_at: toWireTime(w.enqueued_at), deadline: toWireTime(w.deadline) })) })) };
  });
}
