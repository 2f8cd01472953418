import {
  decodeFunctionData,
  erc20Abi,
  getAbiItem,
  getAddress,
  toEventSelector,
  toHex,
  zeroAddress,
  type Address,
  type Hex,
  type PublicClient,
  type TransactionReceipt,
} from 'viem';
import { OrderFillerAbi, RelayDepositoryAbi } from '../../contracts-abi/index.ts';
import { decodeDepositLog, type RpcLog } from '../chains/evm/depositLogs.ts';
import { fundingParts, nodeContracts } from '../chains/evm/fundingWatcher.ts';
import { receiptFee } from '../chains/evm/l1DataFee.ts';
import type { EvmChainConfig } from '../config/schema.ts';
import type { FundingCredit } from '../ledger/funding.ts';
import type { Ledger } from '../ledger/index.ts';
import type { PayoutRow, TransactionRow } from '../ledger/types.ts';

/** The audit of one chain and currency: what was matched, and the balances against the books. */
export interface CurrencyAudit {
  chainId: number;
  currency: string;
  symbol: string;
  credits: number;
  payouts: number;
  events: number;
  deposits: bigint;
  fills: bigint;
  refunds: bigint;
  claims: bigint;
  funding: bigint;
  gas: bigint;
  /** SVM: lamports put into token accounts the solver's payouts created (included in `gas`). */
  rent?: bigint;
  solver: { opening: bigint; expected: bigint; actual: bigint };
  depository: { opening: bigint; expected: bigint; actual: bigint };
}

export interface ChainAudit {
  chainId: number;
  fromBlock: number;
  toBlock: number;
  currencies: CurrencyAudit[];
  /** Deposits a reorg removed after their payout went out (DEPOSIT_REORGED): recorded losses. */
  writtenOff: string[];
  differences: string[];
}

// The block the audit's opening balances are read at: the head when the node first started on the
// chain (written by the EVM adapter), so the devnet's own funding and anything before the node are
// the opening balance, and everything after it must be in the books.
import { AUDIT_OPENING } from '../chains/evm/auditOpening.ts';
export { AUDIT_OPENING };

const FILLED = toEventSelector(getAbiItem({ abi: OrderFillerAbi, name: 'OrderFilled' }));
const SKIPPED = toEventSelector(getAbiItem({ abi: OrderFillerAbi, name: 'FillSkipped' }));
const CALL_EXECUTED = toEventSelector(getAbiItem({ abi: RelayDepositoryAbi, name: 'RelayCallExecuted' }));
const BATCH = 50;

async function inBatches<T, R>(items: T[], fn: (t: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += BATCH) out.push(...(await Promise.all(items.slice(i, i + BATCH).map(fn))));
  return out;
}

/** The sum of amounts (the audits' books). */
export const sum = (xs: bigint[]) => xs.reduce((a, b) => a + b, 0n);

/** What the books say moved the solver's wallet in one currency since the audit's opening block. */
export interface SolverBooks {
  /** In: app balance funding (standing credits) and withdrawals from the depository. */
  funding: bigint;
  withdrawn: bigint;
  /**
   * Out: fills (a fill with calls pays its output as native value; a gas top-up rides as native value), app fee claims,
   * and the value a gasless relay sends with the user's call.
   */
  fills: bigint;
  claims: bigint;
  relayed: bigint;
}

/**
 * The solver wallet's movements in `currency` by the books: `payouts` are the chain's payouts in a
 * state, `credits` its standing (not reversed) funding credits after the opening block. Shared by the
 * audit and the loss breaker, so both explain the wallet the same way.
 */
