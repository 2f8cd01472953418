// A CPU profile of a benchmark's measured window only (not its setup or its ceiling), written beside
// its results when BENCH_PROFILE is set: open it in Chrome's DevTools, or summarise it by stage with
// `npx tsx bench/profile-summary.ts FILE`.
import { mkdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

/** Starts profiling this process when BENCH_PROFILE is set; the returned stop writes `bench/results/<name>-<time>.cpuprofile` and returns its path. */
export async function profileWindow(name: string): Promise<() => Promise<string | undefined>> {
  // BENCH_PERF_CTL=FIFO: `perf record --delay=-1 --control fifo:FIFO` samples the window only (CPU time of every
  // thread, native frames included: SQLite, the kernel's fsync), where the inspector's profile samples the main
  // thread's wall time.
  const ctl = process.env.BENCH_PERF_CTL;
  if (ctl) {
    writeFileSync(ctl, 'enable\n');
    return async () => {
      writeFileSync(ctl, 'disable\n');
      return undefined;
    };
  }
  if (!process.env.BENCH_PROFILE) return async () => undefined;
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  // 200 µs between samples: fine enough for the fill path's sub-millisecond steps.
  await session.post('Profiler.setSamplingInterval', { interval: 200 });
  await session.post('Profiler.start');
  return async () => {
    const { profile } = await session.post('Profiler.stop');
    session.disconnect();
    mkdirSync('bench/results', { recursive: true });
    const file = `bench/results/${name}-${Date.now()}.cpuprofile`;
    writeFileSync(file, JSON.stringify(profile));
    return file;
  };
}
