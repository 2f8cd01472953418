import { getAddress, zeroAddress, type Address, type Hex, type PublicClient, type TransactionReceipt } from 'viem';
import type { EvmChainConfig } from '../../config/schema.ts';
import type { Ledger } from '../../ledger/index.ts';
import type { FundingPart } from '../../ledger/funding.ts';
import type { Logger } from '../../log.ts';
import type { FundingTransfer } from '../adapter.ts';
import { errText } from '../../lib/errors.ts';
import { Loop } from '../../lib/loop.ts';
import { confirmationsForWorth, depositWorth, mostConfirmations, type SeenPrice } from './confirmations.ts';

// App balances are funded by a transfer to the solver whose calldata ends with
// 012345abcdef + the 20-byte address to credit + 012345abcdef (the interface's format).
const MARKER = /012345abcdef([0-9a-f]{40})012345abcdef$/i;
const SOURCE = 'app-balance';
const MAX_BLOCKS_PER_PASS = 50;
// A pass runs on every head the indexer reads; this timer only backs that up.
const BACKSTOP_MS = 30_000;
// keccak256("Transfer(address,address,uint256)")
const TRANSFER_TOPIC = '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef';

/** The wallet a funding marker names, or undefined when the calldata carries none. */
export function parseFunding(input: string): Address | undefined {
  const m = MARKER.exec(input);
  return m ? getAddress(`0x${m[1]}`) : undefined;
}

/**
 * The node's own contracts on `chain` (depository, filler, deposit address factory). A call to one of
 * them is never an app balance funding: whatever it pays the solver is the solver's own money (a
 * depository withdrawal anyone may submit, with a marker appended that the contract ignores).
 */
export function nodeContracts(chain: Pick<EvmChainConfig, 'depository' | 'filler' | 'depositAddressFactory'>): Set<Address> {
  const own = [chain.depository, chain.filler, chain.depositAddressFactory].filter((a): a is Address => !!a);
  return new Set(own.map((a) => getAddress(a)));
}

/**
 * What the sender of a successful transaction paid `solver` from its own address: each Transfer log of
 * a configured token from `tx.from` to the solver (the logged amount, so a fee-on-transfer token counts
 * what arrived) and the transaction's native value when it is sent to the solver directly. Nothing for
 * a reverted transaction, for one the solver sent, or for a call to one of `own` (the node's contracts).
 */
export function fundingParts(
  tx: { from: Address; to: Address | null; value: bigint },
  receipt: Pick<TransactionReceipt, 'status' | 'logs'>,
  solver: Address,
  tokens: Set<string>,
  own: ReadonlySet<Address>,
): FundingPart[] {
  if (receipt.status !== 'success') return [];
  const sender = getAddress(tx.from);
  if (sender === solver || (tx.to && own.has(getAddress(tx.to)))) return [];
  const parts: FundingPart[] = [];
  // The native value is the sender's own by construction; value a contract forwards inside the call is not read.
  if (tx.to && getAddress(tx.to) === solver && tx.value > 0n) parts.push({ currency: zeroAddress, amount: tx.value, logIndex: -1 });
  for (const l of receipt.logs) {
    if (l.topics.length !== 3 || l.topics[0] !== TRANSFER_TOPIC || !tokens.has(getAddress(l.address))) continue;
    const from = getAddress(`0x${l.topics[1]!.slice(26)}`);
    const to = getAddress(`0x${l.topics[2]!.slice(26)}`);
    const amount = BigInt(l.data === '0x' ? 0 : l.data);
    // Only a transfer out of the sender's own address proves the sender funded it: tokens some contract
    // pays the solver in the same transaction (a depository withdrawal, a transferFrom of a third
    // party's allowance) are not the sender's money.
    if (to !== solver || from !== sender || amount <= 0n) continue;
    parts.push({ currency: getAddress(l.address), amount, logIndex: l.logIndex ?? 0 });
  }
  return parts;
}

async function receiptOf(client: PublicClient, hash: Hex): Promise<TransactionReceipt | undefined> {
  return client.getTransactionReceipt({ hash }).catch((e: Error) => {
    if (e.name === 'TransactionReceiptNotFoundError') return undefined;
    throw e; // an RPC failure proves nothing: the pass is retried
  });
}

