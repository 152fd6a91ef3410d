import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ERROR_CATALOGUE, WritError, type ErrorCode } from '../errors.js';
import { anyOfBranches } from '../json-schema.js';
import { toWireTime } from '../wire/time.js';

/** RFC 9457 problem details with Writ's stable `code`. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  code: ErrorCode;
  detail: string;
  instance?: string;
  [extension: string]: unknown;
}

/**
 * Problem members that are instants: the domain's details carry them as ms numbers, the wire as RFC 3339
 * (RESOURCE_BUSY / LEASE_WAIT_TIMEOUT: when the holder's lease expires; LEASE_EXPIRED: when it expired).
 */
export const PROBLEM_TIME_MEMBERS = ['expires_at'] as const;

export function problemOf(code: ErrorCode, detail: string, details?: Record<string, unknown>): Problem {
  const spec = ERROR_CATALOGUE[code];
  // spread-then-add: the loop below only replaces a member `details` has
  const members = { ...(details ?? {}) };
  for (const name of PROBLEM_TIME_MEMBERS) {
    const value = members[name];
    if (typeof value === 'number' && Number.isFinite(value)) members[name] = toWireTime(value);
  }
  return { type: `https://writ.dev/errors/${code}`, title: spec.title, status: spec.status, code, detail, ...members };
}

type ValidationError = NonNullable<FastifyError['validation']>[number];

/**
 * The validation problem to name. A value failing an `anyOf` (a time: an RFC 3339 string, whole ms, or
 * null) is reported by each branch before the anyOf itself; the first branch's "must be string" would
 * mislead for a number with a fraction. When a branch of the value's own type failed for another reason
 * (a string too long), that is the problem; otherwise the value is of none of the branches' types.
 */
function telling(errors: readonly ValidationError[]): { first: ValidationError | undefined; message: string | undefined } {
  const anyOf = errors.find((e) => e.keyword === 'anyOf');
  if (anyOf) {
    const branches = anyOfBranches(errors, anyOf);
    const own = branches.find((e) => e.keyword !== 'type');
    if (own) return { first: own, message: own.message };
    const types = branches.map((e) => String((e.params as { type?: unknown }).type));
    if (types.length > 0) return { first: anyOf, message: `must be ${types.length > 1 ? `${types.slice(0, -1).join(', ')} or ${types.at(-1)}` : types[0]}` };
  }
  return { first: errors[0], message: errors[0]?.message };
}

/** Fastify's own errors (parsing, validation, limits) mapped onto the catalogue. */
function fromFastify(error: FastifyError): WritError {
  if (error.validation) {
    const { first, message } = telling(error.validation);
    const where = first?.instancePath || error.validationContext || 'body';
    const extra = first?.params && 'additionalProperty' in first.params ? ` "${String(first.params.additionalProperty)}"` : '';
    return new WritError('MALFORMED_REQUEST', `${error.validationContext ?? 'body'}${where.startsWith('/') ? where : ''}: ${message ?? 'invalid'}${extra}`);
  }
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new WritError('PAYLOAD_TOO_LARGE', error.message);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new WritError('UNSUPPORTED_MEDIA_TYPE', error.message);
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new WritError('MALFORMED_REQUEST', error.message);
    default:
      // (Not every SyntaxError: JSON.parse of a damaged stored row is no fault of the caller's. A body's
      // parse error comes as FST_ERR_CTP_INVALID_JSON_BODY, or with status 400.)
      if (error.statusCode === 400) return new WritError('MALFORMED_REQUEST', error.message);
      if (error.statusCode === 413) return new WritError('PAYLOAD_TOO_LARGE', error.message);
      return new WritError('INTERNAL', 'internal error');
  }
}

/** The one place where errors become HTTP responses. */
export function sendProblem(error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const writ = error instanceof WritError ? error : fromFastify(error as FastifyError);
  if (writ.code === 'INTERNAL') request.log.error({ err: error }, 'internal error');
  const problem = problemOf(writ.code, writ.message, writ.details);
  problem.instance = request.url;
  const retryAfterMs = writ.details?.retry_after_ms;
  if (typeof retryAfterMs === 'number') reply.header('Retry-After', String(Math.max(1, Math.ceil(retryAfterMs / 1000))));
  return reply.code(problem.status).type('application/problem+json').send(problem);
}
