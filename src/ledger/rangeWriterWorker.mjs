// The ledger writer thread's entry (rangeWriter.ts): a worker thread starts without the main thread's TypeScript
// loader, so it registers tsx's (as bin/relay-node.js does) before loading the thread itself.
import { register } from 'tsx/esm/api';

register();
await import('./rangeWriterThread.ts');
