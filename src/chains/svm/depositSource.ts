// Deposits to the vault as a DepositSource: the signatures of the vault (SOL) and of its token
// accounts (SPL, one per configured currency), at the chain's commitment (`confirmed` or
// `finalized`), each transaction parsed from its balances before and after.
//
// Nothing is visible at the commitment before its slot is complete and nothing read at it is
// replaced, so slots are blocks without reorgs: the driver reads from its cursor to the head
// (maxRange Infinity) and keeps no unfinalized block list. A signature's deposits (one per currency it
// moved to the vault: `${chainId}:${signature}:${i}`) are written once, so reading a slot again writes nothing.
import type { Commitment, Connection, Finality, PublicKey, VersionedTransactionResponse } from '@solana/web3.js';
import type { SvmChainConfig } from '../../config/schema.ts';
import type { DepositSource, Inclusion, RangeRead, SourceBlock } from '../../indexer/source.ts';
import { parseDepositTransactions, type ParsedDeposit } from './transactions.ts';

const PAGE = 1000;
// getTransaction calls in flight at once.
const CHUNK = 20;
// Slots listed again below the cursor, every RELIST_EVERY_MS. A provider writes a slot's transactions into the index that
// getSignaturesForAddress and getTransaction read (Agave's TransactionStatusService) behind its replay, and
// getSignaturesForAddress answers up to the confirmed bank's slot whatever that index holds yet (Agave's own getBlock
// answers BlockStatusNotAvailableYet there): a deposit in a slot not written yet was missing from the list, the cursor
// passed its slot, and it was never read again (neither filled nor refunded). What was read already costs nothing
// again: a deposit in the ledger is skipped by its id, a transaction that held none by the memory below. About two
// minutes at 400 ms a slot.
const RELIST_SLOTS = 300;
// How often those slots are listed again: a provider's index lags by seconds, the window is two minutes, and listing
// it on every pass (each a few hundred milliseconds) read each signature of the vault hundreds of times, a bill anyone
// raises with dust transfers to the vault.
const RELIST_EVERY_MS = 10_000;

/** One signature of an address's list. */
export interface SvmSignature {
  signature: string;
  slot: number;
  err: unknown;
}

/** The id of a signature's first deposit (one per currency it moved to the vault, all written together). */
export const svmDepositId = (chainId: number, signature: string): string => `${chainId}:${signature}:0`;

// A slot as a block: slots at the commitment are final, so the hash is the slot's own name.
const slotBlock = (slot: number): SourceBlock => ({ number: slot, hash: `slot:${slot}`, parentHash: `slot:${slot - 1}` });

/** The vault's deposits on an SVM chain, read from the signature lists of the vault and its token accounts. */
export class SvmDepositSource implements DepositSource {
  readonly rangeMethod = 'getSignaturesForAddress';
  readonly #commitment: Finality;
  // Signatures read whole that held no deposit, by slot: not fetched again while they are listed again (RELIST_SLOTS).
  readonly #nothing = new Map<string, number>();
  #relistedAt = 0;

  constructor(
    private chain: SvmChainConfig,
    private conn: Connection,
    // The addresses deposits arrive at: the vault and its token accounts.
    private sources: PublicKey[],
    private vault: string,
    // Transfers from these (the solver) are not deposits.
    private ignoreFrom: Set<string>,
    // Whether the ledger already holds this deposit id (a signature already read needs no second look).
    private known: (depositId: string) => boolean,
  ) {
    this.#commitment = chain.commitment;
  }

