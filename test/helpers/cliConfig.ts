import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Stack } from './stack.ts';

/**
 * The stack's node as the CLI is pointed at it by an operator: a config file (its chains and ledger, keys and,
 * on PostgreSQL, the database URL named by environment variables) and that environment.
 */
export function cliConfig(s: Stack): { path: string; env: Record<string, string> } {
  const path = join(s.dataDir, 'cli-config.json');
  const ledger = ledgerByEnv(s);
  writeFileSync(
    path,
    JSON.stringify({
      ...s.devnet.nodeConfig({ port: 0, logLevel: 'warn' }),
      dataDir: s.dataDir,
      ...ledger.config,
      solverKey: { env: 'CLI_SOLVER_KEY' },
      allocatorKey: { env: 'CLI_ALLOCATOR_KEY' },
    }),
  );
  return { path, env: { CLI_SOLVER_KEY: s.devnet.keys.solver, CLI_ALLOCATOR_KEY: s.devnet.keys.allocator, ...ledger.env } };
}

/**
 * The stack's ledger for a config file a spawned process reads: on PostgreSQL, `ledger.url` naming an environment
 * variable and that variable (the URL's password never written to a file); nothing on SQLite (the data directory's).
 */
export function ledgerByEnv(s: Stack): { config: { ledger?: { url: { env: string } } }; env: Record<string, string> } {
  const url = s.ledgerConfig.ledger?.url;
  return url ? { config: { ledger: { url: { env: 'RELAY_TEST_LEDGER_URL' } } }, env: { RELAY_TEST_LEDGER_URL: url } } : { config: {}, env: {} };
}

/** The options that point a ledger command (keys, webhooks) at the stack's ledger: its data directory, or on PostgreSQL the config file. */
export function ledgerArgs(s: Stack): { args: string[]; env: Record<string, string> } {
  if (!s.ledgerConfig.ledger) return { args: ['--data-dir', s.dataDir], env: {} };
  const { path, env } = cliConfig(s);
  return { args: ['--config', path], env };
}