/**
 * Reads confirmed blocks for marked transactions, and reports what each successful one moved to the
 * solver once; the cursor moves only after the report is booked. Credits whose block a reorg replaced
 * are checked against the new chain and reversed when their transfer is gone.
 */
export class FundingWatcher {
  readonly #loop: Loop;
  #tokens: Set<string>;
  readonly #own: Set<Address>;
  // The newest head the indexer reported (0 before the first).
  #head = 0;

  constructor(
    private chain: EvmChainConfig,
    private client: PublicClient,
    private ledger: Ledger,
    private solver: Address,
    private report: (t: FundingTransfer) => Promise<void>,
    private log: Logger,
    // The newest price the node's feed gave (the indexer's deposits are weighed at it too, where above the configured one).
    private seen?: SeenPrice,
  ) {
    this.#own = nodeContracts(chain);
    this.#tokens = new Set(chain.currencies.filter((c) => getAddress(c.address) !== zeroAddress).map((c) => getAddress(c.address)));
    this.#loop = new Loop(
      async () => {
        if (this.#head > 0) await this.#pass(this.#head);
      },
      BACKSTOP_MS,
      (e) => this.log.warn({ err: errText(e) }, 'app balance funding scan failed; retrying'),
    );
  }

  /** Starts scanning: a pass on every head the indexer reports, and on a backstop timer. */
  start(): void {
    this.#loop.start();
  }

  /** The indexer read a new head: scan up to its confirmed blocks (heads during a pass coalesce into one more pass). */
  onHead(head: bigint): void {
    this.#head = Number(head);
    this.#loop.wake();
  }

  /** Stops scanning; resolves once the pass under way has finished. */
  async stop(): Promise<void> {
    await this.#loop.stop();
  }

  async #pass(head: number): Promise<void> {
    await this.#checkReorgs(head);
    const confirmed = head - this.chain.confirmations + 1;
    const from = (this.ledger.indexer.cursor(this.chain.id, SOURCE) ?? this.chain.startBlock - 1) + 1;
    const to = Math.min(confirmed, from + MAX_BLOCKS_PER_PASS - 1);
    for (let n = from; n <= to; n++) {
      const block = await this.client.getBlock({ blockNumber: BigInt(n), includeTransactions: true });
      const found: FundingTransfer[] = [];
      const nothing: { tx: Hex; from: Address; reverted: boolean }[] = [];
      for (const tx of block.transactions) {
        const marked = parseFunding(tx.input);
        if (!marked || getAddress(tx.from) === this.solver) continue;
        const receipt = await receiptOf(this.client, tx.hash);
        // Not found: the block was replaced since it was read; the reorg check rewinds the cursor.
        if (!receipt) return;
        const parts = fundingParts(tx, receipt, this.solver, this.#tokens, this.#own);
        if (!parts.length) {
          nothing.push({ tx: tx.hash, from: tx.from, reverted: receipt.status !== 'success' });
          continue;
        }
        const credited = marked === zeroAddress ? getAddress(tx.from) : marked;
        found.push({ chainId: this.chain.id, txHash: tx.hash, blockNumber: n, blockHash: block.hash!, from: getAddress(tx.from), credited, parts });
      }
      // A credit is spendable at once (fast fills, relays, sponsorship): it waits as long as deposits of its
      // worth wait (confirmationsByValue), or a reorg shallower than that row takes back what was spent. The
      // scan stops here until the block is deep enough; the next head looks again.
      if (found.length && !this.#deepEnough(n, head, found)) return;
      for (const x of nothing) {
        if (x.reverted) this.log.warn({ tx: x.tx }, 'marked funding transaction reverted: nothing credited');
        // Named so a funder paying from another address (a contract wallet) can be told why.
        else this.log.warn({ tx: x.tx, from: x.from }, 'marked transaction paid the solver nothing from its sender: nothing credited');
      }
      for (const t of found) await this.report(t);
      // Lazy (no disk flush per block): a cursor lost in a power failure reads its blocks again, and a
      // transaction already credited is never credited twice (FundingCredits.credit).
      this.ledger.tx(
        () => {
          this.ledger.indexer.setCursor(this.chain.id, SOURCE, n);
          this.ledger.funding.setScanMark(this.chain.id, SOURCE, n, block.hash!);
        },
        { lazy: true },
      );
    }
  }

  // Whether the funding transfers `found` in block `n` are as deep as confirmationsByValue asks, judged as the
  // indexer judges deposits: for every reorg that would remove them, they and the credits standing in the blocks
  // it removes ask no more blocks than its depth (each worth at the higher of the currency's configured usdPrice and
  // the feed's newest price: the credit is booked at the feed's).
  #deepEnough(n: number, head: number, found: FundingTransfer[]): boolean {
    if (!this.chain.confirmationsByValue?.length) return true;
    const worth = (parts: FundingPart[]) => parts.reduce((sum, p) => sum + (depositWorth(this.chain, p.currency, p.amount, this.seen) ?? 0n), 0n);
    const ours = new Set(found.map((t) => t.txHash));
    let sum = found.reduce((s, t) => s + worth(t.parts), 0n);
    // Standing credits a reorg removing block n (or a deeper one) could take back with them: those in blocks
    // below the deepest row are past every row already.
    const standing = this.ledger.funding
      .standingFrom(this.chain.id, head - mostConfirmations(this.chain) + 1)
      .filter((c) => !ours.has(c.tx_hash as Hex))
      .sort((a, b) => b.block_number - a.block_number);
    for (const c of standing) if (c.block_number >= n) sum += worth(c.parts);
    if (confirmationsForWorth(this.chain, sum) > head - n + 1) return false;
    for (const c of standing) {
      if (c.block_number >= n) continue;
      sum += worth(c.parts);
      if (confirmationsForWorth(this.chain, sum) > head - c.block_number + 1) return false;
    }
    return true;
  }

