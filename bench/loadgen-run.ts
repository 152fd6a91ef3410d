/** Runs bench/loadgen (Go) and reads its one-line JSON report. */
import { execFileSync, spawn } from 'node:child_process';

export interface Load {
  ops: number;
  seconds: number;
  per_second: number;
  p50_us: number;
  p99_us: number;
  errors: number;
  first_error?: string;
  /** Set by a caller that sampled the servers' processes: their CPU time over the run ÷ ops. */
  server_cpu_us_per_op?: number;
}

/** The report of a finished run; a run with any error fails. */
function report(args: string[], out: string): Load {
  const r = JSON.parse(out) as Load;
  if (r.errors > 0) throw new Error(`loadgen ${args.join(' ')}: ${r.errors} errors, first: ${r.first_error}`);
  return r;
}

/** Runs the load generator to its end, blocking (nothing else of this process needs to run meanwhile). */
export function runLoadgen(bin: string, args: string[]): Load {
  return report(args, execFileSync(bin, args, { encoding: 'utf8', maxBuffer: 1 << 20 }));
}

/** The same without blocking: several may run at once, and this process keeps sampling meanwhile. */
export function runLoadgenAsync(bin: string, args: string[]): Promise<Load> {
  return new Promise((resolve, reject) => {
    const p = spawn(bin, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    // 'close', not 'exit': a process may exit before its stdout has been read to the end (a report lost
    // that way failed a side-by-side run with "Unexpected end of JSON input").
    p.on('close', (code) => {
      if (code !== 0) return reject(new Error(`loadgen ${args.join(' ')} exited ${code}`));
      try {
        resolve(report(args, out));
      } catch (e) {
        reject(e);
      }
    });
  });
}
