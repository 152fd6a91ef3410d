import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root, whether this runs as TypeScript from scripts/ (vitest) or compiled from dist/scripts/ (benches). */
export const REPO = (() => {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json above ${fileURLToPath(import.meta.url)}`);
  }
})();

export const CLI = join(REPO, 'dist/src/cli/main.js');

export function requireDist(): void {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run the README's test command (it compiles TypeScript first) or 'npx tsc -p tsconfig.json'`);
}

/**
 * A port that is free now, picked at random below Linux's ephemeral range (32768–60999): a port the
 * kernel hands out for `listen(0)` is also handed to outgoing connections, so under a parallel test
 * run another process's client socket could take it before the server binds it. Still a probe, not a
 * reservation: spawn with `spawnOnFreePort` (or retry on EADDRINUSE) to close the remaining window.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    const port = attempt < 50 ? 20_000 + Math.floor(Math.random() * 12_000) : 0;
    const got = await new Promise<number | null>((resolve, reject) => {
      const s = createServer();
      s.once('error', (e: NodeJS.ErrnoException) => (e.code === 'EADDRINUSE' || e.code === 'EACCES' ? resolve(null) : reject(e)));
      s.listen(port, '127.0.0.1', () => {
        const bound = (s.address() as { port: number }).port;
        s.close(() => resolve(bound));
      });
    });
    if (got !== null) return got;
  }
}

const addressInUse = (e: unknown): boolean => /EADDRINUSE/.test((e as Error).message);

/** Runs `start(port)` on a free port, and again on another one when the port was taken between the probe and the bind. */
export async function onFreePort<T extends object>(start: (port: number) => Promise<T>, tries = 5): Promise<T & { port: number }> {
  for (let i = 1; ; i++) {
    const port = await freePort();
    try {
      return Object.assign(await start(port), { port });
    } catch (e) {
      if (i >= tries || !addressInUse(e)) throw e;
    }
  }
}

export interface ServerProcess {
  proc: ChildProcess;
  url: string;
  upstreamUrl: string;
  dataDir: string;
  /** Resolves with the exit code (null after a signal) once the process has exited. */
  exited: Promise<number | null>;
  log: () => string;
  /** SIGTERM and wait for exit. */
  stop(): Promise<void>;
  /** SIGKILL (a crash) and wait for exit. */
  kill9(): Promise<void>;
}

export interface ServerProcessOptions {
  /** Default: a fresh directory under the OS temp dir (left for the caller to remove). */
  dataDir?: string;
  /** Default: a free port. */
  port?: number;
  upstreamPort?: number;
  /** Added to this process's environment. */
  env?: Record<string, string>;
  /** Run the sample upstream as its own process instead of inside `writ serve` (own event loop, own commits). */
  separateUpstream?: boolean;
  /** Start no sample upstream: route wp:post:* to this URL (an upstream the caller runs). */
  upstreamUrl?: string;
  /** `writ serve --console-link`: print a one-time console login link at start. */
  consoleLink?: boolean;
}

interface Spawned {
  proc: ChildProcess;
  output: () => string;
  exited: Promise<void>;
}

/** Spawns `node ARGS` in the repo and waits until its output says `listening on`. */
export async function spawnListening(name: string, args: string[], env: NodeJS.ProcessEnv): Promise<Spawned> {
  const proc = spawn(process.execPath, args, { cwd: REPO, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`${name} did not start in 30 s:\n${output}`));
    }, 30_000);
    const take = (b: Buffer) => {
      output += b.toString();
      if (output.includes('listening on')) {
        clearTimeout(timer);
        resolve();
      }
    };
    proc.stdout!.on('data', take);
    proc.stderr!.on('data', take);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited with ${code} before listening:\n${output}`));
    });
  });
  return { proc, output: () => output, exited };
}

/** The sample upstream (dist/src/upstream/main.js) as a process of its own on `port`, its SQLite file in `dir`. */
export function spawnSampleUpstream(port: number, dir: string, env: NodeJS.ProcessEnv = process.env): Promise<Spawned> {
  return spawnListening('the sample upstream', [join(REPO, 'dist/src/upstream/main.js'), '--port', String(port), '--db', join(dir, 'upstream.sqlite')], env);
}

/** The same on a free port; `url` is where it listens. */
export async function startSampleUpstream(dir: string, env: NodeJS.ProcessEnv = process.env): Promise<Spawned & { port: number; url: string }> {
  const upstream = await onFreePort((port) => spawnSampleUpstream(port, dir, env));
  return { ...upstream, url: `http://127.0.0.1:${upstream.port}` };
}

/** Starts `writ serve` from dist/ as a real process (graph/example.yaml, the sample upstream inside or beside it) and waits until it listens. */
export async function startServerProcess(options: ServerProcessOptions = {}): Promise<ServerProcess> {
  requireDist();
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'writ-e2e-'));
  // Ports the caller did not fix are probed, and probed again when one was taken before the bind.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOn(options, dataDir, options.port ?? (await freePort()), options.upstreamUrl ? Number(new URL(options.upstreamUrl).port) : (options.upstreamPort ?? (await freePort())));
    } catch (e) {
      // A port the caller fixed that is taken stays taken: only a probed one is worth probing again.
      const fixedPortTaken = options.port !== undefined && (e as Error).message.includes(`:${options.port}\n`);
      if (attempt >= 5 || !addressInUse(e) || fixedPortTaken || (options.port !== undefined && (options.upstreamPort !== undefined || options.upstreamUrl))) throw e;
    }
  }
}

async function startOn(options: ServerProcessOptions, dataDir: string, port: number, upstreamPort: number): Promise<ServerProcess> {
  const env = { ...process.env, WRIT_UPSTREAM_URL: options.upstreamUrl ?? `http://127.0.0.1:${upstreamPort}`, ...options.env };
  const upstream = options.separateUpstream && !options.upstreamUrl
    ? await spawnSampleUpstream(upstreamPort, dataDir, env)
    : null;
  const upstreamArgs = upstream || options.upstreamUrl ? ['--no-upstream'] : ['--upstream-port', String(upstreamPort)];
  let writ: Spawned;
  try {
    writ = await spawnListening('writ serve', [CLI, 'serve', '--data-dir', dataDir, '--port', String(port), ...upstreamArgs, '--graph', 'graph/example.yaml', ...(options.consoleLink ? ['--console-link'] : [])], env);
  } catch (e) {
    upstream?.proc.kill('SIGKILL');
    await upstream?.exited;
    throw e;
  }
  const stopAll = async (signal: NodeJS.Signals) => {
    for (const p of [writ, upstream]) {
      if (p && p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill(signal);
      await p?.exited;
    }
  };
  return {
    proc: writ.proc,
    url: `http://127.0.0.1:${port}`,
    upstreamUrl: options.upstreamUrl ?? `http://127.0.0.1:${upstreamPort}`,
    exited: writ.exited.then(() => writ.proc.exitCode),
    dataDir,
    log: writ.output,
    stop: () => stopAll('SIGTERM'),
    async kill9() {
      if (writ.proc.exitCode === null) writ.proc.kill('SIGKILL');
      await writ.exited;
    },
  };
}
