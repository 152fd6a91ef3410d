/**
 * POST /v1/impact tells a caller who may not ask about a change nothing, not even whether what it names
 * exists: the same answer for an unknown principal or edge as for a known one it may not ask about.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h?.close());

const impact = (principal: string, change: object) => h.call(principal, { method: 'POST', url: '/v1/impact', payload: change });
/** A problem body with the named id put back as ID, so that two answers compare by shape. */
const shape = (body: { status: number; code: string; detail: string; instance?: string }, id: string) => ({ ...body, detail: body.detail.replaceAll(id, 'ID') });

describe('POST /v1/impact, asked by a principal who may not ask', () => {
  it('an unknown principal and a known one: 403 FORBIDDEN both, word for word', async () => {
    const unknown = await impact('content-agent-3', { revoke: { principal: 'nobody' } });
    const known = await impact('content-agent-3', { revoke: { principal: 'orchestrator' } });
    expect(unknown.status).toBe(403);
    expect(known.status).toBe(403);
    expect(known.body).toEqual(unknown.body);
    expect(known.body.detail).not.toMatch(/orchestrator|seo-agent-7|nobody/);
  });

  it('an unknown edge and one it may not read: 404 UNKNOWN_EDGE both, naming only the id it asked about', async () => {
    const unknown = await impact('content-agent-3', { revoke: { edge: 'nope' } });
    const known = await impact('content-agent-3', { revoke: { edge: 'd-orch-seo' } });
    expect(unknown.status).toBe(404);
    expect(known.status).toBe(404);
    expect(unknown.body.code).toBe('UNKNOWN_EDGE');
    expect(shape(known.body, 'd-orch-seo')).toEqual(shape(unknown.body, 'nope'));
    // GET /v1/edges/:id answers it the same way.
    const read = await h.call('content-agent-3', { method: 'GET', url: '/v1/edges/d-orch-seo' });
    expect([read.status, read.body.code, read.body.detail]).toEqual([404, 'UNKNOWN_EDGE', known.body.detail]);
  });

  it('governance gets the precise codes', async () => {
    expect((await impact('governance', { revoke: { principal: 'nobody' } })).body.code).toBe('UNKNOWN_PRINCIPAL');
    expect((await impact('governance', { revoke: { edge: 'nope' } })).body.code).toBe('UNKNOWN_EDGE');
  });
});
