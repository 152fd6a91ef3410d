/**
 * A peer for the lease comparison (bench/side-by-side.ts): the least an authenticated HTTP lease
 * service on PostgreSQL must do per request, speaking Writ's lease routes so the same load generator
 * drives it. Per call: verify the caller's Ed25519 assertion (libsodium on the event loop, the same
 * implementation as Writ's, src/decision/ed25519-libsodium.ts; until 2026-12-02 both used node:crypto on the
 * thread pool; since 2026-12-03 Writ hands its checks to libsodium on a worker thread while its loop is
 * busy with other requests in flight, which this front, tried with Writ's own check, did no better with:
 * 1,720 and 1,952 pairs/s at 16 and 64 clients against 2,142 and 2,200 checking on the loop, one run
 * each), then ONE autocommitted statement that spends its jti (a durable single-use id, as Writ's) and
 * compare-and-sets the key's row (acquire: free or expired → holder, epoch + 1, a fresh token; release:
 * by token). No policy, no decision check, no graph, no receipts, no queue, no fencing state beyond the
 * epoch: what a user would get by putting fastify and a signature check in front of the PostgreSQL CAS.
 *
 *   node dist/bench/authed-cas-front.js --port N --database postgres://… --key fixtures/keys/seo-agent-7.jwk [--pool 32]
 */
import { createPublicKey, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import Fastify from 'fastify';
import pg from 'pg';
import { libsodiumEd25519 } from '../src/decision/ed25519-libsodium.js';
import { argValue as arg } from './results-file.js';

const jwk = JSON.parse(readFileSync(arg('key'), 'utf8')) as { kty: string; crv: string; x: string };
const publicKey = createPublicKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x }, format: 'jwk' });
// A pool kept warm, as a real service keeps it: connections never close when idle. Closing them after
// 100 ms idle (as this front did until 2026-12-02) made a loaded round churn connections (a PostgreSQL
// backend forked per reconnection): at 64 clients 160 pairs/s with a p99 of 3.3 s, against 774/s and
// 175 ms kept warm. At most --pool (side-by-side: 32, so that with the bare PostgreSQL peer's 64 the shared
// server's 100 connections suffice, which it checks first); more HTTP clients queue for one in this process.
const pool = new pg.Pool({ connectionString: arg('database'), max: Number(arg('pool', '32')), idleTimeoutMillis: 0 });
await pool.query(`CREATE TABLE IF NOT EXISTS front_leases (key text PRIMARY KEY, epoch bigint NOT NULL, token text, expires_at timestamptz);
  CREATE TABLE IF NOT EXISTS front_jti (jti text PRIMARY KEY, expires_at timestamptz NOT NULL)`);

class Refused extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

/** The caller's assertion: signature, expiry, subject; returns its jti (spent by the statement that follows). */
async function authenticate(authorization: string | undefined): Promise<string> {
  const token = authorization?.startsWith('Bearer ') ? authorization.slice(7) : '';
  const [h, p, s] = token.split('.');
  if (!h || !p || !s) throw new Refused(401, 'no assertion');
  const ok = libsodiumEd25519.verify(publicKey, Buffer.from(`${h}.${p}`), Buffer.from(s, 'base64url'));
  if (!ok) throw new Refused(401, 'bad signature');
  const claims = JSON.parse(Buffer.from(p, 'base64url').toString()) as { exp: number; jti: string; sub: string };
  if (claims.exp * 1000 <= Date.now() || typeof claims.jti !== 'string') throw new Refused(401, 'expired');
  return claims.jti;
}

const app = Fastify();
app.setErrorHandler((e: Error, _req, reply) => {
  const status = e instanceof Refused ? e.status : (e as { code?: string }).code === '23505' ? 401 : 500;
  void reply.code(status).send({ error: e.message });
});
app.get('/health', async () => ({ ok: true }));
// The load generator asks for a decision first (every 20 s): the "decision" names the key.
app.post('/v1/decisions', async (req) => {
  await authenticate(req.headers.authorization);
  return { allow: true, token: `${(req.body as { resource: string }).resource}#title` };
});
app.post('/v1/leases', async (req, reply) => {
  const jti = await authenticate(req.headers.authorization);
  const key = (req.body as { decisions: string[] }).decisions[0]!;
  const token = randomUUID();
  const { rows } = await pool.query(
    `WITH j AS (INSERT INTO front_jti (jti, expires_at) VALUES ($1, now() + interval '2 minutes'))
     INSERT INTO front_leases AS l (key, epoch, token, expires_at) VALUES ($2, 1, $3, now() + interval '10 seconds')
     ON CONFLICT (key) DO UPDATE SET epoch = l.epoch + 1, token = EXCLUDED.token, expires_at = EXCLUDED.expires_at
       WHERE l.token IS NULL OR l.expires_at < now()
     RETURNING epoch`,
    [jti, key, token],
  );
  if (rows.length === 0) throw new Refused(423, 'busy');
  return reply.code(201).send({ lease_id: Buffer.from(key).toString('base64url'), token, epoch: rows[0].epoch });
});
app.delete('/v1/leases/:id', async (req) => {
  const jti = await authenticate(req.headers.authorization);
  const { rows } = await pool.query(
    `WITH j AS (INSERT INTO front_jti (jti, expires_at) VALUES ($1, now() + interval '2 minutes'))
     UPDATE front_leases SET token = NULL, expires_at = NULL WHERE key = $2 AND token = $3 RETURNING 1`,
    [jti, Buffer.from((req.params as { id: string }).id, 'base64url').toString(), (req.body as { token: string }).token],
  );
  if (rows.length === 0) throw new Refused(423, 'not held');
  return { released: true };
});
await app.listen({ port: Number(arg('port')), host: '127.0.0.1' });
process.stderr.write(`listening on http://127.0.0.1:${arg('port')}\n`);
process.on('SIGTERM', () => void app.close().then(() => pool.end()).then(() => process.exit(0)));
