// The end conditions of a chaos run, read from the chains themselves (events, receipts, balances),
// with the ledger consulted only to be compared against them:
//  1. every confirmed deposit's request reaches `success` or `refund` (status API, polled with a bound);
//  2. no order id has two OrderFilled events on any filler; no deposit is both filled and refunded;
//     a short-paid or orphan deposit is never filled;
//  3. the ledger's payouts and the chain's events match 1:1 (every successful payout has exactly one
//     included transaction, whose receipt carries its event and amount; every fill and refund event
//     on chain is a payout of the ledger; no payout the ledger calls failed was paid on chain);
//  4. the solver's and the depositories' balances moved by exactly deposits - fills - refunds - gas;
//  5. relay-node audit (src/audit) finds no difference between the run's ledger and the chains.
import { decodeFunctionData, erc20Abi, parseEventLogs, zeroAddress, type Address, type Hex, type PublicClient, type TransactionReceipt } from 'viem';
import { OrderFillerAbi, RelayDepositoryAbi } from '../../contracts-abi/index.ts';
import type { Devnet } from '../../src/devnet/devnet.ts';
import { Ledger } from '../../src/ledger/index.ts';
import { formatAudit, runAudit } from '../../src/audit/audit.ts';
import { buildConfigWithKeys } from '../../src/config/load.ts';
import type { PayoutRow, TransactionRow } from '../../src/ledger/types.ts';
import type { DepositRecord } from './load.ts';
import { scanOtherKinds, type OtherKindsScan } from './otherInvariants.ts';

export interface Baseline {
  // Per chain: the block the run starts after, and balances at that block.
  chains: Map<number, { block: bigint; solver: { native: bigint; usdc: bigint }; depository: { native: bigint; usdc: bigint } }>;
}

const erc20Balance = (pc: PublicClient, token: Address, who: Address, blockNumber?: bigint) =>
  pc.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [who], blockNumber });

export async function takeBaseline(devnet: Devnet, client: (chainId: number) => PublicClient): Promise<Baseline> {
  const chains: Baseline['chains'] = new Map();
  for (const c of devnet.chains) {
    const pc = client(c.id);
    const block = await pc.getBlockNumber();
    chains.set(c.id, {
      block,
      solver: {
        native: await pc.getBalance({ address: devnet.solver, blockNumber: block }),
        usdc: await erc20Balance(pc, c.contracts.stablecoin, devnet.solver, block),
      },
      depository: {
        native: await pc.getBalance({ address: c.contracts.depository, blockNumber: block }),
        usdc: await erc20Balance(pc, c.contracts.stablecoin, c.contracts.depository, block),
      },
    });
  }
  return { chains };
}

export interface StatusOutcome {
  status: string;
  failReason: string | null;
  refundFailReason: string | null;
  txHashes: string[];
}

