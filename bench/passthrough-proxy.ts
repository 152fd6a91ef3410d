/**
 * The floor of the gateway benchmark: a proxy that checks nothing and records nothing, in its own
 * process, on the same stack as Writ (fastify in front, the gateway's node:http upstream client
 * behind). What it adds over a direct write is what any extra hop costs on this machine; what Writ
 * adds beyond that is its own work (verification, commits, receipts).
 *
 *   node dist/bench/passthrough-proxy.js --port 4300 --upstream http://127.0.0.1:4100
 */
import Fastify from 'fastify';
import { parseArgs } from 'node:util';
import { PlainHttpClient } from '../src/upstream/http-request.js';

const { values } = parseArgs({ options: { port: { type: 'string', default: '0' }, upstream: { type: 'string' } } });
if (!values.upstream) throw new Error('--upstream URL is required');
const upstreamUrl = values.upstream.replace(/\/+$/, '');
const client = new PlainHttpClient(upstreamUrl);
const app = Fastify({ logger: false });
app.put<{ Params: { id: string }; Body: unknown }>('/posts/:id', async (request, reply) => {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const ifMatch = request.headers['if-match'];
  if (typeof ifMatch === 'string') headers['if-match'] = ifMatch;
  const res = await client.request(`${upstreamUrl}/posts/${encodeURIComponent(request.params.id)}`, { method: 'PUT', headers, body: JSON.stringify(request.body), timeoutMs: 5000 });
  return reply.code(res.status).send(res.body);
});
const address = await app.listen({ port: Number(values.port), host: '127.0.0.1' });
console.log(`pass-through proxy listening on ${address}`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void app.close().then(() => process.exit(0)));
