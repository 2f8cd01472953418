// Attacks on deposit addresses: dust that makes the solver pay sweeps worth less than their gas,
// and the unauthenticated reindex driving sweeps at will, for requests of any age.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { zeroAddress, type Address, type Hex } from 'viem';
import type { ChainAdapter } from '../../src/chains/adapter.ts';
import { GAS } from '../../src/chains/evm/gas.ts';
import { api, depositAddressQuote, payAddress, startStack, waitForStatus, type Stack } from '../helpers/stack.ts';

let s: Stack;
const A = 8453;
const chain = (id: number) => s.devnet.chains.find((c) => c.id === id)!;
const usdc = (id: number) => chain(id).contracts.stablecoin;

beforeAll(async () => {
  s = await startStack();
});
afterAll(async () => {
  await s?.stop();
});

const quote = () => depositAddressQuote(s);

const pay = (to: Address, currency: Address, amount: bigint) => payAddress(s, 1, A, to, currency, amount);

const sweeps = (id: Hex) => s.node.ledger.payouts.forRequest(id).filter((p) => p.kind === 'sweep');

describe('deposit address sweeps', () => {
  it('pays no sweep for dust: three 1-wei transfers, then sweeps and fills the real deposit', async () => {
    const q = await quote();
    expect(q.status).toBe(200);
    const id = q.body.steps.at(-1).requestId as Hex;
    const at = q.body.steps.at(-1).depositAddress as Address;
    const adapter = s.node.adapters.get(A) as ChainAdapter;
    for (let i = 0; i < 3; i++) {
      await pay(at, zeroAddress, 1n);
      // What the watcher does at each block, done now: it must queue nothing.
      await adapter.checkDepositAddress!(id);
      expect(sweeps(id)).toEqual([]);
    }
    await pay(at, usdc(A), 1n);
    await adapter.checkDepositAddress!(id);
    expect(sweeps(id)).toEqual([]);
    // The quoted deposit is worth far more than its sweep: swept and filled.
    await pay(at, usdc(A), 10_000_000n);
    await waitForStatus(s.url, id, ['success']);
    expect(sweeps(id).map((p) => p.currency)).toEqual([usdc(A)]);
    // The threshold is priced at GAS.sweep: a real sweep must not use more.
    const receipt = await s.publicClient(A).getTransactionReceipt({ hash: sweeps(id)[0]!.tx_hash! });
    expect(receipt.gasUsed).toBeLessThanOrEqual(GAS.sweep);
  });
});

describe('POST /deposit-address/reindex', () => {
  it('is rate-limited per deposit address', async () => {
    const q = await quote();
    const at = q.body.steps.at(-1).depositAddress;
    const answers: number[] = [];
    for (let i = 0; i < 5; i++) answers.push((await api(s.url, '/deposit-address/reindex', { body: { depositAddress: at } })).status);
    expect(answers[0]).toBe(200);
    expect(answers).toContain(429);
  });

  it('does not watch requests older than the configured window again', async () => {
    const q = await quote();
    const id = q.body.steps.at(-1).requestId as Hex;
    // Quoted 400 days ago.
    s.node.ledger.db.prepare('UPDATE requests SET created_at = ? WHERE id = ?').run(Date.now() - 400 * 86_400_000, id);
    await pay(q.body.steps.at(-1).depositAddress, usdc(A), 10_000_000n);
    const r = await api(s.url, '/deposit-address/reindex', { body: { requestId: id } });
    expect(r.status).toBe(400);
    expect(r.body.errorCode).toBe('DEPOSIT_ADDRESS_EXPIRED');
    expect(sweeps(id)).toEqual([]);
  });
});

// The hosted body of the same operation: the same guards, the same buckets (one guarded function).
describe('POST /transactions/deposit-address/reindex (hosted alias)', () => {
  const hosted = (depositAddress: string) => api(s.url, '/transactions/deposit-address/reindex', { body: { chainId: A, depositAddress } });

  it('is rate-limited per deposit address', async () => {
    const q = await quote();
    const at = q.body.steps.at(-1).depositAddress;
    const answers: number[] = [];
    for (let i = 0; i < 5; i++) answers.push((await hosted(at)).status);
    expect(answers[0]).toBe(200);
    expect(answers).toContain(429);
  });

  it('shares the per-address bucket with the node path: the alias is no second budget', async () => {
    const q = await quote();
    const at = q.body.steps.at(-1).depositAddress;
    const { reindexPerAddressPerMinute } = s.node.config.depositAddresses;
    for (let i = 0; i < reindexPerAddressPerMinute; i++)
      expect((await api(s.url, '/deposit-address/reindex', { body: { depositAddress: at } })).status).toBe(200);
    const r = await hosted(at);
    expect([r.status, r.body.errorCode]).toEqual([429, 'RATE_LIMITED']);
  });

  it('does not watch requests older than the configured window again', async () => {
    const q = await quote();
    const id = q.body.steps.at(-1).requestId as Hex;
    s.node.ledger.db.prepare('UPDATE requests SET created_at = ? WHERE id = ?').run(Date.now() - 400 * 86_400_000, id);
    await pay(q.body.steps.at(-1).depositAddress, usdc(A), 10_000_000n);
    const r = await hosted(q.body.steps.at(-1).depositAddress);
    expect([r.status, r.body.errorCode]).toEqual([400, 'DEPOSIT_ADDRESS_EXPIRED']);
    expect(sweeps(id)).toEqual([]);
  });
});
