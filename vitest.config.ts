import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration tests start their own chains; two cores do not profit from more workers.
    maxWorkers: 2,
    minWorkers: 1,
  },
});
