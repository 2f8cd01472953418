/**
 * Takes `--ledger sqlite|postgres` out of a bench's arguments (the rest stay positional); sqlite when absent. A bench
 * that runs on both ledgers reads it the same way, so `bench/ledgers.ts` can drive them all alike.
 */
export function takeLedgerFlag(args: string[]): 'sqlite' | 'postgres' {
  const at = args.indexOf('--ledger');
  const ledger = at >= 0 ? args.splice(at, 2)[1] : 'sqlite';
  if (ledger !== 'sqlite' && ledger !== 'postgres') throw new Error(`--ledger ${ledger}: sqlite or postgres`);
  return ledger;
}
