// Orders of the chaos load that start on the SVM chain or on the exchange (chain 1337), placed as a
// user does there: the quote over HTTP, then on SVM the quote's deposit transaction signed and sent
// straight to the chain (never through the node's fault proxy), and on the exchange the authorize
// step posted to the node and the sendAsset posted straight to the exchange. A short order pays half
// of what its quote asks (SVM: a transfer to the vault with the order id in its memo; exchange: the
// quote's sendAsset for half the amount); the node must refund it on its own chain.
import { Connection, PublicKey, SystemProgram, Transaction, TransactionMessage, VersionedTransaction } from '@solana/web3.js';
import { createTransferCheckedInstruction, getAssociatedTokenAddressSync, TOKEN_PROGRAM_ID } from '@solana/spl-token';
import { parseSignature, toHex, zeroAddress, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { EXCHANGE_PERPS_USD, SVM_NATIVE } from '../../src/chains/address.ts';
import { memoInstruction } from '../../src/chains/svm/transactions.ts';
import type { DepositRecord, LoadOptions } from './load.ts';
import { nodeCall } from './load.ts';

export const OTHER_CHAINS = { svm: 792703809, exchange: 1337 } as const;

export interface OtherOrder {
  index: number;
  kind: 'normal' | 'short' | 'orphan';
  currency: 'native' | 'usdc';
  amount: bigint;
  account: number;
  originChainId: number;
  destinationChainId: number;
}

type Placed = Pick<DepositRecord, 'txHash' | 'blockNumber' | 'logIndex' | 'orderRef' | 'requestId' | 'amount' | 'quotedAmount'>;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const conns = new Map<string, Connection>();
const connOf = (url: string) => {
  let c = conns.get(url);
  if (!c) conns.set(url, (c = new Connection(url, 'confirmed')));
  return c;
};

async function quote(o: LoadOptions, body: Record<string, unknown>, retryMs: number, counters: { retries: number }) {
  const q = await nodeCall(o.nodeUrl, '/quote/v2', { tradeType: 'EXACT_INPUT', ...body }, retryMs, counters);
  if (q.status !== 200) throw new Error(`quote ${q.status}: ${JSON.stringify(q.body).slice(0, 300)}`);
  return q.body;
}

/** Places an order from the SVM chain to an EVM chain; returns its deposit once confirmed on SVM. */
export async function depositFromSvm(o: LoadOptions, p: OtherOrder, retryMs: number, counters: { retries: number }): Promise<Placed> {
  const svm = o.devnet.svm!;
  const conn = connOf(svm.rpcUrl);
  const user = svm.keypair(p.account);
  const dest = o.devnet.chains.find((c) => c.id === p.destinationChainId)!;
  const q = await quote(
    o,
    {
      user: user.publicKey.toBase58(),
      recipient: o.devnet.accounts[p.account]!.address,
      originChainId: p.originChainId,
      destinationChainId: p.destinationChainId,
      originCurrency: p.currency === 'native' ? SVM_NATIVE : svm.mint,
      destinationCurrency: p.currency === 'native' ? zeroAddress : dest.contracts.stablecoin,
      amount: p.amount.toString(),
    },
    retryMs,
    counters,
  );
  const step = q.steps[0];
  const requestId = step.requestId as Hex;
  const quoted = BigInt(q.details.currencyIn.amount);
  let wire: Uint8Array;
  let amount = quoted;
  if (p.kind === 'normal') {
    const tx = Transaction.from(Buffer.from(step.items[0].data.transaction, 'base64'));
    tx.partialSign(user);
    wire = tx.serialize();
  } else {
    amount = quoted / 2n;
    const { blockhash } = await conn.getLatestBlockhash('confirmed');
    const mint = new PublicKey(svm.mint);
    const ata = (owner: PublicKey) => getAssociatedTokenAddressSync(mint, owner, true, TOKEN_PROGRAM_ID);
    const vault = new PublicKey(svm.vault);
    const transfer =
      p.currency === 'native'
        ? SystemProgram.transfer({ fromPubkey: user.publicKey, toPubkey: vault, lamports: amount })
        : createTransferCheckedInstruction(ata(user.publicKey), mint, ata(vault), user.publicKey, amount, 6);
    const msg = new TransactionMessage({
      payerKey: user.publicKey,
      recentBlockhash: blockhash,
      instructions: [transfer, memoInstruction(requestId)],
    }).compileToV0Message();
    const tx = new VersionedTransaction(msg);
    tx.sign([user]);
    wire = tx.serialize();
  }
  const sig = await conn.sendRawTransaction(wire, { skipPreflight: false, preflightCommitment: 'confirmed' });
  // Confirmed as a wallet sees it (polled: no subscription), with a bound.
  const end = Date.now() + 60_000;
  for (;;) {
    const st = (await conn.getSignatureStatuses([sig], { searchTransactionHistory: true })).value[0];
    if (st?.err) throw new Error(`svm deposit ${sig} failed: ${JSON.stringify(st.err)}`);
    if (st && (st.confirmationStatus === 'confirmed' || st.confirmationStatus === 'finalized')) {
      return { txHash: sig as Hex, blockNumber: BigInt(st.slot), logIndex: 0, orderRef: requestId, requestId, amount, quotedAmount: quoted };
    }
    if (Date.now() > end) throw new Error(`svm deposit ${sig} not confirmed within 60 s`);
    await sleep(100);
  }
}

const EIP712_DOMAIN = [
  { name: 'name', type: 'string' },
  { name: 'version', type: 'string' },
  { name: 'chainId', type: 'uint256' },
  { name: 'verifyingContract', type: 'address' },
];

// Micro-USD as the decimal string a sendAsset carries.
const microUsd = (n: bigint) => `${n / 1_000_000n}.${(n % 1_000_000n).toString().padStart(6, '0')}`;

/** Places an order from the exchange (perps USD) to an EVM chain's USDC; returns its transfer once the exchange applied it. */
export async function depositFromExchange(o: LoadOptions, p: OtherOrder, retryMs: number, counters: { retries: number }): Promise<Placed> {
  const ex = o.devnet.exchange!;
  const signer = privateKeyToAccount(o.devnet.accounts[p.account]!.privateKey);
  const dest = o.devnet.chains.find((c) => c.id === p.destinationChainId)!;
  const q = await quote(
    o,
    {
      user: signer.address,
      recipient: signer.address,
      originChainId: p.originChainId,
      destinationChainId: p.destinationChainId,
      originCurrency: EXCHANGE_PERPS_USD,
      destinationCurrency: dest.contracts.stablecoin,
      amount: p.amount.toString(),
      protocolVersion: 'v2',
    },
    retryMs,
    counters,
  );
  const requestId = q.steps[0].requestId as Hex;
  const quoted = BigInt(q.details.currencyIn.amount);
  // The authorize step, signed on chain 1 and posted to the node (retried while it restarts).
  const auth = q.steps.find((x: any) => x.id === 'authorize').items[0].data;
  const authSig = await signer.signTypedData({
    domain: { ...auth.sign.domain, chainId: 1 },
    types: auth.sign.types,
    primaryType: auth.sign.primaryType,
    message: auth.sign.value,
  } as never);
  const a = await nodeCall(o.nodeUrl, `${auth.post.endpoint}?signature=${authSig}`, { ...auth.post.body, signatureChainId: 1 }, retryMs, counters);
  if (a.status !== 200) throw new Error(`authorize ${a.status}: ${JSON.stringify(a.body).slice(0, 300)}`);
  // The deposit step: sendAsset signed by the user and posted to the exchange itself.
  const data = q.steps.find((x: any) => x.id === 'deposit').items[0].data;
  const amount = p.kind === 'short' ? quoted / 2n : quoted;
  const action = { ...data.action.parameters, ...(p.kind === 'short' ? { amount: microUsd(amount) } : {}), type: data.action.type, signatureChainId: toHex(1) };
  const signature = await signer.signTypedData({
    domain: { name: 'ExchangeSignTransaction', version: '1', chainId: 1, verifyingContract: zeroAddress },
    types: { ...data.eip712Types, EIP712Domain: EIP712_DOMAIN },
    primaryType: data.eip712PrimaryType,
    message: action,
  } as never);
  const { r, s, v } = parseSignature(signature);
  const res = await fetch(`${ex.url}/exchange`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ signature: { r, s, v: Number(v) }, nonce: action.nonce, action }),
    signal: AbortSignal.timeout(15_000),
  });
  const body = (await res.json()) as { status?: string };
  if (body.status !== 'ok') throw new Error(`exchange sendAsset: ${JSON.stringify(body).slice(0, 300)}`);
  const u = ex.standin.state
    .ledger(signer.address)
    .find((x) => x.delta.type === 'send' && x.delta.nonce === action.nonce && x.delta.user.toLowerCase() === signer.address.toLowerCase());
  if (!u) throw new Error(`exchange sendAsset nonce ${action.nonce} applied but not in the user's ledger`);
  return { txHash: u.hash.toLowerCase() as Hex, blockNumber: BigInt(u.time), logIndex: 0, orderRef: requestId, requestId, amount, quotedAmount: quoted };
}
