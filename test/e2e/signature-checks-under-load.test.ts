import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createCallerAssertion } from '../../src/sdk/index.js';
import { fixtureKey } from '../support/harness.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

const tmp = mkdtempSync(join(tmpdir(), 'writ-sigload-'));
let server: ServerProcess | undefined;
afterAll(async () => {
  await server?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

/** One bit of the signature (the third segment) flipped: well-formed, correctly encoded, and forged. */
function forged(assertion: string): string {
  const [h, p, s] = assertion.split('.');
  const sig = Buffer.from(s!, 'base64url');
  sig[10]! ^= 0x04;
  return `${h}.${p}.${sig.toString('base64url')}`;
}

const checksOf = async (url: string) => {
  const text = await (await fetch(`${url}/metrics`)).text();
  const value = (thread: string) => Number(new RegExp(`^writ_signature_checks_total\\{thread="${thread}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? NaN);
  return { eventLoop: value('event_loop'), other: value('other') };
};

describe('caller assertions checked under concurrent load (a real writ serve)', () => {
  it('with 32 requests in flight the checks move off the event loop, and every forged or foreign-key assertion is still refused while every good one is answered', async () => {
    server = await startServerProcess({ dataDir: join(tmp, 'writ') });
    const url = server.url;
    const seo = fixtureKey('seo-agent-7');
    const other = fixtureKey('orchestrator');
    const body = JSON.stringify({ action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['title'] });
    type Kind = 'good' | 'forged' | 'foreign key';
    const call = async (kind: Kind): Promise<string> => {
      // A foreign key: orchestrator's key, its kid, but claiming to be seo-agent-7.
      const assertion = await createCallerAssertion({ principal: 'seo-agent-7', privateJwk: kind === 'foreign key' ? { ...other, kid: seo.kid } : seo });
      const res = await fetch(`${url}/v1/decisions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${kind === 'forged' ? forged(assertion) : assertion}` }, body });
      const answer = (await res.json()) as { allow?: boolean; code?: string };
      return res.status === 200 ? `200 allow=${answer.allow}` : `${res.status} ${answer.code}`;
    };
    const before = await checksOf(url);
    const kinds: Kind[] = Array.from({ length: 900 }, (_, i) => (i % 3 === 0 ? 'forged' : i % 3 === 1 ? 'foreign key' : 'good'));
    const answers: string[] = new Array(kinds.length);
    let next = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < kinds.length) {
          const i = next++;
          answers[i] = await call(kinds[i]!);
        }
      }),
    );
    const tally = new Map<string, number>();
    kinds.forEach((k, i) => tally.set(`${k}: ${answers[i]}`, (tally.get(`${k}: ${answers[i]}`) ?? 0) + 1));
    expect(Object.fromEntries(tally)).toEqual({ 'good: 200 allow=true': 300, 'forged: 401 UNAUTHENTICATED': 300, 'foreign key: 401 UNAUTHENTICATED': 300 });
    const after = await checksOf(url);
    // Every request's assertion was checked once (a decision's own token is not checked here), and under
    // this load some of the checks ran on the worker thread: the path the refusals above went through.
    expect(after.eventLoop - before.eventLoop + after.other - before.other).toBe(900);
    expect(after.other - before.other).toBeGreaterThan(0);
  }, 120_000);
});
