// The SQLite ledger's WAL checkpoints, on a thread of their own (checkpointer.ts): every intervalMs a PASSIVE
// checkpoint on a connection of this thread's own copies the pages committed to the write-ahead log back into the
// database file (and syncs it), work SQLite otherwise does inside whichever commit crosses its threshold, on the
// node's one thread. PASSIVE never waits for a lock and never blocks a writer or a reader: what it cannot copy now
// (a reader's snapshot) is copied on a later turn. Plain JavaScript on purpose: a worker starts without the main
// thread's TypeScript loader (tsx, vitest); it needs nothing but `better-sqlite3`.
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

const { path, intervalMs } = workerData;
const db = new Database(path, { fileMustExist: true });
// FULL: the database file is synced after every checkpoint, as the node's own connection would.
db.pragma('synchronous = FULL');
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');

const timer = setInterval(() => {
  try {
    checkpoint.run();
  } catch (e) {
    parentPort.postMessage({ failed: String(e?.message ?? e) });
  }
}, intervalMs);

parentPort.on('message', (m) => {
  if (m !== 'stop') return;
  clearInterval(timer);
  db.close();
  parentPort.close();
});
