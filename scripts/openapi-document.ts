/**
 * Prints Writ's OpenAPI document (what GET /openapi.json serves) for the linter in scripts/test.sh.
 * It opens a throwaway Writ (a temporary data directory, the built policy bundle) and builds the app
 * without listening: the document comes from the same route schemas the server validates with.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config/index.js';
import { buildApp } from '../src/http/index.js';
import { openWrit } from '../src/service/index.js';

const dataDir = mkdtempSync(join(tmpdir(), 'writ-openapi-'));
try {
  const writ = await openWrit(loadConfig({ dataDir }, process.env));
  const app = await buildApp(writ.ctx);
  process.stdout.write(JSON.stringify(app.swagger(), null, 2) + '\n');
  await app.close();
  writ.close();
} finally {
  rmSync(dataDir, { recursive: true, force: true });
}