  /** The newest slot at the chain's commitment. */
  async head(): Promise<SourceBlock> {
    return slotBlock(await this.conn.getSlot(this.#commitment as Commitment));
  }

  /** The slot `n` (final at the commitment: never replaced). */
  async block(n: number): Promise<SourceBlock> {
    return slotBlock(n);
  }

  /**
   * The deposits of every address's signatures in slots [from, to], and, every RELIST_EVERY_MS, of those in the
   * RELIST_SLOTS slots below `from` not read yet (listed late by the provider), oldest first. When a transaction is not
   * served yet, `upTo` stops below its slot: it is read again on a later pass.
   */
  async deposits(from: number, to: number, now = Date.now()): Promise<RangeRead> {
    let low = from;
    if (now - this.#relistedAt >= RELIST_EVERY_MS) {
      this.#relistedAt = now;
      low = Math.max(0, from - RELIST_SLOTS);
      for (const [sig, slot] of this.#nothing) if (slot < low) this.#nothing.delete(sig);
    }
    const sigs: SvmSignature[] = [];
    for (const a of this.sources) sigs.push(...(await this.#signatures(a, low, to)));
    sigs.sort((x, y) => x.slot - y.slot);
    const deposits: (ParsedDeposit & { seen_at?: number })[] = [];
    let upTo: number | undefined;
    for (let i = 0; i < sigs.length; i += CHUNK) {
      const chunk = sigs.slice(i, i + CHUNK);
      const results = await Promise.all(chunk.map((s) => this.#read(s)));
      results.forEach((r, j) => {
        if (r === undefined) upTo = Math.min(upTo ?? Number.MAX_SAFE_INTEGER, chunk[j]!.slot - 1);
        else deposits.push(...r);
      });
      if (upTo !== undefined) break;
    }
    return { deposits: upTo === undefined ? deposits : deposits.filter((d) => d.block_number <= upTo!), entries: sigs.length, blockHashes: new Map(), upTo };
  }

  /** Where a signature's transaction is now, at the commitment. */
  async inclusion(txHash: string): Promise<Inclusion | undefined> {
    const tx = await this.fetch(txHash);
    return tx ? { success: !tx.meta?.err, blockNumber: tx.slot, blockHash: slotBlock(tx.slot).hash } : undefined;
  }

  // Signatures of `address` in slots [from, to], newest first as the list pages.
  async #signatures(address: PublicKey, from: number, to: number): Promise<SvmSignature[]> {
    const out: SvmSignature[] = [];
    let before: string | undefined;
    for (;;) {
      const page = await this.conn.getSignaturesForAddress(address, { before, limit: PAGE }, this.#commitment);
      let done = page.length < PAGE;
      for (const p of page) {
        if (p.slot < from) {
          done = true;
          break;
        }
        if (p.slot <= to) out.push({ signature: p.signature, slot: p.slot, err: p.err });
      }
      if (done || page.length === 0) break;
      before = page.at(-1)!.signature;
    }
    return out;
  }

  // The deposits of a signature (none when it holds none), undefined when it could not be read.
  async #read(s: SvmSignature): Promise<(ParsedDeposit & { seen_at?: number })[] | undefined> {
    // A failed transaction moved nothing; a signature already in the ledger (its first deposit) needs no second look.
    if (s.err || this.#nothing.has(s.signature)) return [];
    if (this.known(svmDepositId(this.chain.id, s.signature))) return [];
    const tx = await this.fetch(s.signature);
    if (!tx) return undefined;
    const found = this.parse(s.signature, tx);
    if (!found.length) this.#nothing.set(s.signature, s.slot);
    return found;
  }

  /** The transaction of a signature at the chain's commitment, or null when it is not there yet. */
  fetch(signature: string): Promise<VersionedTransactionResponse | null> {
    return this.conn.getTransaction(signature, { commitment: this.#commitment, maxSupportedTransactionVersion: 0 });
  }

  /** The deposits a transaction made to the vault: one per currency it moved there. */
  parse(signature: string, tx: VersionedTransactionResponse): (ParsedDeposit & { seen_at?: number })[] {
    // When it reached the chain: its block's time (seconds: the end of that second). Read as when the node read it, a
    // deposit made in time while the node was down (a restart, a takeover) was refunded as ORDER_EXPIRED. The driver
    // holds it to no earlier than a head below its slot was read, and no later than now (the cluster's clock is its word).
    const t = tx.blockTime;
    const deposits = parseDepositTransactions(signature, tx, this.vault, this.ignoreFrom);
    return typeof t === 'number' && Number.isSafeInteger(t) && t > 0 ? deposits.map((d) => ({ ...d, seen_at: t * 1000 + 999 })) : deposits;
  }
}
