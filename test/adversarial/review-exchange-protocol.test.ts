import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { erc20Abi, hexToString, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { ExchangeClient } from '../../src/chains/exchange/client.ts';
import { NONCE_SET_SIZE } from '../../src/devnet/exchange/standin.ts';
import { startStack, until, type Stack } from '../helpers/stack.ts';
import { heldExchangeFill, setPerps } from '../helpers/exchangeSteps.ts';

// Review of the exchange (chain 1337) against Hyperliquid's real protocol.
//
// Hyperliquid keeps the 100 highest nonces PER SIGNER, and an API wallet (agent) is a signer of its own. An agent the
// solver account approved (an operator's rebalancing bot, a trading tool) can sign `agentSendAsset`, an L1 action that
// moves a token between the account's own balances; the account's ledger shows it as the account's `send`, with the
// agent's nonce and nothing naming the signer. The node's dead-action proof counted every `send` of the solver account
// as a nonce of the solver's own key: 100 agent sends above a held action's nonce made it fail the action as dead though
// the solver key's nonce set still takes it (the fill refunded on its origin chain while the signed action can still
// pay it: paid twice), and one agent send at the held action's nonce made it book the payout paid (the recipient never
// paid).
let s: Stack;
const BASE = 8453;

beforeAll(async () => {
  s = await startStack();
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

const state = () => s.devnet.exchange!.standin.state;
const account = (i: number) => privateKeyToAccount(s.devnet.accounts[i]!.privateKey);
const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;
const usdcBalance = (who: Address) => s.publicClient(BASE).readContract({ address: usdc(BASE), abi: erc20Abi, functionName: 'balanceOf', args: [who] });

// An API wallet the solver account approved moves spot HYPE between the account's own balances, once per nonce given
// (its own nonces: the agent's set, not the solver key's).
function agentSends(nonces: number[]): void {
  const solver = s.devnet.solver;
  const agent = privateKeyToAccount(generatePrivateKey()).address;
  state().approveAgent(solver, agent);
  state().credit(solver, { spot: { token: 'HYPE', amount: '1' } });
  const hype = state().findToken('HYPE')!;
  for (const nonce of nonces) {
    const applied = state().applyAgentSend(agent, {
      destination: solver.toLowerCase(),
      sourceDex: 'spot',
      destinationDex: 'spot',
      token: `${hype.name}:${hype.tokenId}`,
      amount: '0.001',
      nonce,
    });
    expect(typeof applied, String(applied)).toBe('object');
  }
}

// Resolves once the node's confirm pass has read the solver's ledger whole after this call: its read goes back 10 minutes
// before its oldest open action (created at `openedAt`); the deposit source reads from its cursor, the newest update read.
async function confirmReadAfterNow(openedAt: number): Promise<void> {
  const read = ExchangeClient.prototype.ledgerUpdates;
  let done = false;
  ExchangeClient.prototype.ledgerUpdates = async function (this: ExchangeClient, ...args: Parameters<typeof read>) {
    const r = await read.apply(this, args);
    if (args[0] === s.devnet.solver && args[1] <= openedAt - 9 * 60_000) done = true;
    return r;
  };
  try {
    await until(() => (done ? true : undefined), "the node's confirm pass reading the solver's ledger", 30_000);
  } finally {
    ExchangeClient.prototype.ledgerUpdates = read;
  }
}

// The payout's final state, once it has one.
const settled = (payoutId: string) =>
  until(
    () => {
      const p = s.node.ledger.payouts.get(payoutId);
      return p && (p.state === 'success' || p.state === 'failed') ? p.state : undefined;
    },
    `payout ${payoutId} settled`,
    60_000,
  );

describe("an API wallet's sends on the solver account", () => {
  it('do not prove a held exchange fill dead: it is paid once when funds return, not refunded while still applicable', { timeout: 240_000 }, async () => {
    const user = account(1);
    const recipient = privateKeyToAccount(generatePrivateKey()).address;
    state().credit(recipient, { perpsUsd: '1' });
    const userBefore = await usdcBalance(user.address);
    const { payoutId, held, stash } = await heldExchangeFill(s, 1, recipient);
    const recipientBefore = state().perpsUsd(recipient);

    agentSends(Array.from({ length: NONCE_SET_SIZE }, (_, i) => held.nonce + 1 + i));
    // The solver key's own nonce set holds nothing above the held action: the exchange still takes it.
    expect(state().isNonceUsed(s.devnet.solver, held.nonce)).toBe(false);
    setPerps(s, s.devnet.solver, stash);

    // Before the fix: failed as dead (and the 5 USDC refunded on 8453), though the held action still applies.
    expect(await settled(payoutId)).toBe('success');
    expect(state().perpsUsd(recipient)).toBeGreaterThan(recipientBefore);
    expect(await usdcBalance(user.address)).toBeLessThan(userBefore);
    // The action the node recorded is the one applied: posted again it is refused as a used nonce (paid once).
    const again = await new ExchangeClient({ url: s.devnet.exchange!.url })
      .submit(JSON.parse(hexToString(s.node.ledger.payouts.rawOf(held.hash))))
      .catch((e: unknown) => e);
    expect(String((again as Error).message)).toMatch(/nonce/i);
  });

  it("at the held action's own nonce do not book the payout paid: the recipient is paid for real", { timeout: 240_000 }, async () => {
    const recipient = privateKeyToAccount(generatePrivateKey()).address;
    state().credit(recipient, { perpsUsd: '1' });
    const { payoutId, held, stash } = await heldExchangeFill(s, 3, recipient);
    const recipientBefore = state().perpsUsd(recipient);

    // The agent's nonce is a millisecond timestamp too: it can equal the held action's.
    agentSends([held.nonce]);
    // The node's confirm pass reads the agent's send while the solver still lacks funds (before the fix: booked paid then).
    await confirmReadAfterNow(held.created_at);
    setPerps(s, s.devnet.solver, stash);

    // Before the fix: booked 'success' at once, the recipient never paid.
    expect(await settled(payoutId)).toBe('success');
    await until(() => (state().perpsUsd(recipient) > recipientBefore ? true : undefined), 'the recipient paid', 30_000);
    expect(state().isNonceUsed(s.devnet.solver, held.nonce)).toBe(true);
  });
});
