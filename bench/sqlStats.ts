// BENCH_SQL=1: every SQLite statement the process runs, counted and timed by its SQL text (better-sqlite3's
// Statement methods wrapped, so statements prepared before are counted too), and the durable commits
// (transactions at synchronous=FULL). Call before the node opens its ledger; `snapshot()` marks the start
// of the measured window, `report(fills)` prints the window's statements per fill, costliest first.
import Database from 'better-sqlite3';

interface Stat {
  n: number;
  ms: number;
}

/** Wraps better-sqlite3 statements when BENCH_SQL is set; otherwise a no-op. */
export function sqlStats(): { snapshot(): void; report(fills: number, top?: number): void } {
  if (!process.env.BENCH_SQL) return { snapshot() {}, report() {} };
  const stats = new Map<string, Stat>();
  const probe = new Database(':memory:');
  const proto = Object.getPrototypeOf(probe.prepare('SELECT 1')) as Record<string, unknown>;
  probe.close();
  for (const m of ['run', 'get', 'all', 'iterate']) {
    const orig = proto[m] as (...a: unknown[]) => unknown;
    proto[m] = function (this: { source: string }, ...a: unknown[]) {
      const t0 = performance.now();
      try {
        return orig.apply(this, a);
      } finally {
        const key = this.source.replace(/\s+/g, ' ').trim();
        const s = stats.get(key) ?? { n: 0, ms: 0 };
        s.n++;
        s.ms += performance.now() - t0;
        stats.set(key, s);
      }
    };
  }
  let base = new Map<string, Stat>();
  return {
    snapshot() {
      base = new Map([...stats].map(([k, v]) => [k, { ...v }]));
    },
    report(fills, top = 25) {
      const rows = [...stats]
        .map(([k, v]) => ({ sql: k, n: v.n - (base.get(k)?.n ?? 0), ms: v.ms - (base.get(k)?.ms ?? 0) }))
        .filter((r) => r.n > 0)
        .sort((a, b) => b.ms - a.ms);
      const n = rows.reduce((a, r) => a + r.n, 0);
      const ms = rows.reduce((a, r) => a + r.ms, 0);
      const commits = rows.filter((r) => /^COMMIT/i.test(r.sql)).reduce((a, r) => a + r.n, 0);
      console.log(
        `  SQLite statements: ${(n / fills).toFixed(1)} per fill, ${(ms / fills).toFixed(3)} ms per fill (${commits} COMMIT statements run as statements)`,
      );
      for (const r of rows.slice(0, top)) {
        console.log(`    ${(r.n / fills).toFixed(2).padStart(6)}/fill ${(r.ms / fills).toFixed(3).padStart(7)} ms/fill  ${r.sql.slice(0, 150)}`);
      }
    },
  };
}
