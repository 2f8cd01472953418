import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * Chain reads made while serving the public API (quotes, liquidity, prices, transaction lookups). They share each RPC
 * provider's budget with the node's own reads (the indexers', the solver's, the submitters'), and yield to them: a
 * client reading as fast as it is answered held every read a fill needed behind its own (a fill of 0.85 s took 36 s).
 */
export const apiReads = new AsyncLocalStorage<true>();

/** Whether the current call is made for the public API. */
export function isApiRead(): boolean {
  return apiReads.getStore() === true;
}

/**
 * Runs `fn` as the node's own work, whoever started it. The mark above is a context that follows everything a request
 * sets off: a request that woke one of the node's stages (a reported deposit wakes its chain's indexer, whose pass wakes
 * the solver and the submitter) had that stage read as the API, behind the API's own reads, and each later pass the
 * stage scheduled from it too. Every stage's pass starts here (lib/loop.ts, the solver's wake in node.ts).
 */
export function asNodeWork<T>(fn: () => T): T {
  return apiReads.exit(fn);
}
