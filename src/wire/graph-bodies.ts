/**
 * JSON schemas of the bodies that write the authority graph (POST /v1/principals, /v1/grants, …). HTTP
 * validates requests with them (fastify) and a graph manifest validates each of its items with the same
 * ones (service/manifest.ts), so a field that is unknown, misspelt or of the wrong type is refused on
 * both paths instead of being dropped (a scope's misspelt `fields` would have meant every field).
 */

export const id = { type: 'string', minLength: 1, maxLength: 128 } as const;
const names = { type: 'array', items: { type: 'string', minLength: 1, maxLength: 256 }, minItems: 1, maxItems: 256 } as const;
const time = { anyOf: [{ type: 'string', maxLength: 64, description: 'an RFC 3339 time' }, { type: 'integer', description: 'ms since the epoch' }, { type: 'null', description: 'null' }] } as const;

export const scopeSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['actions', 'resources'],
  properties: {
    actions: names,
    resources: names,
    environments: names,
    fields: names,
    risk_max: { type: 'integer', minimum: 0 },
    constraints: { type: 'object', additionalProperties: false, properties: { risk_max: { type: 'integer', minimum: 0 } } },
  },
} as const;

const jwk = {
  type: 'object',
  required: ['kty', 'kid'],
  properties: { kty: { type: 'string' }, kid: { type: 'string', minLength: 1 }, crv: { type: 'string' }, x: { type: 'string' }, y: { type: 'string' }, alg: { type: 'string' }, use: { type: 'string' } },
  additionalProperties: true,
} as const;

export const principalBody = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'kind', 'keys'],
  properties: {
    id,
    kind: { type: 'string', enum: ['agent', 'human', 'service', 'control_plane'] },
    priority_class: { type: 'string' },
    attributes: { type: 'object' },
    keys: { type: 'array', items: jwk, maxItems: 16 },
  },
} as const;

const edgeCommon = {
  id,
  reason: { type: 'string', minLength: 1, maxLength: 2000 },
  not_before: time,
  expires_at: time,
} as const;

export const grantBody = {
  type: 'object', additionalProperties: false, required: ['to', 'scope', 'reason'],
  // spread-then-add: a schema, built once when the module loads
  properties: { ...edgeCommon, to: id, scope: scopeSchema, max_depth: { type: 'integer', minimum: 0, maximum: 16 } },
} as const;

export const delegationBody = {
  type: 'object', additionalProperties: false, required: ['from', 'to', 'scope', 'reason'],
  // spread-then-add: a schema, built once when the module loads
  properties: { ...edgeCommon, from: id, to: id, scope: scopeSchema, max_depth: { type: 'integer', minimum: 0, maximum: 16 } },
} as const;

export const ownershipBody = {
  type: 'object', additionalProperties: false, required: ['owner', 'resource', 'reason'],
  // spread-then-add: a schema, built once when the module loads
  properties: { ...edgeCommon, owner: id, resource: { type: 'string', minLength: 1, maxLength: 512 }, fields: names },
} as const;

export const approvalBody = {
  type: 'object', additionalProperties: false, required: ['from', 'to', 'scope', 'reason'],
  // spread-then-add: a schema, built once when the module loads
  properties: { ...edgeCommon, from: id, to: id, scope: scopeSchema },
} as const;

export const preemptionBody = {
  type: 'object', additionalProperties: false, required: ['from', 'to', 'reason'],
  // spread-then-add: a schema, built once when the module loads
  properties: { ...edgeCommon, from: id, to: id },
} as const;
