// Seeded load: users bridging on the devnet, both directions between 8453 and 10, native and the
// stablecoin; a share of them deliberately short-pays its order or deposits to no order, so it must
// be refunded. Each order: quote over HTTP -> deposit from a funded devnet account, straight to anvil
// (never through the fault proxy) -> POST /transactions/index. Every deposit confirmed on chain is
// recorded, for the invariants.
import {
  createPublicClient,
  createWalletClient,
  encodeFunctionData,
  erc20Abi,
  http,
  keccak256,
  toHex,
  zeroAddress,
  type Address,
  type Hex,
  type PublicClient,
  type WalletClient,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { RelayDepositoryAbi } from '../../contracts-abi/index.ts';
import { EXCHANGE_PERPS_USD, SVM_NATIVE } from '../../src/chains/address.ts';
import { depositFromExchange, depositFromSvm, OTHER_CHAINS } from './otherKinds.ts';
import { devnetChain } from '../../src/devnet/deploy.ts';
import type { Devnet } from '../../src/devnet/devnet.ts';
import type { Rng } from './prng.ts';

export type OrderKind = 'normal' | 'short' | 'orphan';
// Which chain kinds an order joins: EVM to EVM, or to / from the SVM chain or the exchange (1337).
export type Route = 'evm' | 'to-svm' | 'from-svm' | 'to-exchange' | 'from-exchange';

export interface DepositRecord {
  index: number;
  kind: OrderKind;
  route: Route;
  // The outcome a correct node reaches for this deposit.
  expect: 'success' | 'refund';
  originChainId: number;
  destinationChainId: number;
  currency: 'native' | 'usdc';
  account: number;
  // The deposit's transaction: an EVM hash, an SVM signature, or the exchange's ledger update hash.
  txHash: Hex;
  // Its block (EVM), slot (SVM) or time (exchange).
  blockNumber: bigint;
  logIndex: number;
  // The order id in the deposit event, and the request whose status tells what became of it.
  orderRef: Hex;
  requestId: Hex;
  amount: bigint;
  quotedAmount?: bigint;
  depositedAt: number;
}

export interface LoadOptions {
  devnet: Devnet;
  // The node's API; read on each call (the node restarts under the load).
  nodeUrl: () => string;
  rng: Rng;
  orders: number;
  // Orders started per second (target).
  rate: number;
  // Test accounts used (1..accounts); each sends one order at a time.
  accounts: number;
  shortShare?: number;
  orphanShare?: number;
  // How long a single HTTP call keeps retrying while the node is down.
  retryMs?: number;
  // The other chain kinds the load also routes orders to and from (the devnet must run them).
  kinds?: ('svm' | 'exchange')[];
  onError?: (what: string, e: unknown) => void;
}

export interface LoadResult {
  deposits: DepositRecord[];
  quoteRetries: number;
  indexCalls: { ok: number; failed: number };
  failedOrders: { index: number; error: string }[];
  durationMs: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// One HTTP call to the node, retried while the node is restarting (connection refused) or answers
// 5xx; a 4xx is returned to the caller.
export async function nodeCall(
  url: () => string,
  path: string,
  body: unknown,
  retryMs: number,
  counters?: { retries: number },
): Promise<{ status: number; body: any }> {
  const end = Date.now() + retryMs;
  let last = '';
  for (;;) {
    try {
      const res = await fetch(url() + path, {
        method: body === undefined ? 'GET' : 'POST',
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(15_000),
      });
      const text = await res.text();
      let parsed: any = text;
      try {
        parsed = JSON.parse(text);
      } catch {}
      if (res.status < 500) return { status: res.status, body: parsed };
      last = `${res.status} ${text.slice(0, 200)}`;
    } catch (e) {
      last = (e as Error).message;
    }
    if (Date.now() > end) throw new Error(`${path}: no answer within ${retryMs} ms (${last})`);
    if (counters) counters.retries++;
    await sleep(100);
  }
}

export function depositRequestId(chainId: number, txHash: Hex, logIndex: number): Hex {
  return keccak256(toHex(`deposit:${chainId}:${txHash}:${logIndex}`));
}

export async function runLoad(o: LoadOptions): Promise<LoadResult> {
  const started = Date.now();
  const retryMs = o.retryMs ?? 60_000;
  const counters = { retries: 0 };
  const indexCalls = { ok: 0, failed: 0 };
  const deposits: DepositRecord[] = [];
  const failedOrders: { index: number; error: string }[] = [];
  const chainOf = (id: number) => o.devnet.chains.find((c) => c.id === id)!;
  const pubs = new Map<number, PublicClient>();
  const pub = (id: number) => {
    let c = pubs.get(id);
    if (!c) {
      const ch = chainOf(id);
      c = createPublicClient({ chain: devnetChain(id, ch.rpcUrl), transport: http(ch.rpcUrl), pollingInterval: 50 }) as PublicClient;
      pubs.set(id, c);
    }
    return c;
  };
  const wallets = new Map<string, WalletClient>();
  const wallet = (account: number, id: number) => {
    const k = `${account}:${id}`;
    let w = wallets.get(k);
    if (!w) {
      const ch = chainOf(id);
      w = createWalletClient({
        account: privateKeyToAccount(o.devnet.accounts[account]!.privateKey),
        chain: devnetChain(id, ch.rpcUrl),
        transport: http(ch.rpcUrl),
      });
      wallets.set(k, w);
    }
    return w;
  };
  const send = async (account: number, chainId: number, to: Address, data: Hex, value: bigint) => {
    const w = wallet(account, chainId);
    const hash = await w.sendTransaction({ account: w.account!, chain: w.chain, to, data, value });
    const receipt = await pub(chainId).waitForTransactionReceipt({ hash, timeout: 60_000 });
    if (receipt.status !== 'success') throw new Error(`tx ${hash} reverted`);
    return receipt;
  };

  // The plan is drawn up front from the seed, so the same seed gives the same orders whatever the
  // timing of the run.
  const plan = Array.from({ length: o.orders }, (_, index) => {
    const r = o.rng;
    const forward = r.chance(0.5);
    const u = r.next();
    let kind: OrderKind = u < (o.orphanShare ?? 0.1) ? 'orphan' : u < (o.orphanShare ?? 0.1) + (o.shortShare ?? 0.1) ? 'short' : 'normal';
    let currency: 'native' | 'usdc' = r.chance(0.5) ? 'native' : 'usdc';
    let amount = currency === 'native' ? BigInt(r.int(10, 100)) * 10n ** 15n : BigInt(r.int(10, 100)) * 10n ** 6n;
    // Drawn only when the other kinds run, so an EVM-only seed keeps its plan.
    let route: Route = 'evm';
    if (o.kinds?.length) {
      const v = r.next();
      const svm = o.kinds.includes('svm');
      const ex = o.kinds.includes('exchange');
      route = svm && v < 0.15 ? 'to-svm' : svm && v < 0.3 ? 'from-svm' : ex && v < 0.4 ? 'to-exchange' : ex && v < 0.5 ? 'from-exchange' : 'evm';
      // The first orders take each route once, paid in full, so that even a short run has all of them.
      const every = [...(svm ? ['to-svm', 'from-svm'] : []), ...(ex ? ['to-exchange', 'from-exchange'] : [])] as Route[];
      if (index < every.length) {
        route = every[index]!;
        kind = 'normal';
      }
      // Orphans (a deposit to no order) stay on the EVM chains; from SVM and the exchange, the amounts
      // are in their own units (lamports, SPL units, micro-USD).
      if (route === 'from-svm' || route === 'from-exchange') {
        if (kind === 'orphan') kind = 'normal';
        if (route === 'from-exchange') currency = 'usdc';
        amount = currency === 'native' ? BigInt(r.int(10, 100)) * 10n ** 7n : BigInt(r.int(10, 100)) * 10n ** 6n;
        // From 3 USDC: a short one (half) still pays its refund, which bears the action and the exchange's 1 USDC
        // activation fee (248323e); a 1 USDC half of 2 was rightly left unrefunded (AMOUNT_TOO_LOW_TO_REFUND).
        if (route === 'from-exchange') amount = BigInt(r.int(3, 20)) * 10n ** 6n;
      }
      if (route === 'to-exchange' && currency === 'native') {
        currency = 'usdc';
        amount = BigInt(r.int(10, 100)) * 10n ** 6n;
      }
    }
    return {
      index,
      kind,
      route,
      currency,
      amount,
      originChainId: route === 'from-svm' ? OTHER_CHAINS.svm : route === 'from-exchange' ? OTHER_CHAINS.exchange : forward ? 8453 : 10,
      destinationChainId: route === 'to-svm' ? OTHER_CHAINS.svm : route === 'to-exchange' ? OTHER_CHAINS.exchange : forward ? 10 : 8453,
      account: 1 + (index % o.accounts),
      at: started + (index * 1000) / o.rate,
      salt: r.int(0, 2 ** 31),
    };
  });

  const one = async (p: (typeof plan)[number]): Promise<void> => {
    if (p.route === 'from-svm' || p.route === 'from-exchange') {
      const d = await (p.route === 'from-svm' ? depositFromSvm : depositFromExchange)(o, p, retryMs, counters);
      deposits.push({
        ...d,
        index: p.index,
        kind: p.kind,
        route: p.route,
        expect: p.kind === 'normal' ? 'success' : 'refund',
        originChainId: p.originChainId,
        destinationChainId: p.destinationChainId,
        currency: p.currency,
        account: p.account,
        depositedAt: Date.now(),
      });
      try {
        const r = await nodeCall(o.nodeUrl, '/transactions/index', { txHash: d.txHash, chainId: p.originChainId }, Math.min(retryMs, 10_000));
        if (r.status === 200) indexCalls.ok++;
        else indexCalls.failed++;
      } catch {
        indexCalls.failed++;
      }
      return;
    }
    const origin = chainOf(p.originChainId);
    const user = o.devnet.accounts[p.account]!.address;
    const token = p.currency === 'native' ? zeroAddress : origin.contracts.stablecoin;
    // The destination's currency and recipient: the same account on EVM and the exchange, its SVM keypair on SVM.
    const destCurrency =
      p.route === 'to-svm'
        ? p.currency === 'native'
          ? SVM_NATIVE
          : o.devnet.svm!.mint
        : p.route === 'to-exchange'
          ? EXCHANGE_PERPS_USD
          : p.currency === 'native'
            ? zeroAddress
            : chainOf(p.destinationChainId).contracts.stablecoin;
    const recipient = p.route === 'to-svm' ? o.devnet.svm!.keypair(p.account).publicKey.toBase58() : user;
    let orderRef: Hex;
    let quoted: bigint | undefined;
    let depositAmount = p.amount;
    let quote: any;
    if (p.kind === 'orphan') {
      orderRef = keccak256(toHex(`chaos orphan ${p.index} ${p.salt}`));
    } else {
      const q = await nodeCall(
        o.nodeUrl,
        p.route === 'evm' ? '/quote' : '/quote/v2',
        {
          user,
          ...(p.route === 'evm' ? {} : { recipient }),
          originChainId: p.originChainId,
          destinationChainId: p.destinationChainId,
          originCurrency: token,
          destinationCurrency: destCurrency,
          amount: p.amount.toString(),
          tradeType: 'EXACT_INPUT',
        },
        retryMs,
        counters,
      );
      if (q.status !== 200) throw new Error(`quote ${q.status}: ${JSON.stringify(q.body).slice(0, 300)}`);
      quote = q.body;
      orderRef = quote.steps.at(-1).requestId as Hex;
      quoted = BigInt(quote.details.currencyIn.amount);
      // Short-paid: half of what the order needs; the node must refund it.
      if (p.kind === 'short') depositAmount = quoted / 2n;
      else depositAmount = quoted;
    }

    const depository = origin.contracts.depository;
    let receipt;
    if (p.kind === 'normal') {
      // As a client following the quote's steps does (an approval first for the stablecoin).
      for (const step of quote.steps) {
        for (const item of step.items) {
          const d = item.data;
          receipt = await send(p.account, d.chainId, d.to, d.data, BigInt(d.value));
        }
      }
    } else if (p.currency === 'native') {
      receipt = await send(
        p.account,
        p.originChainId,
        depository,
        encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositNative', args: [user, orderRef] }),
        depositAmount,
      );
    } else {
      await send(p.account, p.originChainId, token, encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [depository, depositAmount] }), 0n);
      receipt = await send(
        p.account,
        p.originChainId,
        depository,
        encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositErc20', args: [user, token, depositAmount, orderRef] }),
        0n,
      );
    }
    const log = receipt!.logs.find((l) => l.address.toLowerCase() === depository.toLowerCase());
    if (!log) throw new Error(`order ${p.index}: no deposit event in ${receipt!.transactionHash}`);
    const txHash = receipt!.transactionHash;
    deposits.push({
      index: p.index,
      kind: p.kind,
      route: p.route,
      expect: p.kind === 'normal' ? 'success' : 'refund',
      originChainId: p.originChainId,
      destinationChainId: p.destinationChainId,
      currency: p.currency,
      account: p.account,
      txHash,
      blockNumber: receipt!.blockNumber,
      logIndex: log.logIndex!,
      orderRef,
      requestId: p.kind === 'orphan' ? depositRequestId(p.originChainId, txHash, log.logIndex!) : orderRef,
      amount: depositAmount,
      quotedAmount: quoted,
      depositedAt: Date.now(),
    });
    // As the SDK does: tell the node at once. Best effort: the indexer finds it anyway.
    try {
      const r = await nodeCall(o.nodeUrl, '/transactions/index', { txHash, chainId: p.originChainId }, Math.min(retryMs, 10_000));
      if (r.status === 200) indexCalls.ok++;
      else indexCalls.failed++;
    } catch {
      indexCalls.failed++;
    }
  };

  // One worker per account (an account's transactions go in nonce order), each taking the next
  // order of its own whose start time has come.
  const byAccount = new Map<number, typeof plan>();
  for (const p of plan) byAccount.set(p.account, [...(byAccount.get(p.account) ?? []), p]);
  await Promise.all(
    [...byAccount.values()].map(async (mine) => {
      for (const p of mine) {
        const wait = p.at - Date.now();
        if (wait > 0) await sleep(wait);
        try {
          await one(p);
        } catch (e) {
          failedOrders.push({ index: p.index, error: (e as Error).message.slice(0, 300) });
          o.onError?.(`order ${p.index}`, e);
        }
      }
    }),
  );
  deposits.sort((a, b) => a.index - b.index);
  return { deposits, quoteRetries: counters.retries, indexCalls, failedOrders, durationMs: Date.now() - started };
}
