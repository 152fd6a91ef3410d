/**
 * Response schemas of the v1 API, shared by fastify (which serializes every answer through them) and
 * the OpenAPI document (@fastify/swagger lists each under `components.schemas` by its `$id`). A route
 * names them with `ref('Edge')`; `registerComponents` adds them to the app before any route.
 */
import type { FastifyInstance } from 'fastify';
import { ERROR_CATALOGUE, type ErrorCode } from '../errors.js';

const iso = { type: 'string', format: 'date-time', description: 'RFC 3339 time' } as const;
const isoOrNull = { type: ['string', 'null'], format: 'date-time', description: 'RFC 3339 time, or null' } as const;
const strings = { type: 'array', items: { type: 'string' } } as const;
const stringMap = { type: 'object', additionalProperties: { type: 'string' } } as const;
const epochs = { type: 'object', additionalProperties: { type: 'integer' }, description: 'fencing epoch per coordination key' } as const;

export type ComponentName =
  | 'Problem' | 'Scope' | 'Jwk' | 'Principal' | 'Edge' | 'ChainEdge' | 'Obligations' | 'Decision' | 'ChainVerdict' | 'Explanation'
  | 'LeaseGrant' | 'LeaseRecord' | 'Receipt' | 'Incident';

export const ref = (name: ComponentName) => ({ $ref: `${name}#` });

const Problem = {
  $id: 'Problem',
  type: 'object',
  description: 'RFC 9457 problem details with Writ\'s stable `code` (see the README\'s error table). A refused request changed nothing.',
  required: ['type', 'title', 'status', 'code', 'detail'],
  properties: {
    type: { type: 'string', description: 'https://writ.dev/errors/<code>' },
    title: { type: 'string' },
    status: { type: 'integer' },
    code: { type: 'string', enum: Object.keys(ERROR_CATALOGUE) },
    detail: { type: 'string' },
    instance: { type: 'string' },
    key: { type: 'string', description: 'RESOURCE_BUSY, LEASE_WAIT_TIMEOUT: the busy coordination key' },
    held_key: { type: 'string', description: 'RESOURCE_BUSY, LEASE_WAIT_TIMEOUT: present when what is held is a related key, not `key` itself: the resource\'s key when `key` is one of its fields\' (`resource#field`), or a field\'s key when `key` is the resource\'s; `holder` and `expires_at` are then that key\'s' },
    holder: { type: ['string', 'null'], description: 'RESOURCE_BUSY, LEASE_WAIT_TIMEOUT: who holds the key (or `held_key`; null: reserved for a queued waiter); OVERLOADED from POST /v1/leases past WRIT_LEASE_MAX_WAITERS_PER_PRINCIPAL: the principal whose waiting acquisitions reached the bound (the caller)' },
    expires_at: { ...isoOrNull, description: 'RESOURCE_BUSY, LEASE_WAIT_TIMEOUT: when the holder\'s lease expires (null: reserved for a queued waiter); LEASE_EXPIRED: when the lease expired (RFC 3339)' },
    queued: { type: 'boolean', description: 'RESOURCE_BUSY, LEASE_WAIT_TIMEOUT: the key is free but reserved for a waiter ahead in the queue' },
    waited_ms: { type: 'integer', description: 'LEASE_WAIT_TIMEOUT: how long the request waited' },
    retry_after_ms: { type: 'integer', description: 'RESOURCE_BUSY, LEASE_WAIT_TIMEOUT, OVERLOADED: also sent as Retry-After (seconds)' },
    receipt_id: { type: 'string', description: 'POST /v1/actions: the receipt that records this refusal or failure' },
    receipt_status: { type: 'string', enum: ['PENDING', 'FAILED'], description: 'POST /v1/actions: PENDING after UPSTREAM_FAILED on a 5xx, or OVERLOADED after the upstream applied the write but the store could not settle it (the receipt stays PENDING until reconciliation settles it from the upstream\'s record); FAILED when the receipt is settled FAILED, so the write was not applied (OVERLOADED for a write not forwarded because its intent took nearly the whole upstream timeout to become durable; the replay of any failed write): retry with a new Idempotency-Key' },
    waiters: { type: 'integer', description: 'OVERLOADED from POST /v1/leases: how many callers wait in the queue of `key`' },
    max_waiters: { type: 'integer', description: 'OVERLOADED from POST /v1/leases: the most one key\'s queue holds (WRIT_LEASE_MAX_WAITERS)' },
    waiting: { type: 'integer', description: 'OVERLOADED from POST /v1/leases: how many acquisitions `holder` keeps waiting now, over every key' },
    max_waiters_per_principal: { type: 'integer', description: 'OVERLOADED from POST /v1/leases: the most acquisitions one principal may keep waiting at once (WRIT_LEASE_MAX_WAITERS_PER_PRINCIPAL)' },
    current_version: { type: 'integer', description: 'VERSION_CONFLICT: the version the upstream has now' },
    lease_id: { type: 'string', description: 'lease refusals: the lease concerned' },
    decision_id: { type: 'string', description: 'DECISION_EXPIRED: the decision presented (its signature checked); from POST /v1/actions its refusal\'s receipt names it too, so GET /v1/receipts?decision_id= finds it' },
    used_by_receipt_id: { type: 'string', description: 'DECISION_REPLAYED from POST /v1/actions: the receipt of the write that used the decision (absent when the log no longer holds it)' },
    environments: { type: 'array', items: { type: 'string' }, description: 'NO_INCIDENT: the environments of the lease in which no incident is active' },
    clock_offset_ms: { type: 'integer', description: 'UNAUTHENTICATED, DECISION_EXPIRED, LOGIN_LINK_INVALID (PostgreSQL): refused as expired by the database\'s clock though live by this replica\'s; how far this replica\'s clock was from the database\'s (negative: behind). Fix the replica\'s clock (NTP)' },
  },
  additionalProperties: true,
} as const;

