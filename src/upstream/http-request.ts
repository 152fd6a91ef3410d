import http from 'node:http';
import https from 'node:https';

/**
 * The one HTTP request the gateway makes per write, on node:http with a keep-alive agent per
 * upstream. Measured on this project's machines, global `fetch` (undici's WHATWG layer plus an
 * AbortSignal timer per call) added ~0.5 ms at p50 and several ms at p99 to every forwarded write
 * over the same keep-alive connection (bench/RESULTS.md, gateway section).
 */
export interface PlainResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** Parsed JSON object; `{}` for an empty body; `{ message }` with the start of a non-JSON body. */
  body: Record<string, unknown>;
}

/** What went wrong before a whole answer arrived. `code` is the socket error code (ECONNREFUSED, …). */
export class UpstreamRequestError extends Error {
  constructor(message: string, readonly kind: 'timeout' | 'network', readonly code: string | undefined) {
    super(message);
    this.name = kind === 'timeout' ? 'TimeoutError' : 'UpstreamRequestError';
  }
}

const IDLE_SOCKET_MS = 4_000;
/**
 * The most of an answer read (1 MiB; the sample upstream's are under 1 KB). Past it the connection is
 * dropped and the request fails as a network error: an upstream, or a proxy before it, could otherwise
 * make Writ buffer without bound for as long as a write's timeout allows. For a write that is an unknown
 * outcome (the upstream had it), settled from the upstream's record like an answer cut off mid-body.
 */
export const MAX_ANSWER_BYTES = 1024 * 1024;

export class PlainHttpClient {
  private readonly agent: http.Agent;
  private readonly transport: typeof http | typeof https;

  constructor(baseUrl: string) {
    const secure = new URL(baseUrl).protocol === 'https:';
    this.transport = secure ? https : http;
    // An idle pooled socket is closed after 4 s, before common servers close theirs (Node's default
    // keepAliveTimeout is 5 s): a write sent on a socket the server is closing could not be told
    // apart from one the upstream received (it would stay PENDING until reconciled).
    const options = { keepAlive: true, timeout: IDLE_SOCKET_MS };
    this.agent = secure ? new https.Agent(options) : new http.Agent(options);
  }

  /** Whole request, whole answer, within `timeoutMs` (from now until the last byte). */
  request(url: string, init: { method: string; headers?: Record<string, string>; body?: string; timeoutMs: number }): Promise<PlainResponse> {
    return new Promise((resolve, reject) => {
      // Object.assign, not `{ ...init.headers }` and then a key: see test/architecture/spread-then-add.test.ts.
      const headers: Record<string, string | number> = Object.assign({}, init.headers);
      if (init.body !== undefined) headers['content-length'] = Buffer.byteLength(init.body);
      const req = this.transport.request(url, { method: init.method, headers, agent: this.agent });
      const timer = setTimeout(() => req.destroy(new UpstreamRequestError(`no answer within ${init.timeoutMs} ms`, 'timeout', undefined)), init.timeoutMs);
      const fail = (e: Error & { code?: string }) => {
        clearTimeout(timer);
        reject(e instanceof UpstreamRequestError ? e : new UpstreamRequestError(e.message, 'network', e.code));
      };
      req.on('error', fail);
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_ANSWER_BYTES) {
            req.destroy(new UpstreamRequestError(`the upstream's answer exceeds ${MAX_ANSWER_BYTES} bytes; it was not read further`, 'network', 'ANSWER_TOO_LARGE'));
            return;
          }
          chunks.push(c);
        });
        res.on('error', fail);
        res.on('close', () => {
          if (!res.complete) fail(new Error('the upstream closed the connection mid-answer'));
        });
        res.on('end', () => {
          clearTimeout(timer);
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: parseBody(Buffer.concat(chunks).toString('utf8')) });
        });
      });
      req.end(init.body);
    });
  }
}

function parseBody(text: string): Record<string, unknown> {
  if (text === '') return {};
  try {
    const parsed: unknown = JSON.parse(text);
    return parsed !== null && typeof parsed === 'object' ? (parsed as Record<string, unknown>) : {};
  } catch {
    return { message: text.slice(0, 200) };
  }
}
