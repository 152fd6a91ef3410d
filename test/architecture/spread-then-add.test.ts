import { relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * No object literal on a request's path starts with a spread and then adds a key the spread lacks
 * (`{ ...params, key }`, `{ ...a, ...b }`). In Node 20 (V8 11.3) such a literal is cloned from the
 * spread's hidden class and each added key then builds a new hidden class, on every call: ~2 µs for
 * `{ ...tenKeys, key }` against ~0.06 µs for the same object as a literal and ~0.25 µs with the new
 * key first (`{ key, ...params }`); overriding a key the spread has is cheap (bench/spread-then-add.ts,
 * 2026-12-02). Found in perf profiles as `Runtime_DefineNamedOwnIC_Slow`:
 * resolveOwners spent 2.8 µs a decision on `{ ...m, named }` (0.46 µs as a literal), and the lease
 * repository paid it per key and per statement. Write a literal, or put the new keys first where the
 * key order does not matter (SQL parameters, internal objects).
 *
 * Checked with TypeScript's type checker: a key is "added" when the type of the first spread has no
 * such property, or only an optional one (`{ ...options, via: options.via ?? 'v1' }` adds `via` when the
 * caller left it out). Also caught: an object cloned by `{ ...y }` alone and then given a key
 * (`const h = { ...init.headers }; h['content-length'] = …`). `Object.assign({}, p, { key })` and a
 * literal that starts with a key are cheap. A deliberate one says so on the line before:
 * `// spread-then-add: <why it does not matter there>`.
 *
 * The files are those a decision, a lease operation or a gateway write runs through per request
 * (src/audit/receipt-log.ts is not among them: its per-write methods have none, its rare paths —
 * replays, rejections, checkpoints, listings — do); elsewhere (start-up, route schemas, the CLI,
 * the SDK, the sample upstream) the cost does not matter.
 */
const HOT = [
  'src/audit/canonical-json.ts',
  'src/audit/fold.ts',
  'src/audit/hash-chain.ts',
  'src/audit/receipt.ts',
  'src/decision/',
  'src/decision-log/',
  'src/gateway/',
  'src/graph/',
  'src/http/input-guard.ts',
  'src/http/overload.ts',
  'src/http/problem.ts',
  'src/http/wire.ts',
  'src/lease/',
  'src/policy/',
  'src/service/actions.ts',
  'src/service/ask-about.ts',
  'src/service/authzen.ts',
  'src/service/decide.ts',
  'src/service/decision-record.ts',
  'src/service/leases.ts',
  'src/service/resources.ts',
  'src/store/',
  'src/upstream/client.ts',
  'src/upstream/http-request.ts',
  'src/wire/',
];

const MARKER = '// spread-then-add:';

const ROOT = resolve(import.meta.dirname, '../..');
/** Cases the check must find (and one it must leave, being marked): proof that it can fail. */
const CASES = 'test/architecture/spread-then-add-cases.ts';

const config = ts.getParsedCommandLineOfConfigFile(resolve(ROOT, 'tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
if (!config) throw new Error('tsconfig.json cannot be read');
const SOURCES = config.fileNames.map((f) => relative(ROOT, f));
const isHot = (h: string, file: string) => (h.endsWith('/') ? file.startsWith(h) : file === h);

/** The findings in `files` (paths relative to the repository), each `file:line what`. */
function spreadThenAdd(root: string, files: string[]): string[] {
  const wanted = new Set(files);
  const hot = (file: string) => wanted.has(file);
  const program = ts.createProgram({ rootNames: files.map((f) => resolve(root, f)), options: config!.options });
  const checker = program.getTypeChecker();
  /** The keys a spread's value may bring: those of each object member of its type (`c && { x }` brings `x`). */
  const keysOf = (type: ts.Type): string[] =>
    (type.isUnion() ? type.types : [type]).flatMap((t) => (t.flags & ts.TypeFlags.Object ? t.getProperties().map((p) => p.getName()) : []));
  /** Whether `type` surely has `name` (a required property of every member). */
  const surely = (type: ts.Type, name: string): boolean => {
    const p = checker.getPropertyOfType(type, name);
    return p !== undefined && (p.flags & ts.SymbolFlags.Optional) === 0;
  };
  const found: string[] = [];
  for (const sf of program.getSourceFiles()) {
    const file = relative(root, sf.fileName);
    if (!hot(file)) continue;
    const lines = sf.getFullText().split('\n');
    const report = (node: ts.Node, what: string) => {
      const line = sf.getLineAndCharacterOfPosition(node.getStart()).line;
      if ((lines[line - 1] ?? '').includes(MARKER) || lines[line]!.includes(MARKER)) return;
      found.push(`${file}:${line + 1} ${what}`);
    };
    const visit = (node: ts.Node): void => {
      if (ts.isObjectLiteralExpression(node) && node.properties.length > 0 && ts.isSpreadAssignment(node.properties[0]!)) {
        const base = checker.getTypeAtLocation(node.properties[0].expression);
        const added: string[] = [];
        for (const p of node.properties.slice(1)) {
          if (ts.isSpreadAssignment(p)) {
            for (const k of keysOf(checker.getTypeAtLocation(p.expression))) if (!surely(base, k)) added.push(`...${k}`);
          } else if (p.name !== undefined && (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name))) {
            if (!surely(base, p.name.text)) added.push(p.name.text);
          } else {
            added.push('(a computed key)');
          }
        }
        if (added.length > 0) report(node, `adds ${added.join(', ')}`);
        // A clone alone, `const x = { ...y }`: then a key set on x (x.k = …, x[k] = …) that y surely lacks.
        if (node.properties.length === 1 && ts.isVariableDeclaration(node.parent) && ts.isIdentifier(node.parent.name)) {
          const name = node.parent.name.text;
          const scope = ts.findAncestor(node.parent, (n) => ts.isBlock(n) || ts.isSourceFile(n));
          const assigned = (n: ts.Node): void => {
            if (ts.isBinaryExpression(n) && n.operatorToken.kind === ts.SyntaxKind.EqualsToken) {
              const target = n.left;
              if ((ts.isPropertyAccessExpression(target) || ts.isElementAccessExpression(target)) && ts.isIdentifier(target.expression) && target.expression.text === name) {
                const key = ts.isPropertyAccessExpression(target) ? target.name.text : ts.isStringLiteral(target.argumentExpression) ? target.argumentExpression.text : null;
                if (key === null || !surely(base, key)) report(node, `is cloned, then given ${key ?? 'a computed key'}`);
              }
            }
            ts.forEachChild(n, assigned);
          };
          if (scope) assigned(scope);
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  return found;
}

describe('object literals on the request path', () => {
  it('never start with a spread and then add a key the spread lacks (a new hidden class on every call in Node 20)', () => {
    // Every entry of the list still names source files (a renamed directory must not leave the check empty).
    expect(HOT.filter((h) => !SOURCES.some((f) => isHot(h, f)))).toEqual([]);
    const found = spreadThenAdd(ROOT, [...SOURCES.filter((f) => HOT.some((h) => isHot(h, f))), CASES]);
    expect(found.filter((f) => !f.startsWith(CASES))).toEqual([]);
    expect(found.filter((f) => f.startsWith(CASES))).toEqual([
      `${CASES}:4 adds via`,
      `${CASES}:5 adds ...extra`,
      `${CASES}:6 is cloned, then given content-length`,
    ]);
  }, 60_000);
});
