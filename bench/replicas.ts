import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, REPO, spawnListening } from '../scripts/server-process.js';

/** `writ serve` processes sharing one store, as a benchmark drives them (each request to the next URL). */
export interface Replicas {
  name: string;
  urls: string[];
  stop(): Promise<void>;
}

/**
 * Starts `count` `writ serve` processes of the build at `cli` on one data directory under `tmp` (and on
 * `env.WRIT_DATABASE_URL` when set), with no sample upstream; the first applies the example graph.
 */
export async function startReplicas(name: string, options: { cli: string; count: number; tmp: string; env: NodeJS.ProcessEnv }): Promise<Replicas> {
  const dir = mkdtempSync(join(options.tmp, 'replicas-'));
  const procs: Awaited<ReturnType<typeof spawnListening>>[] = [];
  const urls: string[] = [];
  for (let i = 0; i < options.count; i++) {
    const port = await freePort();
    const graph = i === 0 ? ['--graph', join(REPO, 'graph/example.yaml')] : [];
    procs.push(await spawnListening(`${name} ${i}`, [options.cli, 'serve', '--data-dir', dir, '--port', String(port), '--no-upstream', ...graph], options.env));
    urls.push(`http://127.0.0.1:${port}`);
  }
  return {
    name,
    urls,
    async stop() {
      for (const p of procs) {
        p.proc.kill('SIGTERM');
        await p.exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
