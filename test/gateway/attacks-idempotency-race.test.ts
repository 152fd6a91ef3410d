import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCallerAssertion, WritClient } from '../../src/sdk/index.js';
import { fixtureKey } from '../support/harness.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

/**
 * One Idempotency-Key, one request, several attempts in flight at once against a real `writ serve`
 * (SQLite), each with a decision of its own (as retries whose first answer was lost, after a fresh
 * decide): exactly one is forwarded, every attempt answers that one receipt, and the decisions of the
 * attempts that lost the race are not spent (a replay spends nothing but its own caller assertion).
 */
const PRINCIPAL = 'seo-agent-7';
const ROUNDS = 8;
const RACERS = 4;
let server: ServerProcess | undefined;
beforeAll(async () => {
  server = await startServerProcess({});
}, 60_000);
afterAll(async () => server?.stop());

async function post(url: string, decision: string, key: string, body: Record<string, unknown>) {
  const assertion = await createCallerAssertion({ principal: PRINCIPAL, privateJwk: fixtureKey(PRINCIPAL) });
  const res = await fetch(`${url}/v1/actions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${assertion}`, 'content-type': 'application/json', 'writ-decision': decision, 'idempotency-key': key },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

describe('attempts racing under one Idempotency-Key', () => {
  it(`${ROUNDS} rounds of ${RACERS}: one write forwarded per round, every answer its receipt, the losers' decisions unspent`, { timeout: 120_000 }, async () => {
    const url = server!.url;
    const agent = new WritClient({ baseUrl: url, principal: PRINCIPAL, privateJwk: fixtureKey(PRINCIPAL) });
    for (let round = 0; round < ROUNDS; round++) {
      const resource = `wp:post:${5000 + round}`;
      const decisions = await Promise.all(Array.from({ length: RACERS }, () => agent.decide({ action: 'update_post', resource, environment: 'production', fields: ['meta_description'] })));
      const body = { action: 'update_post', resource, fields: ['meta_description'], payload: { meta_description: `r${round}` }, expected_version: 0 };
      const answers = await Promise.all(decisions.map((d) => post(url, d.token!, `race-${round}`, body)));
      const ids = new Set(answers.map((a) => a.body.receipt?.receipt_id));
      expect(ids.size, JSON.stringify(answers)).toBe(1);
      expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
      for (const a of answers) expect([200, 201, 202]).toContain(a.status);
      // One of them was used; each other one still writes (once), under a new key.
      const used = answers.find((a) => a.status === 201)!.body.receipt.decision_id as string;
      const unused = decisions.filter((d) => d.decision_id !== used);
      expect(unused).toHaveLength(RACERS - 1);
      const next = await post(url, unused[0]!.token!, `after-${round}`, { ...body, payload: { meta_description: `after ${round}` }, expected_version: 1 });
      expect(next.status, JSON.stringify(next.body)).toBe(201);
    }
    const writes = (await (await fetch(`${server!.upstreamUrl}/writes`)).json()) as { total: number; per_post: Record<string, number> };
    expect(writes.total).toBe(ROUNDS * 2);
    for (const n of Object.values(writes.per_post)) expect(n).toBe(2);
  });
});