const Scope = {
  $id: 'Scope',
  type: 'object',
  required: ['actions', 'resources', 'environments', 'fields', 'constraints'],
  properties: {
    actions: strings,
    resources: { ...strings, description: 'canonical resource patterns (`wp:post:*`, `site:example.com:**`)' },
    environments: strings,
    fields: strings,
    constraints: { type: 'object', required: ['risk_max'], properties: { risk_max: { type: 'integer' } }, additionalProperties: true },
  },
} as const;

const Jwk = {
  $id: 'Jwk',
  type: 'object',
  required: ['kty'],
  properties: { kty: { type: 'string' }, kid: { type: 'string' }, crv: { type: 'string' }, x: { type: 'string' }, y: { type: 'string' }, n: { type: 'string' }, e: { type: 'string' }, alg: { type: 'string' }, use: { type: 'string' } },
  // Registration accepts any further JWK member (RFC 7517 allows them); answers must not drop them.
  additionalProperties: true,
} as const;

const Principal = {
  $id: 'Principal',
  type: 'object',
  required: ['id', 'kind', 'priority_class', 'priority', 'attributes', 'keys', 'created_at', 'revoked_at'],
  properties: {
    id: { type: 'string' },
    kind: { type: 'string', enum: ['agent', 'human', 'service', 'control_plane', 'governance'] },
    priority_class: { type: 'string' },
    priority: { type: 'integer' },
    attributes: { type: 'object', additionalProperties: true },
    keys: { type: 'array', items: ref('Jwk') },
    created_at: iso,
    revoked_at: isoOrNull,
  },
} as const;

