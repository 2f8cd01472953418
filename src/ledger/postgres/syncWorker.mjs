// The worker thread behind SyncPgClient (syncClient.ts): it owns the process's one PostgreSQL connection and runs
// the batches the blocked main thread posts, answering on the same port and waking the main thread through the
// shared counter. Plain JavaScript on purpose: a worker thread starts without the main thread's TypeScript loader
// (tsx, vitest), and this file needs nothing but `pg`, so it loads the same under node, tsx and vitest.
import { workerData } from 'node:worker_threads';
import pg from 'pg';

const { url, port, signal, timeoutMs, readonly } = workerData;
const wake = new Int32Array(signal);

// Every value comes back as PostgreSQL's text: the main thread converts it by column type, the way the caller
// asked (better-sqlite3's numbers or bigints), so no precision is lost on the way.
const raw = { getTypeParser: () => (v) => v };

let client;
// The transaction status of the connection as the server last reported it (ReadyForQuery: I idle, T in a
// transaction, E in a failed one), and whether a connection was lost while a transaction was open on it.
let txStatus = 'I';
let lostInTransaction = false;

async function connection() {
  if (client) return client;
  const c = new pg.Client({
    connectionString: url,
    connectionTimeoutMillis: timeoutMs,
    keepAlive: true,
    types: raw,
    // A transaction is open only while the main thread runs one synchronous function, so it is never idle for
    // long unless the process is stopped (SIGSTOP, a stalled VM) or cut off mid-transaction. Its writer's lock
    // would then hold back every other writer on the ledger, a standby's lease takeover included, for as long
    // as the stall lasts: the server ends such a transaction (and the session) after the call bound instead.
    idle_in_transaction_session_timeout: timeoutMs,
    // A read-only ledger (an API replica) is read-only in the server too: a write by mistake is refused, even on the primary.
    ...(readonly ? { options: '-c default_transaction_read_only=on' } : {}),
  });
  // A connection lost between calls: the next call opens a new one (but see lostInTransaction).
  const lost = () => {
    if (client !== c) return;
    client = undefined;
    if (txStatus !== 'I') lostInTransaction = true;
    txStatus = 'I';
  };
  c.on('error', lost);
  c.on('end', lost);
  await c.connect();
  c.connection.on('readyForQuery', (m) => {
    if (client === c) txStatus = m.status;
  });
  client = c;
  txStatus = 'I';
  return c;
}

// What the main thread may see of an error: PostgreSQL's message and fields, never the connection string.
function describe(e, index) {
  return {
    message: String(e?.message ?? e),
    code: typeof e?.code === 'string' ? e.code : undefined,
    detail: e?.detail,
    constraint: e?.constraint,
    // No SQLSTATE (a socket error), or class 08 (connection exception) or 57 (the server shutting down, a
    // backend terminated, a statement cancelled): the connection failed, not the statement.
    connection: typeof e?.code !== 'string' || !/^[0-9A-Z]{5}$/.test(e.code) || /^(08|57)/.test(e.code),
    index,
  };
}

async function run({ batch, rollbackOnError }) {
  if (lostInTransaction) {
    lostInTransaction = false;
    // The main thread is inside the transaction that died with its connection (the server rolled it back): the
    // rest of it must not run on a new connection, where each statement would commit on its own, outside the
    // writer's lock and the lease check made at its start. It fails as a lost connection; a new BEGIN goes on.
    if (!/^\s*BEGIN\b/i.test(batch[0]?.sql ?? '')) {
      return { ok: false, error: { message: 'the ledger connection was lost inside a transaction, which the server rolled back', connection: true, index: 0 } };
    }
  }
  const c = await connection();
  const results = [];
  for (let i = 0; i < batch.length; i++) {
    const s = batch[i];
    try {
      const r = await c.query({ text: s.sql, values: s.params, name: s.name, rowMode: 'array' });
      results.push({
        command: r.command ?? '',
        rows: r.rows ?? [],
        rowCount: r.rowCount ?? 0,
        fields: (r.fields ?? []).map((f) => ({ name: f.name, oid: f.dataTypeID })),
      });
    } catch (e) {
      const error = describe(e, i);
      if (rollbackOnError && !error.connection) await c.query('ROLLBACK').catch(() => {});
      if (error.connection) {
        // Reported to the main thread as it happens: not a loss to report again at the next call.
        if (client === c) client = undefined;
        txStatus = 'I';
        lostInTransaction = false;
        c.end().catch(() => {});
      }
      return { ok: false, error };
    }
  }
  return { ok: true, results };
}

let tsx = false;

// An async function of a module run with this connection (the migrations: migratePostgres takes a pg client).
// TypeScript modules need tsx's loader, registered here on first use only (a worker starts without the main
// thread's loader), so a connection that never migrates does not pay for it.
async function call({ module, fn }) {
  if (module.endsWith('.ts') && !tsx) {
    const { register } = await import('tsx/esm/api');
    register();
    tsx = true;
  }
  const m = await import(module);
  // The module reads results with pg's own types: a client of its own, with the default parsers.
  const plain = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs });
  try {
    await plain.connect();
    return { ok: true, results: [], value: await m[fn](plain) };
  } catch (e) {
    const error = describe(e, -1);
    // A socket error (ECONNREFUSED...) or class 08/57 is the connection's; anything else is the module's.
    error.connection = /^E[A-Z]+$/.test(error.code ?? '') || /^(08|57)/.test(error.code ?? '') || /Connection terminated|timeout/i.test(error.message);
    return { ok: false, error };
  } finally {
    await plain.end().catch(() => {});
  }
}

function answer(msg) {
  port.postMessage(msg);
  Atomics.add(wake, 0, 1);
  Atomics.notify(wake, 0);
}

// One message at a time, in order: a batch posted without waiting (a read-only COMMIT) runs whole before the next.
let queue = Promise.resolve();
port.on('message', (req) => {
  queue = queue.then(() => handle(req)).catch(() => {});
});

async function handle(req) {
  if (req.close) {
    await client?.end().catch(() => {});
    client = undefined;
    return answer({ id: req.id, ok: true, results: [] });
  }
  let out;
  try {
    out = req.call ? await call(req.call) : await run(req);
  } catch (e) {
    client?.end().catch(() => {});
    client = undefined;
    out = { ok: false, error: { ...describe(e, -1), connection: true } };
  }
  answer({ id: req.id, ...out });
}

// Loaded: the main thread waits for this before it counts a call's bound (booting a thread is not the database's time).
answer({ id: 0, ok: true, results: [] });
