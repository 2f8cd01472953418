import { parentPort, workerData } from 'node:worker_threads';
import { Registry } from '../../config/registry.ts';
import { Ledger } from '../../ledger/index.ts';
import { runListing, type ListingJob, type ListingWorkerData } from './run.ts';

// A listing worker: its own read-only connection to the ledger, so that a heavy listing query
// blocks this thread only, never the node's event loop (indexers, solver, submitters, /health).
const data = workerData as ListingWorkerData;
const ledger = Ledger.open(data.ledgerPath, { readonly: true });
const ctx = { ledger, registry: new Registry(data.chains), solver: data.solver };

parentPort!.on('message', (msg: { id: number; job: ListingJob }) => {
  try {
    parentPort!.postMessage({ id: msg.id, ok: true, result: runListing(ctx, msg.job) });
  } catch (e) {
    parentPort!.postMessage({ id: msg.id, ok: false, error: (e as Error).message });
  }
});
parentPort!.postMessage({ ready: true });
