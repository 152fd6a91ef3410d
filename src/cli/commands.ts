import { loadConfig, type WritConfig } from '../config/index.js';
import { buildPolicyBundle } from '../policy/index.js';
import { KeyRing } from '../decision/index.js';
import { systemClock } from '../clock.js';
import { GOVERNANCE_ID } from '../graph/model.js';
import { applyManifest, explain, exportGraph, openWrit, readManifest } from '../service/index.js';
import { findOpa } from './opa.js';
import { formatExplanation } from './format.js';
import { serve } from './serve.js';
import { execFileSync } from 'node:child_process';

export interface CommandArgs {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
}

export interface Command {
  name: string;
  summary: string;
  usage?: string;
  options?: Record<string, { type: 'string' | 'boolean'; short?: string }>;
  run(args: CommandArgs): Promise<number>;
}

export function configFrom(values: CommandArgs['values']): WritConfig {
  const overrides: Partial<WritConfig> = {};
  if (typeof values['data-dir'] === 'string') overrides.dataDir = values['data-dir'];
  if (typeof values.port === 'string') overrides.port = Number(values.port);
  if (typeof values.host === 'string') overrides.host = values.host;
  return loadConfig(overrides);
}

function need(positionals: string[], n: number, usage: string): void {
  if (positionals.length < n) throw new Error(`usage: ${usage}`);
}

export const COMMANDS: Command[] = [
  {
    name: 'serve',
    summary: 'run the Writ service (and apply --graph FILE first)',
    usage: '[--graph FILE] [--port N] [--host H] [--upstream-port N] [--no-upstream]',
    options: { graph: { type: 'string' }, port: { type: 'string' }, host: { type: 'string' }, 'upstream-port': { type: 'string' }, 'no-upstream': { type: 'boolean' } },
    run: async ({ values }) => {
      await serve(configFrom(values), {
        graphFile: values.graph as string | undefined,
        upstreamPort: values['no-upstream'] ? null : Number(values['upstream-port'] ?? 4100),
      });
      return 0;
    },
  },
  {
    name: 'graph apply',
    summary: 'apply a graph manifest (idempotent) as governance',
    usage: 'FILE',
    run: async ({ values, positionals }) => {
      need(positionals, 1, 'writ graph apply FILE');
      const w = await openWrit(configFrom(values));
      try {
        const { manifest, baseDir } = readManifest(positionals[0]!);
        const r = applyManifest(w.ctx, GOVERNANCE_ID, manifest, baseDir);
        console.log(`applied ${positionals[0]}: ${r.created.length} created, ${r.unchanged.length} unchanged; graph revision ${r.graph_revision}`);
        for (const c of r.created) console.log(`  + ${c}`);
      } finally {
        w.close();
      }
      return 0;
    },
  },
  {
    name: 'graph export',
    summary: 'print the graph (now or --at REVISION|TIME) as JSON or DOT',
    usage: '[--at REV|TIME] [--format json|dot]',
    options: { at: { type: 'string' }, format: { type: 'string' } },
    run: async ({ values }) => {
      const format = (values.format as string | undefined) ?? 'json';
      if (format !== 'json' && format !== 'dot') throw new Error('--format is json or dot');
      const w = await openWrit(configFrom(values));
      try {
        const out = exportGraph(w.ctx, values.at as string | undefined, format);
        console.log(typeof out === 'string' ? out : JSON.stringify(out, null, 2));
      } finally {
        w.close();
      }
      return 0;
    },
  },
  {
    name: 'trace',
    summary: 'explain for humans whether PRINCIPAL may do ACTION on RESOURCE, chain by chain',
    usage: 'PRINCIPAL ACTION RESOURCE [--env ENV] [--fields a,b] [--json]',
    options: { env: { type: 'string' }, fields: { type: 'string' }, json: { type: 'boolean' } },
    run: async ({ values, positionals }) => {
      need(positionals, 3, 'writ trace PRINCIPAL ACTION RESOURCE [--env ENV] [--fields a,b]');
      const [principal, action, resource] = positionals as [string, string, string];
      const w = await openWrit(configFrom(values));
      try {
        const fields = typeof values.fields === 'string' && values.fields.length > 0 ? values.fields.split(',') : [];
        const x = await explain(w.ctx, GOVERNANCE_ID, { principal, action, resource, environment: (values.env as string | undefined) ?? 'production', fields });
        console.log(values.json ? JSON.stringify(x, null, 2) : formatExplanation(x));
        return x.allow ? 0 : 3;
      } finally {
        w.close();
      }
    },
  },
  {
    name: 'keys rotate',
    summary: 'start signing with a new key; old public keys stay in the JWKS until their decisions expire',
    run: async ({ values }) => {
      const config = configFrom(values);
      const ring = await KeyRing.open(`${config.dataDir}/keys`, systemClock, { maxTokenTtlMs: config.decisionTtlMs });
      const next = await ring.rotate();
      console.log(`signing key is now ${next.kid}; JWKS has ${ring.jwks().keys.length} key(s)`);
      return 0;
    },
  },
  {
    name: 'policy build',
    summary: 'compile policies/ to a wasm bundle (a running service picks it up without a restart)',
    run: async ({ values }) => {
      const config = configFrom(values);
      const r = await buildPolicyBundle({ opaPath: findOpa(), policiesDir: config.policiesDir, outDir: config.bundleDir });
      console.log(`policy bundle ${r.revision} written to ${config.bundleDir}`);
      return 0;
    },
  },
  {
    name: 'policy test',
    summary: 'run the Rego unit tests (opa test policies/)',
    run: async ({ values }) => {
      const config = configFrom(values);
      try {
        const out = execFileSync(findOpa(), ['test', '--v1-compatible', '-v', config.policiesDir], { encoding: 'utf8' });
        console.log(out);
        return 0;
      } catch (e) {
        const err = e as { stdout?: string; stderr?: string };
        console.log(err.stdout ?? '');
        console.error(err.stderr ?? '');
        return 1;
      }
    },
  },
];
