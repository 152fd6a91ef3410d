import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as sdk from '../../src/sdk/index.js';
import { REPO } from '../support/harness.js';
import { typeErrors } from './type-check.js';

const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
const section = readme.slice(readme.indexOf('## For agents: the TypeScript SDK'), readme.indexOf('## For auditors'));

/** Member names of `export interface NAME { … }` in a source file (one member per line). */
function members(file: string, name: string): string[] {
  const text = readFileSync(join(REPO, file), 'utf8');
  const start = text.indexOf(`export interface ${name} `);
  expect(start, `${name} in ${file}`).toBeGreaterThanOrEqual(0);
  const body = text.slice(text.indexOf('{', start) + 1, text.indexOf('\n}', start));
  return [...body.matchAll(/^ {2}(?:readonly )?(\w+)\??[:(]/gm)].map((m) => m[1]!);
}

describe('the README\'s SDK section', () => {
  it('documents every public function and class of the SDK (error classes by their naming rule)', () => {
    for (const name of Object.keys(sdk)) {
      if (name.endsWith('Error') && name !== 'WritApiError') continue;
      expect(section, name).toContain(name);
    }
    expect(section).toContain('VersionConflictError');
  });

  it('documents every method of WritClient and every option', () => {
    const methods = Object.getOwnPropertyNames(sdk.WritClient.prototype).filter((m) => m !== 'constructor' && !m.startsWith('fetch') && !['holding', 'leased', 'send', 'sendAs', 'acquireUnless', 'renewUnless', 'releaseUnless'].includes(m));
    for (const m of methods) expect(section, `method ${m}`).toContain(m);
    const options: [string, string][] = [
      ['src/sdk/client.ts', 'WritClientOptions'], ['src/sdk/client.ts', 'LeaseOptions'], ['src/sdk/client.ts', 'RunExclusiveOptions'],
      ['src/sdk/client.ts', 'LeaseScope'], ['src/sdk/client.ts', 'DelegateRequest'], ['src/sdk/client.ts', 'JobScope'], ['src/sdk/client.ts', 'ActRequest'],
      ['src/wire/assertions.ts', 'CallerAssertionOptions'], ['src/sdk/backoff.ts', 'BackoffOptions'],
    ];
    for (const [file, name] of options) {
      const list = members(file, name);
      expect(list.length, name).toBeGreaterThan(1);
      for (const member of list) expect(section, `${name}.${member}`).toContain(member);
    }
    for (const field of ['code', 'status', 'detail', 'problem', 'retryAfterMs', 'holder']) expect(section, `WritApiError.${field}`).toContain(`\`${field}\``);
  });

  it('has TypeScript examples that compile under strict TS against the SDK (`@writ/sdk`)', () => {
    const blocks = [...section.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
    expect(blocks.length).toBeGreaterThanOrEqual(3);
    // A fragment (no import of its own) goes on from the agent example: `writ` and `decision` are its, and
    // `orchestrator` and `runSubAgent` stand for the reader's own. Declared after the code, so that the
    // line numbers in an error are the block's.
    const context = [
      "import type { Decision, WritClient } from '@writ/sdk';",
      'declare const writ: WritClient;',
      'declare const decision: Decision;',
      'declare const orchestrator: WritClient;',
      'declare function runSubAgent(principal: string): Promise<void>;',
    ].join('\n');
    const sources = Object.fromEntries(blocks.map((code, i) => [`readme-example-${i + 1}`, code.includes("from '@writ/sdk'") ? code : `${code}${context}\n`]));
    expect(typeErrors(sources)).toEqual([]);
  });
});
