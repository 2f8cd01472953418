import { SvmRpcPool, svmConnection } from '../chains/svm/rpcPool.ts';
import type { Connection, PublicKey, ConfirmedSignatureInfo, VersionedTransactionResponse } from '@solana/web3.js';
import { SVM_NATIVE } from '../chains/address.ts';
import { auditedAccounts, readBalances } from '../chains/svm/auditOpening.ts';
import type { SvmChainConfig } from '../config/schema.ts';
import type { Ledger } from '../ledger/index.ts';
import type { PayoutRow, TransactionRow } from '../ledger/types.ts';
import { sum, type ChainAudit, type CurrencyAudit } from './evmAudit.ts';

const PAGE = 1000;

// Lamports a successful transaction put into the token accounts it created (their rent-exempt
// reserve): accounts with no lamports before and a token balance after.
function rentOf(tx: VersionedTransactionResponse | null): bigint {
  const meta = tx?.meta;
  if (!meta || meta.err) return 0n;
  const tokenAccounts = new Set((meta.postTokenBalances ?? []).map((b) => b.accountIndex));
  let rent = 0n;
  meta.preBalances.forEach((pre, i) => {
    if (pre === 0 && meta.postBalances[i]! > 0 && tokenAccounts.has(i)) rent += BigInt(meta.postBalances[i]!);
  });
  return rent;
}

/**
 * Reconciles the SVM chain's transactions with the books (same ChainAudit shape as evmAudit):
 * every paid payout has exactly one successful transaction (signature) on chain and a failed one
 * none, the ledger's recorded fee is the chain's, every successful transaction the solver paid for
 * (fee payer) is a payout's in the ledger, and every ledger deposit is a successful transaction on
 * chain. Then the balances: the solver's and the vault's lamports and each configured token
 * against the opening balances (recordSvmOpening) + what the books say moved since, to the smallest
 * unit: vault = opening + deposits − withdrawals; solver = opening + withdrawals − fills − refunds
 * − gas top-ups − transaction fees − rent of the token accounts its payouts created. Each unexplained
 * amount is named in `differences`.
 */
export async function auditSvmChain(
  chain: SvmChainConfig,
  ledger: Ledger,
  solver: PublicKey,
  conn: Connection = svmConnection(new SvmRpcPool({ chain }), 'confirmed'),
): Promise<ChainAudit> {
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
  const payouts = ledger.payouts.ofChain(chain.id);
  const txs = ledger.payouts.txsOfChain(chain.id);
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
      if (!p.tx_hash || !(await succeeded(p.tx_hash)))
        diff(`payout ${p.id} is paid in the ledger but its transaction ${p.tx_hash ?? '(none)'} is not a successful one on chain`);
      if (successes.length > 1 || (successes.length === 1 && successes[0] !== p.tx_hash))
        diff(`payout ${p.id} has ${successes.length} successful transactions of ours (${successes.join(', ')}); exactly one is ${p.tx_hash}`);
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
  for (const s of sigs) {
    if (s.err !== null || ours.has(s.signature)) continue;
    const t = await txOf(s.signature);
    const payer = t?.transaction.message.getAccountKeys().get(0);
    if (payer?.equals(solver)) diff(`solver transaction ${s.signature} is not in the ledger`);
  }

  // ---- every ledger deposit is a successful transaction on chain
  const deposits = ledger.deposits.liveOfChain(chain.id);
  for (const d of deposits) {
    if (!(await succeeded(d.tx_hash))) diff(`ledger deposit ${d.id} has no successful transaction on chain`);
  }
  const slots = sigs.map((s) => s.slot);
  const currencies = await auditBalances(chain, ledger, conn, solver, payouts, txs, txOf, diff);
  if (currencies) return { chainId: chain.id, ...currencies.range, currencies: currencies.out, writtenOff: [], differences };
  return {
    chainId: chain.id,
    fromBlock: slots.length ? Math.min(...slots) : 0,
    toBlock: slots.length ? Math.max(...slots) : 0,
    currencies: [],
    writtenOff: [],
    differences,
  };
}

