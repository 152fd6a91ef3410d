/** Tests and benches start `writ serve` the same way; benches cannot import from test/ (not compiled), so it lives in scripts/. */
export { CLI, freePort, requireDist, startServerProcess, type ServerProcess, type ServerProcessOptions } from '../../scripts/server-process.js';
