import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { Registry } from '../../config/registry.ts';
import { Ledger } from '../../ledger/index.ts';
import { ApiError } from '../errors.ts';
import { runListing, runRead, type ListingJob, type ListingWorkerData, type ReadJob } from './run.ts';
import { errText } from '../../lib/errors.ts';

// A listing worker: its own read-only connection to the ledger, so that a heavy listing query
// blocks this thread only, never the node's event loop (indexers, solver, submitters, /health).
const data = workerData as ListingWorkerData;
if (data.nice > 0) lowerThreadPriority();
const ledger = Ledger.connect(data.ledger, { readonly: true });
const ctx = { ledger, registry: new Registry(data.chains), solver: data.solver, bounds: data.bounds };

parentPort!.on('message', (msg: { id: number; job: ListingJob | ReadJob }) => {
  try {
    const result = 'kind' in msg.job ? runRead(ctx, msg.job) : runListing(ctx, msg.job);
    parentPort!.postMessage({ id: msg.id, ok: true, result });
  } catch (e) {
    // A refused query (400 naming the bound) goes back as the same answer; anything else is a failure.
    const refused = e instanceof ApiError ? { status: e.status, errorCode: e.errorCode } : {};
    parentPort!.postMessage({ id: msg.id, ok: false, error: errText(e), ...refused });
  }
});
parentPort!.postMessage({ ready: true });

// On Linux a thread has its own niceness: a listing worker at a lower priority than the node's
// main thread gives way to it when they compete for a core, so /health and the solver keep their
// latency while the listings absorb the wait. Elsewhere (or without /proc) it runs as it is.
function lowerThreadPriority(): void {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (Number.isSafeInteger(tid) && tid > 0) setPriority(tid, data.nice);
  } catch {
    // not Linux, or not permitted: nothing to lower
  }
}
