// A provider's fault never looks like "the solver has no money" (issue 16: in the chaos run of seed
// 2, a quote to SVM USDC was refused SOLVER_CAPACITY_EXCEEDED although the solver held 1,000,000
// there: the inventory read through the faulty SVM RPC failed and was taken for an empty account).
// The node speaks to the devnet's SVM RPC through two providers, each the chaos harness's SVM proxy
// (test/chaos/kindProxies.ts), off until a test turns its faults on: the preferred one (weight 1000)
// answers every call with a JSON-RPC internal error (-32603, as the chaos run injects), the other
// is healthy until the last test. A quote must then read the solver's balance from the healthy
// provider, or answer a retryable 503 CHAIN_UNAVAILABLE when no provider can: never a 400
// capacity refusal, never a 500. The same holds on an EVM chain whose only provider fails the
// balance read (the EVM pool already classified such answers as the provider's failure).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Connection, PublicKey } from '@solana/web3.js';
import { getAssociatedTokenAddressSync, TOKEN_PROGRAM_ID } from '@solana/spl-token';
import type { SvmAdapter } from '../src/chains/svm/adapter.ts';
import { isChainUnavailable } from '../src/chains/unavailable.ts';
import { SvmRpcPool, svmConnection } from '../src/chains/svm/rpcPool.ts';
import { SvmProxy } from './chaos/kindProxies.ts';
import { RpcProxy } from './chaos/proxy.ts';
import { Rng } from './chaos/prng.ts';
import { api, startStack, type Stack } from './helpers/stack.ts';

const SVM = 792703809;
const A = 8453;
const B = 10;
let s: Stack;
// Chain B's only RPC provider: the chaos harness's EVM proxy, transparent until a test blocks a method.
let evm: RpcProxy;
let conn: Connection;
let faulty: SvmProxy;
let second: SvmProxy;

beforeAll(async () => {
  s = await startStack({
    svm: true,
    chains: async (_devnet, chains) =>
      Promise.all(
        (chains as { id: number; rpcUrl: string; kind?: string }[]).map(async (c) => {
          if (c.id === B) {
            evm = new RpcProxy({ target: c.rpcUrl, rng: new Rng(18) });
            return { ...c, rpcUrl: await evm.start(), rpc: undefined };
          }
          if (c.kind !== 'svm') return c;
          faulty = new SvmProxy({ target: c.rpcUrl, rng: new Rng(16), rates: { rpcError: 1 } });
          second = new SvmProxy({ target: c.rpcUrl, rng: new Rng(17), rates: { rpcError: 1 } });
          await Promise.all([faulty.start(), second.start()]);
          faulty.setEnabled(false);
          second.setEnabled(false);
          return {
            ...c,
            rpcUrl: faulty.url,
            rpc: [
              { url: faulty.url, name: 'faulty', weight: 1000 },
              { url: second.url, name: 'second' },
            ],
          };
        }),
      ),
  });
  conn = new Connection(s.devnet.svm!.rpcUrl, 'confirmed');
}, 120_000);
afterAll(async () => {
  await s?.stop();
  await Promise.all([faulty?.stop(), second?.stop(), evm?.stop()]);
});

// A quote from chain A's USDC to the SVM chain's USDC, to a recipient that holds a token account.
const quoteToSvmUsdc = () =>
  api(s.url, '/quote/v2', {
    body: {
      user: s.devnet.accounts[1]!.address,
      recipient: s.devnet.svm!.keypair(2).publicKey.toBase58(),
      originChainId: A,
      destinationChainId: SVM,
      originCurrency: s.devnet.chains.find((c) => c.id === A)!.contracts.stablecoin,
      destinationCurrency: s.devnet.svm!.mint,
      tradeType: 'EXACT_INPUT',
      amount: '30000000',
    },
  });

