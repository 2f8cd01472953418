import { toHex, type Block, type Hex, type PublicClient } from 'viem';
import type { EvmChainConfig } from '../../config/schema.ts';
import type { Ledger } from '../../ledger/index.ts';
import type { DepositRow } from '../../ledger/types.ts';
import type { Logger } from '../../log.ts';
import type { Metrics } from '../../metrics.ts';
import type { ReindexResult } from '../adapter.ts';
import { reverseSponsor } from '../../solver/money.ts';
import { confirmationsFor } from './confirmations.ts';
import { decodeDepositLog, type DecodedDeposit, type RpcLog } from './depositLogs.ts';

export interface IndexerEvents {
  // Deposits reached their confirmation depth: the solver has work.
  onConfirmed(): void;
  onHead(number: bigint, baseFeePerGas: bigint): void;
}

export class ReorgTooDeepError extends Error {
  override name = 'ReorgTooDeepError';
}

const SOURCE = 'depository';
// A getLogs answer with this many deposits is dense enough: the range stops growing.
const DENSE_RANGE_LOGS = 5_000;
const INITIAL_RANGE = 32;

// Reads the depository's deposit events into the ledger. A deposit is written once per log
// (chain, tx, log index), confirmed after chain.confirmations blocks, and a deposit in a block that
// a reorg removes before it was acted on is marked reorged and never reaches the solver.
export class EvmIndexer {
  #range: number;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = true;
  #head = 0n;
  #waiters: { block: bigint; resolve: () => void }[] = [];
  // Whether deposits already acted on may sit in blocks a reorg replaced (see #pass).
  #checkHandled = true;
  fatal: Error | undefined;

  constructor(
    private chain: EvmChainConfig,
    private client: PublicClient,
    private ledger: Ledger,
    private events: IndexerEvents,
    private metrics: Metrics,
    private log: Logger,
  ) {
    // Start narrow and widen while answers stay small: a failed oversized getLogs costs the
    // provider (and us) the whole answer before it fails, so probing from the top is expensive.
    this.#range = Math.min(chain.maxLogRange, INITIAL_RANGE);
  }

  get head(): bigint {
    return this.#head;
  }

  indexed(): number {
    return this.ledger.indexer.cursor(this.chain.id, SOURCE) ?? this.chain.startBlock - 1;
  }

