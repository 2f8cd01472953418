import { execFile } from 'node:child_process';
import { runAudit, type AuditResult } from '../../src/audit/audit.ts';
import { cliConfig } from './cliConfig.ts';
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
  const { path, env } = cliConfig(s);
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['bin/relay-node.js', ...args, '--config', path],
      { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, out: stdout + stderr }),
    );
  });
}
