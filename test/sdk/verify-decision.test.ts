import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DecisionExpiredError, DecisionInvalidError, type Decision } from '../../src/sdk/index.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { clientFor } from './sdk-support.js';

let server: ServerProcess;
beforeAll(async () => {
  server = await startServerProcess();
});
afterAll(async () => server?.stop());

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
const parts = (token: string) => token.split('.') as [string, string, string];
const decode = (part: string) => JSON.parse(Buffer.from(part, 'base64url').toString()) as Record<string, unknown>;

describe('offline verifyDecision against the JWKS', () => {
  let decision: Decision;
  let client: ReturnType<typeof clientFor>;
  beforeAll(async () => {
    client = clientFor(server, 'seo-agent-7');
    decision = await client.client.decide({ action: 'update_post', resource: 'wp:post:701', environment: 'production', fields: ['title'] });
    expect(decision.allow).toBe(true);
  });

  it('a fresh decision verifies, its claims are those Writ answered with, and only the JWKS is fetched (once)', async () => {
    const before = client.sent.length;
    const claims = await client.client.verifyDecision(decision.token!);
    expect(claims).toMatchObject({
      decision_id: decision.decision_id,
      principal: 'seo-agent-7',
      action: 'update_post',
      resource: 'wp:post:701',
      environment: 'production',
      fields: ['title'],
      chain: decision.chain,
      graph_revision: decision.graph_revision,
      policy_revision: decision.policy_revision,
    });
    // Each call's claims are the caller's own to change.
    const again = await client.client.verifyDecision(decision.token!);
    expect(again).not.toBe(claims);
    again.fields.push('slug');
    expect(claims.fields).toEqual(['title']);
    expect(client.sent.slice(before)).toEqual([{ method: 'GET', path: '/.well-known/jwks.json' }]);
  });

  it('a decision whose payload was changed (resource widened) is rejected with DecisionInvalidError', async () => {
    const [h, p, s] = parts(decision.token!);
    const payload = decode(p);
    const tampered = `${h}.${b64({ ...payload, resource: 'wp:post:*' })}.${s}`;
    await expect(client.client.verifyDecision(tampered)).rejects.toBeInstanceOf(DecisionInvalidError);
  });

  it('a decision with a flipped signature byte, or re-signed as alg none, is rejected with DecisionInvalidError', async () => {
    const [h, p, s] = parts(decision.token!);
    const sig = Buffer.from(s, 'base64url');
    sig[0] = sig[0]! ^ 0x01;
    await expect(client.client.verifyDecision(`${h}.${p}.${sig.toString('base64url')}`)).rejects.toBeInstanceOf(DecisionInvalidError);
    await expect(client.client.verifyDecision(`${b64({ ...decode(h), alg: 'none' })}.${p}.`)).rejects.toBeInstanceOf(DecisionInvalidError);
  });

  it('a decision naming a key Writ never had is rejected after one JWKS refetch', async () => {
    const [h, p, s] = parts(decision.token!);
    const before = client.sent.length;
    await expect(client.client.verifyDecision(`${b64({ ...decode(h), kid: 'not-a-writ-key' })}.${p}.${s}`)).rejects.toBeInstanceOf(DecisionInvalidError);
    expect(client.sent.slice(before)).toEqual([{ method: 'GET', path: '/.well-known/jwks.json' }]);
  });

  it('verified by a clock 90 s behind the Writ that signed it, it is rejected with DecisionInvalidError saying so; 4 s behind, it verifies', async () => {
    const issuedAt = Date.parse(decision.issued_at);
    await expect(client.client.verifyDecision(decision.token!, issuedAt - 4_000)).resolves.toMatchObject({ decision_id: decision.decision_id });
    const e = await client.client.verifyDecision(decision.token!, issuedAt - 90_000).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(DecisionInvalidError);
    expect((e as Error).message).toMatch(/^DECISION_INVALID: decision \S+ is issued in the future: its iat \S+ is 90\.0 s after this client's time \S+, more than the 5 s of clock skew tolerated; the clock of the Writ replica that signed it is probably ahead: set it right \(NTP\) and decide again$/);
  });

  it('verified after its expiry, the same decision is rejected with DecisionExpiredError', async () => {
    const expiresAt = Date.parse(decision.expires_at!);
    await expect(client.client.verifyDecision(decision.token!, expiresAt + 1_000)).rejects.toBeInstanceOf(DecisionExpiredError);
  });
});
