// Blocks on a fixed interval for a chain whose mining the bench stopped (evm_setIntervalMining 0): anvil takes its
// interval in whole seconds only, and a timer on the bench's own event loop would fire late whenever the node, which
// runs in the same process, holds that loop. The timer runs on a worker thread of its own.
import { Worker } from 'node:worker_threads';

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
let blocks = 0;
const mine = () =>
  fetch(workerData.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","id":1,"method":"evm_mine","params":[]}' })
    .then((r) => r.json())
    .then((r) => { if (!r.error) blocks++; }, () => {});
mine();
const timer = setInterval(mine, workerData.ms);
parentPort.on('message', () => { clearInterval(timer); parentPort.postMessage(blocks); });
`;

/** Mines a block on the local chain at `url` now and then every `ms`, until `stop`, which resolves to the blocks mined. */
export function mineEvery(url: string, ms: number): { stop(): Promise<number> } {
  const worker = new Worker(WORKER, { eval: true, workerData: { url, ms } });
  return {
    stop: () =>
      new Promise<number>((resolve) => {
        worker.once('message', (blocks: number) => void worker.terminate().then(() => resolve(blocks)));
        worker.postMessage('stop');
      }),
  };
}