export function solverBooks(
  payouts: Pick<PayoutRow, 'kind' | 'currency' | 'amount' | 'native_topup' | 'calls'>[],
  credits: FundingCredit[],
  currency: string,
): SolverBooks {
  // Compared lowercased: a checksum per payout would cost more than the rest of the loss breaker's check.
  const cur = currency.toLowerCase();
  const is = (c: string) => c.toLowerCase() === cur;
  const native = cur === zeroAddress;
  const fills =
    sum(payouts.filter((p) => p.kind === 'fill' && (p.calls ? native : is(p.currency))).map((p) => BigInt(p.amount))) +
    (native ? sum(payouts.filter((p) => p.kind === 'fill' && p.native_topup).map((p) => BigInt(p.native_topup!))) : 0n);
  return {
    funding: sum(credits.flatMap((c) => c.parts.filter((p) => is(p.currency)).map((p) => p.amount))),
    withdrawn: sum(payouts.filter((p) => p.kind === 'withdrawal' && is(p.currency)).map((p) => BigInt(p.amount))),
    fills,
    claims: sum(payouts.filter((p) => p.kind === 'claim' && is(p.currency)).map((p) => BigInt(p.amount))),
    relayed: sum(payouts.filter((p) => p.kind === 'relay' && is(p.currency)).map((p) => BigInt(p.amount))),
  };
}

// Whether a receipt carries the filler's FillSkipped for this order: the batch was included, the order not paid.
function skips(r: TransactionReceipt, filler: Address, orderId: string | null): boolean {
  const id = orderId?.toLowerCase();
  return r.logs.some((l) => getAddress(l.address) === filler && l.topics[0] === SKIPPED && l.topics[1]?.toLowerCase() === id);
}

/**
 * Reconciles one EVM chain's books with the chain, from the audit's opening block to the head:
 * every standing app balance credit against its transaction, every payout against exactly one
 * successful transaction, every fill, refund and deposit event against the ledger, and the solver's
 * and the depository's balance of each configured currency against opening + what the books say
 * moved (deposits − fills − refunds − claims + funding − gas), to the smallest unit. Each
 * difference is named in `differences`; none means the books and the chain agree.
 */
