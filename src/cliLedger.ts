// The ledger a CLI command reads or writes, as the operator names it: the SQLite file in --data-dir, or
// the ledger the --config file names (PostgreSQL at its ledger.url, else the SQLite file in its dataDir).
// One place for every command: `admin keys create` read only the data directory, so on a PostgreSQL node
// its key went into a stray SQLite file and the node refused it.
import { join } from 'node:path';
import type { Argv } from 'yargs';
import { loadConfigFile } from './config/load.ts';
import { Ledger, type LedgerLocation } from './ledger/index.ts';
import { ledgerLocation } from './node.ts';

/** The --data-dir and --config options of a command that works on the ledger. */
export function ledgerOptions<T>(y: Argv<T>) {
  return y
    .option('data-dir', { type: 'string', default: './data', describe: 'the ledger directory' })
    .option('config', { type: 'string', describe: "work on this config file's ledger (its ledger.url, else the SQLite file in its dataDir)" });
}

/** Where the command's ledger is. A config file that cannot be read or built throws (ConfigError). */
export function cliLedgerLocation(argv: { dataDir: string; config?: string }): LedgerLocation {
  return argv.config ? ledgerLocation(loadConfigFile(argv.config)) : { path: join(argv.dataDir, 'ledger.sqlite') };
}

/** Runs `fn` on the command's ledger, then closes it. A config file that cannot be read or built goes to `fail`. */
export function withLedger(argv: { dataDir: string; config?: string }, fail: (e: unknown) => never, fn: (ledger: Ledger) => void): void {
  let where: LedgerLocation;
  try {
    where = cliLedgerLocation(argv);
  } catch (e) {
    fail(e);
  }
  const ledger = Ledger.connect(where);
  try {
    fn(ledger);
  } finally {
    ledger.close();
  }
}
