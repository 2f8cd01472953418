import { parentPort, workerData } from 'node:worker_threads';
import { errText } from '../lib/errors.ts';
import { type FinalRange, writeFinalRange } from './finalRange.ts';
import { Ledger } from './index.ts';

// The ledger writer thread (rangeWriter.ts): a connection of its own to the node's SQLite ledger (migrated already
// by the node's: opening it finds nothing to apply), writing each range asked for in one lazy transaction, in the order asked, with the very stores
// the node's connection writes through.
const { path, autocheckpoint } = workerData as { path: string; autocheckpoint: number };
const ledger = Ledger.open(path);
const db = ledger.db;
db.pragma(`wal_autocheckpoint = ${autocheckpoint}`);

parentPort!.on('message', (m: { id: number; range: FinalRange } | 'stop') => {
  if (m === 'stop') {
    db.close();
    parentPort!.close();
    return;
  }
  try {
    parentPort!.postMessage({ id: m.id, recorded: ledger.tx(() => writeFinalRange(ledger, m.range), { lazy: true }) });
  } catch (e) {
    parentPort!.postMessage({ id: m.id, error: errText(e) });
  }
});
parentPort!.postMessage({ ready: true });
