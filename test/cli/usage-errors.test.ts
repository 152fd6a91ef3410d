import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { requireDist } from '../support/server-process.js';
import { runWrit } from '../support/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'writ-usage-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('writ given wrong arguments', () => {
  it.each([
    [['why'], 'writ: usage: writ why RECEIPT_ID'],
    [['revoke', 'g-publisher', 'g-release-controller', '--reason', 'two at once'], 'writ: one argument too many ("g-release-controller"; quote a value with spaces); usage: writ revoke EDGE|PRINCIPAL --reason TEXT'],
    [['revoke', 'g-publisher', '--reason', 'incident', '42'], 'writ: one argument too many ("42"; quote a value with spaces)'],
    [['graph', 'export', 'extra'], 'writ: graph export takes no arguments, got "extra" (quote a value with spaces); usage: writ graph export [--at REV|TIME] [--format json|dot|manifest]'],
    [['lease', 'bump-epochs', '--by', '5', '--reason', 'restored', 'from', 'backup'], 'writ: lease bump-epochs takes no arguments, got "from" "backup"'],
    [['graph', 'export', '--format', 'svg'], 'writ: --format is json, dot or manifest'],
    [['audit', 'archive', '--out', 'x.jsonl'], 'writ: usage: writ audit archive --older-than DURATION --out FILE'],
    [['trace', 'seo-agent-7', '--no-such-option'], "writ: Unknown option '--no-such-option'"],
    [['trace', 'seo-agent-7', 'update_post', 'wp:post:1', '--feilds', 'title'], `writ: Unknown option '--feilds' (did you mean "--fields"?). To pass a value starting with '-' as an argument, put it after '--', as in: -- "--feilds"`],
    [['why', 'r_1', '--format', 'svg'], 'writ: --format is text, json, dot or mermaid'],
    [['serve', '--port', 'abc'], 'writ: --port must be a port number from 0 to 65535 (0: any free port), got "abc"'],
    [['serve', '--port', '65536'], 'writ: --port must be a port number from 0 to 65535'],
    [['serve', '--port', '0', '--upstream-port', '0'], 'writ: --upstream-port must be a port number from 1 to 65535, got "0"'],
  ])('%j: says what is wrong in one line, without a stack trace, and exits with 2', async (args, message) => {
    requireDist();
    const r = await runWrit(dir, ...args);
    expect(r.code).toBe(2);
    expect(r.output.trim().split('\n')[0]).toContain(message);
    expect(r.output).not.toMatch(/^\s+at /m);
    // Refused before anything was opened or created (a serve with a bad port made its admin credential first).
    expect(existsSync(join(dir, 'admin.jwk'))).toBe(false);
  });

  it('a group\'s name alone lists its commands (exit 2; with --help exit 0), not the whole list', async () => {
    requireDist();
    const bare = await runWrit(dir, 'policy');
    expect(bare.code).toBe(2);
    expect(bare.output).toMatch(/^writ policy: which one\?/);
    expect(bare.output.match(/^ {2}writ policy \w+/gm)).toEqual(['  writ policy build', '  writ policy impact', '  writ policy test']);
    const help = await runWrit(dir, 'lease', '--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('  writ lease prune-history');
    expect(help.stdout).not.toContain('writ graph');
  });

  it('a command\'s --help: its usage line (no options: the command alone), then its summary', async () => {
    requireDist();
    const build = await runWrit(dir, 'policy', 'build', '--help');
    expect(build.code).toBe(0);
    expect(build.stdout.split('\n').slice(0, 3)).toEqual(['writ policy build', '', expect.stringContaining('data.json checked first')]);
    const trace = await runWrit(dir, 'trace', '--help');
    expect(trace.stdout.split('\n')[0]).toBe('writ trace PRINCIPAL ACTION RESOURCE [--env ENV] [--fields a,b] [--policy BUNDLE_OR_POLICIES_DIR] [--json]');
  });

  it.each([
    [['lease', 'prune-history', '--older-than', '5x'], '"5x"'],
    [['expiring', '--within', 'soon'], '"soon"'],
    [['audit', 'archive', '--older-than', '1y', '--out', 'x.jsonl'], '"1y"'],
  ])('%j: a bad duration is UNPROCESSABLE on every command, in one line, before anything is opened', async (args, value) => {
    requireDist();
    const r = await runWrit(dir, ...args);
    expect([r.code, r.output.trim()]).toEqual([1, `writ: UNPROCESSABLE (Unprocessable): ${value} is not a duration like 90s, 15m, 1h, 2d`]);
    expect(existsSync(join(dir, 'admin.jwk'))).toBe(false);
  });

  it('writ lease prune-history without an age: UNPROCESSABLE (its code since it exists), before the data directory is opened', async () => {
    requireDist();
    const r = await runWrit(dir, 'lease', 'prune-history');
    expect([r.code, r.output.trim()]).toEqual([1, 'writ: UNPROCESSABLE (Unprocessable): say how old: --older-than 90d']);
    expect(existsSync(join(dir, 'admin.jwk'))).toBe(false);
  });

  it('writ audit verify --archive with a JWKS file that is missing or is not a JWKS: MALFORMED_REQUEST, saying which and why, exit 3 (could not check; 1 is BROKEN)', async () => {
    requireDist();
    const archive = join(dir, 'archive.jsonl');
    writeFileSync(archive, '');
    writeFileSync(join(dir, 'not-jwks.json'), '{"kid":"a"}');
    const missing = await runWrit(dir, 'audit', 'verify', '--archive', archive, '--jwks', join(dir, 'nope.json'));
    expect([missing.code, missing.output.trim()]).toEqual([3, `writ: MALFORMED_REQUEST (Malformed request): cannot read the JWKS ${join(dir, 'nope.json')}: ENOENT: no such file or directory, open '${join(dir, 'nope.json')}'`]);
    const notJwks = await runWrit(dir, 'audit', 'verify', '--archive', archive, '--jwks', join(dir, 'not-jwks.json'));
    expect(notJwks.code).toBe(3);
    expect(notJwks.output).toContain('not-jwks.json is not a JWKS: it needs a "keys" array');
    expect(notJwks.output).not.toMatch(/^\s+at /m);
  });
});

describe('writ pointed at a data directory that holds no store (a typo, a missing mount)', () => {
  // Every command that reads or changes an existing store; only serve, graph apply and keys add-governance make one.
  it.each([
    ['audit', 'verify'], ['audit', 'checkpoint'], ['audit', 'archive', '--older-than', '1d', '--out', join(dir, 'a.jsonl')],
    ['receipts'], ['why', 'rcpt_1'], ['trace', 'seo-agent-7', 'update_post', 'wp:post:1'], ['who', 'update_post', 'wp:post:1'],
    ['can', 'seo-agent-7'], ['expiring'], ['orphans'], ['graph', 'export'], ['impact', 'revoke', 'g-publisher'],
    ['impact', 'delegate', 'orchestrator', 'seo-agent-7', '--actions', 'update_post', '--resources', 'wp:post:*'],
    ['revoke', 'g-publisher', '--reason', 'typo'], ['lease', 'ls'], ['lease', 'bumps'], ['lease', 'prune-history', '--older-than', '1d'],
    ['lease', 'bump-epochs', '--by', '5', '--reason', 'typo'], ['console'], ['keys', 'rotate'],
  ])('%j refuses it with NOT_FOUND naming the path (exit 1; audit verify 3, its 1 being BROKEN) and creates nothing there', async (...args) => {
    requireDist();
    const typo = join(dir, 'no-such-data-dir');
    const r = await runWrit(typo, ...args);
    expect([r.code, r.output.trim()]).toEqual([args.join(' ') === 'audit verify' ? 3 : 1, `writ: NOT_FOUND (Not found): no Writ store in ${typo} (it does not exist): name the data directory the servers use with --data-dir or WRIT_DATA_DIR (writ serve makes one on its first start); nothing was created`]);
    expect(existsSync(typo)).toBe(false);
  });

  it('an existing directory without writ.sqlite, or a file, is refused the same way, and left as it was', async () => {
    requireDist();
    const empty = mkdtempSync(join(tmpdir(), 'writ-empty-'));
    const file = join(empty, 'not-a-dir');
    writeFileSync(file, 'mine');
    try {
      const inEmpty = await runWrit(empty, 'audit', 'verify');
      expect([inEmpty.code, inEmpty.output.trim()]).toEqual([3, expect.stringContaining(`writ: NOT_FOUND (Not found): no Writ store in ${empty} (it holds no writ.sqlite)`)]);
      const onFile = await runWrit(file, 'receipts');
      expect([onFile.code, onFile.output.trim()]).toEqual([1, expect.stringContaining(`writ: NOT_FOUND (Not found): no Writ store in ${file} (it is not a directory)`)]);
      expect(readdirSync(empty)).toEqual(['not-a-dir']);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});

describe('writ told to write a file into a folder that does not exist', () => {
  it.each([
    [['backup', join(dir, 'nodir', 'b.sqlite')], 'the backup', join(dir, 'nodir', 'b.sqlite')],
    [['audit', 'archive', '--older-than', '0s', '--out', join(dir, 'nodir', 'a.jsonl')], 'the archive', join(dir, 'nodir', 'a.jsonl')],
  ])('%j: NOT_FOUND naming the folder, in one line (exit 1), nothing written', async (args, what, file) => {
    requireDist();
    const r = await runWrit(dir, ...args);
    expect([r.code, r.output.trim()]).toEqual([1, `writ: NOT_FOUND (Not found): cannot write ${what} ${file}: ${join(dir, 'nodir')} is not an existing directory (create it first); nothing was written`]);
    expect(existsSync(join(dir, 'nodir'))).toBe(false);
  });
});
