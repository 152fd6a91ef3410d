import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CompactSign, compactVerify, importJWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO } from '../support/harness.js';
import { CLI, requireDist, startServerProcess } from '../support/server-process.js';
import { WritClient } from '../../src/sdk/index.js';
import { runWrit } from '../support/cli.js';
import pg from 'pg';
import { createTestDatabase } from '../../scripts/test-database.js';

let dataDir: string;

/** `writ policy test` on another policies folder (WRIT_POLICIES_DIR). */
async function runPolicyTest(policiesDir: string): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [CLI, 'policy', 'test'], { cwd: REPO, env: { ...process.env, WRIT_POLICIES_DIR: policiesDir } });
    return { code: 0, output: stdout + stderr };
  } catch (e) {
    const err = e as { stdout: string; stderr: string; code: number };
    return { code: err.code, output: err.stdout + err.stderr };
  }
}

const writ = async (...args: string[]) => {
  const r = await runWrit(dataDir, ...args);
  return { out: r.output, code: r.code };
};

beforeAll(() => {
  requireDist();
  dataDir = mkdtempSync(join(tmpdir(), 'writ-cli-'));
});
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe('the writ command for operators and policy authors', () => {
  it('graph apply is idempotent, and the first start leaves a 0600 admin credential', async () => {
    const first = await writ('graph', 'apply', 'graph/example.yaml');
    expect(first.code).toBe(0);
    expect(first.out).toMatch(/applied graph\/example\.yaml: (\d+) created, 0 unchanged/);
    expect(first.out).toContain('+ delegation d-orch-seo');
    expect(statSync(join(dataDir, 'admin.jwk')).mode & 0o777).toBe(0o600);
    const second = await writ('graph', 'apply', 'graph/example.yaml');
    expect(second.out).toMatch(/applied graph\/example\.yaml: 0 created, \d+ unchanged/);
    const dry = await writ('graph', 'apply', 'graph/example.yaml', '--dry-run');
    expect(dry.out).toMatch(/^graph\/example\.yaml applied to the graph at revision \d+ would give: 0 created, \d+ unchanged \(dry run: nothing written\)\n$/);
  });

  it('graph apply --dry-run where there is no store yet judges the manifest against a new one and creates nothing', async () => {
    const none = join(dataDir, 'not-yet');
    const before = readdirSync(tmpdir()).filter((f) => f.startsWith('writ-dry-run-')).length;
    const r = await runWrit(none, 'graph', 'apply', 'graph/example.yaml', '--dry-run');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^graph/example\\.yaml applied to a new store \\(there is none at ${none}/writ\\.sqlite\\) would give: \\d+ created, 0 unchanged \\(dry run: nothing written\\)\\n`));
    expect(existsSync(none)).toBe(false);
    expect(readdirSync(tmpdir()).filter((f) => f.startsWith('writ-dry-run-')).length).toBe(before);
  });

  it('graph apply --dry-run on a PostgreSQL database no Writ has opened writes nothing there (no schema, no governance, no credential)', async () => {
    const db = await createTestDatabase('writ_cli_dry');
    const here = join(dataDir, 'dry-pg');
    try {
      const tables = async () => {
        const c = new pg.Client({ connectionString: db.url });
        await c.connect();
        try {
          return (await c.query('SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()')).rows.length;
        } finally {
          await c.end();
        }
      };
      const dry = await runWrit(here, 'graph', 'apply', 'graph/example.yaml', '--dry-run', '--database', db.url);
      expect(dry.code).toBe(0);
      expect(dry.stdout).toMatch(/^graph\/example\.yaml applied to a new store \(the PostgreSQL database holds none yet\) would give: \d+ created, 0 unchanged \(dry run: nothing written\)\n/);
      expect(await tables()).toBe(0);
      expect(existsSync(here)).toBe(false);
      // Once the database holds a graph, the dry run judges against it.
      expect((await runWrit(here, 'graph', 'apply', 'graph/example.yaml', '--database', db.url)).code).toBe(0);
      const again = await runWrit(here, 'graph', 'apply', 'graph/example.yaml', '--dry-run', '--database', db.url);
      expect(again.stdout).toMatch(/^graph\/example\.yaml applied to the graph at revision \d+ would give: 0 created, \d+ unchanged \(dry run: nothing written\)\n$/);
      // A dry run by a newer Writ (here: a schema whose last migration is not recorded) says so, and migrates nothing.
      const c = new pg.Client({ connectionString: db.url });
      await c.connect();
      try {
        const { rows } = await c.query<{ v: number }>('DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations) RETURNING version AS v');
        const older = await runWrit(here, 'graph', 'apply', 'graph/example.yaml', '--dry-run', '--database', db.url);
        expect(older).toMatchObject({ code: 1, output: expect.stringContaining(`the PostgreSQL schema is at version ${rows[0]!.v - 1}, this Writ needs ${rows[0]!.v}: run \`writ migrate\``) });
        expect((await c.query('SELECT 1 FROM schema_migrations WHERE version = $1', [rows[0]!.v])).rows).toEqual([]);
      } finally {
        await c.end();
      }
    } finally {
      await db.drop();
    }
  });

  it('keys add-governance registers a key pair\'s public half for governance (after losing the credential); twice is ALREADY_EXISTS', async () => {
    expect((await writ('graph', 'apply', 'graph/example.yaml')).code).toBe(0);
    const file = join(dataDir, 'replacement.jwk');
    expect((await writ('keys', 'new', file)).code).toBe(0);
    const added = await writ('keys', 'add-governance', file);
    expect(added.code).toBe(0);
    expect(added.out).toMatch(/^governance key \S+ registered \(graph revision \d+\); governance's keys now: \S+, \S+\n$/);
    const again = await writ('keys', 'add-governance', join(dataDir, 'replacement.pub.jwk'));
    expect(again).toMatchObject({ code: 1, out: expect.stringContaining('ALREADY_EXISTS') });
  });

  it('keys add-governance on a new store creates governance with that key alone and writes no credential; a server then takes governance\'s writes signed with it', async () => {
    const fresh = mkdtempSync(join(tmpdir(), 'writ-cli-byok-'));
    try {
      const file = join(fresh, '..', `${fresh.split('/').at(-1)}-vault.jwk`);
      expect((await runWrit(fresh, 'keys', 'new', file)).code).toBe(0);
      const made = await runWrit(fresh, 'keys', 'add-governance', file.replace(/\.jwk$/, '.pub.jwk'), '--json');
      expect(made.code, made.output).toBe(0);
      const kid = (JSON.parse(readFileSync(file, 'utf8')) as { kid: string }).kid;
      expect(JSON.parse(made.stdout)).toMatchObject({ kid, keys: [kid], created: true, raced: false });
      expect(existsSync(join(fresh, 'admin.jwk'))).toBe(false);
      const text = await runWrit(fresh, 'keys', 'add-governance', file);
      expect(text).toMatchObject({ code: 1, output: expect.stringContaining('ALREADY_EXISTS') });

      const server = await startServerProcess({ dataDir: fresh });
      try {
        expect(server.log()).toContain('no governance admin credential at');
        const governance = new WritClient({ baseUrl: server.url, principal: 'governance', privateJwk: JSON.parse(readFileSync(file, 'utf8')) as never });
        const grant = await governance.request<{ created: boolean }>('POST', '/v1/grants', {
          id: 'g-byok', to: 'publisher', reason: 'governance signs with its own key', scope: { actions: ['publish_post'], resources: ['wp:post:1'], environments: ['production'], fields: ['status'], risk_max: 1 },
        });
        expect(grant.created).toBe(true);
        expect(existsSync(join(fresh, 'admin.jwk'))).toBe(false);
      } finally {
        await server.stop();
      }
      rmSync(file);
      rmSync(file.replace(/\.jwk$/, '.pub.jwk'));
    } finally {
      rmSync(fresh, { recursive: true, force: true });
    }
  });

  it('output piped into a reader that stops early ends the command quietly (no EPIPE stack trace)', async () => {
    // `true` reads nothing and is gone before node has started: every write meets a closed pipe.
    const command = [process.execPath, CLI, 'graph', 'apply', 'graph/example.yaml', '--dry-run', '--data-dir', dataDir].map((a) => JSON.stringify(a)).join(' ');
    const r = await promisify(execFile)('bash', ['-c', `set -o pipefail; ${command} | true`], { cwd: REPO }).then(
      ({ stderr }) => ({ code: 0, stderr }),
      (e: { code: number; stderr: string }) => ({ code: e.code, stderr: e.stderr }),
    );
    expect(r).toEqual({ code: 0, stderr: '' });
  });

  it('migrate applies the numbered migrations on either engine and says where the schema stands; another URL is refused', async () => {
    const sqlite = await writ('migrate');
    expect(sqlite).toMatchObject({ code: 0, out: expect.stringMatching(/^sqlite store .*writ\.sqlite: schema at version \d+/) });
    const db = await createTestDatabase('writ_cli_migrate');
    try {
      const onPg = await writ('migrate', '--database', db.url);
      expect(onPg).toMatchObject({ code: 0, out: expect.stringMatching(/^postgres store .*: schema at version \d+/) });
      expect((await writ('migrate', '--database', db.url)).code).toBe(0); // again: nothing to apply
    } finally {
      await db.drop();
    }
    const other = await writ('migrate', '--database', 'mysql://root@127.0.0.1/writ');
    expect(other.code).not.toBe(0);
    expect(other.out).toMatch(/UNPROCESSABLE.*postgres:\/\//);
  });

  it('lease prune-history deletes old lease history (each key keeps its latest) and refuses a missing or bad age', async () => {
    expect(await writ('lease', 'prune-history', '--older-than', '30d')).toMatchObject({ code: 0, out: expect.stringMatching(/^pruned \d+ lease history event\(s\) older than 30d/) });
    const missing = await writ('lease', 'prune-history');
    expect(missing.code).not.toBe(0);
    expect(missing.out).toMatch(/UNPROCESSABLE.*--older-than/);
    expect((await writ('lease', 'prune-history', '--older-than', 'soon')).code).not.toBe(0);
  });

  it('trace explains an allow chain by chain (exit 0) and a deny with what is missing (exit 3)', async () => {
    const allow = await writ('trace', 'seo-agent-7', 'update_post', 'wp:post:1024', '--fields', 'title,meta_description');
    expect(allow.code).toBe(0);
    expect(allow.out).toMatch(/^ALLOW {2}seo-agent-7 update_post wp:post:1024 in production fields \[meta_description, title\]/);
    expect(allow.out).toContain('✓ d-orch-seo: orchestrator → seo-agent-7 [delegate]');
    const deny = await writ('trace', 'seo-agent-7', 'update_post', 'wp:post:1024', '--fields', 'body');
    expect(deny.code).toBe(3);
    expect(deny.out).toMatch(/^DENY/);
    expect(deny.out).toContain('fields: body is not in the scope of edge d-orch-seo');
  });

  it('an unknown principal or a malformed manifest is a clear error with its code', async () => {
    const r = await writ('trace', 'ghost', 'update_post', 'wp:post:1');
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/UNKNOWN_PRINCIPAL/);
    const bad = await writ('graph', 'apply', 'package.json');
    expect(bad.code).toBe(1);
    expect(bad.out).toMatch(/MALFORMED_REQUEST.*the graph manifest has \d+ problems; nothing was applied/);
    expect(bad.out).toContain('  - the manifest: unknown property "name"');
  });

  it('trace --policy DIR judges the request under a candidate policies folder, before it is deployed; the live bundle is untouched', { timeout: 60_000 }, async () => {
    const live = await writ('trace', 'seo-agent-7', 'update_post', 'wp:post:1024', '--fields', 'title');
    expect(live.code).toBe(0);
    const candidate = join(dataDir, 'candidate-policies');
    cpSync(join(REPO, 'policies'), candidate, { recursive: true });
    const data = JSON.parse(readFileSync(join(candidate, 'data.json'), 'utf8'));
    data.writ.actions.update_post.risk = 2;
    writeFileSync(join(candidate, 'data.json'), JSON.stringify(data, null, 2));
    const r = await writ('trace', 'seo-agent-7', 'update_post', 'wp:post:1024', '--fields', 'title', '--policy', candidate);
    expect(r.code).toBe(3);
    expect(r.out).toContain('reason: chain 0: risk: 2 exceeds the risk_max 1 of edge d-orch-seo');
    const revisionOf = (out: string) => /policy (sha256:[0-9a-f]{16})/.exec(out)![1];
    expect(revisionOf(r.out)).not.toBe(revisionOf(live.out));
    expect(revisionOf((await writ('trace', 'seo-agent-7', 'update_post', 'wp:post:1024', '--fields', 'title')).out)).toBe(revisionOf(live.out));
  });

  it('a manifest whose last item could never apply changes nothing: the items before it are not applied either', async () => {
    expect((await writ('graph', 'apply', 'graph/example.yaml')).code).toBe(0);
    const before = JSON.parse((await writ('graph', 'export')).out);
    const file = join(dataDir, 'typo.yaml');
    writeFileSync(file, [
      'principals:',
      '  - { id: new-agent, kind: agent, keys: [] }',
      'grants:',
      '  - { id: g-new-ok, to: editor-alice, reason: fine, scope: { actions: [read_post], resources: ["wp:post:*"], risk_max: 0 } }',
      '  - { id: g-new-typo, to: editor-alice, reason: typo, scope: { actions: [update_psot], resources: ["wp:post:*"], risk_max: 1 } }',
      '',
    ].join('\n'));
    const r = await writ('graph', 'apply', file);
    expect(r.code).not.toBe(0);
    expect(r.out).toContain('UNPROCESSABLE');
    expect(r.out).toContain('grants[1] (g-new-typo).scope.actions: "update_psot" is not an action of the policy');
    const after = JSON.parse((await writ('graph', 'export')).out);
    expect(after.revision).toBe(before.revision);
    expect(after.principals.map((p: { id: string }) => p.id)).not.toContain('new-agent');
  });

  it('keys rotate adds a signing key; the old one stays in the JWKS', async () => {
    const r = await writ('keys', 'rotate');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/JWKS has 2 key\(s\)/);
  });

  it("keys new makes an agent's key pair (the private half 0600, never overwritten) whose public half a manifest registers and verifies its signatures", async () => {
    const file = join(dataDir, 'bot.jwk');
    const made = await writ('keys', 'new', file, '--json');
    expect(made.code).toBe(0);
    const { public_file, public_jwk } = JSON.parse(made.out);
    expect(public_file).toBe(join(dataDir, 'bot.pub.jwk'));
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const privateJwk = JSON.parse(readFileSync(file, 'utf8'));
    const publicJwk = JSON.parse(readFileSync(public_file, 'utf8'));
    expect(publicJwk).toEqual(public_jwk);
    expect(publicJwk).not.toHaveProperty('d');
    expect(privateJwk).toMatchObject({ kty: 'OKP', crv: 'Ed25519', kid: publicJwk.kid, x: publicJwk.x, d: expect.any(String) });

    expect((await writ('keys', 'new', join(dataDir, 'other.pub.jwk'))).out).toContain('names a public key file: name the private one');
    const again = await writ('keys', 'new', file);
    expect(again).toMatchObject({ code: 2, out: expect.stringContaining(`${file} exists: a key file is never overwritten`) });
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual(privateJwk);

    const manifest = join(dataDir, 'bot.yaml');
    writeFileSync(manifest, 'principals:\n  - { id: bot, kind: agent, key_files: [bot.pub.jwk] }\n');
    expect((await writ('graph', 'apply', manifest)).code).toBe(0);
    const registered = JSON.parse((await writ('graph', 'export')).out).principals.find((p: { id: string }) => p.id === 'bot').keys;
    expect(registered).toEqual([publicJwk]);
    const jws = await new CompactSign(new TextEncoder().encode('hello')).setProtectedHeader({ alg: 'EdDSA', kid: privateJwk.kid }).sign(await importJWK(privateJwk, 'EdDSA'));
    await expect(compactVerify(jws, await importJWK(registered[0], 'EdDSA'))).resolves.toBeDefined();
  });

  it('policy test runs the Rego tests, then builds the folder without publishing it; data a service would refuse fails it', { timeout: 60_000 }, async () => {
    const r = await writ('policy', 'test');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/PASS: \d+\/\d+/);
    expect(r.out).toMatch(/and \S+policies builds into a usable bundle \(sha256:[0-9a-f]{16}; not published/);
    const candidate = join(dataDir, 'typo-policies');
    cpSync(join(REPO, 'policies'), candidate, { recursive: true });
    const data = JSON.parse(readFileSync(join(candidate, 'data.json'), 'utf8'));
    data.writ.actions.deploy.riks = 3; // a typo the Rego tests cannot see: the risk stays the old one
    writeFileSync(join(candidate, 'data.json'), JSON.stringify(data, null, 2));
    const bundle = readFileSync(join(REPO, 'build/policy/revision'), 'utf8');
    const t = await runPolicyTest(candidate);
    expect(t.code).toBe(1);
    expect(t.output).toMatch(/PASS: \d+\/\d+/);
    expect(t.output).toContain('the Rego tests pass, but');
    expect(t.output).toContain('data.writ.actions.deploy: unknown property "riks"');
    expect(readFileSync(join(REPO, 'build/policy/revision'), 'utf8')).toBe(bundle);
  });
});
