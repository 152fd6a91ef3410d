#!/usr/bin/env node
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { WritError, ERROR_CATALOGUE } from '../errors.js';
import { didYouMean } from '../json-schema.js';
import { CliError, exitCodeOf, exitingWith } from './cli-error.js';
import { COMMANDS, type Command } from './commands.js';

function usage(): string {
  const lines = ['usage: writ <command> [options]', '', 'commands:'];
  for (const c of COMMANDS) lines.push(`  ${c.name.padEnd(34)} ${c.summary}`);
  lines.push('', 'common options: --data-dir DIR (default ./data or $WRIT_DATA_DIR), --database postgres://… (default: the SQLite file in the data dir; or $WRIT_DATABASE_URL)');
  return lines.join('\n');
}

/** The options of the command being parsed, for the message of an unknown one. */
let parsing: { options: NonNullable<ParseArgsConfig['options']> } | null = null;

async function main(argv: string[]): Promise<number> {
  if (argv.length === 0 || argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help') {
    console.log(usage());
    return 0;
  }
  // Longest matching command name ("graph apply" before "graph").
  let command: Command | undefined;
  let rest: string[] = [];
  for (const c of [...COMMANDS].sort((a, b) => b.name.split(' ').length - a.name.split(' ').length)) {
    const words = c.name.split(' ');
    if (words.every((w, i) => argv[i] === w)) {
      command = c;
      rest = argv.slice(words.length);
      break;
    }
  }
  if (!command) {
    // A group's name alone ("writ policy", "writ lease --help"): its commands, not the whole list.
    const group = COMMANDS.filter((c) => c.name.startsWith(`${argv[0]} `));
    if (group.length > 0 && (argv.length === 1 || argv[1]?.startsWith('-'))) {
      const help = argv[1] === '--help' || argv[1] === '-h';
      (help ? console.log : console.error)(`writ ${argv[0]}: which one?\n\n${group.map((c) => `  writ ${c.name.padEnd(28)} ${c.summary}`).join('\n')}\n\n(writ COMMAND --help for its options)`);
      return help ? 0 : 2;
    }
    console.error(`writ: unknown command "${argv.join(' ')}"\n\n${usage()}`);
    return 2;
  }
  parsing = { options: { 'data-dir': { type: 'string' }, database: { type: 'string' }, help: { type: 'boolean' }, ...command.options } };
  const { values, positionals } = parseArgs({ args: rest, options: parsing.options, allowPositionals: true, strict: true });
  if (values.help) {
    console.log(`${['writ', command.name, command.usage].filter(Boolean).join(' ')}\n\n${command.summary}`);
    return 0;
  }
  // A command whose usage starts with no ARGUMENT (an option, or nothing) takes none: one given is a
  // mistake (an unquoted value with a space, a second name), never something to ignore. The others
  // check their count themselves (need, in commands.ts).
  if (positionals.length > 0 && !/^[A-Z]/.test(command.usage ?? '')) {
    console.error(`writ: ${command.name} takes no arguments, got ${positionals.map((p) => JSON.stringify(p)).join(' ')} (quote a value with spaces); usage: ${['writ', command.name, command.usage].filter(Boolean).join(' ')}`);
    return 2;
  }
  const failureExit = command.failureExit;
  return command.run({ values: values as Record<string, string | boolean | undefined>, positionals }).catch((e: unknown) => {
    throw exitingWith(e, failureExit);
  });
}

// Output piped into a reader that stops early (`writ receipts | head`): what is left to print goes
// nowhere, and the command still ends as it would (its clean-up runs), instead of a stack trace.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code !== 'EPIPE') throw e;
  });
}

/**
 * Node's own words, but for an unknown option, whose message misses its closing quote (`as in '-- "--x"`):
 * ours names it, the command's closest option and how to pass a value that starts with '-'.
 */
function parseArgsMessage(e: TypeError): string {
  const unknown = (e as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? /^Unknown option '([^']+)'/.exec(e.message)?.[1] : undefined;
  if (unknown === undefined) return e.message;
  const options = unknown.startsWith('--') && parsing ? Object.keys(parsing.options).map((o) => `--${o}`) : [];
  return `Unknown option '${unknown}'${didYouMean(unknown, options)}. To pass a value starting with '-' as an argument, put it after '--', as in: -- "${unknown}"`;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code !== undefined && code !== 0) process.exitCode = code;
  },
  (e: unknown) => {
    if (e instanceof WritError) {
      console.error(`writ: ${e.code} (${ERROR_CATALOGUE[e.code].title}): ${e.message}`);
      process.exitCode = exitCodeOf(e, 1);
    } else if (e instanceof CliError) {
      console.error(`writ: ${e.message}`);
      process.exitCode = exitCodeOf(e, e.exitCode);
    } else if (e instanceof TypeError && (e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      console.error(`writ: ${parseArgsMessage(e)}`);
      process.exitCode = 2;
    } else {
      console.error(`writ: ${(e as Error).stack ?? String(e)}`);
      process.exitCode = exitCodeOf(e, 1);
    }
  },
);
