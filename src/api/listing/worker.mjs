// The listing worker's entry: a worker thread starts without the main thread's TypeScript loader,
// so it registers tsx's (as bin/relay-node.js does) before loading the worker itself.
import { register } from 'tsx/esm/api';

register();
await import('./worker.ts');
