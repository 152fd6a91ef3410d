import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveLogger } from '../../src/cli/serve.js';
import { buildApp } from '../../src/http/index.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h?.close());

describe("writ serve's log: an INTERNAL answer's cause is always written", () => {
  it('by default errors only; WRIT_LOG=info (or 1) adds requests; another word is refused at start', () => {
    expect(serveLogger({})).toEqual({ level: 'error' });
    expect(serveLogger({ WRIT_LOG: '' })).toEqual({ level: 'error' });
    expect(serveLogger({ WRIT_LOG: '1' })).toEqual({ level: 'info' });
    expect(serveLogger({ WRIT_LOG: 'debug' })).toEqual({ level: 'debug' });
    expect(() => serveLogger({ WRIT_LOG: 'loud' })).toThrow(/^configuration WRIT_LOG must be one of fatal, error, warn, info, debug, trace \(or 1 for info\), got "loud"$/);
  });

  it('with the default, a failure the caller sees as 500 INTERNAL leaves one line with its stack, and a request that went well none', async () => {
    const lines: string[] = [];
    const stream = new Writable({ write(chunk, _enc, done) { lines.push(String(chunk)); done(); } });
    const app = await buildApp(h.ctx, {
      logger: { ...serveLogger({}), stream },
      plugins: [(a) => void a.get('/test/boom', async () => { throw new Error('kaboom in a use case'); })],
    });
    try {
      const ok = await app.inject({ method: 'GET', url: '/healthz' });
      expect(ok.statusCode).toBe(200);
      expect(lines).toEqual([]);
      const r = await app.inject({ method: 'GET', url: '/test/boom' });
      expect(r.statusCode).toBe(500);
      expect(r.json()).toMatchObject({ code: 'INTERNAL', detail: 'internal error' });
      expect(lines).toHaveLength(1);
      const line = JSON.parse(lines[0]!);
      expect(line).toMatchObject({ level: 50, msg: 'internal error', err: { message: 'kaboom in a use case' } });
      expect(line.err.stack).toMatch(/kaboom in a use case\n\s+at /);
    } finally {
      await app.close();
    }
  });
});
