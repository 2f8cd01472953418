// relay-node audit (issue 12, item 4): after real money flows on a devnet the books reconcile with
// the chains to the smallest unit; a ledger that says something the chain does not is named.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, erc20Abi, zeroAddress, type Address, type Hex } from 'viem';
import { api, executeSteps, startStack, until, waitForStatus, type Stack, nativeBridge } from '../helpers/stack.ts';
import { auditCli, auditStack } from '../helpers/audit.ts';

let s: Stack;
beforeAll(async () => {
  s = await startStack();
}, 90_000);
afterAll(async () => {
  await s?.stop();
});

const A = 8453;
const B = 10;
const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;
const account = (i: number) => s.devnet.accounts[i]!;
const marker = (credited: Address) => `012345abcdef${credited.slice(2).toLowerCase()}012345abcdef`;

const cli = (args: string[]) => auditCli(s, args);

const metric = async (name: string) => {
  const text = await s.node.metrics.registry.metrics();
  return Number(new RegExp(`^${name} (-?[\\d.e+]+)$`, 'm').exec(text)?.[1]);
};

describe('relay-node audit', () => {
  it('reconciles fills (native and ERC-20), a refund, a gas top-up and an app balance credit to the smallest unit', async () => {
    expect(await metric('relay_audit_differences')).toBe(-1);
    // An app balance credit.
    const w = s.wallet(1, A);
    const data = `${encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [s.devnet.solver, 7_000_000n] })}${marker(account(1).address)}` as Hex;
    const funding = await w.sendTransaction({ account: w.account!, chain: w.chain, to: usdc(A), data });
    await s.publicClient(A).waitForTransactionReceipt({ hash: funding });
    await until(() => (s.node.ledger.balances.get(`credit:${A}:${funding}`) ? true : undefined), 'the credit');
    // A native fill A→B, an ERC-20 fill B→A with a gas top-up, and a refund (a native fill to a
    // recipient that rejects ETH reverts: the deposit is refunded on A).
    const quotes = [
      {
        user: account(2).address,
        originChainId: A,
        destinationChainId: B,
        originCurrency: zeroAddress,
        destinationCurrency: zeroAddress,
        amount: '10000000000000000',
        tradeType: 'EXACT_INPUT',
      },
      {
        user: account(3).address,
        originChainId: B,
        destinationChainId: A,
        originCurrency: usdc(B),
        destinationCurrency: usdc(A),
        amount: '20000000',
        tradeType: 'EXACT_INPUT',
        topupGas: true,
        topupGasAmount: '1000000',
      },
      nativeBridge(account(2).address, usdc(B), A, B, '10000000000000000'),
    ];
    const ids: Hex[] = [];
    for (const [i, body] of quotes.entries()) {
      const q = await api(s.url, '/quote', { body });
      expect(q.status).toBe(200);
      ids.push(q.body.steps.at(-1).requestId);
      await executeSteps(s, q.body, i === 1 ? 3 : 2);
    }
    expect((await waitForStatus(s.url, ids[0]!, ['success', 'failure', 'refund'])).status).toBe('success');
    expect((await waitForStatus(s.url, ids[1]!, ['success', 'failure', 'refund'])).status).toBe('success');
    expect((await waitForStatus(s.url, ids[2]!, ['refund'], 60_000)).status).toBe('refund');

    const r = await auditStack(s);
    expect(r.differences).toEqual([]);
    const usdcA = r.chains.find((c) => c.chainId === A)!.currencies.find((c) => c.symbol === 'USDC')!;
    expect(usdcA.funding).toBe(7_000_000n);
    expect(usdcA.solver.actual).toBe(usdcA.solver.expected);
    expect(r.chains.find((c) => c.chainId === B)!.currencies.find((c) => c.symbol === 'USDC')!.deposits).toBe(20_000_000n);

    // The CLI says the same, exits 0, and the node's metrics show the run.
    const out = await cli(['audit']);
    expect(out.out).toMatch(/no differences/);
    expect(out.code).toBe(0);
    expect(await metric('relay_audit_differences')).toBe(0);
    expect(await metric('relay_audit_last_run_timestamp')).toBeGreaterThan(0);
  });

  it('names what the chain does not prove: a credit with no transfer, a fill booked for more than it paid', async () => {
    const ledger = s.node.ledger;
    // A credit booked with no evidence, and a paid fill whose booked amount is one unit more than the chain paid.
    ledger.tx(() => ledger.balances.post({ wallet: account(4).address, kind: 'credit', amount: 1_000_000n, request_id: null, ref: 'credit:forged' }));
    const paid = ledger.db.prepare(`SELECT id FROM payouts WHERE kind = 'fill' AND state = 'success' LIMIT 1`).get() as { id: string };
    const { amount } = ledger.db.prepare('SELECT amount FROM payouts WHERE id = ?').get(paid.id) as { amount: string };
    ledger.db.prepare('UPDATE payouts SET amount = ? WHERE id = ?').run((BigInt(amount) + 1n).toString(), paid.id);
    const out = await cli(['audit']);
    expect(out.code).toBe(1);
    expect(out.out).toMatch(/balance entry credit:forged credits 1000000 micro-USD to 0x\w+ with no on-chain evidence/);
    expect(out.out).toMatch(/solver (ETH|USDC): the chain holds \d+, the books explain \d+ .*unexplained 1\b/);
    expect(await metric('relay_audit_differences')).toBeGreaterThanOrEqual(2);
  });
});
