// Pre-signed transactions sent to a local anvil in JSON-RPC batches, then waited for until the chain has included
// every one of them, sending again a nonce chain anvil stranded. The benchmarks use it (neither signing nor round
// trips are counted), and so does the devnet's deployment (many transactions from one key at once).
import { keccak256, type Address, type Hex } from 'viem';

/** One pre-signed transaction, with the sender and nonce it was signed for. */
export interface RawTx {
  raw: Hex;
  sender: Address;
  nonce: number;
}

/** What waiting for inclusion took. */
export interface Inclusion {
  /** When the last of them was seen included (performance.now()). */
  at: number;
  /** Transactions sent again because anvil had stranded them (0 when the chain took every one at once). */
  reSent: number;
}

/** One JSON-RPC call to the chain (a local devnet chain: 127.0.0.1). */
export async function rpc<T = unknown>(url: string, method: string, params: unknown[]): Promise<T> {
  const res = (await (
    await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) })
  ).json()) as { result?: T; error?: { message: string } };
  if (res.error) throw new Error(`${method}: ${res.error.message}`);
  return res.result as T;
}

/** Sends the transactions in JSON-RPC batches of `batchSize`, one batch after the other; throws when the chain refuses one. */
export async function sendRawBatches(url: string, raws: Hex[], batchSize = 50): Promise<void> {
  for (let i = 0; i < raws.length; i += batchSize) {
    const batch = raws.slice(i, i + batchSize);
    const res = (await (
      await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(batch.map((raw, k) => ({ jsonrpc: '2.0', id: k, method: 'eth_sendRawTransaction', params: [raw] }))),
      })
    ).json()) as { error?: { message: string } }[];
    const failed = res.find((r) => r.error);
    if (failed) throw new Error(`a transaction was refused: ${failed.error!.message}`);
  }
}

/**
 * Resolves once the chain has included every transaction: the newest nonce of each sender (nonces are
 * consecutive, so its receipt stands for the ones below it). Throws after `timeoutMs`.
 *
 * anvil (automine) sometimes strands a sender's nonce chain when transactions arrive while it mines: a
 * transaction validated against the state before its predecessor's block was committed (so it needs the
 * predecessor from the pool) is inserted after that block took the predecessor out of the pool; it then
 * waits in `queued` at the account's own nonce for a predecessor that never comes, and no block ever
 * takes it (nor the rest of the chain behind it). A transaction the pool lost leaves the rest queued behind
 * it just as well. A sender whose transactions are not all included while anvil has nothing pending is
 * stuck; seen so twice in a row (`strandCheckMs` apart), its transactions are taken out of
 * the pool and those from the account's nonce on are sent again in nonce order: anvil validates them
 * afresh against the state and mines them, under the same hashes.
 */
export async function awaitIncluded(url: string, txs: RawTx[], opts: { timeoutMs: number; pollMs?: number; strandCheckMs?: number }): Promise<Inclusion> {
  const pollMs = opts.pollMs ?? 5;
  const strandCheckMs = opts.strandCheckMs ?? 100;
  let nextCheck = performance.now() + strandCheckMs;
  let suspects = new Set<string>();
  let reSent = 0;
  const newest = new Map<Address, RawTx>();
  for (const t of txs) if ((newest.get(t.sender)?.nonce ?? -1) < t.nonce) newest.set(t.sender, t);
  const waiting = new Set([...newest.values()].map((t) => keccak256(t.raw)));
  const deadline = performance.now() + opts.timeoutMs;
  for (;;) {
    const hashes = [...waiting];
    const res = (await (
      await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(hashes.map((h, k) => ({ jsonrpc: '2.0', id: k, method: 'eth_getTransactionReceipt', params: [h] }))),
      })
    ).json()) as { id: number; result?: unknown }[];
    for (const r of res) if (r.result) waiting.delete(hashes[r.id]!);
    if (!waiting.size) return { at: performance.now(), reSent };
    if (performance.now() > deadline) throw new Error(`${waiting.size} transactions not included after ${opts.timeoutMs} ms`);
    if (performance.now() >= nextCheck) {
      const stranded = await strandedSenders(url, new Set([...newest.values()].filter((t) => waiting.has(keccak256(t.raw))).map((t) => t.sender)));
      for (const key of stranded) {
        if (!suspects.has(key)) continue;
        const [sender, nonce] = key.split(':') as [Address, string];
        const rest = txs.filter((t) => t.sender === sender && t.nonce >= Number(nonce)).sort((a, b) => a.nonce - b.nonce);
        if (!rest.length) continue;
        await rpc(url, 'anvil_removePoolTransactions', [sender]);
        await sendRawBatches(
          url,
          rest.map((t) => t.raw),
        );
        reSent += rest.length;
      }
      suspects = new Set([...stranded].filter((k) => !suspects.has(k)));
      nextCheck = performance.now() + strandCheckMs;
    }
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

// Senders (of `ours`, those not all included) that nothing will move: anvil has no pending transaction, so what of
// theirs is still out is queued behind a nonce it will never get (stranded at the account's own nonce, or behind a
// transaction the pool lost). Keys are `sender:accountNonce`.
async function strandedSenders(url: string, ours: Set<Address>): Promise<Set<string>> {
  const out = new Set<string>();
  if (!ours.size) return out;
  const status = await rpc<{ pending: string; queued: string }>(url, 'txpool_status', []);
  if (Number(status.pending) !== 0) return out;
  for (const sender of ours) out.add(`${sender}:${Number(await rpc<Hex>(url, 'eth_getTransactionCount', [sender, 'latest']))}`);
  return out;
}
