import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runAudit, type AuditResult } from '../../src/audit/audit.ts';
import { until, type Stack } from './stack.ts';

// The books of a stack reconciled with its chains (src/audit), once no payout is in flight.
export async function auditStack(s: Stack): Promise<AuditResult> {
  const open = () => (s.node.ledger.db.prepare(`SELECT COUNT(*) AS n FROM payouts WHERE state IN ('queued', 'sent')`).get() as { n: number }).n;
  await until(() => (open() === 0 ? true : undefined), 'every payout settled', 60_000);
  return runAudit(s.node.config, s.node.ledger);
}

// `relay-node audit` (or another verb) run as the operator runs it, against the stack's ledger and chains.
// Asynchronous: the devnet's exchange stand-in answers from this very process.
export function auditCli(s: Stack, args: string[] = ['audit']): Promise<{ code: number | null; out: string }> {
  const path = join(s.dataDir, 'audit-config.json');
  writeFileSync(
    path,
    JSON.stringify({
      ...s.devnet.nodeConfig({ port: 0, logLevel: 'warn' }),
      dataDir: s.dataDir,
      // On PostgreSQL, the stack's database, its URL (and password) through the environment.
      ...(s.ledgerConfig.ledger ? { ledger: { url: { env: 'AUDIT_LEDGER_URL' } } } : {}),
      solverKey: { env: 'AUDIT_SOLVER_KEY' },
      allocatorKey: { env: 'AUDIT_ALLOCATOR_KEY' },
    }),
  );
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['bin/relay-node.js', ...args, '--config', path],
      {
        env: {
          ...process.env,
          AUDIT_SOLVER_KEY: s.devnet.keys.solver,
          AUDIT_ALLOCATOR_KEY: s.devnet.keys.allocator,
          ...(s.ledgerConfig.ledger ? { AUDIT_LEDGER_URL: s.ledgerConfig.ledger.url } : {}),
        },
        encoding: 'utf8',
        timeout: 60_000,
      },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, out: stdout + stderr }),
    );
  });
}