const edgeProperties = {
  id: { type: 'string' },
  kind: { type: 'string', enum: ['grant', 'delegate', 'owns', 'approves', 'preempts'] },
  from: { type: 'string' },
  to: { type: 'string' },
  scope: ref('Scope'),
  max_depth: { type: ['integer', 'null'] },
  creator: { type: 'string' },
  reason: { type: 'string' },
} as const;
const edgeRequired = ['id', 'kind', 'from', 'to', 'scope', 'max_depth', 'creator', 'reason', 'created_at', 'not_before', 'expires_at', 'revoked_at'] as const;

const Edge = {
  $id: 'Edge',
  type: 'object',
  description: 'An edge of the authority graph; its time window is [not_before, expires_at).',
  required: [...edgeRequired, 'revision'],
  properties: { ...edgeProperties, created_at: iso, not_before: isoOrNull, expires_at: isoOrNull, revoked_at: isoOrNull, revision: { type: 'integer', description: 'graph revision that created it' } },
} as const;

const ChainEdge = {
  $id: 'ChainEdge',
  type: 'object',
  description: 'An edge as the policy judged it.',
  required: [...edgeRequired],
  properties: { ...edgeProperties, created_at: iso, not_before: isoOrNull, expires_at: isoOrNull, revoked_at: isoOrNull },
} as const;

const Obligations = {
  $id: 'Obligations',
  type: 'object',
  required: ['lease_required', 'version_required', 'approval_required', 'resource_class', 'field_classes', 'conflict_domain'],
  properties: {
    lease_required: { type: 'boolean', description: 'false: the write needs no lease (POST /v1/leases refuses; withLease runs without one)' },
    version_required: { type: 'boolean' },
    approval_required: { type: 'boolean' },
    resource_class: { type: 'string', description: 'READ_SHARED, WRITE_OPTIMISTIC, WRITE_EXCLUSIVE or MULTI_WRITER_MERGEABLE' },
    field_classes: { ...stringMap, description: 'per requested field, its class' },
    conflict_domain: { type: ['string', 'null'] },
  },
} as const;

const Decision = {
  $id: 'Decision',
  type: 'object',
  required: ['decision_id', 'allow', 'principal', 'action', 'resource', 'environment', 'fields', 'reasons', 'approval_missing', 'obligations', 'risk', 'chain', 'chain_edges', 'owners', 'graph_revision', 'policy_revision', 'issued_at', 'expires_at', 'token'],
  properties: {
    decision_id: { type: 'string' },
    allow: { type: 'boolean' },
    principal: { type: 'string' },
    action: { type: 'string' },
    resource: { type: 'string', description: 'canonical key (an alias in the request is resolved)' },
    environment: { type: 'string' },
    fields: strings,
    reasons: { ...strings, description: 'what is missing; empty on allow' },
    approval_missing: { type: 'boolean', description: 'Denied only for want of an approval: decide again with context.approval from a principal with an approves edge.' },
    obligations: ref('Obligations'),
    risk: { type: 'integer' },
    chain: { ...strings, description: 'edge ids, governance first; empty on deny' },
    chain_edges: { type: 'array', items: ref('ChainEdge') },
    owners: { type: 'object', additionalProperties: { type: ['string', 'null'] } },
    graph_revision: { type: 'integer' },
    policy_revision: { type: 'string' },
    issued_at: iso,
    expires_at: isoOrNull,
    token: { type: ['string', 'null'], description: 'compact JWS for the gateway; null on deny' },
  },
} as const;

const ChainVerdict = {
  $id: 'ChainVerdict',
  type: 'object',
  required: ['index', 'ok', 'edges', 'problems'],
  properties: {
    index: { type: 'integer' },
    ok: { type: 'boolean' },
    edges: { type: 'array', items: { type: 'object', required: ['id', 'ok', 'problems'], properties: { id: { type: 'string' }, ok: { type: 'boolean' }, problems: strings } } },
    problems: strings,
  },
} as const;

