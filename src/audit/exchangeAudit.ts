import { getAddress, type Address } from 'viem';
import { EXCHANGE_PERPS_USD } from '../chains/address.ts';
import { ExchangeAssets } from '../chains/exchange/assets.ts';
import { ExchangeClient, parseDecimalFloor, type LedgerUpdate, type SendLedgerDelta } from '../chains/exchange/client.ts';
import type { ExchangeChainConfig } from '../config/schema.ts';
import type { Ledger } from '../ledger/index.ts';
import { sum, type ChainAudit, type CurrencyAudit } from './evmAudit.ts';

/**
 * Reconciles the exchange chain's books with what the exchange's own API reports: its ledger of
 * the solver's account (userNonFundingLedgerUpdates) against the ledger's deposits and payouts, both
 * ways, and the solver's balance of each currency against opening + deposits − fills − refunds −
 * fees, to the smallest unit. The exchange keeps no balance history, so the opening balance is the
 * part of today's balance that no transfer in its ledger reports (credited outside sendAsset: the
 * account's funding); every transfer it does report must then be one the books hold. A deposit is
 * matched by its update hash, a payout by the nonce of its signed action. The solver's account is
 * also the deposit address: the depository balance is the solver's (reported as zero).
 */
export async function auditExchangeChain(
  chain: ExchangeChainConfig,
  ledger: Ledger,
  solver: Address,
  client = new ExchangeClient({ url: chain.exchangeUrl, weightPerMinute: chain.weightPerMinute }),
): Promise<ChainAudit> {
  const differences: string[] = [];
  const diff = (s: string) => differences.push(`chain ${chain.id}: ${s}`);
  const assets = new ExchangeAssets(chain, client);
  const updates: LedgerUpdate[] = await client.ledgerUpdates(solver, 0);
  const until = updates.reduce((m, u) => Math.max(m, u.time), 0);

  // ---- the exchange's transfers of the solver's account, each read in the currency it moved
  interface Move {
    hash: string;
    time: number;
    out: boolean;
    nonce: number | undefined;
    currency: string;
    amount: bigint;
    fee: bigint;
    feeCurrency: string | undefined;
    to: string;
  }
  const moves: Move[] = [];
  for (const u of updates) {
    const d = u.delta as SendLedgerDelta;
    if (d?.type !== 'send' && d?.type !== 'spotTransfer' && d?.type !== 'internalTransfer') {
      diff(`exchange ledger update ${u.hash} of type ${String(d?.type)} moves the solver's account in a way the audit does not read`);
      continue;
    }
    const out = getAddress(d.user) === solver;
    const into = getAddress(d.destination) === solver;
    if (out && into) {
      diff(`exchange transfer ${u.hash} from the solver to itself is not in the books`);
      continue;
    }
    // A usdSend (internalTransfer) moves perps USD, its amount in `usdc`.
    const usd = (d.type as string) === 'internalTransfer';
    const amount = usd ? String((d as unknown as { usdc: unknown }).usdc) : d.amount;
    const dex = d.type === 'send' ? (out ? d.sourceDex : d.destinationDex) : usd ? '' : 'spot';
    const asset = await assets.ofTransfer(usd ? 'USDC' : d.token, dex).catch(() => undefined);
    if (!asset) {
      diff(`exchange transfer ${u.hash} moved ${amount} of ${d.token} (dex ${JSON.stringify(dex)}), a token the exchange does not list`);
      continue;
    }
    const fee = out && d.fee && Number(d.fee) !== 0 ? parseDecimalFloor(d.fee, chain.nativeCurrency.decimals) : 0n;
    moves.push({
      hash: u.hash.toLowerCase(),
      time: u.time,
      out,
      nonce: typeof d.nonce === 'number' ? d.nonce : undefined,
      currency: asset.currency,
      amount: parseDecimalFloor(amount, asset.decimals),
      fee,
      feeCurrency: fee ? EXCHANGE_PERPS_USD : undefined,
      to: getAddress(d.destination),
    });
  }

  // ---- deposits: every transfer to the solver is a ledger deposit, and every ledger deposit is one of them
  const deposits = ledger.deposits.liveOfChain(chain.id);
  const depositOf = new Map(deposits.map((d) => [d.tx_hash.toLowerCase(), d]));
  const ins = moves.filter((m) => !m.out);
  for (const m of ins) {
    const d = depositOf.get(m.hash);
    if (!d) diff(`exchange transfer ${m.hash} of ${m.amount} ${m.currency} to the solver is not a ledger deposit`);
    else if (d.currency !== m.currency || BigInt(d.amount) !== m.amount)
      diff(`ledger deposit ${d.id} books ${d.amount} of ${d.currency}; the exchange moved ${m.amount} of ${m.currency}`);
  }
  const inHashes = new Set(ins.map((m) => m.hash));
  for (const d of deposits)
    if (!inHashes.has(d.tx_hash.toLowerCase())) diff(`ledger deposit ${d.id} (${d.amount} of ${d.currency}) is not in the exchange's ledger`);

  // ---- payouts: each paid one is exactly one transfer out (by its action's nonce), a failed one none
  const payouts = ledger.payouts.ofChain(chain.id);
  const txs = ledger.payouts.txsOfChain(chain.id);
  const outsByNonce = new Map<number, Move[]>();
  for (const m of moves) if (m.out && m.nonce !== undefined) outsByNonce.set(m.nonce, [...(outsByNonce.get(m.nonce) ?? []), m]);
  const matched = new Set<Move>();
  for (const p of payouts) {
    const own = txs.filter((t) => t.payout_id === p.id);
    const landed = own.flatMap((t) => (t.nonce === null ? [] : (outsByNonce.get(Number(t.nonce)) ?? []).map((m) => ({ t, m }))));
    for (const { m } of landed) matched.add(m);
    if (p.state === 'success') {
      const mine = landed.filter(({ t }) => t.hash === p.tx_hash);
      if (mine.length !== 1 || landed.length !== 1)
        diff(`payout ${p.id} is paid in the ledger by ${p.tx_hash ?? '(none)'}, but the exchange reports ${landed.length} transfer(s) of its actions`);
      for (const { m } of mine) {
        if (m.currency !== p.currency || m.amount !== BigInt(p.amount) || m.to !== getAddress(p.recipient))
          diff(`payout ${p.id} books ${p.amount} of ${p.currency} to ${p.recipient}; the exchange moved ${m.amount} of ${m.currency} to ${m.to} (${m.hash})`);
      }
    } else if (p.state === 'failed') {
      if (landed.length) diff(`payout ${p.id} failed in the ledger but the exchange applied its action (${landed[0]!.m.hash})`);
    } else {
      diff(`payout ${p.id} (${p.kind}) is still ${p.state}: the books are not settled`);
    }
  }
  for (const m of moves)
    if (m.out && !matched.has(m)) diff(`exchange transfer ${m.hash} of ${m.amount} ${m.currency} out of the solver to ${m.to} is not a ledger payout`);

  // ---- balances per currency: opening (what no transfer reports) + deposits − fills − refunds − fees
  const all = [{ address: EXCHANGE_PERPS_USD, symbol: chain.nativeCurrency.symbol }, ...chain.currencies.filter((c) => c.address !== EXCHANGE_PERPS_USD)];
  const out: CurrencyAudit[] = [];
  const events = moves.length;
  for (const c of all) {
    const asset = await assets.asset(c.address);
    const is = (x: string) => x === asset.currency;
    const actual = await balanceOf(client, solver, asset);
    const reported =
      sum(moves.filter((m) => is(m.currency)).map((m) => (m.out ? -m.amount : m.amount))) -
      sum(moves.filter((m) => m.feeCurrency && is(m.feeCurrency)).map((m) => m.fee));
    const opening = actual - reported;
    const paid = payouts.filter((p) => p.state === 'success' && is(p.currency));
    const fills = sum(paid.filter((p) => p.kind === 'fill').map((p) => BigInt(p.amount)));
    const claims = sum(paid.filter((p) => p.kind === 'claim').map((p) => BigInt(p.amount)));
    const refunds = sum(paid.filter((p) => p.kind !== 'fill' && p.kind !== 'claim').map((p) => BigInt(p.amount)));
    const deposited = sum(deposits.filter((d) => is(d.currency)).map((d) => BigInt(d.amount)));
    // The exchange's fees (none on the devnet) are evidence only its ledger holds: they are the books' gas.
    const fees = sum(moves.filter((m) => m.feeCurrency && is(m.feeCurrency)).map((m) => m.fee));
    const expected = opening + deposited - fills - refunds - claims - fees;
    if (actual !== expected)
      diff(
        `solver ${c.symbol} (${asset.currency}): the exchange holds ${actual}, the books explain ${expected} (opening ${opening} + deposits ${deposited} − fills ${fills} − refunds ${refunds} − claims ${claims} − fees ${fees}); unexplained ${actual - expected}`,
      );
    out.push({
      chainId: chain.id,
      currency: asset.currency,
      symbol: c.symbol,
      credits: 0,
      payouts: payouts.filter((p) => is(p.currency)).length,
      events: 0,
      deposits: deposited,
      fills,
      refunds,
      claims,
      funding: 0n,
      gas: fees,
      solver: { opening, expected, actual },
      depository: { opening: 0n, expected: 0n, actual: 0n },
    });
  }
  if (out[0]) out[0].events = events;
  return { chainId: chain.id, fromBlock: 0, toBlock: until, currencies: out, writtenOff: [], differences };
}

// The solver's total (held included: a hold is the solver's money) of one asset, in its smallest unit.
async function balanceOf(client: ExchangeClient, solver: Address, asset: Awaited<ReturnType<ExchangeAssets['asset']>>): Promise<bigint> {
  if (asset.perps) return client.withdrawable(solver);
  const b = (await client.spotBalances(solver, asset.dex)).find((x) => x.token === asset.tokenIndex);
  return b ? parseDecimalFloor(b.total, asset.decimals) : 0n;
}
