import { join } from 'node:path';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { runWrit } from '../support/cli.js';
import { REPO, startHarness, type Harness } from '../support/harness.js';
import { requireDist } from '../support/server-process.js';
import { WIRE_TIME } from '../support/wire-times.js';

let h: Harness;
let clock: ManualClock;
const KEY = join(REPO, 'fixtures/keys/editor-alice.jwk');
const writ = async (...args: string[]) => {
  const r = await runWrit(h.dataDir, ...args);
  clock.set(Math.max(clock.now(), Date.now()));
  return r;
};
const request = { action: 'publish_post', resource: 'wp:post:42', environment: 'production', fields: ['status'] };

beforeAll(async () => {
  requireDist();
  // The CLI signs on the system clock: the service judges on the same one (catchUp() before asking: a
  // clock left where it started fell behind the CLI's on a loaded machine, "issued in the future").
  clock = new ManualClock(Date.now());
  h = await startHarness({ clock });
  await h.call('governance', { method: 'POST', url: '/v1/grants', payload: { id: 'g-publisher-risky', to: 'publisher', reason: 'emergency publishing', max_depth: 0, scope: { actions: ['publish_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['status'], risk_max: 3 } } });
  await h.call('governance', { method: 'POST', url: '/v1/approvals', payload: { id: 'a-alice-publisher', from: 'editor-alice', to: 'publisher', reason: 'editor signs off risky publishing', scope: { actions: ['publish_post'], resources: ['wp:post:*'], environments: ['production'], risk_max: 3 } } });
});
afterAll(async () => h?.close());

describe('writ approve: a human approver signs off one request from the command line', () => {
  it('prints the assertion alone on stdout (what it is on stderr); the requester passes it and the decision is allowed, once', async () => {
    const r = await writ('approve', 'publisher', 'publish_post', 'wp:post:42', '--as', 'editor-alice', '--key', KEY, '--fields', 'status');
    expect(r.code).toBe(0);
    const assertion = r.stdout.trim();
    expect(assertion).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
    expect(r.output).toContain('approval by editor-alice of publisher publish_post wp:post:42 in production on fields [status]: single use, until ');
    expect(decodeProtectedHeader(assertion)).toMatchObject({ alg: 'EdDSA', kid: expect.any(String) });
    expect(decodeJwt(assertion)).toMatchObject({ iss: 'editor-alice', sub: 'editor-alice', aud: 'writ:approval', approve: { principal: 'publisher', action: 'publish_post', resource: 'wp:post:42', environment: 'production', fields: ['status'] } });

    const without = await h.call('publisher', { method: 'POST', url: '/v1/decisions', payload: { ...request, context: { risk: 3 } } });
    expect(without.body).toMatchObject({ allow: false, obligations: { approval_required: true } });
    const allowed = await h.call('publisher', { method: 'POST', url: '/v1/decisions', payload: { ...request, context: { risk: 3, approval: assertion } } });
    expect(allowed.body.allow, JSON.stringify(allowed.body.reasons)).toBe(true);
    const again = await h.call('publisher', { method: 'POST', url: '/v1/decisions', payload: { ...request, context: { risk: 3, approval: assertion } } });
    expect(again.body).toMatchObject({ code: 'UNPROCESSABLE', detail: expect.stringContaining('already used') });
  });

  it('--fields binds the fields approved: a request touching another is refused; * approves every field', async () => {
    const r = await writ('approve', 'publisher', 'publish_post', 'wp:post:42', '--as', 'editor-alice', '--key', KEY, '--fields', 'status', '--json');
    expect(JSON.parse(r.stdout).approve.fields).toEqual(['status']);
    const wider = await h.call('publisher', { method: 'POST', url: '/v1/decisions', payload: { ...request, fields: ['status', 'title'], context: { risk: 3, approval: JSON.parse(r.stdout).assertion } } });
    expect(wider.body).toMatchObject({ code: 'UNPROCESSABLE', detail: 'the approval is for another request: fields ["title"] not among those it approves, ["status"]' });
    const every = await writ('approve', 'publisher', 'publish_post', 'wp:post:42', '--as', 'editor-alice', '--key', KEY, '--fields', 'title, status,title', '--json');
    expect(JSON.parse(every.stdout).approve.fields).toEqual(['status', 'title']);
    const star = await writ('approve', 'publisher', 'publish_post', 'wp:post:42', '--as', 'editor-alice', '--key', KEY, '--fields', '*');
    expect(star.output).toContain(' on fields [*]: single use');
    const allowed = await h.call('publisher', { method: 'POST', url: '/v1/decisions', payload: { ...request, context: { risk: 3, approval: star.stdout.trim() } } });
    expect(allowed.body.allow, JSON.stringify(allowed.body)).toBe(true);
  });

  it('writ who lists the principal that may do it with an approval as allowed, needing one', async () => {
    const r = await writ('who', 'publish_post', 'wp:post:42', '--fields', 'status', '--risk', '3', '--all');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/\n {2}ALLOW publisher {16}via g-publisher-risky {2}\(needs (a lease and )?an approval\)/);
    expect(r.stdout).toMatch(/\n {2}deny {2}content-agent-3 {10}chain 0: /); // the chain's reason, not the approval's
  });

  it('--json gives the assertion with what it approves and until when; --ttl shortens it', async () => {
    const before = Date.now();
    const r = await writ('approve', 'publisher', 'publish_post', 'wp:post:42', '--as', 'editor-alice', '--key', KEY, '--fields', 'status', '--env', 'production', '--ttl', '90s', '--json');
    expect(r.code).toBe(0);
    const answer = JSON.parse(r.stdout);
    expect(answer).toMatchObject({ approver: 'editor-alice', approve: { principal: 'publisher', action: 'publish_post', resource: 'wp:post:42', environment: 'production', fields: ['status'] }, expires_at: expect.stringMatching(WIRE_TIME) });
    const claims = decodeJwt(answer.assertion);
    expect(claims.exp! - claims.iat!).toBe(90);
    expect(Date.parse(answer.expires_at)).toBe(claims.exp! * 1000);
    // 90 s from when the CLI signed: between its start and its answer (it may take seconds to start on a busy machine).
    expect(Date.parse(answer.expires_at)).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 + 90_000);
    expect(Date.parse(answer.expires_at)).toBeLessThanOrEqual(Date.now() + 90_000);
  });

  it('the audience follows WRIT_AUDIENCE, as the server\'s does', async () => {
    process.env.WRIT_AUDIENCE = 'writ-staging';
    try {
      const r = await writ('approve', 'publisher', 'publish_post', 'wp:post:42', '--as', 'editor-alice', '--key', KEY, '--fields', 'status');
      expect(decodeJwt(r.stdout.trim()).aud).toBe('writ-staging:approval');
    } finally {
      delete process.env.WRIT_AUDIENCE;
    }
  });

  it('an --env the local policy bundle does not declare is signed with a warning naming the closest; with no bundle to read, no warning (the server names it when used)', async () => {
    const r = await writ('approve', 'publisher', 'publish_post', 'wp:post:42', '--as', 'editor-alice', '--key', KEY, '--fields', 'status', '--env', 'prodution');
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toMatch(/^eyJ[\w-]*\.[\w-]+\.[\w-]+$/);
    expect(r.output).toContain('[writ] WARNING: the environment: "prodution" is not an environment of the policy (data.writ.environments: production, staging, development) (did you mean "production"?), in the policy bundle at ');
    expect(r.output).toContain(': a decision under that policy would not use this approval');
    process.env.WRIT_BUNDLE_DIR = join(h.dataDir, 'no-bundle-here');
    try {
      const away = await writ('approve', 'publisher', 'publish_post', 'wp:post:42', '--as', 'editor-alice', '--key', KEY, '--fields', 'status', '--env', 'prodution');
      expect(away.code).toBe(0);
      expect(away.output).not.toContain('WARNING');
      const used = await h.call('publisher', { method: 'POST', url: '/v1/decisions', payload: { ...request, context: { risk: 3, approval: away.stdout.trim() } } });
      expect(used.body).toMatchObject({ code: 'UNPROCESSABLE', detail: expect.stringContaining('environment "prodution", not "production"') });
    } finally {
      delete process.env.WRIT_BUNDLE_DIR;
    }
  });

  it.each([
    [['approve', 'publisher', 'publish_post', 'wp:post:42', '--key', KEY], '--as APPROVER and --key FILE'],
    [['approve', 'publisher', 'publish_post', 'wp:post:42', '--as', 'editor-alice', '--key', KEY], '--fields is required: the fields the request may touch (* for every field and the whole resource)'],
    [['approve', 'publisher', 'publish_post', 'wp:post:42', '--as', 'editor-alice', '--key', KEY, '--fields', ' , '], '--fields is required'],
    [['approve', 'publisher', 'publish_post', 'wp:post:42', '--as', 'editor-alice', '--key', KEY, '--fields', 'status', '--ttl', '10m'], '--ttl is whole seconds or minutes from 1s to 300s'],
    [['approve', 'publisher', 'publish_post', 'wp:post:42', '--as', 'editor-alice', '--key', KEY, '--fields', 'status', '--ttl', '5x'], '--ttl is whole seconds or minutes'],
    [['approve', 'publisher', 'publish_post', 'wp:post:42', '--as', 'editor-alice', '--key', join(REPO, 'package.json'), '--fields', 'status'], 'is not a private JWK'],
    [['approve', 'publisher', 'publish_post', 'wp:post:42', '--as', 'editor-alice', '--key', 'no-such.jwk', '--fields', 'status'], 'cannot read the key no-such.jwk'],
  ])('%j is refused in one line, exit 2', async (args, message) => {
    const r = await writ(...args);
    expect(r.code).toBe(2);
    expect(r.output).toContain(message);
    expect(r.stdout.split('\n')[0]).not.toMatch(/^eyJ/);
  });
});
