import { runAudit, type AuditResult } from '../../src/audit/audit.ts';
import { until, type Stack } from './stack.ts';

// The books of a stack reconciled with its chains (src/audit), once no payout is in flight.
export async function auditStack(s: Stack): Promise<AuditResult> {
  const open = () => (s.node.ledger.db.prepare(`SELECT COUNT(*) AS n FROM payouts WHERE state IN ('queued', 'sent')`).get() as { n: number }).n;
  await until(() => (open() === 0 ? true : undefined), 'every payout settled', 60_000);
  return runAudit(s.node.config, s.node.ledger);
}
