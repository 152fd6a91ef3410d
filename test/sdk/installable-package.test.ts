import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO } from '../support/harness.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

/**
 * The SDK as an agent's project gets it: `npm pack` of packages/sdk, installed offline into a fresh
 * project (with jose and ws, its two dependencies, packed from this repository's node_modules: no registry),
 * a TypeScript file type-checked against the package's declarations and run against a live Writ.
 */
const SDK_DIR = join(REPO, 'packages/sdk');
const TSC = join(REPO, 'node_modules/typescript/bin/tsc');

let server: ServerProcess;
let work: string;
beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'writ-sdk-package-'));
  server = await startServerProcess();
});
afterAll(async () => {
  await server?.stop();
  rmSync(work, { recursive: true, force: true });
});

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : [p];
  });
}

const AGENT = `
import { readFileSync } from 'node:fs';
import {
  WritClient, generatePrincipalKeyPair, createCallerAssertion, ResourceBusyError, VersionConflictError, WritApiError,
  type Decision, type DecisionClaims, type Lease, type Receipt,
} from '@writ/sdk';

const [baseUrl, keyFile, postId] = process.argv.slice(2) as [string, string, string];
const privateJwk = JSON.parse(readFileSync(keyFile, 'utf8'));
const client = new WritClient({ baseUrl, principal: 'seo-agent-7', privateJwk });
const resource = \`wp:post:\${postId}\`;
const title = (d: Decision, text: string, expected_version: number) =>
  ({ decision: d, action: 'update_post', resource, fields: ['title'], payload: { title: text }, expected_version });

// The declarations are real types, not any: this call must not type-check (it is never run).
const neverRun = () =>
  // @ts-expect-error action is a string
  client.decide({ action: 1, resource, environment: 'production' });
void neverRun;

const decision: Decision = await client.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] });
const claims: DecisionClaims = await client.verifyDecision(decision.token!);
const receipt: Receipt = await client.withLease([decision], ({ act }) => act(title(decision, 'from the packed SDK', 0)), { ttlMs: 5_000 });

let conflict: VersionConflictError | null = null;
const stale = await client.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] });
try {
  await client.withLease([stale], ({ act }) => act(title(stale, 'stale', 0)));
} catch (e) {
  if (!(e instanceof VersionConflictError)) throw e;
  conflict = e;
}

const other = new WritClient({ baseUrl, principal: 'seo-agent-7', privateJwk });
const held: Lease = await client.acquireLease([await client.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] })], { ttlMs: 5_000 });
let busy: ResourceBusyError | null = null;
try {
  await other.acquireLease([await other.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] })]);
} catch (e) {
  if (!(e instanceof ResourceBusyError)) throw e;
  busy = e;
}
await client.releaseLease(held);

// The lease stream: the same lease and the same typed refusal over one WebSocket.
const stream = await client.openLeaseStream();
const streamed = await stream.acquire([(await client.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] })).token!], { ttlMs: 5_000 });
let streamBusy: ResourceBusyError | null = null;
try {
  await stream.acquire([(await client.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] })).token!]);
} catch (e) {
  if (!(e instanceof ResourceBusyError)) throw e;
  streamBusy = e;
}
const released = await stream.release(streamed);
await stream.close();

const keys = await generatePrincipalKeyPair();
const assertion: string = await createCallerAssertion({ principal: 'someone', privateJwk: keys.privateJwk });
const base: WritApiError | null = busy;

console.log(JSON.stringify({
  claims: { principal: claims.principal, resource: claims.resource, fields: claims.fields },
  receipt: { status: receipt.status, final_version: receipt.final_version },
  conflict: conflict && { name: conflict.name, code: conflict.code, status: conflict.status },
  busy: busy && { code: busy.code, status: busy.status, holder: busy.holder, retryAfterMs: busy.retryAfterMs },
  assertionParts: assertion.split('.').length,
  isApiError: base instanceof WritApiError,
  stream: { epochRose: released.epochs[\`\${resource}#title\`]! > held.epochs[\`\${resource}#title\`]!, busy: streamBusy?.code, closed: (await stream.closed).code },
}));
`;

describe('the SDK package', () => {
  it('packs with declarations and no server code, installs offline into a fresh project, type-checks and runs against a live Writ', { timeout: 120_000 }, async () => {
    const packed = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', work], { cwd: SDK_DIR, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })) as { filename: string; files: { path: string }[] }[];
    const shipped = packed[0]!.files.map((f) => f.path).sort();
    expect(shipped).toContain('dist/sdk/index.d.ts');
    expect(shipped).toContain('dist/sdk/index.js');
    for (const f of shipped) expect(f, f).not.toMatch(/(^|\/)(http|service|store|graph|policy|lease|gateway|audit|upstream|cli)\//);
    const manifest = JSON.parse(readFileSync(join(SDK_DIR, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    expect(Object.keys(manifest.dependencies)).toEqual(['jose', 'ws']);
    const pack = (dependency: string) => JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', work, join(REPO, 'node_modules', dependency)], { cwd: work, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })) as { filename: string }[];
    const jose = pack('jose');
    const ws = pack('ws');

    const project = join(work, 'agent-project');
    mkdirSync(project);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'agent-project', private: true, type: 'module' }));
    execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', join(work, packed[0]!.filename), join(work, jose[0]!.filename), join(work, ws[0]!.filename)], { cwd: project, stdio: ['ignore', 'pipe', 'pipe'] });
    const installed = files(join(project, 'node_modules/@writ/sdk')).map((f) => relative(join(project, 'node_modules/@writ/sdk'), f));
    expect(installed).toContain('dist/sdk/client.d.ts');

    writeFileSync(join(project, 'agent.ts'), AGENT);
    writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({
      compilerOptions: {
        target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, outDir: 'out', noEmitOnError: true,
        skipLibCheck: false, types: ['node'], typeRoots: [join(REPO, 'node_modules/@types')],
      },
      include: ['agent.ts'],
    }));
    try {
      execFileSync(process.execPath, [TSC, '-p', project], { cwd: project, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (e) {
      throw new Error(`the agent project does not type-check:\n${(e as { stdout?: string }).stdout ?? ''}`);
    }

    const out = execFileSync(process.execPath, [join(project, 'out/agent.js'), server.url, join(REPO, 'fixtures/keys/seo-agent-7.jwk'), '881'], { cwd: project, encoding: 'utf8' });
    const result = JSON.parse(out.trim().split('\n').pop()!);
    expect(result).toEqual({
      claims: { principal: 'seo-agent-7', resource: 'wp:post:881', fields: ['title'] },
      receipt: { status: 'COMPLETED', final_version: 1 },
      conflict: { name: 'VersionConflictError', code: 'VERSION_CONFLICT', status: 409 },
      busy: { code: 'RESOURCE_BUSY', status: 423, holder: 'seo-agent-7', retryAfterMs: expect.any(Number) },
      assertionParts: 3,
      isApiError: true,
      stream: { epochRose: true, busy: 'RESOURCE_BUSY', closed: 1000 },
    });
    expect(result.busy.retryAfterMs).toBeGreaterThan(0);
  });
});
