// Summarises a .cpuprofile (bench/profile.ts) for the fill path: the top functions by self time, and
// every sample's time by stage (the nearest frame on its stack that names one: decision, estimate,
// signing, recording, broadcast, receipts, indexing, ...) against what it was doing at the leaf (the
// ledger, RPC and HTTP, crypto, encoding, other).
// Usage: npx tsx bench/profile-summary.ts FILE.cpuprofile [top]
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
const file = process.argv[2];
if (!file) throw new Error('usage: profile-summary FILE.cpuprofile [top]');
const top = Number(process.argv[3] ?? 30);
// A stage's own top functions (by self time), when named: BENCH_STAGE='decision (solver)'.
const only = process.env.BENCH_STAGE;
const p = JSON.parse(readFileSync(file, 'utf8')) as { nodes: Node[]; samples: number[]; timeDeltas: number[] };
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const short = (url: string) => url.replace(/.*node_modules\//, 'nm/').replace(/^file:\/\/.*?\/(src|bench|test|contracts-abi)\//, '$1/');
const name = (n: Node) => `${n.callFrame.functionName || '(anonymous)'} ${short(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`;

// Stages, by the nearest frame (from the leaf up) that names one.
const STAGES: [string, (n: Node) => boolean][] = [
  ['(profiler itself)', (n) => /node:inspector/.test(n.callFrame.url)],
  ['signing', (n) => /^(signTransaction|sign|signCallRequest)$/.test(n.callFrame.functionName) && /viem|src\//.test(n.callFrame.url)],
  ['estimate', (n) => /^(estimateGas|prepare|current)$/.test(n.callFrame.functionName) && /viem\/_esm\/actions|payoutSender|fees\.ts/.test(n.callFrame.url)],
  ['broadcast', (n) => /^(sendRawTransaction|#broadcast|broadcast)$/.test(n.callFrame.functionName)],
  ['recording (signed)', (n) => /^#recordSigned$/.test(n.callFrame.functionName)],
  ['receipts (confirm)', (n) => /^(confirm|#confirmGroup|#confirmPass|#onIncluded|#onReceipt|getTransactionReceipt)$/.test(n.callFrame.functionName)],
  ['send pass (pump, batch)', (n) => /^(#pump|#drain|#processBatch|#process|#submitBatch)$/.test(n.callFrame.functionName)],
  // The solver's hooks (onSigned, onPaid, onFailed) run inside the submitter's transactions: counted with the caller's stage.
  ['decision (solver)', (n) => /src\/solver\//.test(n.callFrame.url) && !/^on(Signed|Paid|Failed)$/.test(n.callFrame.functionName)],
  ['indexing', (n) => /src\/indexer\/|depositSource|depositLogs|src\/chains\/evm\/adapter/.test(n.callFrame.url)],
  ['rpc transport', (n) => /src\/chains\/providers\//.test(n.callFrame.url)],
  ['api', (n) => /src\/api\/|nm\/fastify|fastify/.test(n.callFrame.url)],
  ['bench', (n) => /\/bench\//.test(n.callFrame.url)],
];
const LEAF: [string, (n: Node) => boolean][] = [
  // better-sqlite3's statements are native (no URL): run, get, all, iterate, exec.
  [
    'ledger (sqlite)',
    (n) =>
      /better-sqlite3|src\/ledger\//.test(n.callFrame.url) || (!n.callFrame.url && /^(run|get|all|iterate|exec|pluck|raw)$/.test(n.callFrame.functionName)),
  ],
  ['crypto (noble)', (n) => /@noble/.test(n.callFrame.url)],
  [
    'http/json-rpc',
    (n) => /undici|node:internal\/(webstreams|streams|net|http)|writev|src\/chains\/providers/.test(n.callFrame.url + n.callFrame.functionName),
  ],
  ['viem (abi, format)', (n) => /viem|abitype|ox\//.test(n.callFrame.url)],
  ['logging', (n) => /pino/.test(n.callFrame.url)],
  ['gc', (n) => n.callFrame.functionName === '(garbage collector)'],
  ['idle', (n) => n.callFrame.functionName === '(idle)'],
];
const stageOf = (id: number): string => {
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const n = byId.get(cur)!;
    for (const [s, match] of STAGES) if (match(n)) return s;
  }
  return 'other';
};
const leafOf = (n: Node) => LEAF.find(([, m]) => m(n))?.[0] ?? 'other';

const self = new Map<string, number>();
const grid = new Map<string, Map<string, number>>();
let total = 0;
let idle = 0;
for (let i = 0; i < p.samples.length; i++) {
  const id = p.samples[i]!;
  const dt = p.timeDeltas[i] ?? 0;
  const n = byId.get(id)!;
  total += dt;
  if (n.callFrame.functionName === '(idle)') {
    idle += dt;
    continue;
  }
  const s = stageOf(id);
  if (!only || s === only) self.set(name(n), (self.get(name(n)) ?? 0) + dt);
  const row = grid.get(s) ?? new Map<string, number>();
  row.set(leafOf(n), (row.get(leafOf(n)) ?? 0) + dt);
  grid.set(s, row);
}
const busy = total - idle;
const ms = (us: number) => (us / 1000).toFixed(0);
const pc = (us: number) => `${((100 * us) / busy).toFixed(1)}%`;
console.log(`${file}: ${ms(total)} ms sampled, ${ms(busy)} ms busy (${((100 * busy) / total).toFixed(0)}%)`);
console.log(`\ntop ${top} functions by self time (share of busy time):`);
for (const [k, t] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${ms(t).padStart(7)} ms ${pc(t).padStart(6)}  ${k}`);
const leaves = [...new Set([...grid.values()].flatMap((r) => [...r.keys()]))].sort();
console.log(`\nby stage (nearest naming frame) × what the leaf was doing, ms:`);
console.log(['stage'.padEnd(26), 'total'.padStart(7), ...leaves.map((l) => l.slice(0, 14).padStart(15))].join(''));
for (const [s, row] of [...grid].sort((a, b) => sum(b[1]) - sum(a[1]))) {
  console.log([`${s}`.padEnd(26), ms(sum(row)).padStart(7), ...leaves.map((l) => ms(row.get(l) ?? 0).padStart(15))].join(''));
}
function sum(m: Map<string, number>): number {
  return [...m.values()].reduce((a, b) => a + b, 0);
}
