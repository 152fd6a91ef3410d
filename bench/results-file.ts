import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** bench/RESULTS.md, whichever of src or dist this runs from. */
export const RESULTS_FILE = join(dirname(fileURLToPath(import.meta.url)), ...(import.meta.url.includes('/dist/') ? ['..', '..'] : ['..']), 'bench', 'RESULTS.md');

/** Replaces (or appends) the section between `<!-- NAME:start -->` and `<!-- NAME:end -->`. */
export function writeResultsSection(name: string, section: string): void {
  const start = `<!-- ${name}:start -->`;
  const end = `<!-- ${name}:end -->`;
  const block = `${start}\n${section}\n${end}`;
  const text = existsSync(RESULTS_FILE) ? readFileSync(RESULTS_FILE, 'utf8') : '# Benchmark results\n';
  const a = text.indexOf(start);
  const b = text.indexOf(end);
  const next = a >= 0 && b > a ? text.slice(0, a) + block + text.slice(b + end.length) : `${text.trimEnd()}\n\n${block}\n`;
  writeFileSync(RESULTS_FILE, next);
  console.log(`\nwrote ${RESULTS_FILE}`);
}

export function machineLine(): string {
  return `Machine: ${cpus().length} cores (${cpus()[0]?.model.trim() ?? 'unknown'}), ${Math.round(totalmem() / 2 ** 20)} MB RAM, Node ${process.version}; 1-minute load average ${loadavg()[0]!.toFixed(1)} at the end of the run. Run ${new Date().toISOString()}.`;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** The middle value (the mean of the two middle ones for an even count). */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

/** Per-round ratios as the results report them: `median× (min–max)`. */
export function ratioSummary(ratios: number[]): string {
  return `${median(ratios).toFixed(2)}× (${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})`;
}

/** `--name VALUE` from this process's arguments, or `fallback` (an error when there is none). */
export function argValue(name: string, fallback?: string): string {
  const i = process.argv.indexOf(`--${name}`);
  if (i >= 0 && process.argv[i + 1] !== undefined) return process.argv[i + 1]!;
  if (fallback === undefined) throw new Error(`--${name} is required`);
  return fallback;
}

export function summarize(samplesUs: number[]): { n: number; p50: number; p90: number; p99: number; max: number; mean: number } {
  const s = [...samplesUs].sort((a, b) => a - b);
  return { n: s.length, p50: percentile(s, 50), p90: percentile(s, 90), p99: percentile(s, 99), max: s[s.length - 1] ?? NaN, mean: s.reduce((a, b) => a + b, 0) / (s.length || 1) };
}
