/**
 * JSON schemas of the AuthZEN 1.0 front door. Unlike the v1 schemas, unknown members are allowed: the
 * specification requires receivers to ignore them.
 */
const str = { type: 'string', minLength: 1, maxLength: 512 } as const;
const properties = { type: 'object' } as const;

const subject = { type: 'object', required: ['type', 'id'], properties: { type: str, id: str, properties } } as const;
const resource = { type: 'object', required: ['type', 'id'], properties: { type: str, id: str, properties } } as const;
const action = { type: 'object', required: ['name'], properties: { name: str, properties } } as const;
const context = { type: 'object' } as const;

export const evaluationBody = {
  type: 'object',
  required: ['subject', 'action', 'resource'],
  properties: { subject, action, resource, context },
} as const;

export const evaluationsBody = {
  type: 'object',
  properties: {
    subject, action, resource, context,
    evaluations: { type: 'array', maxItems: 64, items: { type: 'object', properties: { subject, action, resource, context } } },
    options: { type: 'object', properties: { evaluations_semantic: { type: 'string', enum: ['execute_all', 'deny_on_first_deny', 'permit_on_first_permit'] } } },
  },
} as const;

const page = { type: 'object', properties: { token: { type: 'string', maxLength: 1024 }, limit: { type: 'integer', minimum: 1, maximum: 1000 } } } as const;
const searchSubject = { type: 'object', required: ['type'], properties: { type: str, id: str, properties } } as const;
const searchResource = { type: 'object', required: ['type'], properties: { type: str, id: str, properties } } as const;

export const subjectSearchBody = {
  type: 'object', required: ['subject', 'action', 'resource'],
  properties: { subject: searchSubject, action, resource, context, page },
} as const;

export const resourceSearchBody = {
  type: 'object', required: ['subject', 'action', 'resource'],
  properties: { subject, action, resource: searchResource, context, page },
} as const;

export const actionSearchBody = {
  type: 'object', required: ['subject', 'resource'],
  properties: { subject, resource, context, page },
} as const;
