// A seeded fuzzer over every endpoint of the API, and an auth matrix over every authenticated one.
//
// Endpoints are found in the sources (every `app.get/post/...('<path>'` under src/), and checked
// against the running server, so a route added later is fuzzed without touching this file. Requests
// go out through node:http (not fetch) so the fuzzer can send what fetch refuses to: duplicate
// headers, bodies that do not match their content-type, raw bytes.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
// The SQLite ledger: the digest reads every table through its connection.
import type { OpenedLedger as Ledger } from '../../src/ledger/index.ts';
import { Rng } from './prng.ts';
import { dialectOf } from '../../src/ledger/dialect.ts';

export interface Route {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';
  path: string;
  // The handler (as written in the source) calls requireCaller.
  authenticated: boolean;
  file: string;
}

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? walk(p) : p.endsWith('.ts') ? [p] : [];
  });
}

// Every route registered in the sources, with whether its handler requires an API key. A handler
// shared by two routes (a function called with a flag) is marked from the call site's segment and
// the helper's; the auth matrix also finds authenticated routes by their answers.
export function discoverRoutes(srcDir: string): Route[] {
  const out: Route[] = [];
  const re = /\b(?:app|scope|f|instance|fastify)\.(get|post|put|delete|patch)\(\s*['"`]([^'"`]+)['"`]/g;
  // Unit tests beside the sources register routes of their own on throwaway servers.
  for (const file of walk(srcDir).filter((f) => !f.endsWith('.test.ts'))) {
    const text = readFileSync(file, 'utf8');
    const hits = [...text.matchAll(re)];
    hits.forEach((m, i) => {
      const end = hits[i + 1]?.index ?? text.length;
      const segment = text.slice(m.index!, end);
      // `submit(req, true)`-style: the helper it calls requires a caller when its flag is true.
      const viaHelper = /\(\s*req\s*,\s*true\s*\)/.test(segment.split('\n')[0]!) && /requireCaller\(/.test(text);
      out.push({ method: m[1]!.toUpperCase() as Route['method'], path: m[2]!, authenticated: /requireCaller\(/.test(segment) || viaHelper, file });
    });
  }
  return out;
}

export interface Sent {
  method: string;
  path: string;
  headers?: Record<string, string | string[]>;
  body?: string | Buffer;
}

export interface Answer {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

// One raw HTTP request. A connection the server closes is answered as status 0.
export function send(base: string, s: Sent, timeoutMs = 10_000): Promise<Answer> {
  const u = new URL(base);
  return new Promise((resolve) => {
    const req = httpRequest(
      {
        host: u.hostname,
        port: u.port,
        method: s.method,
        // node:http sends any byte from ! to ÿ as it is; the rest is percent-encoded.
        path: s.path.replace(/[^\u0021-\u00ff]/gu, (c) => enc(c)),
        headers: { ...(s.body !== undefined ? { 'content-length': String(Buffer.byteLength(s.body)) } : {}), ...s.headers },
        timeout: timeoutMs,
        // A fresh connection each time: a call the server cut short never poisons the next one.
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString(), headers: res.headers }));
        res.on('error', () => resolve({ status: 0, body: '', headers: {} }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) => resolve({ status: 0, body: `client error: ${e.message}`, headers: {} }));
    if (s.body !== undefined) req.write(s.body);
    req.end();
  });
}

const rowText = (r: unknown) => JSON.stringify(r, (_k, v) => (typeof v === 'bigint' ? v.toString() : Buffer.isBuffer(v) ? v.toString('hex') : v));

// A digest of the ledger's durable tables (all but the indexer's own bookkeeping, which moves with
// every block), to show that a rejected call wrote nothing.
export function ledgerDigest(ledger: Ledger): { hash: string; rows: Record<string, number> } {
  // api_usage counts every keyed call, refused ones included (that is what GET /metrics/usage
  // reports): operational counters, not state a call can corrupt. scan_marks: the funding watcher's
  // last-read block hash, moving with the chain like the cursors.
  const volatile = new Set(['cursors', 'chain_blocks', 'scan_marks', 'sqlite_sequence', 'schema_migrations', 'api_usage']);
  const listed =
    dialectOf(ledger.db) === 'postgres'
      ? `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`
      : `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`;
  const tables = (ledger.db.prepare(listed).all() as { name: string }[]).map((t) => t.name).filter((n) => !volatile.has(n) && !n.startsWith('sqlite_'));
  const h = createHash('sha256');
  const rows: Record<string, number> = {};
  for (const t of tables) {
    // A deposit's tx_fee is its receipt's fee, read once by a request listing: a cache of chain data.
    const all = (ledger.db.prepare(`SELECT * FROM "${t}"`).all() as Record<string, unknown>[]).map((r) => {
      if (t !== 'deposits') return r;
      const { tx_fee: _cached, ...rest } = r;
      return rest;
    });
    rows[t] = all.length;
    h.update(t);
    // In a dialect-free order (PostgreSQL has no rowid): each row's text, sorted.
    h.update(JSON.stringify(all.map(rowText).sort()));
  }
  return { hash: h.digest('hex'), rows };
}

// ---- hostile values

const HOSTILE_STRINGS = [
  '',
  ' ',
  '../../../../etc/passwd',
  '..%2f..%2f..%2fetc%2fpasswd',
  '%00',
  '\u0000',
  'a\u0000b',
  "' OR 1=1 --",
  "'; DROP TABLE requests; --",
  '" OR ""="',
  '1; SELECT * FROM api_keys',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a template-injection probe, sent as the literal text.
  '${7*7}',
  '{{7*7}}',
  '<script>alert(1)</script>',
  '__proto__',
  'constructor',
  'prototype',
  'null',
  'undefined',
  'NaN',
  'Infinity',
  '-1',
  '0',
  '1e309',
  '-0',
  '0x',
  '0xZZ',
  `0x${'f'.repeat(40)}`,
  `0x${'ab'.repeat(32)}`,
  `0x${'00'.repeat(65)}`,
  `1${'0'.repeat(400)}`,
  '115792089237316195423570985008687907853269984665640564039457584007913129639936',
  '9'.repeat(5000),
  'ｆｕｌｌｗｉｄｔｈ',
  '𝕦𝕟𝕚𝕔𝕠𝕕𝕖',
  '💸🔥'.repeat(50),
  '\uFEFF\u202Eevil',
  '\ud800',
  'Ω≈ç√∫˜µ≤≥÷',
  'a'.repeat(70_000),
];

const HOSTILE_VALUES: unknown[] = [
  ...HOSTILE_STRINGS.filter((s) => s.length < 10_000),
  0,
  -1,
  1.5,
  1e308,
  -1e308,
  Number.MAX_SAFE_INTEGER + 2,
  true,
  false,
  null,
  [],
  [1, 2, 3],
  {},
  { $gt: '' },
  { __proto__: { polluted: true } },
  [`0x${'ab'.repeat(32)}`],
];

const FIELD_NAMES = [
  'user',
  'recipient',
  'originChainId',
  'destinationChainId',
  'originCurrency',
  'destinationCurrency',
  'amount',
  'tradeType',
  'txHash',
  'chainId',
  'requestId',
  'signature',
  'wallet',
  'currency',
  'address',
  'limit',
  'continuation',
  'url',
  'events',
  'secret',
  'depositAddress',
  'refundTo',
  'txs',
  'appFees',
  'referrer',
  'useDepositAddress',
  'protocolVersion',
  'maxFillAmountUsd',
  'issuedAt',
  'term',
  'chainIds',
  'sortBy',
  'sortDirection',
  '__proto__',
  'constructor',
];

// A structurally plausible quote body, to mutate one field at a time (reaching deeper validation).
export function goodQuote(user: string, originCurrency = '0x0000000000000000000000000000000000000000'): Record<string, unknown> {
  return {
    user,
    originChainId: 8453,
    destinationChainId: 10,
    originCurrency,
    destinationCurrency: originCurrency,
    amount: '1000000000000000',
    tradeType: 'EXACT_INPUT',
  };
}

function deepNest(depth: number): string {
  return '['.repeat(depth) + ']'.repeat(depth);
}

// encodeURIComponent, except that a lone surrogate (which it refuses) goes out as its raw bytes.
const enc = (v: string) => {
  try {
    return encodeURIComponent(v);
  } catch {
    return '%ED%A0%80';
  }
};

export interface FuzzCase extends Sent {
  label: string;
}

// One seeded case for `route`. `ctx.key` is a valid API key (used on some cases, so authenticated
// routes are fuzzed past their auth check too).
export function fuzzCase(rng: Rng, route: Route, ctx: { key: string; user: string }): FuzzCase {
  const pathParam = () => enc(rng.pick(HOSTILE_STRINGS.filter((s) => s.length < 3000)));
  const rawParam = () => rng.pick(['..', '../..', '%2e%2e', '%00', "'%20OR%201=1--", '%E2%82%AC', '%ZZ', '%', 'a%2Fb', '😀', encodeURIComponent('𝕦𝕟𝕚')]);
  let path = route.path.replace(/:(\w+)/g, () => (rng.chance(0.25) ? rawParam() : pathParam()));
  // Query string: known names with hostile values, duplicates, garbage names.
  if (rng.chance(route.method === 'GET' ? 0.85 : 0.3)) {
    const n = rng.int(1, 5);
    const parts: string[] = [];
    for (let i = 0; i < n; i++) {
      const name = rng.chance(0.8) ? rng.pick(FIELD_NAMES) : rng.pick(['a[b]', 'a[]', '__proto__[x]', 'x'.repeat(300), '%00', '']);
      const v = rng.pick(HOSTILE_STRINGS.filter((s) => s.length < 6000));
      parts.push(`${enc(name)}=${rng.chance(0.15) ? v.replace(/[\s#]/g, '+') : enc(v)}`);
      if (rng.chance(0.15)) parts.push(`${enc(name)}=${enc(rng.pick(HOSTILE_STRINGS.slice(0, 20)))}`);
    }
    path += `?${parts.join('&')}`;
  }
  const headers: Record<string, string | string[]> = {};
  const h = rng.next();
  let label = '';
  if (h < 0.15) {
    headers['x-api-key'] = [ctx.key, rng.pick(['nope', ctx.key, ''])];
    label += 'dup-key ';
  } else if (h < 0.25) {
    headers['x-api-key'] = 'k'.repeat(rng.pick([201, 4000, 12_000]));
    label += 'long-key ';
  } else if (h < 0.35) {
    headers.authorization = rng.pick([
      'Bearer',
      'Bearer ',
      'Bearer  x y',
      'Basic dXNlcjpwYXNz',
      `Bearer ${'z'.repeat(300)}`,
      'bearer \u00ff\u00fe',
      `Bearer ${ctx.key}extra`,
      'Bearer ' + "' OR 1=1 --",
    ]);
    label += 'bearer-garbage ';
  } else if (h < 0.4) {
    headers['x-filler'] = 'f'.repeat(rng.pick([8_000, 20_000, 70_000]));
    label += 'long-header ';
  } else if (h < 0.6) {
    headers['x-api-key'] = ctx.key;
    label += 'valid-key ';
  }
  let body: string | Buffer | undefined;
  if (route.method !== 'GET' || rng.chance(0.1)) {
    const b = rng.next();
    const ct = rng.next();
    headers['content-type'] =
      ct < 0.7
        ? 'application/json'
        : rng.pick([
            'text/plain',
            'application/x-www-form-urlencoded',
            'multipart/form-data; boundary=x',
            'application/json; charset=utf-7',
            'application/xml',
            '',
            'application/json, text/plain',
            '*/*',
          ]);
    if (b < 0.15) {
      body = rng.pick([
        '{"user": ',
        '[',
        '{',
        '}',
        '{"a":1,}',
        "{'a':1}",
        'nul',
        '"\\ud800"',
        '{"a":"\\u0000"}',
        '\u0000\u0001\u0002',
        '{"amount": 1e999999}',
        `{"a":${'9'.repeat(5000)}}`,
      ]);
      label += 'malformed ';
    } else if (b < 0.25) {
      body = JSON.stringify({ pad: 'x'.repeat(rng.pick([65 * 1024, 200 * 1024, 1024 * 1024])) });
      label += 'huge-body ';
    } else if (b < 0.3) {
      body = deepNest(rng.pick([100, 5_000, 20_000]));
      label += 'deep-nest ';
    } else if (b < 0.35) {
      body = rng.pick(['null', 'true', '0', '"string"', '[]', '[{}]', '{"__proto__":{"isAdmin":true}}', '{"constructor":{"prototype":{"x":1}}}']);
      label += 'json-scalar ';
    } else if (b < 0.4) {
      body = Buffer.from(Array.from({ length: rng.int(1, 512) }, () => rng.int(0, 255)));
      label += 'raw-bytes ';
    } else if (b < 0.7) {
      // A plausible body with one field made hostile.
      const good = goodQuote(ctx.user);
      const field = rng.pick([...Object.keys(good), ...FIELD_NAMES]);
      body = JSON.stringify({ ...good, [field]: rng.pick(HOSTILE_VALUES) });
      label += `mutate:${field} `;
    } else {
      const o: Record<string, unknown> = {};
      for (let i = rng.int(0, 6); i > 0; i--) o[rng.pick(FIELD_NAMES)] = rng.pick(HOSTILE_VALUES);
      body = JSON.stringify(o);
      label += 'random-object ';
    }
    if (headers['content-type'] === '') delete headers['content-type'];
  }
  return { label: `${route.method} ${route.path} ${label.trim()}`, method: route.method, path, headers, body };
}

export interface FuzzReport {
  sent: number;
  byStatus: Record<string, number>;
  fiveHundreds: { label: string; path: string; status: number; body: string }[];
  // Calls answered 4xx (or closed) that changed the ledger.
  ledgerChanged: { label: string; path: string; status: number; tables: string[] }[];
  healthFailures: number;
  healthAnswers: string[];
  leaked: { label: string; secret: string }[];
}

export interface FuzzTarget {
  url: () => string;
  ledger: Ledger;
  routes: Route[];
  key: string;
  user: string;
  // Strings that must never appear in an answer.
  secrets?: string[];
}

// Sends `perRoute` seeded cases to every route, in batches of `batch` (GET /health after each), with
// a ledger digest before and after each call: a rejected call must leave it unchanged.
export async function fuzz(t: FuzzTarget, seed: number, perRoute: number, batch = 25): Promise<FuzzReport> {
  const rng = new Rng(seed);
  const report: FuzzReport = { sent: 0, byStatus: {}, fiveHundreds: [], ledgerChanged: [], healthFailures: 0, healthAnswers: [], leaked: [] };
  const cases: FuzzCase[] = [];
  for (const r of t.routes) for (let i = 0; i < perRoute; i++) cases.push(fuzzCase(rng.fork(`${r.method} ${r.path} ${i}`), r, { key: t.key, user: t.user }));
  // Interleave routes, so a batch mixes endpoints.
  const order = cases
    .map((c, i) => ({ c, k: rng.next() + i * 0 }))
    .sort((a, b) => a.k - b.k)
    .map((x) => x.c);
  const secrets = (t.secrets ?? []).map((s) => s.toLowerCase());
  for (let i = 0; i < order.length; i++) {
    const c = order[i]!;
    const before = ledgerDigest(t.ledger);
    const a = await send(t.url(), c);
    report.sent++;
    report.byStatus[a.status] = (report.byStatus[a.status] ?? 0) + 1;
    if (a.status >= 500) report.fiveHundreds.push({ label: c.label, path: c.path.slice(0, 200), status: a.status, body: a.body.slice(0, 300) });
    if (a.status >= 400 || a.status === 0) {
      const after = ledgerDigest(t.ledger);
      if (after.hash !== before.hash) {
        report.ledgerChanged.push({
          label: c.label,
          path: c.path.slice(0, 200),
          status: a.status,
          tables: Object.keys(after.rows).filter((k) => after.rows[k] !== before.rows[k]),
        });
      }
    }
    const lower = a.body.toLowerCase();
    for (const s of secrets) if (lower.includes(s)) report.leaked.push({ label: c.label, secret: `${s.slice(0, 6)}…` });
    if ((i + 1) % batch === 0 || i === order.length - 1) {
      const h = await send(t.url(), { method: 'GET', path: '/health' });
      if (h.status !== 200) {
        report.healthFailures++;
        report.healthAnswers.push(`${h.status} after ${c.label}: ${h.body.slice(0, 200)}`);
      }
    }
  }
  return report;
}

export interface AuthRow {
  route: string;
  noKey: number;
  unknownKey: number;
  revokedKey: number;
  validKey: number;
  bearerValid: number;
  bearerRevoked: number;
  ok: boolean;
}

// For every authenticated route: no key 401, unknown key 403, revoked key 403, valid key neither
// (by x-api-key and by Bearer). Path parameters get plausible values; bodies are empty objects.
export async function authMatrix(
  url: string,
  routes: Route[],
  keys: { valid: string; revoked: string },
  params: Record<string, string> = {},
): Promise<AuthRow[]> {
  const rows: AuthRow[] = [];
  for (const r of routes) {
    const path = r.path.replace(/:(\w+)/g, (_m, name: string) => params[name] ?? 'x');
    const call = (headers: Record<string, string>) =>
      send(url, {
        method: r.method,
        path,
        headers: r.method === 'GET' || r.method === 'DELETE' ? headers : { 'content-type': 'application/json', ...headers },
        body: r.method === 'GET' || r.method === 'DELETE' ? undefined : '{}',
      }).then((a) => a.status);
    const row: AuthRow = {
      route: `${r.method} ${r.path}`,
      noKey: await call({}),
      unknownKey: await call({ 'x-api-key': 'rk_this_key_does_not_exist_0000000000' }),
      revokedKey: await call({ 'x-api-key': keys.revoked }),
      validKey: await call({ 'x-api-key': keys.valid }),
      bearerValid: await call({ authorization: `Bearer ${keys.valid}` }),
      bearerRevoked: await call({ authorization: `Bearer ${keys.revoked}` }),
      ok: false,
    };
    row.ok =
      row.noKey === 401 &&
      row.unknownKey === 403 &&
      row.revokedKey === 403 &&
      row.bearerRevoked === 403 &&
      ![401, 403].includes(row.validKey) &&
      ![401, 403].includes(row.bearerValid) &&
      row.validKey < 500 &&
      row.bearerValid < 500;
    rows.push(row);
  }
  return rows;
}
