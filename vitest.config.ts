import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // The machines have two cores; concurrency tests spawn their own processes.
    maxWorkers: 2,
  },
});