  start(): void {
    this.#stopped = false;
    this.poke();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
    for (const w of this.#waiters) w.resolve();
    this.#waiters = [];
  }

  // Polls now rather than at the next tick; concurrent pokes coalesce into one more pass.
  poke(): void {
    if (this.#stopped || this.fatal) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    clearTimeout(this.#timer);
    this.#running = this.#loop().finally(() => {
      this.#running = undefined;
      if (this.#stopped || this.fatal) return;
      if (this.#again) {
        this.#again = false;
        this.poke();
      } else {
        this.#timer = setTimeout(() => this.poke(), this.chain.pollIntervalMs);
      }
    });
  }

  // Resolves once the indexer has read up to `block` (or stops).
  waitFor(block: bigint): Promise<void> {
    if (BigInt(this.indexed()) >= block) return Promise.resolve();
    return new Promise((resolve) => {
      this.#waiters.push({ block, resolve });
      this.poke();
    });
  }

  async #loop(): Promise<void> {
    try {
      // Catch up in as many passes as it takes; each pass commits its range.
      while (!this.#stopped && (await this.#pass())) {}
    } catch (e) {
      if (e instanceof ReorgTooDeepError) {
        this.fatal = e;
        this.log.fatal({ chain: this.chain.id, err: e.message }, 'indexer stopped: reorg deeper than the finality window');
        return;
      }
      this.metrics.rpcErrors.inc({ chain: this.chain.id, method: 'indexer' });
      this.log.warn({ chain: this.chain.id, err: (e as Error).message }, 'indexer pass failed; retrying');
    }
    const done = BigInt(this.indexed());
    this.#waiters = this.#waiters.filter((w) => (w.block <= done ? (w.resolve(), false) : true));
  }

  // One step: returns true when there is more to read right away.
  async #pass(): Promise<boolean> {
    const chainId = this.chain.id;
    const latest = await this.client.getBlock({ blockTag: 'latest' });
    this.#head = latest.number;
    this.metrics.headBlock.set({ chain: chainId }, Number(latest.number));
    this.events.onHead(latest.number, latest.baseFeePerGas ?? 0n);

    const tip = this.ledger.indexer.tip(chainId);
    if (tip && tip.number <= Number(latest.number)) {
      const canonical = tip.number === Number(latest.number) ? latest : await this.client.getBlock({ blockNumber: BigInt(tip.number) });
      if (canonical.hash !== tip.hash) {
        await this.#rewind(tip.number);
        return true;
      }
    } else if (tip && tip.number > Number(latest.number)) {
      // The chain is shorter than what we indexed: a reorg to a shorter fork (or a reset node).
      await this.#rewind(Number(latest.number));
      return true;
    }

    const from = this.indexed() + 1;
    const head = Number(latest.number);
    if (from > head) {
      this.#confirm(head);
      return false;
    }
    const to = Math.min(head, from + this.#range - 1);

    let logs: RpcLog[];
    try {
      // Raw JSON-RPC logs: decoded below without a generic ABI decoder (see depositLogs.ts).
      logs = (await this.client.request({
        method: 'eth_getLogs',
        params: [{ address: this.chain.depository, fromBlock: toHex(from), toBlock: toHex(to) }],
      })) as unknown as RpcLog[];
      // Widen again after a shrink, but only while responses stay small: a range dense with
      // deposits keeps the width that worked.
      if (this.#range < this.chain.maxLogRange && logs.length < DENSE_RANGE_LOGS) this.#range = Math.min(this.chain.maxLogRange, this.#range * 2);
    } catch (e) {
      // Providers refuse wide ranges in many ways; narrow sharply and try again.
      if (this.#range > 1) {
        this.#range = Math.max(1, Math.floor(this.#range / 4));
        this.log.debug({ chain: chainId, range: this.#range }, 'getLogs failed; shrinking range');
        this.metrics.rpcErrors.inc({ chain: chainId, method: 'eth_getLogs' });
        return true;
      }
      throw e;
    }

    // Headers of the blocks inside the unfinalized window, linked by parent hash to the tip.
    const windowStart = Math.max(from, head - this.chain.finalityDepth + 1);
    const headers: Block[] = await Promise.all(
      Array.from({ length: Math.max(0, to - windowStart + 1) }, (_, i) => windowStart + i).map((n) =>
        n === head ? latest : this.client.getBlock({ blockNumber: BigInt(n) }),
      ),
    );
    let parent = windowStart === from ? tip?.hash : undefined;
    for (const h of headers) {
      if (parent && h.parentHash !== parent) return true; // the chain moved under us; the next pass sees the reorg
      parent = h.hash!;
    }
    const hashOf = new Map(headers.map((h) => [Number(h.number), h.hash!]));
    const deposits: DecodedDeposit[] = [];
    for (const l of logs) {
      const expected = hashOf.get(Number(l.blockNumber));
      if (expected && expected !== l.blockHash) return true; // logs from another fork than the headers
      const d = decodeDepositLog(l);
      if (d) deposits.push(d);
    }

    // Deposits already acted on whose block a reorg replaced (their block hash is not the canonical
    // one any more). Back in these logs, or included again later on the new chain, they are the
    // same deposit (the insert below relocates them). Still absent once the new chain has gone as
    // far past their old block as their confirmations: DEPOSIT_REORGED (#reorgedAfterHandled).
    // Looked for after a rewind, and once after a start (a crash may have come between the two).
    const gone: DepositRow[] = [];
    if (this.#checkHandled) {
      let pending = false;
      const windowFloor = Math.max(this.chain.startBlock, head - this.chain.finalityDepth + 1);
      for (const h of this.ledger.deposits.handledIn(chainId, windowFloor, to)) {
        const canonical = hashOf.get(h.block_number) ?? this.ledger.indexer.block(chainId, h.block_number)?.hash;
        if (!canonical || canonical === h.block_hash) continue;
        if (deposits.some((d) => d.tx_hash === h.tx_hash && d.order_ref === h.order_ref && d.amount === h.amount)) continue;
        // Decided already (its payout had gone out, so it stays handled).
        if (h.request_id && this.ledger.requests.get(h.request_id)?.fail_reason === 'DEPOSIT_REORGED') continue;
        pending = true;
        if (to < h.block_number + this.chain.confirmations) continue;
        const receipt = await this.client.getTransactionReceipt({ hash: h.tx_hash as Hex }).catch((e: Error) => {
          if (e.name === 'TransactionReceiptNotFoundError') return undefined;
          throw e; // an RPC failure proves nothing: the pass is retried
        });
        if (receipt?.status === 'success') {
          // Included again at a later block: the insert relocates it when that block is read.
          if (Number(receipt.blockNumber) > to) continue;
          return true; // the chain moves under us; look again on the next pass
        }
        // Not on the new chain (or included again but reverted: no deposit).
        gone.push(h);
      }
      if (!pending) this.#checkHandled = false;
    }

    const now = Date.now();
    let fresh = 0;
    this.ledger.tx(() => {
      fresh = this.#store(deposits, now).length;
      for (const d of gone) this.#reorgedAfterHandled(d, now);
      for (const h of headers) {
        this.ledger.indexer.putBlock(chainId, { number: Number(h.number), hash: h.hash!, parent_hash: h.parentHash });
      }
      this.ledger.indexer.setCursor(chainId, SOURCE, to);
      this.ledger.indexer.pruneBelow(chainId, head - this.chain.finalityDepth);
    });
    if (fresh) {
      this.metrics.depositsIndexed.inc({ chain: chainId }, fresh);
      this.log.info({ chain: chainId, count: fresh, from, to }, 'deposits indexed');
    }
    this.#confirm(head);
    this.metrics.indexerLag.set({ chain: chainId }, head - to);
    return to < head;
  }

  // Writes deposits read from canonical blocks; returns the ids of those new to the ledger (or
  // revived after a reorg). A deposit already recorded is not written again; one acted on that a
  // reorg moved follows its block. Runs inside the caller's ledger transaction.
  #store(deposits: DecodedDeposit[], now: number): string[] {
    const chainId = this.chain.id;
    const fresh: string[] = [];
    for (const d of deposits) {
      const earlier = this.ledger.deposits.handledFromOtherFork({ ...d, chain_id: chainId });
      if (earlier) {
        this.ledger.deposits.relocate(earlier.id, d.block_number, d.block_hash);
        continue;
      }
      const id = `${chainId}:${d.tx_hash}:${d.log_index}`;
      if (this.ledger.deposits.insert({ ...d, chain_id: chainId, id, seen_at: now })) fresh.push(id);
    }
    return fresh;
  }

  /**
   * Reads the depository's deposits again over [fromBlock, toBlock], blocks the indexer has already
   * passed (an operator's repair: a provider that answered a range without its logs, a cursor moved
   * by hand). Idempotent: a deposit already recorded is left as it is; one missed is recorded and
   * confirmed like any other, so the solver decides it as usual. Logs of blocks the node has not
   * read yet, or of a fork other than the canonical chain's, are left to the indexer's own passes.
   * `record` runs inside the ledger transaction that writes what was found (the admin entry).
   */
  async reindex(fromBlock: number, toBlock: number, record: (r: ReindexResult) => void): Promise<ReindexResult> {
    const chainId = this.chain.id;
    const logs = (await this.client.request({
      method: 'eth_getLogs',
      params: [{ address: this.chain.depository, fromBlock: toHex(fromBlock), toBlock: toHex(toBlock) }],
    })) as unknown as RpcLog[];
    const latest = await this.client.getBlock({ blockTag: 'latest' });
    const windowFloor = Number(latest.number) - this.chain.finalityDepth + 1;
    // Blocks still inside the unfinalized window: a log counts only if its block is the canonical
    // one (the hash the ledger stored, or else the chain's own answer now).
    const canonical = new Map<number, string>();
    for (const n of new Set(logs.map((l) => Number(l.blockNumber)).filter((n) => n >= windowFloor))) {
      canonical.set(n, this.ledger.indexer.block(chainId, n)?.hash ?? (await this.client.getBlock({ blockNumber: BigInt(n) })).hash!);
    }
    const decoded = logs.flatMap((l) => {
      const d = decodeDepositLog(l);
      return d ? [d] : [];
    });
    const result = this.ledger.tx(() => {
      // Read again inside the transaction: a pass may have rewound the cursor meanwhile.
      const cursor = this.indexed();
      const deposits = decoded.filter((d) => d.block_number <= cursor && (!canonical.has(d.block_number) || canonical.get(d.block_number) === d.block_hash));
      const recorded = this.#store(deposits, Date.now());
      const r: ReindexResult = { fromBlock, toBlock, logs: decoded.length, recorded, skipped: decoded.length - deposits.length };
      record(r);
      return r;
    });
    if (result.recorded.length) {
      this.metrics.depositsIndexed.inc({ chain: chainId }, result.recorded.length);
      for (const id of result.recorded) {
        this.log.warn({ chain: chainId, requestId: this.ledger.deposits.get(id)?.order_ref, deposit: id, fromBlock, toBlock }, 're-index found a deposit the indexer had missed');
      }
    }
    this.#confirm(Number(latest.number));
    return result;
  }

  // A deposit the node acted on, that a reorg removed and the new chain does not hold: the request
  // records DEPOSIT_REORGED. Payouts not yet signed for it are cancelled (the deposit is left as
  // reorged, so a later inclusion of the same transaction is decided afresh); a payout already signed
  // cannot be taken back: the request keeps its course, with the reason recorded for the operator.
  // Runs inside the pass's ledger transaction.
  #reorgedAfterHandled(d: DepositRow, now: number): void {
    const payouts = this.ledger.payouts.forDeposit(d.id);
    const signed = payouts.filter((p) => p.state !== 'queued');
    for (const p of payouts) {
      if (p.state === 'queued') this.ledger.payouts.setState(p.id, 'failed', { failReason: 'DEPOSIT_REORGED' }, now);
    }
    if (!signed.length) {
      this.ledger.deposits.unhandleReorged(d.id);
      if (d.request_id && payouts.some((p) => p.kind === 'fill')) reverseSponsor(this.ledger, d.request_id);
    }
    const r = d.request_id ? this.ledger.requests.get(d.request_id) : undefined;
    if (r) this.ledger.requests.setStatus(r.id, signed.length ? r.status : 'failure', { failReason: 'DEPOSIT_REORGED' }, now);
    this.metrics.decisions.inc({ decision: 'fail', reason: 'DEPOSIT_REORGED' });
    this.log.error(
      { chain: this.chain.id, requestId: d.request_id ?? d.order_ref, deposit: d.id, cancelled: payouts.length - signed.length, signed: signed.map((p) => p.id) },
      signed.length ? 'DEPOSIT_REORGED: a reorg removed a deposit already paid out' : 'DEPOSIT_REORGED: a reorg removed a deposit; its payouts are cancelled',
    );
  }

  #confirm(head: number): void {
    const upTo = Math.min(head - this.chain.confirmations + 1, this.indexed());
    const n = this.ledger.tx(() => {
      if (!this.chain.confirmationsByValue?.length) return this.ledger.deposits.confirmUpTo(this.chain.id, upTo);
      // Each deposit waits as many blocks as its value asks (confirmationsFor).
      let n = 0;
      for (const d of this.ledger.deposits.unconfirmed(this.chain.id, upTo)) {
        if (d.block_number <= head - confirmationsFor(this.chain, d.currency, BigInt(d.amount)) + 1 && this.ledger.deposits.confirmOne(d.id)) n++;
      }
      return n;
    });
    if (n) this.events.onConfirmed();
  }

  // Walks back from `from` to the newest block whose stored hash the chain still has, drops what
  // the ledger took from the blocks above it, and re-reads forward from there.
  async #rewind(from: number): Promise<void> {
    const chainId = this.chain.id;
    let n = from;
    const floor = from - this.chain.finalityDepth;
    for (;;) {
      if (n <= floor) {
        throw new ReorgTooDeepError(`chain ${chainId}: no common ancestor within ${this.chain.finalityDepth} blocks of ${from}`);
      }
      const stored = this.ledger.indexer.block(chainId, n);
      if (!stored) {
        n--;
        continue;
      }
      const onChain = await this.client.getBlock({ blockNumber: BigInt(n) }).catch(() => undefined);
      if (onChain?.hash === stored.hash) break;
      n--;
    }
    const ancestor = n;
    const { dropped, acted } = this.ledger.tx(() => {
      const dropped = this.ledger.deposits.reorgAbove(chainId, ancestor);
      const acted = this.ledger.deposits.handledAbove(chainId, ancestor);
      this.ledger.indexer.dropAbove(chainId, ancestor);
      this.ledger.indexer.setCursor(chainId, SOURCE, ancestor);
      return { dropped, acted };
    });
    this.metrics.reorgs.inc({ chain: chainId });
    if (acted.length) this.#checkHandled = true;
    this.log.warn({ chain: chainId, ancestor, from, dropped: dropped.length }, 'reorg: rewound to common ancestor');
    for (const d of dropped) this.log.warn({ chain: chainId, requestId: d.order_ref, deposit: d.id, ancestor }, 'reorg: deposit dropped until its block is read again');
    if (acted.length) {
      // These were confirmed and acted on; if they do not come back on the new chain, an operator must look.
      for (const d of acted) this.log.error({ chain: chainId, requestId: d.request_id ?? d.order_ref, deposit: d.id }, 'reorg removed a block holding a deposit already acted on');
    }
  }
}
