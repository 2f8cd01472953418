// The steps of a withdrawal from the exchange (origin 1337) as a wallet performs them: the `authorize` step's
// NonceMapping and the `deposit` step's sendAsset, each signed on the wallet's active chain.
import { parseSignature, toHex, zeroAddress, type Hex } from 'viem';
import { expect } from 'vitest';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { splitSignature } from '../../src/chains/exchange/typedData.ts';
import { ExchangeClient } from '../../src/chains/exchange/client.ts';
import { NONCE_SET_SIZE, simpleSendTypedData, type SimpleSendAction } from '../../src/devnet/exchange/standin.ts';
import { api, executeSteps, until, type Stack } from './stack.ts';

const EIP712_DOMAIN = [
  { name: 'name', type: 'string' },
  { name: 'version', type: 'string' },
  { name: 'chainId', type: 'uint256' },
  { name: 'verifyingContract', type: 'address' },
];

/**
 * The authorize step, signed on the wallet's active chain (domain.chainId and signatureChainId overridden
 * identically, as the spec says), posted to post.endpoint with ?signature=.
 */
export async function authorize(
  s: Stack,
  quote: any,
  signer: PrivateKeyAccount,
  chainId: number,
  overrides: { sign?: Record<string, unknown>; body?: Record<string, unknown> } = {},
) {
  const data = quote.steps.find((x: any) => x.id === 'authorize').items[0].data;
  const signature = await signer.signTypedData({
    domain: { ...data.sign.domain, chainId },
    types: data.sign.types,
    primaryType: data.sign.primaryType,
    message: { ...data.sign.value, ...overrides.sign },
  } as never);
  return api(s.url, `${data.post.endpoint}?signature=${signature}`, {
    method: data.post.method,
    body: { ...data.post.body, signatureChainId: chainId, ...overrides.body },
  });
}

/** The deposit step as the spec's signing steps describe it, posted to {exchange_url}/exchange. */
export async function sendDeposit(s: Stack, quote: any, signer: PrivateKeyAccount, chainId: number, params: Record<string, unknown> = {}) {
  const data = quote.steps.find((x: any) => x.id === 'deposit').items[0].data;
  const action = { ...data.action.parameters, ...params, type: data.action.type, signatureChainId: toHex(chainId) };
  const signature = await signer.signTypedData({
    domain: { name: 'ExchangeSignTransaction', version: '1', chainId, verifyingContract: zeroAddress },
    types: { ...data.eip712Types, EIP712Domain: EIP712_DOMAIN },
    primaryType: data.eip712PrimaryType,
    message: action,
  } as never);
  const { r, s: sPart, v } = parseSignature(signature);
  const res = await fetch(`${s.devnet.exchange!.url}/exchange`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ signature: { r, s: sPart, v: Number(v) }, nonce: action.nonce, action }),
  });
  return { status: res.status, body: (await res.json()) as any, action };
}

/**
 * An attacker's dust: a fresh account, credited 20 perps USD, whose every call sends 0.01 perps USD to the solver
 * (a usdSend: one more update in the solver's ledger, which anyone can add).
 */
export function dustSender(s: Stack): () => Promise<void> {
  const ex = s.devnet.exchange!;
  const attacker = privateKeyToAccount(generatePrivateKey());
  ex.standin.credit(attacker.address, { perpsUsd: '20' });
  let nonce = Date.now();
  return async () => {
    const action: SimpleSendAction = {
      type: 'usdSend',
      amount: '0.01',
      signatureChainId: toHex(1),
      exchangeChain: 'Mainnet',
      destination: s.devnet.solver.toLowerCase(),
      time: ++nonce,
    };
    const signature = splitSignature(await attacker.signTypedData(simpleSendTypedData(action) as never));
    const res = await fetch(`${ex.url}/exchange`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ action, nonce: action.time, signature }),
    });
    const body = (await res.json()) as { status?: string };
    if (body.status !== 'ok') throw new Error(`the dust transfer was refused: ${JSON.stringify(body)}`);
  };
}

/**
 * One block of the exchange: its clock stands still while `count` dust transfers to the solver land, then `then`
 * (the user's transfer, say). Returns the block's time.
 */
export async function flooded(s: Stack, count: number, then: () => Promise<void>): Promise<number> {
  const state = s.devnet.exchange!.standin.state as unknown as { now: () => number };
  const clock = state.now;
  const send = dustSender(s);
  const T = Date.now();
  state.now = () => T;
  try {
    for (let i = 0; i < count; i++) await send();
    await then();
  } finally {
    state.now = clock;
  }
  // The block holds the dust and what `then` added: the exchange lists only its first 500 updates.
  expect(s.devnet.exchange!.standin.state.ledger(s.devnet.solver).filter((u) => u.time === T).length).toBeGreaterThan(count);
  return T;
}

