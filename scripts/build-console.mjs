// Builds the console (console/) into build/console (or $WRIT_CONSOLE_DIR): one ES module bundle of
// the TypeScript (esbuild, with cytoscape and its dagre layout inside: no third-party origin), the
// style sheet and the page. `writ serve` serves that folder at /console.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const out = resolve(process.env.WRIT_CONSOLE_DIR ?? join(root, 'build/console'));
mkdirSync(out, { recursive: true });
await build({
  entryPoints: [join(root, 'console/src/main.ts')],
  bundle: true,
  format: 'esm',
  target: ['es2022'],
  minify: true,
  sourcemap: true,
  outfile: join(out, 'app.js'),
  logLevel: 'warning',
  legalComments: 'linked',
});
for (const f of ['index.html', 'console.css']) copyFileSync(join(root, 'console', f), join(out, f));
console.error(`[setup] console built into ${out}`);
