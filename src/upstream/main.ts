/**
 * Runs the sample upstream (a stand-in for a real CMS, for the demo and the tests):
 *   node dist/src/upstream/main.js --port 4100 --host 127.0.0.1 --db data/upstream.sqlite
 */
import { parseArgs } from 'node:util';
import { startSampleUpstream } from './app.js';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '4100' },
    host: { type: 'string', default: '127.0.0.1' },
    db: { type: 'string', default: 'data/upstream.sqlite' },
  },
});

const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`--port must be a port number, got ${values.port}`);
  process.exit(2);
}

const { app, url } = await startSampleUpstream({ port, host: values.host, dbFile: values.db, logger: { level: 'warn' } });
console.log(`sample upstream (stand-in for a real CMS) listening on ${url}, data in ${values.db}`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void app.close().then(() => process.exit(0));
  });
}
