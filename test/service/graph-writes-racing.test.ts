import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writePrivateFile } from '../../src/decision/index.js';
import { AuthorityGraph } from '../../src/graph/index.js';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { addGovernanceKey, adminCredentialPath, createGrant, ensureGovernance, openWrit } from '../../src/service/index.js';
import { loadConfig } from '../../src/config/index.js';
import { ManualClock } from '../../src/clock.js';
import { generatePrincipalKeyPair } from '../../src/wire/principal-keys.js';
import { commitGraphChange } from '../../src/service/graph-changes.js';
import { BUNDLE_DIR, REPO, startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h?.close());

const scope = { actions: ['read_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['*'], constraints: { risk_max: 0 } };

describe('graph writes that race', () => {
  it('a plan that awaits while another write commits is planned again on the newer graph, not appended on a head it never saw', async () => {
    let plans = 0;
    let release!: () => void;
    const paused = new Promise<void>((r) => (release = r));
    const slow = commitGraphChange(h.ctx, GOVERNANCE_ID, async (graph, now) => {
      plans += 1;
      const exists = graph.edge('g-race') !== undefined; // judged before the wait, as an async plan would
      if (plans === 1) await paused;
      if (exists) return [];
      return [{ type: 'edge.created', edge: { id: 'g-race', kind: 'grant', from: GOVERNANCE_ID, to: 'editor-alice', scope, max_depth: 0, reason: 'slow', creator: GOVERNANCE_ID, created_at: now, not_before: null, expires_at: null } }];
    });
    await new Promise((r) => setTimeout(r, 20));
    await createGrant(h.ctx, GOVERNANCE_ID, { id: 'g-race', to: 'editor-alice', reason: 'fast', max_depth: 0, scope: { ...scope, risk_max: 0, constraints: undefined } });
    release();
    await slow;
    expect(plans).toBe(2);
    // One g-race in the log, which replays.
    const events = await h.ctx.store.read((tx) => tx.graph.read(0));
    expect(events.filter((e) => e.event.type === 'edge.created' && e.event.edge.id === 'g-race')).toHaveLength(1);
    expect(() => AuthorityGraph.replay(events)).not.toThrow();
  });

  it('two first starts on one data directory at once: one makes the admin credential, the other uses it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'writ-first-starts-'));
    const config = loadConfig({ dataDir: dir, bundleDir: BUNDLE_DIR, policiesDir: join(REPO, 'policies') }, {});
    const [a, b] = await Promise.all([openWrit(config), openWrit(config)]);
    try {
      expect([a.credentialCreated, b.credentialCreated].sort()).toEqual([false, true]); // one wrote it; the other found it
      const kid = JSON.parse(readFileSync(adminCredentialPath(dir), 'utf8')).kid as string;
      expect((await a.ctx.graph.current()).principal(GOVERNANCE_ID)!.keys.map((k) => k.kid)).toEqual([kid]);
      expect(statSync(adminCredentialPath(dir)).mode & 0o777).toBe(0o600);
    } finally {
      await a.close();
      await b.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('first starts of one store from two data directories at once, in one millisecond', () => {
  it('one credential becomes governance\'s; the other is removed, not announced as created', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'writ-first-starts-two-'));
    const clock = new ManualClock(Date.now()); // one millisecond for both
    const configs = ['a', 'b'].map((d) => loadConfig({ dataDir: join(dir, d), dbFile: join(dir, 'writ.sqlite'), bundleDir: BUNDLE_DIR, policiesDir: join(REPO, 'policies') }, {}));
    const [a, b] = await Promise.all(configs.map((c) => openWrit(c, { clock })));
    try {
      const opened = [a!, b!];
      expect(opened.map((w) => w.credentialCreated).sort()).toEqual([false, true]);
      const loser = opened.find((w) => !w.credentialCreated)!;
      expect(loser.credentialMissing).toBe(true);
      expect(existsSync(loser.credentialPath)).toBe(false);
      const winner = opened.find((w) => w.credentialCreated)!;
      const registered = (await a!.ctx.graph.current()).principal(GOVERNANCE_ID)!.keys;
      expect(registered).toHaveLength(1);
      expect(registered[0]!.x).toBe(JSON.parse(readFileSync(winner.credentialPath, 'utf8')).x);
    } finally {
      await a!.close();
      await b!.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('writ keys add-governance on a new store', () => {
  it('creates governance with the key alone; when a server created it meanwhile, the key is added beside its own and says so (raced)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'writ-byok-'));
    const config = (d: string) => loadConfig({ dataDir: join(dir, d), dbFile: join(dir, 'writ.sqlite'), bundleDir: BUNDLE_DIR, policiesDir: join(REPO, 'policies') }, {});
    const { privateJwk: first } = await generatePrincipalKeyPair('operator-1');
    const { privateJwk: second } = await generatePrincipalKeyPair('operator-2');
    // The operator's command opens without bootstrapping; a server starting at that moment bootstraps
    // after the command planned on a graph without governance, and before its plan is appended.
    const operator = await openWrit(config('cli'), { bootstrapGovernance: false });
    let server: Awaited<ReturnType<typeof openWrit>> | undefined;
    const store = operator.ctx.store;
    const readWrite = store.readWrite.bind(store);
    store.readWrite = (async (...args: Parameters<typeof readWrite>) => {
      server ??= await openWrit(config('server'));
      return readWrite(...args);
    }) as typeof store.readWrite;
    try {
      const r = await addGovernanceKey(operator.ctx, 'operator', first as Record<string, unknown>);
      expect(server!.credentialCreated).toBe(true);
      expect(r).toMatchObject({ kid: 'operator-1', created: false, raced: true });
      expect(r.keys).toHaveLength(2);
      expect(await addGovernanceKey(operator.ctx, 'operator', second as Record<string, unknown>)).toMatchObject({ created: false, raced: false });
    } finally {
      await server?.close();
      await operator.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('without a race, governance is made with the key alone (created) and no credential is written', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'writ-byok-'));
    const { privateJwk } = await generatePrincipalKeyPair('operator-only');
    const operator = await openWrit(loadConfig({ dataDir: join(dir, 'cli'), dbFile: join(dir, 'writ.sqlite'), bundleDir: BUNDLE_DIR, policiesDir: join(REPO, 'policies') }, {}), { bootstrapGovernance: false });
    try {
      expect(await addGovernanceKey(operator.ctx, 'operator', privateJwk as Record<string, unknown>)).toMatchObject({ keys: ['operator-only'], created: true, raced: false });
      expect(existsSync(adminCredentialPath(join(dir, 'cli')))).toBe(false);
    } finally {
      await operator.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the admin credential, once governance exists', () => {
  it('nothing mints or registers a governance key: not a missing credential, not a stray file; writ keys add-governance does, on purpose', async () => {
    const path = adminCredentialPath(h.config.dataDir);
    const before = (await h.ctx.graph.current()).principal(GOVERNANCE_ID)!.keys.map((k) => k.kid);
    const revision = (await h.ctx.graph.current()).revision;
    rmSync(path);
    expect(await ensureGovernance(h.ctx)).toEqual({ credentialPath: path, created: false, missing: true, unregistered: false });
    expect(existsSync(path)).toBe(false);
    // A credential of another store (a laptop's own data/admin.jwk) is not taken for one of this store's.
    const { privateJwk } = await generatePrincipalKeyPair('governance-replacement');
    writePrivateFile(path, JSON.stringify(privateJwk), { overwrite: false });
    expect(await ensureGovernance(h.ctx)).toEqual({ credentialPath: path, created: false, missing: false, unregistered: true });
    expect((await h.ctx.graph.current()).revision).toBe(revision);
    // After losing the credential, the operator registers a new key pair's public half explicitly.
    expect(await addGovernanceKey(h.ctx, 'operator', privateJwk as Record<string, unknown>)).toMatchObject({ kid: 'governance-replacement', keys: [...before, 'governance-replacement'] });
    await expect(addGovernanceKey(h.ctx, 'operator', privateJwk as Record<string, unknown>)).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
    await expect(addGovernanceKey(h.ctx, 'operator', { kty: 'oct', k: 'x', kid: 'sym' })).rejects.toMatchObject({ code: 'UNPROCESSABLE' });
  });
});

describe('writePrivateFile', () => {
  const dir = mkdtempSync(join(tmpdir(), 'writ-private-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('writes 0600; never replaces a file unless asked to; leaves no temporary file behind', () => {
    const file = join(dir, 'key.jwk');
    writePrivateFile(file, 'first', { overwrite: false });
    expect(readFileSync(file, 'utf8')).toBe('first');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(() => writePrivateFile(file, 'second', { overwrite: false })).toThrow(/EEXIST/);
    expect(readFileSync(file, 'utf8')).toBe('first');
    writePrivateFile(file, 'third', { overwrite: true });
    expect(readFileSync(file, 'utf8')).toBe('third');
    writeFileSync(join(dir, 'other'), 'x', { mode: 0o644 });
    expect(readdirSync(dir).sort()).toEqual(['key.jwk', 'other']);
  });
});
