// Reads deposits to the vault into the ledger: the signatures of the vault (SOL) and of its token
// accounts (SPL, one per configured currency) from a cursor kept in the ledger, at the chain's
// commitment (`confirmed` or `finalized`), each transaction parsed from its balances before and after.
//
// The cursor of each address is the newest slot whose transactions are all read. Nothing is visible
// at the commitment before its slot is complete, so a slot is read once and the cursor moves past
// it only when every signature of it is in the ledger; a deposit is written once per signature
// (`${chainId}:${signature}:0`), so reading a slot again writes nothing.
import type { Commitment, Connection, Finality, PublicKey, VersionedTransactionResponse } from '@solana/web3.js';
import type { SvmChainConfig } from '../../config/schema.ts';
import type { Ledger } from '../../ledger/index.ts';
import type { Logger } from '../../log.ts';
import type { Metrics } from '../../metrics.ts';
import { parseDepositTransaction, type ParsedDeposit } from './transactions.ts';

const PAGE = 1000;
// getTransaction calls in flight at once, and per ledger commit.
const CHUNK = 20;

export interface SvmIndexerEvents {
  // Deposits reached the chain's commitment: the solver has work.
  onConfirmed(): void;
  onHead(slot: number): void;
}

export interface SvmSignature {
  signature: string;
  slot: number;
  err: unknown;
}

export class SvmIndexer {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = true;
  #head = 0;
  // The slot every source was read up to by the last complete pass (in memory only: the ledger's
  // cursors move with the signatures actually read).
  #readUpTo = -1;
  readonly #commitment: Finality;

  constructor(
    private chain: SvmChainConfig,
    private conn: Connection,
    private ledger: Ledger,
    // The addresses deposits arrive at: the vault and its token accounts.
    private sources: PublicKey[],
    private vault: string,
    // Transfers from these (the solver) are not deposits.
    private ignoreFrom: Set<string>,
    private events: SvmIndexerEvents,
    private metrics: Metrics,
    private log: Logger,
  ) {
    this.#commitment = chain.commitment;
  }

  get head(): number {
    return this.#head;
  }

  get readUpTo(): number {
    return Math.max(this.#readUpTo, this.indexed());
  }

  #source(a: PublicKey): string {
    return `svm:${a.toBase58()}`;
  }

