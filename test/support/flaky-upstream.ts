import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/**
 * What the flaky upstream does with the next writes (PUT); reads (GET: lookups of reconciliation)
 * always pass through while it is up.
 * - `pass`: forward and answer as the real upstream did
 * - `slow-before`: hold the write `delayMs`, then forward it (it arrives after its Writ-Deadline)
 * - `slow-after`: forward at once, hold the real answer `delayMs`
 * - `5xx-before`: answer 503 without forwarding
 * - `5xx-after`: forward, then answer 502 whatever the real upstream said
 * - `reset-request`: reset the connection as the write arrives, without forwarding it
 * - `reset-mid-body`: forward, then send the status, headers and half the body, and reset
 * - `hold`: forward only when `release()` is called, then answer as the real upstream did
 */
export type FlakyMode = 'pass' | 'slow-before' | 'slow-after' | '5xx-before' | '5xx-after' | 'reset-request' | 'reset-mid-body' | 'hold';

export interface FlakyUpstream {
  url: string;
  mode: FlakyMode;
  delayMs: number;
  /** Writes (PUT) received so far, whatever became of them. */
  readonly writesSeen: number;
  /** Writes waiting in `hold` mode. */
  readonly held: number;
  release(): void;
  /** Stop listening and reset every connection: writes get ECONNREFUSED. */
  down(): Promise<void>;
  /** Listen again on the same port. */
  up(): Promise<void>;
  close(): Promise<void>;
}

/** A small HTTP proxy on 127.0.0.1 in front of `target` (the real sample upstream) that fails the way it is told to. */
export async function startFlakyUpstream(target: string): Promise<FlakyUpstream> {
  const sockets = new Set<Socket>();
  const holds: (() => void)[] = [];
  let writesSeen = 0;
  const forward = (req: IncomingMessage, body: Buffer): Promise<{ status: number; headers: Record<string, string>; body: Buffer }> =>
    new Promise((resolve, reject) => {
      const headers = { ...req.headers } as Record<string, string>;
      delete headers.host;
      const out = httpRequest(target + req.url, { method: req.method, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const h: Record<string, string> = {};
          for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string' && k !== 'connection' && k !== 'keep-alive' && k !== 'transfer-encoding') h[k] = v;
          resolve({ status: res.statusCode ?? 0, headers: h, body: Buffer.concat(chunks) });
        });
      });
      out.on('error', reject);
      out.end(body);
    });
  const answer = (res: ServerResponse, r: { status: number; headers: Record<string, string>; body: Buffer }) => {
    res.writeHead(r.status, { ...r.headers, 'content-length': String(r.body.length) });
    res.end(r.body);
  };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  const flaky: FlakyUpstream = {
    url: '',
    mode: 'pass',
    delayMs: 1000,
    get writesSeen() {
      return writesSeen;
    },
    get held() {
      return holds.length;
    },
    release() {
      for (const go of holds.splice(0)) go();
    },
    down: async () => {
      // Sockets first: close() alone waits for the connections in use (a reconciliation read on a
      // kept-alive one would still get its answer from an upstream that is "down").
      const closed = new Promise<void>((r) => server.close(() => r()));
      for (const s of sockets) s.destroy();
      await closed;
    },
    up: () => new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r())),
    close: async () => {
      flaky.release();
      for (const s of sockets) s.destroy();
      if (server.listening) await new Promise<void>((r) => server.close(() => r()));
    },
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const body = Buffer.concat(chunks);
        if (req.method !== 'PUT') return answer(res, await forward(req, body));
        writesSeen++;
        switch (flaky.mode) {
          case 'pass':
            return answer(res, await forward(req, body));
          case 'slow-before':
            await sleep(flaky.delayMs);
            return answer(res, await forward(req, body));
          case 'slow-after': {
            const r = await forward(req, body);
            await sleep(flaky.delayMs);
            return answer(res, r);
          }
          case '5xx-before':
            return answer(res, { status: 503, headers: { 'content-type': 'application/json' }, body: Buffer.from('{"code":"UNAVAILABLE","message":"flaky: shedding"}') });
          case '5xx-after':
            await forward(req, body);
            return answer(res, { status: 502, headers: { 'content-type': 'application/json' }, body: Buffer.from('{"code":"BAD_GATEWAY","message":"flaky: lost the answer"}') });
          case 'reset-request':
            req.socket.destroy();
            return;
          case 'reset-mid-body': {
            const r = await forward(req, body);
            res.writeHead(r.status, { ...r.headers, 'content-length': String(r.body.length) });
            res.write(r.body.subarray(0, Math.floor(r.body.length / 2)));
            await sleep(20);
            req.socket.destroy();
            return;
          }
          case 'hold':
            await new Promise<void>((go) => holds.push(go));
            return answer(res, await forward(req, body));
        }
      })().catch(() => req.socket.destroy());
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  flaky.url = `http://127.0.0.1:${port}`;
  return flaky;
}