// Polls the status of every deposit's request until it is success or refund, or the bound passes.
export async function waitForOutcomes(nodeUrl: () => string, deposits: DepositRecord[], timeoutMs: number): Promise<Map<Hex, StatusOutcome>> {
  const out = new Map<Hex, StatusOutcome>();
  const end = Date.now() + timeoutMs;
  for (;;) {
    const open = deposits.filter((d) => !['success', 'refund'].includes(out.get(d.requestId)?.status ?? ''));
    if (!open.length) return out;
    await Promise.all(
      open.map(async (d) => {
        try {
          const res = await fetch(`${nodeUrl()}/intents/status/v3?requestId=${d.requestId}`, { signal: AbortSignal.timeout(5_000) });
          if (res.status === 200) out.set(d.requestId, (await res.json()) as StatusOutcome);
        } catch {}
      }),
    );
    if (Date.now() > end) return out;
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface FillEvent {
  chainId: number;
  orderId: Hex;
  token: Address;
  amount: bigint;
  recipient: Address;
  txHash: Hex;
}
interface CallEvent {
  chainId: number;
  id: Hex;
  to: Address;
  value: bigint;
  token?: Address;
  tokenAmount?: bigint;
  recipient?: Address;
  txHash: Hex;
}

export interface ChainScan {
  fills: FillEvent[];
  topUps: { chainId: number; orderId: Hex; amount: bigint; txHash: Hex }[];
  calls: CallEvent[];
  deposits: { chainId: number; token: Address; amount: bigint; id: Hex; txHash: Hex }[];
  solverFees: Map<number, bigint>;
  solverTxs: Map<number, number>;
  endBlock: Map<number, bigint>;
}

// Reads, from the baseline's block to the head, every fill, top-up, executed call (refund) and
// deposit event, and the fee of every transaction the solver sent.
export async function scanChains(devnet: Devnet, client: (chainId: number) => PublicClient, base: Baseline): Promise<ChainScan> {
  const scan: ChainScan = { fills: [], topUps: [], calls: [], deposits: [], solverFees: new Map(), solverTxs: new Map(), endBlock: new Map() };
  for (const c of devnet.chains) {
    const pc = client(c.id);
    const from = base.chains.get(c.id)!.block + 1n;
    const to = await pc.getBlockNumber();
    scan.endBlock.set(c.id, to);
    const fillerLogs = await pc.getLogs({ address: c.contracts.filler, fromBlock: from, toBlock: to });
    for (const l of parseEventLogs({ abi: OrderFillerAbi, logs: fillerLogs })) {
      if (l.eventName === 'OrderFilled') {
        scan.fills.push({
          chainId: c.id,
          orderId: l.args.orderId,
          token: l.args.token,
          amount: l.args.amount,
          recipient: l.args.recipient,
          txHash: l.transactionHash,
        });
      } else if (l.eventName === 'GasTopUp') {
        scan.topUps.push({ chainId: c.id, orderId: l.args.orderId, amount: l.args.amount, txHash: l.transactionHash });
      }
    }
    const depLogs = await pc.getLogs({ address: c.contracts.depository, fromBlock: from, toBlock: to });
    for (const l of parseEventLogs({ abi: RelayDepositoryAbi, logs: depLogs })) {
      if (l.eventName === 'RelayNativeDeposit')
        scan.deposits.push({ chainId: c.id, token: zeroAddress, amount: l.args.amount, id: l.args.id, txHash: l.transactionHash });
      else if (l.eventName === 'RelayErc20Deposit')
        scan.deposits.push({ chainId: c.id, token: l.args.token, amount: l.args.amount, id: l.args.id, txHash: l.transactionHash });
      else if (l.eventName === 'RelayCallExecuted') {
        const call = l.args.call;
        const ev: CallEvent = { chainId: c.id, id: l.args.id, to: call.to, value: call.value, txHash: l.transactionHash };
        if (call.data && call.data !== '0x') {
          try {
            const d = decodeFunctionData({ abi: erc20Abi, data: call.data });
            if (d.functionName === 'transfer') {
              ev.token = call.to;
              ev.recipient = d.args[0];
              ev.tokenAmount = d.args[1];
            }
          } catch {}
        } else {
          ev.recipient = call.to;
        }
        scan.calls.push(ev);
      }
    }
    // Every transaction the solver sent: its fee is the only other way its native balance moves.
    let fees = 0n;
    let count = 0;
    for (let n = from; n <= to; n++) {
      const block = await pc.getBlock({ blockNumber: n, includeTransactions: true });
      for (const tx of block.transactions) {
        if (tx.from.toLowerCase() !== devnet.solver.toLowerCase()) continue;
        const r = await pc.getTransactionReceipt({ hash: tx.hash });
        fees += r.gasUsed * r.effectiveGasPrice + ((r as { l1Fee?: bigint }).l1Fee ?? 0n);
        count++;
      }
    }
    scan.solverFees.set(c.id, fees);
    scan.solverTxs.set(c.id, count);
  }
  return scan;
}

export interface InvariantReport {
  ok: boolean;
  failures: string[];
  figures: {
    deposits: number;
    success: number;
    refund: number;
    notTerminal: number;
    unexpectedRefunds: { index: number; failReason: string | null }[];
    fillsOnChain: number;
    refundsOnChain: number;
    doubleFills: number;
    filledAndRefunded: number;
    solverTxs: number;
    payouts: Record<string, number>;
    failReasons: Record<string, number>;
    // relay-node audit's report over the run's ledger (src/audit).
    audit: string[];
    // The SVM chain and the exchange, read from them: payouts of the solver per request.
    svm?: { fills: number; refunds: number; solverTxs: number };
    exchange?: { fills: number; refunds: number; solverSends: number };
    // Outcomes per route (evm, to-svm, from-svm, to-exchange, from-exchange).
    routes: Record<string, { deposits: number; success: number; refund: number }>;
  };
}

const lc = (s: string) => s.toLowerCase();

// All the end conditions. `outcomes` comes from waitForOutcomes; `ledgerPath` is opened read-only.
export async function checkInvariants(o: {
  devnet: Devnet;
  client: (chainId: number) => PublicClient;
  base: Baseline;
  deposits: DepositRecord[];
  outcomes: Map<Hex, StatusOutcome>;
  ledgerPath: string;
  // A PostgreSQL ledger (its URL) instead of the SQLite file at ledgerPath.
  ledgerUrl?: string;
  // Deposits removed by a reorg before their confirmations: never filled, never refunded.
  vanished?: { chainId: number; txHash: Hex; orderRef: Hex }[];
}): Promise<InvariantReport> {
  const failures: string[] = [];
  const fail = (m: string) => {
    if (failures.length < 200) failures.push(m);
  };
  const scan = await scanChains(o.devnet, o.client, o.base);
  const chain = (id: number) => o.devnet.chains.find((c) => c.id === id)!;
  const evmIds = new Set(o.devnet.chains.map((c) => c.id));
  // The SVM chain's and the exchange's payouts, read from them (each request's solver transfers).
  const others: OtherKindsScan = await scanOtherKinds(o.devnet, { path: o.ledgerPath, url: o.ledgerUrl }, fail);

  // ---- 1. every confirmed deposit ends in success or refund
  let success = 0;
  let refund = 0;
  let notTerminal = 0;
  const unexpectedRefunds: { index: number; failReason: string | null }[] = [];
  const failReasons: Record<string, number> = {};
  const routes: InvariantReport['figures']['routes'] = {};
  for (const d of o.deposits) {
    const s = o.outcomes.get(d.requestId);
    const r = (routes[d.route] ??= { deposits: 0, success: 0, refund: 0 });
    r.deposits++;
    if (s?.status === 'success') r.success++;
    if (s?.status === 'refund') r.refund++;
    if (s?.failReason) failReasons[s.failReason] = (failReasons[s.failReason] ?? 0) + 1;
    if (s?.status === 'success') success++;
    else if (s?.status === 'refund') refund++;
    else {
      notTerminal++;
      fail(
        `deposit ${d.index} (${d.kind}, ${d.txHash} on ${d.originChainId}) ended ${s ? `${s.status} ${s.failReason ?? ''} ${s.refundFailReason ?? ''}` : 'with no status'}`,
      );
      continue;
    }
    if (d.expect === 'refund' && s.status === 'success') fail(`deposit ${d.index} (${d.kind}) should have been refunded but is success`);
    if (d.expect === 'success' && s.status === 'refund') unexpectedRefunds.push({ index: d.index, failReason: s.failReason });
  }

  // ---- 2. at most one fill per order, never both filled and refunded
  const fillsByOrder = new Map<string, FillEvent[]>();
  for (const f of scan.fills) fillsByOrder.set(lc(f.orderId), [...(fillsByOrder.get(lc(f.orderId)) ?? []), f]);
  let doubleFills = 0;
  for (const [id, fs] of fillsByOrder) {
    if (fs.length > 1) {
      doubleFills++;
      fail(`order ${id} has ${fs.length} OrderFilled events: ${fs.map((f) => `${f.chainId}:${f.txHash}`).join(', ')}`);
    }
  }
  // A request's payouts by the solver on the SVM chain or the exchange: one at most (a fill there, or
  // a refund of a deposit made there), never both.
  for (const [id, n] of others.paidPerRequest)
    if (n > 1) {
      doubleFills++;
      fail(`request ${id} was paid ${n} times on ${others.chainOf.get(id)}`);
    }
  // Fills of an order: OrderFilled events on EVM, the solver's transfers on SVM and the exchange.
  const fillsOf = (d: DepositRecord, id: Hex): { chainId: number }[] =>
    evmIds.has(d.destinationChainId)
      ? (fillsByOrder.get(lc(id)) ?? [])
      : Array.from({ length: others.fills.get(lc(id)) ?? 0 }, () => ({ chainId: d.destinationChainId }));
  for (const d of o.deposits) {
    const fills = fillsOf(d, d.requestId);
    if (d.kind !== 'normal' && fillsOf(d, d.orderRef).length) fail(`deposit ${d.index} (${d.kind}) was filled on chain`);
    const s = o.outcomes.get(d.requestId);
    if (s?.status === 'success' && fills.length !== 1) fail(`deposit ${d.index} (${d.route}) is success but has ${fills.length} fills on chain`);
    if (s?.status === 'success' && fills.length === 1 && fills[0]!.chainId !== d.destinationChainId)
      fail(`deposit ${d.index} filled on ${fills[0]!.chainId}, not ${d.destinationChainId}`);
    // A refund of a deposit made on SVM or the exchange is paid there, once.
    if (s?.status === 'refund' && !evmIds.has(d.originChainId) && (others.refunds.get(lc(d.requestId)) ?? 0) !== 1) {
      fail(`deposit ${d.index} (${d.route}) is refund but has ${others.refunds.get(lc(d.requestId)) ?? 0} refunds on ${d.originChainId}`);
    }
  }
  for (const v of o.vanished ?? []) {
    if ((fillsByOrder.get(lc(v.orderRef)) ?? []).length) fail(`reorged-out deposit ${v.txHash} (order ${v.orderRef}) was filled`);
  }

  // ---- 3. the ledger against the chain, 1:1
  const ledger = Ledger.connect({ path: o.ledgerPath, url: o.ledgerUrl }, { readonly: true });
  let auditReport: string[] = [];
  let filledAndRefunded = 0;
  const payoutCounts: Record<string, number> = {};
  try {
    // The EVM chains here; the SVM chain and the exchange in otherInvariants.ts and their audits.
    const payouts = (ledger.db.prepare('SELECT * FROM payouts').all() as PayoutRow[]).filter((p) => evmIds.has(p.chain_id));
    const txs = (ledger.db.prepare('SELECT * FROM transactions').all() as TransactionRow[]).filter((t) => evmIds.has(t.chain_id));
    const txsOf = new Map<string, TransactionRow[]>();
    for (const t of txs) txsOf.set(t.payout_id, [...(txsOf.get(t.payout_id) ?? []), t]);
    // A transaction carries one payout, or several (a batch of fills): one ledger row per payout.
    const payoutsOfTx = new Map<string, PayoutRow[]>();
    const byId = new Map(payouts.map((p) => [p.id, p]));
    for (const t of txs) payoutsOfTx.set(lc(t.hash), [...(payoutsOfTx.get(lc(t.hash)) ?? []), byId.get(t.payout_id)!]);
    const fillsIn = new Map<string, FillEvent[]>();
    for (const f of scan.fills) fillsIn.set(lc(f.txHash), [...(fillsIn.get(lc(f.txHash)) ?? []), f]);
    // Whether a successful transaction paid this payout: for a fill, it emitted the order's OrderFilled
    // (a batch skips an order it cannot pay, which then goes alone).
    const paysIt = (p: PayoutRow, hash: string) => p.kind !== 'fill' || (fillsIn.get(lc(hash)) ?? []).some((f) => lc(f.orderId) === lc(p.request_id ?? ''));
    const receipts = new Map<string, TransactionReceipt | null>();
    const receipt = async (chainId: number, hash: Hex) => {
      const k = `${chainId}:${lc(hash)}`;
      if (!receipts.has(k))
        receipts.set(
          k,
          await o
            .client(chainId)
            .getTransactionReceipt({ hash })
            .catch(() => null),
        );
      return receipts.get(k)!;
    };
    const refundedRequests = new Set<string>();
    for (const p of payouts) {
      payoutCounts[`${p.kind}:${p.state}`] = (payoutCounts[`${p.kind}:${p.state}`] ?? 0) + 1;
      const mine = txsOf.get(p.id) ?? [];
      // Which of the payout's transactions the chain actually executed successfully.
      const executed: TransactionRow[] = [];
      for (const t of mine) {
        const r = await receipt(p.chain_id, t.hash);
        if (r?.status === 'success' && paysIt(p, t.hash)) executed.push(t);
      }
      if (p.state === 'queued' || p.state === 'sent') fail(`payout ${p.id} still ${p.state} at the end`);
      if (p.state === 'success') {
        const included = mine.filter((t) => t.state === 'included' && paysIt(p, t.hash));
        if (included.length !== 1) fail(`payout ${p.id} is success with ${included.length} included transactions in the ledger`);
        if (executed.length !== 1) fail(`payout ${p.id} is success with ${executed.length} successful transactions on chain`);
        if (p.tx_hash && executed[0] && lc(p.tx_hash) !== lc(executed[0].hash)) fail(`payout ${p.id} names ${p.tx_hash} but ${executed[0].hash} was executed`);
        if (p.kind === 'refund' && p.request_id) refundedRequests.add(lc(p.request_id));
        const hash = executed[0]?.hash;
        if (hash && p.kind === 'fill') {
          const ev = (fillsIn.get(lc(hash)) ?? []).filter((f) => lc(f.orderId) === lc(p.request_id!));
          if (ev.length !== 1 || lc(ev[0]!.orderId) !== lc(p.request_id!)) fail(`fill payout ${p.id}: its transaction ${hash} carries ${ev.length} fills`);
          else if (ev[0]!.amount !== BigInt(p.amount) || lc(ev[0]!.recipient) !== lc(p.recipient))
            fail(`fill payout ${p.id}: ledger says ${p.amount} to ${p.recipient}, chain paid ${ev[0]!.amount} to ${ev[0]!.recipient}`);
        }
        if (hash && (p.kind === 'refund' || p.kind === 'excess')) {
          const ev = scan.calls.filter((c) => lc(c.txHash) === lc(hash));
          const paid = ev.reduce((a, c) => a + (c.tokenAmount ?? c.value), 0n);
          if (ev.length !== 1 || paid !== BigInt(p.amount) || lc(ev[0]!.recipient ?? '') !== lc(p.recipient)) {
            fail(`${p.kind} payout ${p.id}: ledger says ${p.amount} to ${p.recipient}, chain executed ${ev.length} calls paying ${paid}`);
          }
        }
      } else if (executed.length && p.kind !== 'deposit' && p.kind !== 'sweep') {
        fail(`payout ${p.id} is ${p.state} in the ledger but ${executed.map((t) => t.hash).join(', ')} succeeded on chain`);
      }
    }
    // Every fill and every executed call on chain is one of the ledger's payouts.
    for (const f of scan.fills) {
      const p = payoutsOfTx.get(lc(f.txHash))?.find((x) => x.kind === 'fill' && lc(x.request_id ?? '') === lc(f.orderId));
      if (!p || p.kind !== 'fill' || lc(p.request_id ?? '') !== lc(f.orderId) || p.state !== 'success') {
        fail(`fill on chain ${f.chainId} of order ${f.orderId} (${f.txHash}) is ${p ? `payout ${p.id} (${p.state})` : 'unknown to the ledger'}`);
      }
      if (refundedRequests.has(lc(f.orderId))) {
        filledAndRefunded++;
        fail(`order ${f.orderId} was filled and refunded`);
      }
    }
    for (const c of scan.calls) {
      const p = payoutsOfTx.get(lc(c.txHash))?.[0];
      if (!p || !['refund', 'excess', 'claim'].includes(p.kind) || p.state !== 'success') {
        fail(`executed call on ${c.chainId} (${c.txHash}) is ${p ? `payout ${p.id} (${p.state})` : 'unknown to the ledger'}`);
      }
    }
    // The ledger's own fee bookkeeping agrees with the receipts.
    for (const t of txs) {
      if (t.state !== 'included' || !t.fee) continue;
      const r = await receipt(t.chain_id, t.hash);
      if (r && BigInt(t.fee) !== r.gasUsed * r.effectiveGasPrice)
        fail(`transaction ${t.hash}: ledger fee ${t.fee}, receipt ${r.gasUsed * r.effectiveGasPrice}`);
    }
    // ---- 5. relay-node audit over the same ledger: it must find what the checks above find
    // Every chain of the devnet: EVM, the exchange (exchangeAudit) and SVM (svmAudit), read directly
    // (not through the fault proxies).
    const base = o.devnet.nodeConfig({ port: 0, logLevel: 'warn' });
    const config = buildConfigWithKeys(base, o.devnet.keys);
    const audit = await runAudit(config, ledger, new Map(o.devnet.chains.map((c) => [c.id, o.client(c.id)])));
    auditReport = formatAudit(audit).split('\n');
    for (const d of audit.differences) fail(`audit: ${d}`);
    for (const n of audit.notCovered) fail(`audit: chain ${n.chainId} (${n.kind}) not reconciled`);
  } finally {
    ledger.close();
  }

  // ---- 4. balances: what moved is exactly what the events say
  for (const c of o.devnet.chains) {
    const pc = o.client(c.id);
    const b = o.base.chains.get(c.id)!;
    const end = scan.endBlock.get(c.id)!;
    const usdc = lc(c.contracts.stablecoin);
    const fills = scan.fills.filter((f) => f.chainId === c.id);
    const nativeFills = fills.filter((f) => f.token === zeroAddress).reduce((a, f) => a + f.amount, 0n);
    const usdcFills = fills.filter((f) => lc(f.token) === usdc).reduce((a, f) => a + f.amount, 0n);
    const topUps = scan.topUps.filter((t) => t.chainId === c.id).reduce((a, t) => a + t.amount, 0n);
    const otherFills = fills.filter((f) => f.token !== zeroAddress && lc(f.token) !== usdc);
    if (otherFills.length) fail(`chain ${c.id}: ${otherFills.length} fills in a currency the load never used`);
    const solverNative = await pc.getBalance({ address: o.devnet.solver, blockNumber: end });
    const solverUsdc = await erc20Balance(pc, c.contracts.stablecoin, o.devnet.solver, end);
    const expectNative = b.solver.native - nativeFills - topUps - scan.solverFees.get(c.id)!;
    if (solverNative !== expectNative)
      fail(`chain ${c.id}: solver holds ${solverNative} wei, start - fills - top-ups - gas = ${expectNative} (off by ${solverNative - expectNative})`);
    if (solverUsdc !== b.solver.usdc - usdcFills) fail(`chain ${c.id}: solver holds ${solverUsdc} USDC units, start - fills = ${b.solver.usdc - usdcFills}`);

    const deps = scan.deposits.filter((d) => d.chainId === c.id);
    const calls = scan.calls.filter((x) => x.chainId === c.id);
    const inNative = deps.filter((d) => d.token === zeroAddress).reduce((a, d) => a + d.amount, 0n);
    const inUsdc = deps.filter((d) => lc(d.token) === usdc).reduce((a, d) => a + d.amount, 0n);
    const outNative = calls.reduce((a, x) => a + x.value, 0n);
    const outUsdc = calls.filter((x) => x.token && lc(x.token) === usdc).reduce((a, x) => a + x.tokenAmount!, 0n);
    const depNative = await pc.getBalance({ address: c.contracts.depository, blockNumber: end });
    const depUsdc = await erc20Balance(pc, c.contracts.stablecoin, c.contracts.depository, end);
    if (depNative !== b.depository.native + inNative - outNative)
      fail(`chain ${c.id}: depository holds ${depNative} wei, start + deposits - refunds = ${b.depository.native + inNative - outNative}`);
    if (depUsdc !== b.depository.usdc + inUsdc - outUsdc)
      fail(`chain ${c.id}: depository holds ${depUsdc} USDC units, start + deposits - refunds = ${b.depository.usdc + inUsdc - outUsdc}`);
    // Every deposit the load confirmed is on chain, as the load recorded it.
    for (const d of o.deposits.filter((x) => x.originChainId === c.id)) {
      if (!deps.some((e) => lc(e.txHash) === lc(d.txHash) && lc(e.id) === lc(d.orderRef) && e.amount === d.amount))
        fail(`deposit ${d.index} (${d.txHash}) is not on chain ${c.id} as recorded`);
    }
  }
  void chain;
  for (const d of o.deposits)
    if (!evmIds.has(d.originChainId) && !others.deposits.has(lc(d.txHash)))
      fail(`deposit ${d.index} (${d.route}, ${d.txHash}) is not a successful deposit on ${d.originChainId}`);

  return {
    ok: failures.length === 0,
    failures,
    figures: {
      deposits: o.deposits.length,
      success,
      refund,
      notTerminal,
      unexpectedRefunds,
      fillsOnChain: scan.fills.length,
      refundsOnChain: scan.calls.length,
      doubleFills,
      filledAndRefunded,
      solverTxs: [...scan.solverTxs.values()].reduce((a, b) => a + b, 0),
      payouts: payoutCounts,
      failReasons,
      audit: auditReport,
      ...(others.svm ? { svm: others.svm } : {}),
      ...(others.exchange ? { exchange: others.exchange } : {}),
      routes,
    },
  };
}