  // A reorg under what was read: the scan restarts below it (credits already standing are not booked
  // twice), and each credit whose block was replaced is checked on the new chain. Its transaction
  // gone, reverted, or moving less than was credited: the credit is reversed.
  async #checkReorgs(head: number): Promise<void> {
    const mark = this.ledger.funding.scanMark(this.chain.id, SOURCE);
    if (mark && (mark.block_number > head || (await this.client.getBlock({ blockNumber: BigInt(mark.block_number) })).hash !== mark.block_hash)) {
      const back = Math.max(this.chain.startBlock - 1, Math.min(head, mark.block_number) - this.chain.finalityDepth);
      this.ledger.tx(() => {
        this.ledger.indexer.setCursor(this.chain.id, SOURCE, back);
        this.ledger.funding.setScanMark(this.chain.id, SOURCE, back, '');
      });
      this.log.warn({ from: mark.block_number, to: back }, 'reorg under the app balance funding scan: reading again');
    }
    const confirmed = head - this.chain.confirmations + 1;
    for (const c of this.ledger.funding.standingFrom(this.chain.id, head - this.chain.finalityDepth)) {
      if (c.block_number <= head) {
        const b = await this.client.getBlock({ blockNumber: BigInt(c.block_number) });
        if (b.hash === c.block_hash) continue;
      }
      const receipt = await receiptOf(this.client, c.tx_hash as Hex);
      // Included again, not yet confirmed: looked at again on a later pass.
      if (receipt?.status === 'success' && Number(receipt.blockNumber) > confirmed) continue;
      if (receipt?.status === 'success') {
        const tx = await this.client.getTransaction({ hash: c.tx_hash as Hex });
        const now = fundingParts(tx, receipt, this.solver, this.#tokens, this.#own);
        const sum = (ps: FundingPart[], cur: string) => ps.filter((p) => p.currency === cur).reduce((a, p) => a + p.amount, 0n);
        if (c.parts.every((p) => sum(now, p.currency) >= sum(c.parts, p.currency))) continue;
      }
      const reason = receipt
        ? receipt.status === 'success'
          ? 'reorg: the transfer moved less on the new chain'
          : 'reorg: the transfer reverted on the new chain'
        : 'reorg: the transfer is not on the new chain';
      const booked = this.ledger.tx(() => this.ledger.funding.reverse(c, reason));
      if (booked) this.log.error({ wallet: c.wallet, tx: c.tx_hash, micro: c.micro.toString(), reason }, 'app balance credit reversed');
    }
  }
}