/**
 * Sets the solver's (or anyone's) perps USD on the exchange stand-in, whose balances are private to it, and drops the
 * solver's inventory snapshot (read about once a second): one read while the money was away would otherwise decide the
 * next fill against it.
 */
export function setPerps(s: Stack, who: string, units: bigint): void {
  const state = s.devnet.exchange!.standin.state as unknown as { setBalance(u: string, dex: string, t: unknown, v: bigint): void; usdc: unknown };
  state.setBalance(who, '', state.usdc, units);
  s.node.solver!.invalidate();
}

/**
 * Until `restore()`, the first action the node posts paying `recipient` on the exchange finds the solver's perps USD
 * moved aside just before it (other payouts, an operator's transfer): refused for funds, the node keeps the signed
 * action open and posts the same body again. `stash()`: what was moved aside (give it back with setPerps).
 */
export function refuseFirstPostFor(s: Stack, recipient: string): { restore(): void; stash(): bigint | undefined } {
  const submit = ExchangeClient.prototype.submit;
  let stash: bigint | undefined;
  ExchangeClient.prototype.submit = async function (this: ExchangeClient, body: Parameters<typeof submit>[0]) {
    if (stash === undefined && body.action?.destination?.toLowerCase() === recipient.toLowerCase()) {
      stash = s.devnet.exchange!.standin.state.perpsUsd(s.devnet.solver);
      setPerps(s, s.devnet.solver, 0n);
    }
    return submit.call(this, body);
  };
  return {
    restore: () => {
      ExchangeClient.prototype.submit = submit;
    },
    stash: () => stash,
  };
}

/**
 * A fill of 5 USDC from chain 8453 to perps USD on the exchange, by account `from` for `recipient`, whose first post
 * the exchange refuses for funds (refuseFirstPostFor): the node keeps its signed action open. Resolves once it is so,
 * with the held action and what was moved aside of the solver's perps USD (`stash`: give it back with setPerps).
 */
export async function heldExchangeFill(s: Stack, from: number, recipient: string) {
  const q = await api(s.url, '/quote/v2', {
    body: {
      user: s.devnet.accounts[from]!.address,
      recipient,
      originChainId: 8453,
      destinationChainId: 1337,
      originCurrency: s.devnet.chains.find((c) => c.id === 8453)!.contracts.stablecoin,
      destinationCurrency: `0x${'0'.repeat(32)}`,
      amount: '5000000',
      tradeType: 'EXACT_INPUT',
    },
  });
  expect(q.status, JSON.stringify(q.body)).toBe(200);
  const requestId = q.body.steps.at(-1).requestId as Hex;
  const payoutId = `fill:${requestId}`;
  const refused = refuseFirstPostFor(s, recipient);
  try {
    await executeSteps(s, q.body, from);
    // Bounded generously: under the full suite's load beside other work, 30 s ran out here once in a few runs.
    await until(() => s.node.ledger.payouts.txsOf(payoutId).find((t) => /insufficient/i.test(t.error ?? '')), 'the fill refused for funds', 90_000);
  } finally {
    refused.restore();
  }
  return { requestId, payoutId, held: s.node.ledger.payouts.txsOf(payoutId)[0]!, stash: refused.stash()! };
}

/**
 * The key (the solver's by default) signs 100 more actions above `nonce` (its next payouts, or the operator's own use of
 * the key): transfers of spot HYPE to another account (one the exchange knows: no activation fee). The exchange then
 * never applies an action of that key at `nonce`. Not self-transfers: the ledger shows an API wallet's agentSendAsset
 * as the account's own send to itself, with the agent's nonce, so the node counts no send to the solver itself as its
 * key's.
 */
export async function hundredNoncesAbove(s: Stack, nonce: number, key: Hex = s.devnet.keys.solver): Promise<void> {
  const signer = privateKeyToAccount(key).address;
  const st = s.devnet.exchange!.standin.state;
  st.credit(signer, { spot: { token: 'HYPE', amount: '1' } });
  const sink = privateKeyToAccount(generatePrivateKey()).address;
  st.credit(sink, { spot: { token: 'HYPE', amount: '0.01' } });
  const hype = st.findToken('HYPE')!;
  const client = new ExchangeClient({ url: s.devnet.exchange!.url });
  for (let i = 1; i <= NONCE_SET_SIZE; i++) {
    await client.sendAsset(
      key,
      {
        exchangeChain: 'Mainnet',
        destination: sink.toLowerCase(),
        sourceDex: 'spot',
        destinationDex: 'spot',
        token: `${hype.name}:${hype.tokenId}`,
        amount: '0.001',
        fromSubAccount: '',
        nonce: nonce + i,
      },
      { signatureChainId: 0xa4b1 },
    );
  }
}
