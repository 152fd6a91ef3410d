import type { FastifyInstance } from 'fastify';
import { openCallerSession, type CallerSessionInput } from '../../service/index.js';
import { toWireTime } from '../../wire/time.js';
import { AUTHENTICATED, errorResponses, WITH_INPUT } from '../components.js';
import { sessionBody } from '../schemas.js';

const x25519Key = {
  type: 'object', required: ['kty', 'crv', 'x'],
  properties: { kty: { type: 'string', enum: ['OKP'] }, crv: { type: 'string', enum: ['X25519'] }, x: { type: 'string' } },
} as const;

export function registerSessionRoutes(app: FastifyInstance): void {
  app.post<{ Body: CallerSessionInput }>('/v1/sessions', {
    schema: {
      body: sessionBody, operationId: 'openCallerSession', tags: ['Coordination'],
      summary: 'Open a caller session (with a signed caller assertion only): the session key is agreed by X25519, and later requests are authenticated by an HS256 request token over it, bound to their method and path, instead of a signature each',
      description: 'The opening assertion must be bound to this session\'s key and to this request: besides the usual claims it carries `"cnf": {"jwk": {"kty": "OKP", "crv": "X25519", "x": <the body\'s public_key.x>}}` (RFC 7800) and `"htm": "POST"`, `"htu": "/v1/sessions"` (the path as sent, without the query). Without them, or naming another key or request, it is refused (401 UNAUTHENTICATED) and not spent: an assertion that leaked before it was used cannot open a session under another party\'s key.',
      response: {
        201: {
          type: 'object', description: 'Opened', required: ['session', 'public_key', 'principal', 'kid', 'expires_at'],
          properties: {
            session: { type: 'string', description: 'the session token (opaque): the `kid` of each request token' },
            public_key: { ...x25519Key, description: 'Writ\'s X25519 public key for this session' },
            principal: { type: 'string' },
            kid: { type: 'string', description: 'the caller key that signed the opening assertion: the session ends when the principal no longer has it' },
            expires_at: { type: 'string', format: 'date-time', description: 'RFC 3339 time' },
          },
        },
        ...errorResponses([...WITH_INPUT, ...AUTHENTICATED, 'UNPROCESSABLE']),
      },
    },
  }, async (request, reply) => {
    // The assertion must name the body's key (cnf.jwk) and this request (htm, htu): a leaked one opens nothing.
    const caller = await app.unspentAssertion(request, request.body.public_key);
    const opened = await openCallerSession(app.writ, caller, request.body);
    return reply.code(201).send({ ...opened, expires_at: toWireTime(opened.expires_at) });
  });
}
