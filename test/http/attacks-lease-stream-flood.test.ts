/**
 * The lease stream tried as an attacker would: a client that floods it with messages and never reads
 * the answers. Every message is answered (a refusal too), so unless the stream stops reading while its
 * answers are unsent, the server buffers them for as long as the connection lives (up to the ping
 * timeout: 60–90 s by default), and one connection can fill the server's memory.
 */
import type WebSocket from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { closeOpened, listening, rawStream } from '../support/lease-stream.js';

afterEach(closeOpened);

const SEO = 'seo-agent-7';

/** The server's side of every lease stream open now. */
const serverSockets = (h: { app: unknown }) => [...(h.app as { websocketServer: { clients: Set<WebSocket> } }).websocketServer.clients];

describe('a lease stream flooded by a client that reads no answer', () => {
  it('stops reading while its unsent answers pass a bound: the server buffers a few MB, not one answer per message sent', { timeout: 60_000 }, async () => {
    const { h, url } = await listening();
    const raw = await rawStream(url, await h.auth(SEO));
    // The client stops reading its socket: every answer the server sends stays in the server's buffers.
    (raw.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    // 100 000 two-byte messages, each answered with a MALFORMED_REQUEST problem of some 210 bytes (21 MB).
    const message = '{}';
    const sent = 100_000;
    let most = 0;
    const watch = setInterval(() => {
      for (const s of serverSockets(h)) most = Math.max(most, s.bufferedAmount);
    }, 5);
    for (let i = 0; i < sent; i++) raw.ws.send(message);
    // Until the server has read all it will read (its buffered answers stop growing for half a second).
    let last = -1;
    for (let stable = 0; stable < 10;) {
      await new Promise((r) => setTimeout(r, 50));
      const now = serverSockets(h).reduce((n, s) => n + s.bufferedAmount, 0);
      stable = now === last ? stable + 1 : 0;
      last = now;
    }
    clearInterval(watch);
    expect(most, `the server buffered ${most} bytes of answers`).toBeLessThan(8 * 1024 * 1024);
    // The stream is still the caller's once it reads again: every message read was answered, in order, and a real request works.
    (raw.ws as unknown as { _socket: { resume(): void } })._socket.resume();
    const until = Date.now() + 30_000;
    while (raw.replies.length < sent && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    expect(raw.replies.length).toBe(sent);
    expect(new Set(raw.replies.map((r) => r.problem?.code))).toEqual(new Set(['MALFORMED_REQUEST']));
    raw.send({ id: 7, op: 'release', lease_id: 'lease_nope', token: 'x'.repeat(43) });
    for (let i = 0; i < sent; i++) await raw.next();
    const answer = await raw.next(10_000);
    expect(answer.id).toBe(7);
    expect(answer.ok).toBe(false);
    expect((await h.call(GOVERNANCE_ID, { method: 'GET', url: '/v1/leases?state=HELD' })).body.leases).toEqual([]);
  });
});
