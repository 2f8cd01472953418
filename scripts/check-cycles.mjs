#!/usr/bin/env node
// Folder cycles in src/: the graph whose nodes are the top-level folders of src/ (chains, quote,
// solver, ...) and whose edges are the imports between their files, type-only imports included
// (a type import still couples the folders: it is where a cycle starts). Data flows one way
// (chains → indexers → ledger → solver → submitters → chains, the API reads the ledger); a cycle
// between folders means some module reaches backwards. Exits 1 and prints each cycle found.
//
// Backward edges not yet removed are listed in KNOWN_BACKWARD with what removes them: the check
// leaves them out, so any other cycle fails it, and says when a listed edge is gone (shorten the list).
//
// Usage: node scripts/check-cycles.mjs [srcDir]
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Imports that still point backwards (from → to), each closing a cycle through chains. Listed, not
 * allowed to grow: remove an entry once its edge is gone.
 */
export const KNOWN_BACKWARD = {};

/** Every .ts file under `dir`, tests beside the sources excluded (they may import across freely). */
function sources(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...sources(p));
    else if (/\.(ts|mts)$/.test(name) && !/\.test\.ts$/.test(name) && !name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

/** The folder of src/ a file belongs to: its first path segment ('.' for files at the top of src/). */
function folderOf(src, file) {
  const rel = relative(src, file).split(sep);
  return rel.length > 1 ? rel[0] : '.';
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;

/** The folder graph: folder → (folder → one file-level import that makes the edge, for the report). */
export function folderGraph(src) {
  const graph = new Map();
  for (const file of sources(src)) {
    const from = folderOf(src, file);
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(IMPORT)) {
      const spec = m[1] ?? m[2];
      if (!spec.startsWith('.')) continue;
      const target = resolve(dirname(file), spec);
      if (!target.startsWith(src + sep)) continue;
      const to = folderOf(src, target);
      if (to === from || to === '.' || from === '.') continue;
      if (!graph.has(from)) graph.set(from, new Map());
      const edges = graph.get(from);
      if (!edges.has(to)) edges.set(to, `${relative(src, file)} → ${relative(src, target)}`);
    }
  }
  return graph;
}

/** The strongly connected components of more than one folder (Tarjan), each a folder cycle. */
export function folderCycles(graph) {
  let index = 0;
  const idx = new Map();
  const low = new Map();
  const stack = [];
  const on = new Set();
  const out = [];
  const visit = (v) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v)?.keys() ?? []) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const scc = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1) out.push(scc.sort());
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return out;
}

/** The cycles as readable lines: each folder of a cycle with the imports that tie it to the others. */
export function describeCycles(graph, cycles) {
  const lines = [];
  for (const c of cycles) {
    lines.push(`folder cycle: ${c.join(' ↔ ')}`);
    for (const a of c) for (const [b, why] of graph.get(a) ?? []) if (c.includes(b)) lines.push(`  ${a} → ${b}: ${why}`);
  }
  return lines;
}

/** The graph less the known backward edges; prints a note for each listed edge that no longer exists. */
export function withoutKnown(graph, known = KNOWN_BACKWARD) {
  const out = new Map([...graph].map(([k, v]) => [k, new Map(v)]));
  for (const edge of Object.keys(known)) {
    const [from, to] = edge.split(' → ');
    if (!out.get(from)?.delete(to)) console.log(`note: ${edge} is gone; remove it from KNOWN_BACKWARD`);
  }
  return out;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const src = resolve(process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), '..', 'src'));
  // Another tree (a test's) is checked without the list: the list names this repository's edges.
  const graph = process.argv[2] ? folderGraph(src) : withoutKnown(folderGraph(src));
  const cycles = folderCycles(graph);
  if (cycles.length) {
    for (const l of describeCycles(graph, cycles)) console.error(l);
    process.exit(1);
  }
  console.log(`no folder cycles in ${relative(process.cwd(), src) || '.'}`);
}
