/**
 * The lease stream (GET /v1/leases/stream) over a real socket of the in-process harness: a listening
 * harness whose server-side sockets are tracked, and a raw `ws` client with its replies queued. Every
 * harness, stream and client made here is closed by `closeOpened` (a test file's afterEach).
 */
import { once } from 'node:events';
import type { Socket } from 'node:net';
import WebSocket from 'ws';
import { expect } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { startHarness, type Harness, type HarnessOptions } from './harness.js';

/** A ManualClock that follows the wall clock: the SDK signs its assertions with Date.now(), which the server checks (5 s tolerance). */
export class WallClock extends ManualClock {
  override now(): number {
    return Date.now();
  }
}

/** What `closeOpened` closes, newest first. */
export const opened: { close(): Promise<unknown> }[] = [];

export async function closeOpened(): Promise<void> {
  for (const o of opened.splice(0).reverse()) await o.close().catch(() => undefined);
}

/** Server-side sockets of each harness: the clean-up destroys any left open so that a leak (see the refused upgrades) fails its test, not the hook. */
const serverSockets = new WeakMap<Harness, Set<Socket>>();

export async function listening(options: HarnessOptions = {}): Promise<{ h: Harness; url: string }> {
  const h = await startHarness({ clock: new WallClock(), ...options });
  const sockets = new Set<Socket>();
  serverSockets.set(h, sockets);
  h.app.server.on('connection', (socket: Socket) => sockets.add(socket));
  opened.push({
    async close() {
      for (const socket of sockets) socket.destroy();
      await h.close();
    },
  });
  const url = await h.app.listen({ port: 0, host: '127.0.0.1' });
  return { h, url };
}

/** Server-side sockets still open (after a moment for closes in progress to land). */
export async function openServerSockets(h: Harness): Promise<number> {
  await new Promise((r) => setTimeout(r, 200));
  return [...serverSockets.get(h)!].filter((s) => !s.destroyed).length;
}

/** Whether app.close() finishes within `ms` (it waits for every connection of the server). */
export async function closesWithin(h: Harness, ms: number): Promise<boolean> {
  return Promise.race([h.app.close().then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);
}

/** A raw WebSocket on the stream, its replies queued in arrival order. */
export interface Raw {
  ws: WebSocket;
  replies: any[];
  /** When each reply arrived (Date.now()), by its index in `replies`. */
  arrivals: number[];
  send(message: unknown): void;
  /** The next reply not yet taken. */
  next(timeoutMs?: number): Promise<any>;
  closed: Promise<{ code: number; reason: string }>;
}

export async function rawStream(url: string, headers: Record<string, string>): Promise<Raw> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/leases/stream`, { headers, perMessageDeflate: false });
  const replies: any[] = [];
  const arrivals: number[] = [];
  let taken = 0;
  let wake: (() => void) | null = null;
  ws.on('message', (data, isBinary) => {
    expect(isBinary).toBe(false);
    arrivals.push(Date.now());
    replies.push(JSON.parse(data.toString()));
    wake?.();
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  await once(ws, 'open');
  const raw: Raw = {
    ws,
    replies,
    arrivals,
    closed,
    send: (m) => ws.send(typeof m === 'string' || Buffer.isBuffer(m) ? (m as string | Buffer) : JSON.stringify(m)),
    async next(timeoutMs = 5_000) {
      const end = Date.now() + timeoutMs;
      while (replies.length <= taken) {
        if (Date.now() > end) throw new Error(`no reply within ${timeoutMs} ms (have ${JSON.stringify(replies)})`);
        await new Promise<void>((resolve) => {
          wake = resolve;
          setTimeout(resolve, 50);
        });
      }
      return replies[taken++];
    },
  };
  opened.push({ close: async () => { ws.terminate(); } });
  return raw;
}
