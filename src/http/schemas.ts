/** JSON schemas of the v1 wire types. Unknown fields are refused (additionalProperties: false). */

import { delegationBody, id } from '../wire/graph-bodies.js';

/**
 * The largest integer a JSON number carries exactly (2^53 − 1). A larger one passes `integer` (1e308 % 1
 * is 0) but is not the number the caller wrote: an expected_version of 2^53 + 1 went upstream as another.
 */
const SAFE = Number.MAX_SAFE_INTEGER;

export { approvalBody, delegationBody, grantBody, ownershipBody, preemptionBody, principalBody, scopeSchema } from '../wire/graph-bodies.js';

/** The optional body of a revoking DELETE (the reason may come as the `reason` query parameter instead). */
export const revokeBody = {
  type: ['object', 'null'], additionalProperties: false,
  properties: { reason: { type: 'string', minLength: 1, maxLength: 2000 } },
} as const;

export const reasonQuery = {
  type: 'object', additionalProperties: false,
  properties: { reason: { type: 'string', minLength: 1, maxLength: 2000 } },
} as const;

export const decisionBody = {
  type: 'object',
  additionalProperties: false,
  required: ['action', 'resource', 'environment'],
  properties: {
    action: { type: 'string', minLength: 1, maxLength: 128 },
    resource: { type: 'string', minLength: 1, maxLength: 512 },
    environment: { type: 'string', minLength: 1, maxLength: 64 },
    fields: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 128 }, maxItems: 128 },
    context: {
      type: 'object',
      additionalProperties: false,
      properties: { risk: { type: 'integer', minimum: 0, maximum: SAFE }, approval: { type: 'string', maxLength: 8192 }, reason: { type: 'string', maxLength: 2000 } },
    },
  },
} as const;

export const explainBody = {
  ...decisionBody,
  properties: { ...decisionBody.properties, principal: id },
} as const;



export const leaseBody = {
  type: 'object',
  additionalProperties: false,
  required: ['decisions'],
  properties: {
    decisions: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 16384 }, minItems: 1, maxItems: 64 },
    ttl_ms: { type: 'integer', minimum: 1, maximum: SAFE },
    wait_ms: { type: 'integer', minimum: 0, maximum: SAFE },
    preempt: { type: 'boolean' },
    token: {
      type: 'string', pattern: '^[A-Za-z0-9_-]{43}$',
      description: 'Your own lease token: 32 bytes from a cryptographically secure random source, base64url (43 characters), fresh for each lease; '
        + 'without it Writ makes one. Asked again with the same token after its answer was lost, the acquisition is answered with the lease it was granted '
        + '(200, `replayed`, Idempotent-Replayed: true) while that lease is live, instead of taking a second one or waiting behind itself; '
        + 'a token whose lease has ended is LEASE_EXPIRED (LEASE_PREEMPTED), one used for other keys or by another principal IDEMPOTENCY_MISMATCH.',
    },
  },
} as const;

export const renewBody = {
  type: 'object',
  additionalProperties: false,
  required: ['token'],
  properties: { token: { type: 'string', minLength: 1, maxLength: 256 }, ttl_ms: { type: 'integer', minimum: 1, maximum: SAFE } },
} as const;

/** The optional body of DELETE /v1/leases/{id}: the token may come in the Writ-Lease-Token header instead. */
export const releaseBody = {
  type: ['object', 'null'],
  additionalProperties: false,
  properties: { token: { type: 'string', minLength: 1, maxLength: 256 } },
} as const;

/** The request headers of POST /v1/actions (the gateway answers a missing one with its own code). */
export const actionHeaders = {
  type: 'object',
  properties: {
    'writ-decision': { type: 'string', description: 'the allow decision\'s token (compact JWS)' },
    'writ-lease-token': { type: 'string', description: 'the lease token, for exclusive resources' },
    'writ-lease-id': { type: 'string', description: 'the lease id (optional; checked against the token when given)' },
    'writ-fencing-epoch': { type: 'string', description: '`key=epoch, …` naming exactly the write\'s coordination keys' },
    'idempotency-key': { type: 'string', description: 'a retry with the same key and request replays the first answer' },
  },
} as const;

export const actionBody = {
  type: 'object',
  additionalProperties: false,
  required: ['action', 'resource', 'fields', 'payload'],
  properties: {
    action: { type: 'string', minLength: 1, maxLength: 128 },
    resource: { type: 'string', minLength: 1, maxLength: 512 },
    environment: { type: 'string', minLength: 1, maxLength: 64 },
    fields: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 128 }, maxItems: 128 },
    payload: { type: 'object' },
    expected_version: { type: 'integer', minimum: 0, maximum: SAFE },
  },
} as const;

export const incidentBody = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'reason', 'decision'],
  properties: {
    id: { type: 'string', minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._-]+$' },
    reason: { type: 'string', minLength: 1, maxLength: 2000 },
    ttl_ms: { type: 'integer', minimum: 1, maximum: SAFE },
    decision: { type: 'string', minLength: 1, maxLength: 16384 },
  },
} as const;

/** POST /v1/impact: exactly one change — revoke an edge, revoke a principal, or add a delegation. */
export const impactBody = {
  type: 'object', additionalProperties: false, minProperties: 1, maxProperties: 1,
  properties: {
    revoke: {
      type: 'object', additionalProperties: false, minProperties: 1, maxProperties: 1,
      description: 'the edge or the principal whose revocation to analyse',
      properties: { edge: id, principal: id },
    },
    delegate: { ...delegationBody, description: 'a delegation to analyse as if it were written (the same body as POST /v1/delegations)' },
  },
} as const;

/** POST /v1/sessions: the caller's X25519 public key (a JWK of its public members only) and the session's lifetime. */
export const sessionBody = {
  type: 'object',
  additionalProperties: false,
  required: ['public_key'],
  properties: {
    public_key: {
      type: 'object', additionalProperties: false, required: ['kty', 'crv', 'x'],
      description: 'the caller\'s ephemeral X25519 public key (JWK, RFC 8037)',
      properties: { kty: { type: 'string', enum: ['OKP'] }, crv: { type: 'string', enum: ['X25519'] }, x: { type: 'string', pattern: '^[A-Za-z0-9_-]{43}$', description: 'base64url of the 32-byte public key' } },
    },
    ttl_ms: { type: 'integer', minimum: 1000, maximum: SAFE, description: 'the session\'s lifetime, at most WRIT_CALLER_SESSION_MAX_TTL_MS (the default)' },
  },
} as const;
