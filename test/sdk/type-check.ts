import { join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { REPO } from '../support/harness.js';

/**
 * Type-checks TypeScript that is not in a file (README examples, generated uses of the SDK's types) as an
 * agent's project would: the repository's strict compiler options, `@writ/sdk` resolved to the SDK's
 * source. Each source is an ES module (`.mts`) in test/sdk/, so top-level await is allowed.
 * → the diagnostics, one line each (`name:line: message`); empty when it compiles.
 */
export function typeErrors(sources: Record<string, string>): string[] {
  const config = ts.getParsedCommandLineOfConfigFile(join(REPO, 'tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
  if (!config) throw new Error('tsconfig.json cannot be read');
  // Strict as the repository is, but an example may leave a value unused (as the tests' own config allows).
  const options: ts.CompilerOptions = { ...config.options, noEmit: true, noUnusedLocals: false, noUnusedParameters: false, paths: { '@writ/sdk': [join(REPO, 'src/sdk/index.ts')] } };
  const dir = join(REPO, 'test/sdk');
  const virtual = new Map(Object.entries(sources).map(([name, text]) => [resolve(dir, `${name}.mts`), text]));
  const host = ts.createCompilerHost(options);
  const { fileExists, readFile, getSourceFile } = host;
  host.fileExists = (f) => virtual.has(resolve(f)) || fileExists.call(host, f);
  host.readFile = (f) => virtual.get(resolve(f)) ?? readFile.call(host, f);
  host.getSourceFile = (f, language, onError, create) => {
    const text = virtual.get(resolve(f));
    return text !== undefined ? ts.createSourceFile(f, text, language, true) : getSourceFile.call(host, f, language, onError, create);
  };
  const program = ts.createProgram({ rootNames: [...virtual.keys()], options, host });
  return ts.getPreEmitDiagnostics(program)
    // The SDK's own files are checked by the build; what matters here is what a user of it sees.
    .filter((d) => d.file === undefined || virtual.has(resolve(d.file.fileName)))
    .map((d) => {
      const message = `TS${d.code} ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
      if (!d.file) return message;
      const { line } = d.file.getLineAndCharacterOfPosition(d.start ?? 0);
      return `${relative(dir, d.file.fileName)}:${line + 1}: ${message}`;
    });
}