export async function auditEvmChain(chain: EvmChainConfig, client: PublicClient, ledger: Ledger, solver: Address): Promise<ChainAudit> {
  const differences: string[] = [];
  const diff = (s: string) => differences.push(`chain ${chain.id}: ${s}`);
  const mark = ledger.funding.scanMark(chain.id, AUDIT_OPENING);
  const head = Number(await client.getBlockNumber({ cacheTime: 0 }));
  const opening = mark?.block_number ?? chain.startBlock - 1;
  if (!mark) diff(`no opening block recorded: reading from the config's startBlock ${chain.startBlock}`);
  const openingTag = { blockNumber: BigInt(opening) };
  const currencies = chain.currencies.map((c) => ({ ...c, address: getAddress(c.address) }));
  const native = { address: zeroAddress as Address, symbol: chain.nativeCurrency.symbol };
  const all = [native, ...currencies.filter((c) => c.address !== zeroAddress)];
  const depository = getAddress(chain.depository);
  const filler = getAddress(chain.filler);

  // ---- the solver's transactions, read from the chain's blocks
  const numbers = Array.from({ length: head - opening }, (_, i) => BigInt(opening + 1 + i));
  const blocks = await inBatches(numbers, (n) => client.getBlock({ blockNumber: n, includeTransactions: true }));
  const solverTxs = blocks.flatMap((b) => b.transactions.filter((t) => getAddress(t.from) === solver));
  const receipts = new Map<string, TransactionReceipt>();
  for (const r of await inBatches(solverTxs, (t) => client.getTransactionReceipt({ hash: t.hash }))) receipts.set(r.transactionHash, r);
  const gas = sum([...receipts.values()].map((r) => receiptFee(r)));

  // ---- payouts: each paid one has exactly one successful transaction; a failed one has none
  const payouts = ledger.payouts.ofChain(chain.id);
  const txs = ledger.payouts.txsOfChain(chain.id);
  const txsOf = new Map<string, TransactionRow[]>();
  for (const t of txs) txsOf.set(t.payout_id, [...(txsOf.get(t.payout_id) ?? []), t]);
  const receiptOf = async (hash: string) => receipts.get(hash) ?? (await client.getTransactionReceipt({ hash: hash as Hex }).catch(() => undefined));
  // A batched fill pays several payouts in one transaction: each hash maps to every payout it paid.
  const paidTx = new Map<string, PayoutRow[]>();
  for (const p of payouts) {
    const own = txsOf.get(p.id) ?? [];
    const successes: string[] = [];
    for (const t of own) {
      const r = await receiptOf(t.hash);
      // A cancel (feeCapPolicy 'cancel') succeeds without paying, and so does a batch that skipped this
      // order (FillSkipped): neither is the payout's transaction.
      if (r?.status === 'success' && !t.cancel && !(p.kind === 'fill' && skips(r, filler, p.request_id))) successes.push(t.hash);
      if (r && t.fee !== null && BigInt(t.fee) !== receiptFee(r))
        diff(`transaction ${t.hash} of payout ${p.id}: the ledger's fee ${t.fee} is not the chain's ${receiptFee(r)}`);
    }
    if (p.state === 'success') {
      const r = p.tx_hash ? await receiptOf(p.tx_hash) : undefined;
      if (!p.tx_hash || r?.status !== 'success')
        diff(`payout ${p.id} is paid in the ledger but its transaction ${p.tx_hash ?? '(none)'} is not a successful one on chain`);
      // Another sender may have landed it (a refund's signed request is anyone's to submit): then none of ours succeeded.
      if (successes.length > 1 || (successes.length === 1 && successes[0] !== p.tx_hash))
        diff(`payout ${p.id} has ${successes.length} successful transactions of ours (${successes.join(', ')}); exactly one is ${p.tx_hash}`);
      if (p.tx_hash) paidTx.set(p.tx_hash, [...(paidTx.get(p.tx_hash) ?? []), p]);
    } else if (p.state === 'failed') {
      if (successes.length) diff(`payout ${p.id} failed in the ledger but its transaction ${successes[0]} succeeded on chain`);
    } else {
      diff(`payout ${p.id} (${p.kind}) is still ${p.state}: the books are not settled`);
    }
  }
  // Every transaction the solver sent is a payout's, or its one-time approval of the filler.
  const ours = new Set(txs.map((t) => t.hash));
  for (const t of solverTxs) {
    if (ours.has(t.hash)) continue;
    let approval = false;
    try {
      const d = decodeFunctionData({ abi: erc20Abi, data: t.input });
      approval = d.functionName === 'approve' && getAddress(d.args[0] as Address) === filler && t.value === 0n;
    } catch {}
    if (!approval) diff(`solver transaction ${t.hash} is not in the ledger`);
  }

  // ---- events on chain, each matched to the ledger
  const logs = async (address: Address) =>
    (await client.request({ method: 'eth_getLogs', params: [{ address, fromBlock: toHex(opening + 1), toBlock: toHex(head) }] })) as unknown as RpcLog[];
  const [fillerLogs, depositoryLogs] = await Promise.all([logs(filler), logs(depository)]);
  let events = 0;
  for (const l of fillerLogs) {
    if (l.topics[0] !== FILLED) continue;
    events++;
    const paid = paidTx.get(l.transactionHash) ?? [];
    if (!paid.some((p) => p.kind === 'fill' && p.request_id?.toLowerCase() === l.topics[1]?.toLowerCase()))
      diff(`OrderFilled ${l.topics[1]} in ${l.transactionHash} matches no paid fill in the ledger`);
  }
  const inRange = ledger.deposits.inBlocks(chain.id, opening, head);
  // A deposit is matched by what it is, not by its log index: one included again at another index
  // after a reorg keeps its ledger id (the indexer relocates it).
  const what = (d: { tx_hash: string; order_ref: string; currency: string; amount: string }) =>
    `${d.tx_hash.toLowerCase()}:${d.order_ref.toLowerCase()}:${getAddress(d.currency)}:${d.amount}`;
  // A deposit a reorg removed after its payout was signed stays handled, with DEPOSIT_REORGED on its
  // request: a loss the books already record (written off), not a deposit the depository holds.
  const writtenOff = new Set<string>();
  const deposits = inRange.filter((d) => (d.fail_reason === 'DEPOSIT_REORGED' ? (writtenOff.add(d.id), false) : true));
  const depositIds = new Set(deposits.map(what));
  const writtenOffWhat = new Set(inRange.filter((d) => writtenOff.has(d.id)).map(what));
  const onChainDeposits = new Set<string>();
  for (const l of depositoryLogs) {
    if (l.topics[0] === CALL_EXECUTED) {
      events++;
      const paid = paidTx.get(l.transactionHash) ?? [];
      if (!paid.some((p) => p.kind === 'refund' || p.kind === 'excess' || p.kind === 'withdrawal'))
        diff(`RelayCallExecuted in ${l.transactionHash} matches no paid refund or withdrawal in the ledger`);
      continue;
    }
    const d = decodeDepositLog(l);
    if (!d) continue;
    events++;
    const id = `${chain.id}:${d.tx_hash}:${d.log_index}`;
    const key = what({ ...d, amount: String(d.amount) });
    onChainDeposits.add(key);
    if (!depositIds.has(key)) diff(`deposit event ${id} (${d.amount} of ${d.currency}) is not in the ledger`);
  }
  for (const d of deposits) if (!onChainDeposits.has(what(d))) diff(`ledger deposit ${d.id} has no event on chain`);
  // A written-off deposit back on chain after all would be counted nowhere: name it.
  for (const k of writtenOffWhat) if (onChainDeposits.has(k)) diff(`deposit ${k} is recorded DEPOSIT_REORGED but is on chain`);

  // ---- app balance credits: each standing one proven by its successful transaction
  const credits = ledger.funding.all().filter((c) => c.chain_id === chain.id && c.block_number > opening);
  const tokens = new Set(currencies.filter((c) => c.address !== zeroAddress).map((c) => c.address as string));
  for (const c of credits) {
    const r = await receiptOf(c.tx_hash);
    if (c.reversed) {
      if (r?.status === 'success' && Number(r.blockNumber) <= head - chain.confirmations + 1) {
        const again = ledger.funding.ofTx(chain.id, c.tx_hash).some((x) => !x.reversed);
        if (!again) diff(`credit ${c.credit_ref} was reversed, but its transaction is on chain and not credited again`);
      }
      continue;
    }
    if (r?.status !== 'success') {
      diff(`credit ${c.credit_ref} (${c.micro} micro-USD to ${c.wallet}) has no successful transaction on chain`);
      continue;
    }
    const tx = await client.getTransaction({ hash: c.tx_hash as Hex });
    const now = fundingParts(tx, r, solver, tokens, nodeContracts(chain));
    const key = (ps: { currency: string; amount: bigint }[]) =>
      ps
        .map((p) => `${getAddress(p.currency)}:${p.amount}`)
        .sort()
        .join(',');
    if (key(now) !== key(c.parts)) diff(`credit ${c.credit_ref}: the ledger booked ${key(c.parts)}, the chain moved ${key(now)}`);
  }

  // ---- balances per currency: opening + what the books say moved = what the chain holds
  const out: CurrencyAudit[] = [];
  const balanceOf = (currency: Address, who: Address, at?: { blockNumber: bigint }) =>
    currency === zeroAddress
      ? client.getBalance({ address: who, ...at })
      : client.readContract({ address: currency, abi: erc20Abi, functionName: 'balanceOf', args: [who], ...at });
  for (const cur of all) {
    const is = (c: string) => getAddress(c) === cur.address;
    const paid = payouts.filter((p) => p.state === 'success');
    // A withdrawal moves depository funds owed to the solver into the solver's wallet.
    const { fills, claims, withdrawn, funding, relayed } = solverBooks(
      paid,
      credits.filter((c) => !c.reversed),
      cur.address,
    );
    const refunds = sum(paid.filter((p) => (p.kind === 'refund' || p.kind === 'excess') && is(p.currency)).map((p) => BigInt(p.amount)));
    const deposited = sum(deposits.filter((d) => is(d.currency)).map((d) => BigInt(d.amount)));
    const gasHere = cur.address === zeroAddress ? gas : 0n;
    const headTag = { blockNumber: BigInt(head) };
    const [sOpen, sNow, dOpen, dNow] = await Promise.all([
      balanceOf(cur.address, solver, openingTag),
      balanceOf(cur.address, solver, headTag),
      balanceOf(cur.address, depository, openingTag),
      balanceOf(cur.address, depository, headTag),
    ]);
    const sExpected = sOpen + funding + withdrawn - fills - claims - relayed - gasHere;
    const dExpected = dOpen + deposited - refunds - withdrawn;
    if (sNow !== sExpected)
      diff(
        `solver ${cur.symbol}: the chain holds ${sNow}, the books explain ${sExpected} (opening ${sOpen} + funding ${funding} + withdrawals ${withdrawn} − fills ${fills} − claims ${claims} − relayed ${relayed} − gas ${gasHere}); unexplained ${sNow - sExpected}`,
      );
    if (dNow !== dExpected)
      diff(
        `depository ${cur.symbol}: the chain holds ${dNow}, the books explain ${dExpected} (opening ${dOpen} + deposits ${deposited} − refunds ${refunds} − withdrawals ${withdrawn}); unexplained ${dNow - dExpected}`,
      );
    // What the depository owes the solver: its running total (inventory, the withdrawal threshold) against the deposits
    // that make it up, less what withdrawals took of deposits a reorg took back; and never more than the chain holds.
    const shortfall = ledger.withdrawals.shortfall(chain.id, cur.address);
    const owedDeposits = sum(ledger.withdrawals.owed(chain.id, cur.address).map((d) => d.owed)) - shortfall;
    const owedTotal = ledger.withdrawals.owedByCurrency(chain.id).get(cur.address.toLowerCase()) ?? 0n;
    if (owedTotal !== owedDeposits)
      diff(`depository ${cur.symbol}: owed to the solver ${owedTotal} by its running total, ${owedDeposits} by its deposits (shortfall ${shortfall})`);
    if (owedDeposits > dNow) diff(`depository ${cur.symbol}: the chain holds ${dNow}, less than the ${owedDeposits} it owes the solver`);
    // Withdrawals took deposits a reorg then took back, more than the depository still owes the solver: its users'
    // deposits are short by the rest until the solver pays it in.
    if (owedDeposits < 0n)
      diff(
        `depository ${cur.symbol}: withdrawals took ${shortfall} of deposits a reorg took back, ${-owedDeposits} more than it owes the solver: its users' deposits are short`,
      );
    out.push({
      chainId: chain.id,
      currency: cur.address,
      symbol: cur.symbol,
      credits: credits.filter((c) => c.parts.some((p) => is(p.currency))).length,
      payouts: payouts.filter((p) => is(p.currency)).length,
      events: 0,
      deposits: deposited,
      fills,
      refunds,
      claims,
      funding,
      gas: gasHere,
      solver: { opening: sOpen, expected: sExpected, actual: sNow },
      depository: { opening: dOpen, expected: dExpected, actual: dNow },
    });
  }
  if (out[0]) out[0].events = events;
  return { chainId: chain.id, fromBlock: opening + 1, toBlock: head, currencies: out, writtenOff: [...writtenOff], differences };
}

/** App balance credit entries with no on-chain evidence recorded (every credit must name its transfer). */
export function unevidencedCredits(ledger: Ledger): string[] {
  const evidenced = new Set(ledger.funding.all().map((c) => c.credit_ref));
  return ledger.balances
    .credits()
    .filter((e) => !evidenced.has(e.ref))
    .map((e) => `balance entry ${e.ref} credits ${e.amount} micro-USD to ${e.wallet} with no on-chain evidence`);
}
