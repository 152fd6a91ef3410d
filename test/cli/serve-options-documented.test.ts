import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { COMMANDS } from '../../src/cli/commands.js';
import { REPO } from '../support/harness.js';

describe('the README\'s configuration table', () => {
  it('documents every flag of `writ serve` (the sample upstream\'s port among them)', () => {
    const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('## Error codes'));
    const serve = COMMANDS.find((c) => c.name === 'serve')!;
    const flags = Object.keys(serve.options ?? {});
    expect(flags).toContain('upstream-port');
    for (const flag of flags) expect(section, `--${flag}`).toContain(`--${flag}`);
  });
});