const Explanation = {
  $id: 'Explanation',
  type: 'object',
  required: ['principal', 'request', 'allow', 'reasons', 'approval_missing', 'risk', 'obligations', 'owners', 'chains', 'graph_revision', 'policy_revision'],
  properties: {
    principal: { type: 'string' },
    request: {
      type: 'object', required: ['action', 'resource', 'environment', 'fields'],
      properties: { action: { type: 'string' }, resource: { type: 'string' }, environment: { type: 'string' }, fields: strings },
    },
    allow: { type: 'boolean' },
    reasons: strings,
    approval_missing: { type: 'boolean', description: 'Denied only for want of an approval (a valid chain; every reason is the approval\'s): an approval would allow it.' },
    risk: { type: 'integer' },
    obligations: ref('Obligations'),
    owners: { type: 'object', additionalProperties: { type: ['string', 'null'] } },
    chains: { type: 'array', items: { type: 'object', required: ['edges', 'verdict'], properties: { edges: { type: 'array', items: ref('ChainEdge') }, verdict: ref('ChainVerdict') } } },
    graph_revision: { type: 'integer' },
    policy_revision: { type: 'string' },
  },
} as const;

const LeaseGrant = {
  $id: 'LeaseGrant',
  type: 'object',
  required: ['lease_id', 'token', 'epochs', 'expires_at', 'preempted', 'keys', 'holder', 'replayed'],
  properties: {
    lease_id: { type: 'string' },
    token: { type: 'string', description: 'bearer secret for renew, release and writes (Writ stores only its hash)' },
    epochs,
    expires_at: iso,
    preempted: {
      type: 'array',
      items: { type: 'object', required: ['lease_id', 'holder', 'key', 'epoch'], properties: { lease_id: { type: 'string' }, holder: { type: 'string' }, key: { type: 'string' }, epoch: { type: 'integer' } } },
    },
    keys: strings,
    holder: { type: 'string' },
    replayed: { type: 'boolean', description: 'true when this answers an acquisition asked again with its own `token` after the lease was granted (nothing was taken now; `preempted` is then empty)' },
  },
} as const;

const LeaseRecord = {
  $id: 'LeaseRecord',
  type: 'object',
  description: 'A coordination key\'s lease in the Kubernetes Lease vocabulary, plus its fencing epoch.',
  required: ['key', 'holderIdentity', 'holderInstance', 'leaseDurationSeconds', 'acquireTime', 'renewTime', 'leaseTransitions', 'epoch', 'expiresAt', 'leaseId', 'priority', 'state', 'preemptedBy'],
  properties: {
    key: { type: 'string' },
    holderIdentity: { type: ['string', 'null'] },
    holderInstance: { type: ['string', 'null'] },
    leaseDurationSeconds: { type: ['number', 'null'] },
    acquireTime: isoOrNull,
    renewTime: isoOrNull,
    leaseTransitions: { type: 'integer' },
    epoch: { type: 'integer' },
    expiresAt: isoOrNull,
    leaseId: { type: ['string', 'null'] },
    priority: { type: ['integer', 'null'] },
    state: { type: 'string', enum: ['HELD', 'EXPIRED', 'FREE'] },
    preemptedBy: { type: ['string', 'null'] },
  },
} as const;

