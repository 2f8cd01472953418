// BENCH_MARKS=1 (bench/fill-latency.ts): the moments a fill passes on its way from the solver's decision to its
// broadcast, per request id, in epoch milliseconds (fractional). Off (the default), mark() is one comparison.

const on = process.env.BENCH_MARKS === '1';
const marks = new Map<string, [string, number][]>();

/** Notes that the request `id` reached `label` now (only under BENCH_MARKS=1). */
export function mark(id: string | null | undefined, label: string): void {
  if (!on || !id) return;
  let m = marks.get(id);
  if (!m) marks.set(id, (m = []));
  m.push([label, performance.timeOrigin + performance.now()]);
}

/** The moments noted so far, by request id. */
export function benchMarks(): ReadonlyMap<string, readonly [string, number][]> {
  return marks;
}
