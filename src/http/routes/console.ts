/**
 * The auditor's console: its static assets at /console (built by scripts/build-console.mjs into the
 * configured console directory, served from this origin only) and the exchange of a one-time login
 * link for a session cookie. The console's data come from the public API like any client's.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { WritError } from '../../errors.js';
import { CONSOLE_SESSION_TTL_MS, endConsoleSession, exchangeLoginToken } from '../../service/index.js';
import { toWireTime } from '../../wire/time.js';
import { AUTHENTICATED, errorResponses, WITH_INPUT } from '../components.js';
import { clearedSessionCookie, sessionSetCookie } from '../console-auth.js';

/** No inline script or style, nothing from another origin, never framed. */
export const CONSOLE_CSP = [
  "default-src 'self'", "script-src 'self'", "style-src 'self'", "img-src 'self' data: blob:", "font-src 'self'", "connect-src 'self'",
  "object-src 'none'", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml', '.png': 'image/png', '.map': 'application/json', '.ico': 'image/x-icon',
};
/** A flat folder of built files: a name is one path segment, so nothing outside it can be asked for. */
const ASSET = /^[A-Za-z0-9][A-Za-z0-9._-]{0,100}$/;

const sessionReply = {
  type: 'object', description: 'The session', required: ['principal', 'auditor', 'expires_at'],
  properties: {
    principal: { type: 'string' },
    auditor: { type: 'boolean', description: 'true: governance or audit_read on audit:principal:* in every environment (sees everything); false: sees its own receipts and capabilities only' },
    expires_at: { type: 'string', format: 'date-time', description: 'RFC 3339 time' },
  },
} as const;

function secure(request: FastifyRequest): boolean {
  return request.protocol === 'https';
}

function hardened(reply: FastifyReply): FastifyReply {
  return reply
    .header('Content-Security-Policy', CONSOLE_CSP)
    .header('X-Content-Type-Options', 'nosniff')
    .header('Referrer-Policy', 'no-referrer')
    .header('X-Frame-Options', 'DENY')
    .header('Cross-Origin-Opener-Policy', 'same-origin');
}

export async function registerConsoleRoutes(app: FastifyInstance): Promise<void> {
  const ctx = app.writ;
  const dir = ctx.config.consoleDir;
  const page = { security: [], tags: ['Console'] } as const;
  const html = { description: 'The console page (HTML)', content: { 'text/html': { schema: { type: 'string' } } } };

  const sendAsset = async (name: string, reply: FastifyReply) => {
    if (!ASSET.test(name)) throw new WritError('NOT_FOUND', `no console asset ${JSON.stringify(name)}`);
    const type = TYPES[name.slice(name.lastIndexOf('.'))];
    if (!type) throw new WritError('NOT_FOUND', `no console asset ${name}`);
    let body: Buffer;
    try {
      body = await readFile(join(dir, name));
    } catch {
      if (name === 'index.html') throw new WritError('NOT_FOUND', `the console is not built (no ${join(dir, name)}): run scripts/setup.sh`);
      throw new WritError('NOT_FOUND', `no console asset ${name}`);
    }
    // The page itself is never cached (it names the current bundle); the bundle may be, briefly.
    return hardened(reply).type(type).header('Cache-Control', name === 'index.html' ? 'no-store' : 'private, max-age=300').send(body);
  };

  app.get('/console', {
    schema: { ...page, operationId: 'consoleEntry', summary: 'The auditor\'s console: a single page (also served at /console/) whose views are deep links in the fragment: #/receipts, #/receipt/ID, #/principal/ID, #/graph, #/edge/ID, #/coordination', response: { 200: html, ...errorResponses(['NOT_FOUND']) } },
  }, async (_request, reply) => sendAsset('index.html', reply));

  app.get('/console/', {
    // The same page as /console; left out of the document, whose paths carry no trailing slash.
    schema: { ...page, hide: true, operationId: 'consolePage', response: { 200: html, ...errorResponses(['NOT_FOUND']) } },
  }, async (_request, reply) => sendAsset('index.html', reply));

  app.get<{ Params: { file: string } }>('/console/:file', {
    schema: { ...page, operationId: 'consoleAsset', summary: 'A static asset of the console (its script and style sheet), from this origin', response: { 200: { description: 'The file', content: { 'text/javascript': { schema: { type: 'string' } }, 'text/css': { schema: { type: 'string' } } } }, ...errorResponses(['NOT_FOUND']) } },
  }, async (request, reply) => sendAsset(request.params.file, reply));

  app.post<{ Body: { token: string } }>('/v1/console/session', {
    schema: {
      security: [], tags: ['Console'], operationId: 'openConsoleSession',
      summary: 'Exchanges a one-time login link of `writ console` (the token in its #login= fragment) for a session cookie: HttpOnly, SameSite=Strict, Secure over TLS. A link works once',
      body: { type: 'object', additionalProperties: false, required: ['token'], properties: { token: { type: 'string', minLength: 1, maxLength: 4096, description: 'the token of the link' } } },
      response: {
        201: { ...sessionReply, headers: { 'Set-Cookie': { type: 'string', description: `writ_console=…; Path=/; Max-Age=${CONSOLE_SESSION_TTL_MS / 1000}; HttpOnly; SameSite=Strict, and Secure over TLS (a TLS connection into Writ, or X-Forwarded-Proto: https from a proxy named in WRIT_TRUST_PROXY)` } } },
        ...errorResponses([...WITH_INPUT, 'LOGIN_LINK_INVALID', 'LOGIN_LINK_SPENT', 'OVERLOADED', 'STORE_FAILED', 'INTERNAL']),
      },
    },
  }, async (request, reply) => {
    const s = await exchangeLoginToken(ctx, request.body.token);
    reply.header('Set-Cookie', sessionSetCookie(s.token, s.expires_at - ctx.clock.now(), secure(request)));
    return reply.code(201).send({ principal: s.principal, auditor: s.auditor, expires_at: toWireTime(s.expires_at) });
  });

  app.get('/v1/console/session', {
    schema: {
      tags: ['Console'], operationId: 'getConsoleSession', summary: 'Who the console session cookie signs in (UNAUTHENTICATED without one)',
      response: { 200: sessionReply, ...errorResponses([...AUTHENTICATED]) },
    },
  }, async (request) => {
    await app.caller(request);
    const s = request.consoleSession;
    if (!s) throw new WritError('UNAUTHENTICATED', 'no console session: sign in with a link from `writ console`');
    return { principal: s.principal, auditor: s.auditor, expires_at: toWireTime(s.expires_at) };
  });

  app.delete('/v1/console/session', {
    schema: {
      tags: ['Console'], operationId: 'endConsoleSession', summary: 'Signs the console session out: the cookie is cleared and refused from now on by every process sharing the store',
      response: { 200: { type: 'object', description: 'Signed out', required: ['signed_out'], properties: { signed_out: { type: 'boolean' } } }, ...errorResponses([...AUTHENTICATED]) },
    },
  }, async (request, reply) => {
    await app.caller(request);
    const s = request.consoleSession;
    if (!s) throw new WritError('UNAUTHENTICATED', 'no console session to sign out');
    await endConsoleSession(ctx, s);
    reply.header('Set-Cookie', clearedSessionCookie(secure(request)));
    return { signed_out: true };
  });
}