const Receipt = {
  $id: 'Receipt',
  type: 'object',
  description: 'A coordination receipt: the fold of its hash-chained entries (their stored bodies keep ms times; this view shows RFC 3339).',
  required: ['receipt_id', 'coordination_id', 'status', 'principal', 'action', 'resource_key', 'fields', 'owners', 'authority_epoch', 'ownership_epoch', 'decision_id', 'policy_revision', 'graph_revision', 'chain', 'lease_id', 'lease_epoch', 'expected_version', 'final_version', 'conflicts', 'upstream_status', 'error', 'presented_lease', 'idempotency_key', 'request_hash', 'created_at', 'completed_at', 'reconciled', 'hash_chain', 'prev_hash', 'hash', 'entries'],
  properties: {
    receipt_id: { type: 'string' },
    coordination_id: { type: 'string' },
    status: { type: 'string', enum: ['PENDING', 'COMPLETED', 'FAILED', 'REJECTED'] },
    principal: { type: 'string' },
    action: { type: 'string' },
    resource_key: { type: 'string' },
    fields: strings,
    owners: strings,
    authority_epoch: { type: ['integer', 'null'] },
    ownership_epoch: { type: ['integer', 'null'] },
    decision_id: { type: ['string', 'null'] },
    policy_revision: { type: ['string', 'null'] },
    graph_revision: { type: ['integer', 'null'] },
    chain: strings,
    lease_id: { type: ['string', 'null'] },
    lease_epoch: { type: ['integer', 'null'] },
    expected_version: { type: ['integer', 'null'] },
    final_version: { type: ['integer', 'null'] },
    conflicts: {
      type: 'array',
      items: { type: 'object', required: ['kind'], properties: { kind: { type: 'string' }, expected: {}, actual: {}, detail: { type: 'string' } } },
    },
    upstream_status: { type: ['integer', 'null'] },
    error: {
      anyOf: [{ type: 'null' }, {
        type: 'object', required: ['code', 'message'],
        properties: {
          code: { type: 'string' },
          message: { type: 'string' },
          used_by_receipt_id: { type: 'string', description: 'DECISION_REPLAYED: the receipt of the write that used the decision (absent when the log no longer held it at the refusal, and on refusals recorded before Writ kept it, whose message names it)' },
        },
      }],
    },
    presented_lease: {
      description: 'A REJECTED receipt refused for a lease reason (LEASE_REQUIRED, LEASE_EXPIRED, LEASE_TOKEN_MISMATCH, LEASE_PREEMPTED, STALE_FENCING_EPOCH): the lease the write presented and its keys at the refusal. '
        + 'null on every other receipt, and on those recorded before Writ kept it. Never the token nor its hash',
      anyOf: [
        { type: 'null' },
        {
          type: 'object', required: ['lease_id', 'token_lease_id', 'keys'],
          properties: {
            lease_id: { type: ['string', 'null'], description: 'Writ-Lease-Id, else the id the lease token names (null: neither names a lease)' },
            token_lease_id: { type: ['string', 'null'], description: 'the id the lease token names (null: no token, or not one Writ issued); differs from lease_id when the header named another lease' },
            keys: {
              type: 'array', description: 'each coordination key the write needed',
              items: {
                type: 'object', required: ['key', 'presented_epoch', 'current_epoch', 'holder', 'lease_id', 'state'],
                properties: {
                  key: { type: 'string' },
                  presented_epoch: { type: ['integer', 'null'], description: 'the fencing epoch Writ-Fencing-Epoch gave for it (null: none, or the header was unreadable)' },
                  current_epoch: { type: 'integer', description: 'its fencing epoch (high-water mark) at the refusal' },
                  holder: { type: ['string', 'null'], description: 'its recorded holder at the refusal (null: none)' },
                  lease_id: { type: ['string', 'null'], description: 'its latest lease at the refusal' },
                  state: { type: 'string', enum: ['HELD', 'EXPIRED', 'FREE'], description: 'HELD: the holder\'s lease was live; EXPIRED: past its expiry; FREE: released or never taken' },
                },
              },
            },
          },
        },
      ],
    },
    idempotency_key: { type: ['string', 'null'] },
    request_hash: { type: ['string', 'null'] },
    created_at: iso,
    completed_at: isoOrNull,
    reconciled: { type: 'boolean' },
    hash_chain: { type: 'string', description: 'the hash chain its entries are in: its coordination key (the resource key); "" for the legacy chain of receipts written before per-key chains' },
    prev_hash: { type: 'string' },
    hash: { type: 'string' },
    entries: {
      type: 'array',
      items: {
        type: 'object', required: ['seq', 'pos', 'kind', 'at', 'prev_hash', 'hash'],
        properties: { seq: { type: 'integer', description: 'store-wide order (pages follow it; gaps allowed)' }, pos: { type: 'integer', description: 'place in the hash chain (1, 2, … with no gap)' }, kind: { type: 'string', enum: ['intent', 'completed', 'failed', 'rejected', 'reconciled'] }, at: iso, prev_hash: { type: 'string' }, hash: { type: 'string' } },
      },
    },
    replayed: { type: 'boolean', description: 'set when the call wrote nothing and answers with the receipt as it already was' },
  },
} as const;