  // The slot up to which every source is read (-1 before the first pass).
  indexed(): number {
    let min = Number.MAX_SAFE_INTEGER;
    for (const s of this.sources) min = Math.min(min, this.ledger.indexer.cursor(this.chain.id, this.#source(s)) ?? -1);
    return min;
  }

  start(): void {
    this.#stopped = false;
    this.poke();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
  }

  poke(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    clearTimeout(this.#timer);
    this.#running = this.#pass()
      .catch((e) => {
        this.metrics.rpcErrors.inc({ chain: this.chain.id, method: 'indexer' });
        this.log.warn({ chain: this.chain.id, err: (e as Error).message }, 'svm indexer pass failed; retrying');
      })
      .finally(() => {
        this.#running = undefined;
        if (this.#stopped) return;
        if (this.#again) {
          this.#again = false;
          this.poke();
        } else {
          this.#timer = setTimeout(() => this.poke(), this.chain.pollIntervalMs);
        }
      });
  }

  async #pass(): Promise<void> {
    const slot = await this.conn.getSlot(this.#commitment as Commitment);
    this.#head = slot;
    this.metrics.headBlock.set({ chain: this.chain.id }, slot);
    this.events.onHead(slot);
    let complete = true;
    for (const s of this.sources) {
      if (this.#stopped) return;
      if (!(await this.#readSource(s))) complete = false;
    }
    if (complete) this.#readUpTo = slot;
    this.metrics.indexerLag.set({ chain: this.chain.id }, Math.max(0, slot - this.readUpTo));
  }

  // Signatures of `address` newer than its cursor, oldest first.
  async #newSignatures(address: PublicKey, cursor: number): Promise<SvmSignature[]> {
    const out: SvmSignature[] = [];
    let before: string | undefined;
    for (;;) {
      const page = await this.conn.getSignaturesForAddress(address, { before, limit: PAGE }, this.#commitment);
      let done = page.length < PAGE;
      for (const p of page) {
        if (p.slot <= cursor) {
          done = true;
          break;
        }
        out.push({ signature: p.signature, slot: p.slot, err: p.err });
      }
      if (done || page.length === 0) break;
      before = page.at(-1)!.signature;
    }
    return out.reverse();
  }

  // Returns whether everything new was read.
  async #readSource(address: PublicKey): Promise<boolean> {
    const chainId = this.chain.id;
    const source = this.#source(address);
    const cursor = this.ledger.indexer.cursor(chainId, source) ?? -1;
    const sigs = await this.#newSignatures(address, cursor);
    if (!sigs.length) return true;
    for (let i = 0; i < sigs.length && !this.#stopped; i += CHUNK) {
      const chunk = sigs.slice(i, i + CHUNK);
      const deposits = await this.#read(chunk);
      if (deposits === undefined) return false; // a transaction not served yet: the next pass reads it again
      const next = sigs[i + chunk.length];
      const last = chunk.at(-1)!.slot;
      // The cursor stops below a slot whose signatures run on into the next chunk.
      const upTo = next && next.slot === last ? last - 1 : last;
      const fresh = this.#commit(deposits, source, Math.max(cursor, upTo));
      if (fresh) {
        this.metrics.depositsIndexed.inc({ chain: chainId }, fresh);
        this.log.info({ chain: chainId, count: fresh, source: address.toBase58(), upTo }, 'svm deposits indexed');
      }
    }
    return !this.#stopped;
  }

  // The deposits of these signatures; undefined when one could not be read.
  async #read(chunk: SvmSignature[]): Promise<ParsedDeposit[] | undefined> {
    const results = await Promise.all(
      chunk.map(async (s): Promise<ParsedDeposit | null | undefined> => {
        // A failed transaction moved nothing; a signature already in the ledger needs no second look.
        if (s.err) return null;
        if (this.ledger.deposits.get(`${this.chain.id}:${s.signature}:0`)) return null;
        const tx = await this.fetch(s.signature);
        if (!tx) return undefined;
        return this.parse(s.signature, tx) ?? null;
      }),
    );
    if (results.some((r) => r === undefined)) return undefined;
    return results.filter((r): r is ParsedDeposit => r !== null && r !== undefined);
  }

  fetch(signature: string): Promise<VersionedTransactionResponse | null> {
    return this.conn.getTransaction(signature, { commitment: this.#commitment, maxSupportedTransactionVersion: 0 });
  }

  parse(signature: string, tx: VersionedTransactionResponse): ParsedDeposit | undefined {
    return parseDepositTransaction(signature, tx, this.vault, this.ignoreFrom);
  }

  // Writes deposits read at the chain's commitment: they are confirmed at once. Returns how many
  // are new. With `source`, the source's cursor moves to `upTo` in the same ledger transaction.
  #commit(deposits: ParsedDeposit[], source?: string, upTo?: number): number {
    const chainId = this.chain.id;
    const now = Date.now();
    let fresh = 0;
    const confirmed = this.ledger.tx(() => {
      for (const d of deposits) {
        if (this.ledger.deposits.insert({ ...d, chain_id: chainId, id: `${chainId}:${d.tx_hash}:${d.log_index}`, seen_at: now })) fresh++;
      }
      if (source !== undefined && upTo !== undefined) this.ledger.indexer.setCursor(chainId, source, upTo);
      const top = deposits.reduce((m, d) => Math.max(m, d.block_number), -1);
      return top >= 0 ? this.ledger.deposits.confirmUpTo(chainId, top) : 0;
    });
    if (confirmed) this.events.onConfirmed();
    return fresh;
  }

  // Reads one transaction now (the API's /transactions/index). Returns the deposits it holds, or
  // undefined when the chain does not have it at the commitment yet.
  async indexNow(signature: string): Promise<number | undefined> {
    const tx = await this.fetch(signature);
    if (!tx) return undefined;
    const d = this.parse(signature, tx);
    if (!d) return 0;
    const fresh = this.#commit([d]);
    if (fresh) this.metrics.depositsIndexed.inc({ chain: this.chain.id }, fresh);
    return 1;
  }
}
