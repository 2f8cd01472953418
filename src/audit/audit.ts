import { createPublicClient, type PublicClient } from 'viem';
import type { Registry as PromRegistry } from 'prom-client';
import { Gauge } from 'prom-client';
import { readTransport } from '../chains/evm/readTransport.ts';
import { viemChain } from '../chains/evm/viemChain.ts';
import type { Config } from '../config/load.ts';
import type { Ledger } from '../ledger/index.ts';
import { auditEvmChain, unevidencedCredits, type ChainAudit } from './evmAudit.ts';
import { svmKeypair } from '../chains/svm/transactions.ts';
import { auditExchangeChain } from './exchangeAudit.ts';
import { auditSvmChain } from './svmAudit.ts';

export interface AuditResult {
  ranAt: number;
  chains: ChainAudit[];
  /** Chains the audit does not reconcile (an SVM chain without its key), named so the report says so. */
  notCovered: { chainId: number; kind: string }[];
  differences: string[];
}

/** Reconciles the ledger with every chain of the config: EVM (auditEvmChain), exchange (auditExchangeChain), SVM (auditSvmChain). */
export async function runAudit(config: Config, ledger: Ledger, clients: Map<number, PublicClient> = new Map()): Promise<AuditResult> {
  const solver = config.solverAddress;
  const chains: ChainAudit[] = [];
  const notCovered: AuditResult['notCovered'] = [];
  for (const chain of config.chains) {
    // One reader per kind of chain, each behind the same ChainAudit.
    if (chain.kind === 'exchange') {
      chains.push(await auditExchangeChain(chain, ledger, solver));
      continue;
    }
    if (chain.kind === 'svm' && config.svmSolverKey) {
      chains.push(await auditSvmChain(chain, ledger, svmKeypair(config.svmSolverKey.reveal()).publicKey));
      continue;
    }
    if (chain.kind !== 'evm') {
      notCovered.push({ chainId: chain.id, kind: chain.kind });
      continue;
    }
    const client =
      clients.get(chain.id) ??
      (createPublicClient({ chain: viemChain(chain), transport: readTransport(chain.rpcUrl, { batch: { batchSize: 50 } }) }) as PublicClient);
    chains.push(await auditEvmChain(chain, client, ledger, solver));
  }
  return {
    ranAt: Date.now(),
    chains,
    notCovered,
    differences: [...unevidencedCredits(ledger), ...balanceTotalsDifferences(ledger), ...chains.flatMap((c) => c.differences)],
  };
}

/**
 * Every wallet whose app balance totals (what Balances.summary answers, migration 38) differ from the sums of its
 * entries, the truth: a difference means a writer went around the trigger that keeps them.
 */
export function balanceTotalsDifferences(ledger: Ledger): string[] {
  return ledger.balances
    .totalsDrift()
    .map(
      (d) =>
        `app balance totals of ${d.wallet} (balance ${d.balance}, held ${d.held} micro-USD) differ from its entries' sums (balance ${d.entriesBalance}, held ${d.entriesHeld})`,
    );
}

/** The report as the CLI prints it: per chain and currency, then every difference by name. */
export function formatAudit(r: AuditResult): string {
  const lines: string[] = [];
  for (const c of r.chains) {
    lines.push(`chain ${c.chainId} (blocks ${c.fromBlock}..${c.toBlock})`);
    for (const x of c.currencies) {
      const ok = (b: { expected: bigint; actual: bigint }) => (b.expected === b.actual ? 'ok' : `DIFFERENT by ${b.actual - b.expected}`);
      lines.push(
        `  ${x.symbol.padEnd(6)} deposits ${x.deposits} fills ${x.fills} refunds ${x.refunds} claims ${x.claims} funding ${x.funding} gas ${x.gas}` +
          `${x.rent !== undefined ? ` (rent ${x.rent})` : ''} | solver ${x.solver.actual} (${ok(x.solver)}) depository ${x.depository.actual} (${ok(x.depository)}) | credits ${x.credits} payouts ${x.payouts}`,
      );
    }
  }
  for (const c of r.chains)
    for (const id of c.writtenOff) lines.push(`chain ${c.chainId}: deposit ${id} written off (a reorg removed it after its payout: DEPOSIT_REORGED)`);
  for (const n of r.notCovered) lines.push(`chain ${n.chainId} (${n.kind}): not reconciled by this audit`);
  lines.push(r.differences.length ? `${r.differences.length} difference(s):` : 'no differences: the books reconcile with the chains');
  for (const d of r.differences) lines.push(`  - ${d}`);
  return lines.join('\n');
}

/** Keeps the run in the ledger, where the node's metrics read the last one. */
export function recordAudit(ledger: Ledger, r: AuditResult): void {
  const report = JSON.stringify(r, (_k, v) => (typeof v === 'bigint' ? v.toString() : v));
  ledger.tx(() => ledger.audits.recordRun(r.ranAt, r.differences.length, report));
}

/** relay_audit_differences and relay_audit_last_run_timestamp, read from the ledger's last audit run. */
export function registerAuditMetrics(registry: PromRegistry, ledger: Ledger): void {
  const last = () => {
    try {
      return ledger.audits.lastRun();
    } catch {
      return undefined; // a closed ledger at shutdown
    }
  };
  new Gauge({
    name: 'relay_audit_differences',
    help: 'Differences between the books and the chains found by the last relay-node audit (-1: never run)',
    registers: [registry],
    collect() {
      this.set(last()?.differences ?? -1);
    },
  });
  new Gauge({
    name: 'relay_audit_last_run_timestamp',
    help: 'When the last relay-node audit ran (unix seconds; 0: never)',
    registers: [registry],
    collect() {
      this.set(Math.floor((last()?.ran_at ?? 0) / 1000));
    },
  });
}
