import { defineConfig } from 'vitest/config';
import type { Reporter, TestModule } from 'vitest/node';

// Ends the run with a plain "N passed, N failed" line that any CI can read.
class SummaryLine implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>) {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const m of modules) {
      for (const t of m.children.allTests()) {
        const state = t.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
        else skipped++;
      }
      // A file that failed outside its tests (a hook, an import) counts as a failure.
      if (m.state() === 'failed' && ![...m.children.allTests()].some((t) => t.result().state === 'failed')) failed++;
    }
    process.stdout.write(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
  }
}

export default defineConfig({
  test: {
    // Unit tests sit beside the module they test; chain-backed tests live in test/.
    include: ['test/**/*.test.ts', 'src/**/*.test.ts'],
    // Kills, by PID, whatever a worker ended by a signal left running (test/globalSetup.ts).
    globalSetup: ['test/globalSetup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration tests start their own chains; two cores do not profit from more workers.
    maxWorkers: 2,
    minWorkers: 1,
    reporters: ['default', new SummaryLine()],
  },
});