const Incident = {
  $id: 'Incident',
  type: 'object',
  required: ['id', 'declared_by', 'reason', 'decision_id', 'environment', 'declared_at', 'ends_at', 'resolved_at'],
  properties: {
    id: { type: 'string' }, declared_by: { type: 'string' }, reason: { type: 'string' }, decision_id: { type: 'string' },
    environment: {
      type: ['string', 'null'],
      description: 'the environment of the decision that declared it: preemption counts it only for leases in that environment. '
        + 'null: declared before Writ recorded it; it counts in an environment while its declarer may declare it there',
    },
    declared_at: iso, ends_at: iso, resolved_at: isoOrNull,
  },
} as const;

const COMPONENTS = { Problem, Scope, Jwk, Principal, Edge, ChainEdge, Obligations, Decision, ChainVerdict, Explanation, LeaseGrant, LeaseRecord, Receipt, Incident } satisfies Record<ComponentName, { $id: ComponentName }>;

export function registerComponents(app: FastifyInstance): void {
  for (const schema of Object.values(COMPONENTS)) app.addSchema(schema);
}

/** Retry-After, on the answers that carry it (RESOURCE_BUSY, LEASE_WAIT_TIMEOUT, OVERLOADED, RATE_LIMITED). */
const RETRY_AFTER: readonly ErrorCode[] = ['RESOURCE_BUSY', 'LEASE_WAIT_TIMEOUT', 'OVERLOADED', 'RATE_LIMITED'];
const retryAfter = { 'Retry-After': { type: 'integer', minimum: 1, description: 'seconds to wait before retrying' } } as const;

/**
 * Codes every authenticated route may answer, besides its own. A console session (cookie) gets
 * SESSION_READ_ONLY from anything but a read; a reader that is no auditor (a session, or a signed GET)
 * gets FORBIDDEN from a whole-graph read.
 */
export const AUTHENTICATED: readonly ErrorCode[] = ['UNAUTHENTICATED', 'CALLER_SESSION_INVALID', 'CALLER_SESSIONS_DISABLED', 'RATE_LIMITED', 'OVERLOADED', 'STORE_FAILED', 'INTERNAL', 'SESSION_READ_ONLY', 'FORBIDDEN'];
/** Codes every route with a JSON body (or query) may answer. */
export const WITH_INPUT: readonly ErrorCode[] = ['MALFORMED_REQUEST', 'PAYLOAD_TOO_LARGE', 'NESTING_TOO_DEEP', 'UNSUPPORTED_MEDIA_TYPE'];

/**
 * The error responses of a route: one problem+json response per status, whose `code` lists exactly
 * the catalogue codes the route can answer with that status.
 */
export function errorResponses(codes: readonly ErrorCode[]): Record<string, object> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of new Set(codes)) {
    const status = ERROR_CATALOGUE[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const out: Record<string, object> = {};
  for (const [status, list] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    list.sort();
    out[String(status)] = {
      description: list.map((c) => `\`${c}\`: ${ERROR_CATALOGUE[c].title}`).join('; '),
      ...(list.some((c) => RETRY_AFTER.includes(c)) ? { headers: retryAfter } : {}),
      content: {
        'application/problem+json': {
          schema: { allOf: [ref('Problem'), { type: 'object', properties: { code: { type: 'string', enum: list } } }] },
        },
      },
    };
  }
  return out;
}
