import { parentPort, workerData } from 'node:worker_threads';
import { openDb } from './db.ts';
import { Deposits } from './deposits.ts';
import { type FinalRange, writeFinalRange } from './finalRange.ts';
import { IndexerState } from './indexerState.ts';

// The ledger writer thread (rangeWriter.ts): a connection of its own to the node's SQLite ledger (migrated already by
// the node's), writing each range asked for in one transaction, in the order asked, with the very stores the node's
// connection writes through. It loads those two stores only (not the whole ledger, nor viem): the node starts it beside
// its first requests, and its start is CPU they would wait for.
const { path, autocheckpoint } = workerData as { path: string; autocheckpoint: number };
const db = openDb(path);
// Every commit here is a lazy one (TxOptions.lazy): no disk flush of its own.
db.pragma('synchronous = NORMAL');
db.pragma(`wal_autocheckpoint = ${autocheckpoint}`);
const stores = { deposits: new Deposits(db), indexer: new IndexerState(db) };
// Immediate, as the node's transactions: the write lock is taken before the cursor is read, not upgraded to after it.
const write = (range: FinalRange) => db.transaction(() => writeFinalRange(stores, range)).immediate();

parentPort!.on('message', (m: { id: number; range: FinalRange } | 'stop') => {
  if (m === 'stop') {
    db.close();
    parentPort!.close();
    return;
  }
  try {
    parentPort!.postMessage({ id: m.id, recorded: write(m.range) });
  } catch (e) {
    // Not errText (lib/errors.ts): it loads viem, which this thread is kept free of.
    parentPort!.postMessage({ id: m.id, error: e instanceof Error ? e.message : String(e) });
  }
});
parentPort!.postMessage({ ready: true });
