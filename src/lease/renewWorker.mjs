// The leader lease's renewer thread (renewer.ts): every renewMs it runs the lease's renewal on a ledger connection of
// its own, so that a main thread kept busy in synchronous ledger calls (its event loop not turning for seconds) does
// not lose the lease by itself. It renews only while the main thread shows life (threadLife.ts: its event loop
// turned, or it waits on the ledger within a call's bound): a hung main thread stops the renewals, and the lease
// expires for a standby to take. It writes when it sent each renewal that landed (process-wide monotonic clock), or
// that one was refused, into shared memory, which the main thread's gate reads. Plain JavaScript on purpose: a worker
// starts without the main thread's TypeScript loader (tsx, vitest); it needs nothing but `pg` or `better-sqlite3`.
import { parentPort, workerData } from 'node:worker_threads';

const { life, lease, slots, where, statement, holder, epoch, leaseMs, actMs, renewMs, hungMs, timeoutMs } = workerData;
const lifeView = new BigInt64Array(life);
const leaseView = new BigInt64Array(lease);
const hungMicros = BigInt(Math.round(hungMs * 1000));
const actMicros = BigInt(Math.round(actMs * 1000));

const micros = () => process.hrtime.bigint() / 1000n;
const running = () => Atomics.load(leaseView, slots.state) === slots.renewing;

// The main thread is alive: inside a ledger call within its bound, or it showed life less than hungMs ago.
function alive(t) {
  if (t < Atomics.load(lifeView, slots.callUntil)) return true;
  return t - Atomics.load(lifeView, slots.beat) < hungMicros;
}

// What the main thread may see of an error: its message only (it hides the URL before logging).
const say = (msg) => parentPort.postMessage(msg);

// The renewal on this thread's own connection: true when it landed, false when refused (another holder or epoch).
async function connect() {
  if (where.url) {
    const { default: pg } = await import('pg');
    let client;
    const values = (now) => statement.names.map((n) => ({ holder, epoch, now, ttl: leaseMs })[n]);
    return {
      async renew(now) {
        if (!client) {
          const c = new pg.Client({ connectionString: where.url, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs, keepAlive: true });
          c.on('error', () => {
            if (client === c) client = undefined;
          });
          try {
            await c.connect();
          } catch (e) {
            c.end().catch(() => {});
            throw e;
          }
          client = c;
        }
        try {
          const r = await client.query({ text: statement.text, values: values(now), name: 'lease_renew' });
          return r.rowCount === 1;
        } catch (e) {
          // Timed out or failed: a connection of unknown state; the next renewal opens a new one.
          client?.end().catch(() => {});
          client = undefined;
          throw e;
        }
      },
      close: () => client?.end().catch(() => {}),
    };
  }
  const { default: Database } = await import('better-sqlite3');
  const db = new Database(where.path, { fileMustExist: true });
  db.pragma(`busy_timeout = ${timeoutMs}`);
  const renew = db.prepare(statement.text);
  return {
    renew: async (now) => renew.run({ holder, epoch, now, ttl: leaseMs }).changes === 1,
    close: () => db.close(),
  };
}

const ledger = await connect().catch((e) => {
  say({ failed: String(e?.message ?? e) });
  return undefined;
});
let hung = false;
while (ledger && running()) {
  const sent = micros();
  // Past the gate's deadline already (the process was paused, or no renewal landed in time): the leader stops
  // acting, even if the lease is still its own; never extend it again.
  if (sent >= Atomics.load(leaseView, slots.sent) + actMicros) break;
  if (alive(sent)) {
    if (hung) say({ alive: true });
    hung = false;
    try {
      // The expiry is now + lease, now read after `sent` (PostgreSQL: the database's clock; SQLite: this host's): the
      // gate's deadline (sent + lease − margin) comes first.
      const landed = await ledger.renew(Date.now());
      if (!running()) break;
      if (landed) Atomics.store(leaseView, slots.sent, sent);
      else {
        Atomics.compareExchange(leaseView, slots.state, slots.renewing, slots.refused);
        say({ refused: true });
        break;
      }
    } catch (e) {
      say({ failed: String(e?.message ?? e) });
    }
  } else if (!hung) {
    hung = true;
    say({ hung: Number(sent - Atomics.load(lifeView, slots.beat)) / 1000 });
  }
  const left = renewMs - Number(micros() - sent) / 1000;
  if (left > 0) await new Promise((resolve) => setTimeout(resolve, left));
}
await ledger?.close();