// What the solver holds of the SVM USDC, read from the devnet's RPC directly.
async function solverUsdc(): Promise<bigint> {
  const solver = new PublicKey((s.node.adapters.get(SVM) as SvmAdapter).solver);
  const ata = getAssociatedTokenAddressSync(new PublicKey(s.devnet.svm!.mint), solver, true, TOKEN_PROGRAM_ID);
  return BigInt((await conn.getTokenAccountBalance(ata, 'confirmed')).value.amount);
}

describe("an SVM provider's fault is never read as the solver's capacity", () => {
  it('a quote to SVM USDC while the preferred provider answers internal errors reads the balance from the healthy one', async () => {
    const held = await solverUsdc();
    expect(held).toBeGreaterThan(30_000_000n);
    faulty.setEnabled(true);
    try {
      const before = faulty.counts.rpcError;
      const q = await quoteToSvmUsdc();
      expect(q.status, JSON.stringify(q.body)).toBe(200);
      expect(BigInt(q.body.details.currencyOut.amount)).toBeGreaterThan(0n);
      // The faulty provider was asked (and failed) on the way.
      expect(faulty.counts.rpcError).toBeGreaterThan(before);
      // The solver's balance, read through the node's providers, is what the chain holds.
      const adapter = s.node.adapters.get(SVM) as SvmAdapter;
      expect(await adapter.balanceOf(adapter.solver, s.devnet.svm!.mint)).toBe(await solverUsdc());
    } finally {
      faulty.setEnabled(false);
    }
  });

  it('a read that only a faulty provider answers fails as "chain unavailable", never as an answer', async () => {
    faulty.setEnabled(true);
    try {
      const pool = new SvmRpcPool({ chain: { id: SVM, rpcUrl: faulty.url }, maxWaitMs: 300 });
      const c = svmConnection(pool, 'confirmed');
      const solver = new PublicKey((s.node.adapters.get(SVM) as SvmAdapter).solver);
      const err = await c.getAccountInfo(solver, 'confirmed').then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(Error);
      expect(isChainUnavailable(err)).toBe(true);
      // The provider's URL never reaches the error.
      expect((err as Error).message).not.toContain('127.0.0.1');
    } finally {
      faulty.setEnabled(false);
    }
  });

  it('a quote to SVM USDC while no provider can answer is 503 CHAIN_UNAVAILABLE, not a capacity refusal', async () => {
    faulty.setEnabled(true);
    second.setEnabled(true);
    try {
      const q = await quoteToSvmUsdc();
      expect(q.body.errorCode).not.toBe('SOLVER_CAPACITY_EXCEEDED');
      expect([q.status, q.body.errorCode]).toEqual([503, 'CHAIN_UNAVAILABLE']);
    } finally {
      faulty.setEnabled(false);
      second.setEnabled(false);
    }
    // Once the providers recover, the same quote is priced.
    const q = await quoteToSvmUsdc();
    expect(q.status, JSON.stringify(q.body)).toBe(200);
  });

  it('on an EVM chain too, a balance read its provider fails is 503 CHAIN_UNAVAILABLE, never a capacity refusal', async () => {
    const quote = () =>
      api(s.url, '/quote/v2', {
        body: {
          user: s.devnet.accounts[1]!.address,
          originChainId: A,
          destinationChainId: B,
          originCurrency: s.devnet.chains.find((c) => c.id === A)!.contracts.stablecoin,
          destinationCurrency: s.devnet.chains.find((c) => c.id === B)!.contracts.stablecoin,
          tradeType: 'EXACT_INPUT',
          amount: '30000000',
        },
      });
    // The token balance is an eth_call: every one of them answered with an internal error.
    evm.block(['eth_call']);
    try {
      const q = await quote();
      expect(evm.blockedAnswers).toBeGreaterThan(0);
      expect([q.status, q.body.errorCode]).toEqual([503, 'CHAIN_UNAVAILABLE']);
    } finally {
      evm.block([]);
    }
    const q = await quote();
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    // The EVM pool waits up to 30 s for a provider before it gives up.
  }, 120_000);
});
