import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The run's temporary files in a directory of its own, removed at the end (test/suite-temp-dir.ts).
    globalSetup: ['test/suite-temp-dir.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // The machines have two cores; concurrency tests spawn their own processes.
    maxWorkers: 2,
  },
});