// The balances, explained by the books from the opening slot to the slot they are read at now.
async function auditBalances(
  chain: SvmChainConfig,
  ledger: Ledger,
  conn: Connection,
  solver: PublicKey,
  payouts: PayoutRow[],
  txs: TransactionRow[],
  txOf: (sig: string) => Promise<VersionedTransactionResponse | null>,
  diff: (s: string) => void,
): Promise<{ out: CurrencyAudit[]; range: { fromBlock: number; toBlock: number } } | undefined> {
  const opening = ledger.audits.svmOpening(chain.id);
  if (!opening.length) {
    diff('no opening balances recorded (the node records them when it first starts on the chain): balances not explained');
    return undefined;
  }
  const from = opening[0]!.slot;
  const list = auditedAccounts(chain, solver);
  const now = await readBalances(conn, list);
  const to = now.slot;
  const inRange = (n: number | null) => n !== null && n > from && n <= to;
  // The ledger's transactions that landed in range: each paid its fee, failed or not.
  const landed = txs.filter((t) => (t.state === 'included' || t.state === 'reverted') && inRange(t.block_number));
  const fees = sum(landed.map((t) => BigInt(t.fee ?? 0)));
  const included = landed.filter((t) => t.state === 'included');
  let rent = 0n;
  for (const t of included) rent += rentOf(await txOf(t.hash));
  const paidBy = new Set(included.map((t) => t.hash as string));
  const paid = payouts.filter((p) => p.state === 'success' && p.tx_hash && paidBy.has(p.tx_hash));
  const deposits = ledger.deposits.amountsInBlocks(chain.id, from, to);
  const balance = (owner: string, currency: string) => {
    const i = list.findIndex((a) => a.owner === owner && a.currency === currency);
    const o = opening.find((x) => x.owner === owner && x.currency === currency);
    return { opening: o ? BigInt(o.amount) : 0n, actual: now.amounts[i]! };
  };
  const out: CurrencyAudit[] = [];
  const all = [{ address: SVM_NATIVE, symbol: chain.nativeCurrency.symbol }, ...chain.currencies.filter((c) => c.address !== SVM_NATIVE)];
  for (const cur of all) {
    const native = cur.address === SVM_NATIVE;
    const amounts = (kinds: string[]) => sum(paid.filter((p) => kinds.includes(p.kind) && p.currency === cur.address).map((p) => BigInt(p.amount)));
    const fills = amounts(['fill']);
    const refunds = amounts(['refund', 'excess']);
    const withdrawn = amounts(['withdrawal']);
    // A token payout's gas top-up rides along as lamports (a SOL payout has none).
    const topups = native ? sum(paid.filter((p) => p.kind === 'fill' && p.currency !== SVM_NATIVE && p.native_topup).map((p) => BigInt(p.native_topup!))) : 0n;
    const gas = native ? fees : 0n;
    const rentHere = native ? rent : 0n;
    const deposited = sum(deposits.filter((d) => d.currency === cur.address).map((d) => BigInt(d.amount)));
    const s = balance('solver', cur.address);
    const v = balance('vault', cur.address);
    const sExpected = s.opening + withdrawn - fills - refunds - topups - gas - rentHere;
    const vExpected = v.opening + deposited - withdrawn;
    if (s.actual !== sExpected)
      diff(
        `solver ${cur.symbol}: the chain holds ${s.actual}, the books explain ${sExpected} (opening ${s.opening} at slot ${from} + withdrawals ${withdrawn} − fills ${fills} − refunds ${refunds} − top-ups ${topups} − fees ${gas} − rent ${rentHere}); unexplained ${s.actual - sExpected}`,
      );
    if (v.actual !== vExpected)
      diff(
        `vault ${cur.symbol}: the chain holds ${v.actual}, the books explain ${vExpected} (opening ${v.opening} at slot ${from} + deposits ${deposited} − withdrawals ${withdrawn}); unexplained ${v.actual - vExpected}`,
      );
    out.push({
      chainId: chain.id,
      currency: cur.address,
      symbol: cur.symbol,
      credits: 0,
      payouts: payouts.filter((p) => p.currency === cur.address).length,
      events: 0,
      deposits: deposited,
      fills: fills + topups,
      refunds,
      claims: 0n,
      funding: 0n,
      gas: gas + rentHere,
      rent: rentHere,
      solver: { opening: s.opening, expected: sExpected, actual: s.actual },
      depository: { opening: v.opening, expected: vExpected, actual: v.actual },
    });
  }
  return { out, range: { fromBlock: from + 1, toBlock: to } };
}
