import { SvmRpcPool, svmConnection } from '../chains/svm/rpcPool.ts';
import { Connection, PublicKey, type ConfirmedSignatureInfo } from '@solana/web3.js';
import type { SvmChainConfig } from '../config/schema.ts';
import type { Ledger } from '../ledger/index.ts';
import type { PayoutRow, TransactionRow } from '../ledger/types.ts';
import type { ChainAudit } from './evmAudit.ts';

const PAGE = 1000;

/**
 * Reconciles the SVM chain's transactions with the books (same ChainAudit shape as evmAudit):
 * every paid payout has exactly one successful transaction (signature) on chain and a failed one
 * none, the ledger's recorded fee is the chain's, every successful transaction the solver paid for
 * (fee payer) is a payout's in the ledger, and every ledger deposit is a successful transaction on
 * chain. Balances (lamports, SPL) are not explained here yet: `currencies` stays empty.
 */
export async function auditSvmChain(chain: SvmChainConfig, ledger: Ledger, solver: PublicKey, conn: Connection = svmConnection(new SvmRpcPool({ chain }), 'confirmed')): Promise<ChainAudit> {
  const differences: string[] = [];
  const diff = (s: string) => differences.push(`chain ${chain.id}: ${s}`);
  const txCache = new Map<string, Awaited<ReturnType<Connection['getTransaction']>>>();
  const txOf = async (sig: string) => {
    if (!txCache.has(sig)) txCache.set(sig, await conn.getTransaction(sig, { commitment: 'confirmed', maxSupportedTransactionVersion: 0 }).catch(() => null));
    return txCache.get(sig)!;
  };
  const succeeded = async (sig: string) => {
    const t = await txOf(sig);
    return !!t && t.meta?.err === null;
  };

  // ---- payouts: each paid one has exactly one successful transaction; a failed one has none
  const payouts = ledger.db.prepare('SELECT * FROM payouts WHERE chain_id = ?').all(chain.id) as PayoutRow[];
  const txs = ledger.db.prepare('SELECT * FROM transactions WHERE chain_id = ?').all(chain.id) as TransactionRow[];
  const txsOf = new Map<string, TransactionRow[]>();
  for (const t of txs) txsOf.set(t.payout_id, [...(txsOf.get(t.payout_id) ?? []), t]);
  for (const p of payouts) {
    const successes: string[] = [];
    for (const t of txsOf.get(p.id) ?? []) {
      if (!(await succeeded(t.hash))) continue;
      successes.push(t.hash);
      const fee = (await txOf(t.hash))!.meta!.fee;
      if (t.fee !== null && BigInt(t.fee) !== BigInt(fee)) diff(`transaction ${t.hash} of payout ${p.id}: the ledger's fee ${t.fee} is not the chain's ${fee}`);
    }
    if (p.state === 'success') {
      if (!p.tx_hash || !(await succeeded(p.tx_hash))) diff(`payout ${p.id} is paid in the ledger but its transaction ${p.tx_hash ?? '(none)'} is not a successful one on chain`);
      if (successes.length > 1 || (successes.length === 1 && successes[0] !== p.tx_hash)) diff(`payout ${p.id} has ${successes.length} successful transactions of ours (${successes.join(', ')}); exactly one is ${p.tx_hash}`);
    } else if (p.state === 'failed') {
      if (successes.length) diff(`payout ${p.id} failed in the ledger but its transaction ${successes[0]} succeeded on chain`);
    } else {
      diff(`payout ${p.id} (${p.kind}) is still ${p.state}: the books are not settled`);
    }
  }

  // ---- every successful transaction the solver paid for is a payout's
  const ours = new Set<string>(txs.map((t) => t.hash));
  const sigs: ConfirmedSignatureInfo[] = [];
  for (let before: string | undefined; ; ) {
    const page = await conn.getSignaturesForAddress(solver, { before, limit: PAGE }, 'confirmed');
    sigs.push(...page);
    if (page.length < PAGE) break;
    before = page.at(-1)!.signature;
  }
  let events = 0;
  for (const s of sigs) {
    if (s.err !== null || ours.has(s.signature)) continue;
    const t = await txOf(s.signature);
    const payer = t?.transaction.message.getAccountKeys().get(0);
    if (payer?.equals(solver)) diff(`solver transaction ${s.signature} is not in the ledger`);
  }

  // ---- every ledger deposit is a successful transaction on chain
  const deposits = ledger.db.prepare(`SELECT id, tx_hash FROM deposits WHERE chain_id = ? AND state != 'reorged'`).all(chain.id) as { id: string; tx_hash: string }[];
  for (const d of deposits) {
    events++;
    if (!(await succeeded(d.tx_hash))) diff(`ledger deposit ${d.id} has no successful transaction on chain`);
  }
  const slots = sigs.map((s) => s.slot);
  return { chainId: chain.id, fromBlock: slots.length ? Math.min(...slots) : 0, toBlock: slots.length ? Math.max(...slots) : 0, currencies: [], writtenOff: [], differences };
}
