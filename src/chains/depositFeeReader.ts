import type { Ledger } from '../ledger/index.ts';
import type { Logger } from '../log.ts';
import type { ChainPorts } from './ports.ts';
import { errText } from '../lib/errors.ts';

// Deposits seen within this window get their fee read; older ones are left as they are.
const WINDOW_MS = 24 * 60 * 60 * 1000;
// A receipt read this many times without success is not asked for again (until a restart).
const MAX_ATTEMPTS = 5;
const BATCH = 100;

/**
 * Reads, once, the fee each deposit transaction paid (its receipt: `inTxs[].fee` of the request
 * records) and keeps it in the ledger. It runs beside the indexers, after a deposit is recorded
 * and off the path to its fill: the API only reads the ledger, so no client request causes an RPC
 * call, and a fill never waits for a receipt it does not need.
 */
export class DepositFeeReader {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  readonly #attempts = new Map<string, number>();

  constructor(
    private readonly ledger: Ledger,
    private readonly chains: Pick<ChainPorts, 'txFees'>,
    private readonly log: Logger,
    private readonly opts: { intervalMs: number; now: () => number } = { intervalMs: 2000, now: Date.now },
  ) {}

  /** One pass over the recent deposits whose fee is unknown. */
  async runOnce(): Promise<void> {
    const todo = new Map<string, { chainId: number; txHash: string }>();
    for (const d of this.ledger.deposits.recentWithoutTxFee(this.opts.now() - WINDOW_MS, BATCH)) {
      const key = `${d.chain_id}:${d.tx_hash}`;
      if (this.chains.txFees(d.chain_id) && (this.#attempts.get(key) ?? 0) < MAX_ATTEMPTS) todo.set(key, { chainId: d.chain_id, txHash: d.tx_hash });
    }
    const read: { chainId: number; txHash: string; fee: bigint }[] = [];
    await Promise.all(
      [...todo].map(async ([key, { chainId, txHash }]) => {
        try {
          read.push({ chainId, txHash, fee: await this.chains.txFees(chainId)!.txFee(txHash) });
          this.#attempts.delete(key);
        } catch (e) {
          this.#attempts.set(key, (this.#attempts.get(key) ?? 0) + 1);
          this.log.debug({ chainId, txHash, err: errText(e) }, 'deposit fee not readable yet');
        }
      }),
    );
    // The pass's fees in one commit (each write on its own was a disk flush per deposit), lazy: a fee
    // lost in a power failure is read again from the chain.
    if (read.length) this.ledger.tx(() => read.forEach((r) => this.ledger.deposits.setTxFee(r.chainId, r.txHash, r.fee)), { lazy: true });
  }

  start(): void {
    const tick = () => {
      this.#running = this.runOnce()
        .catch((e) => this.log.warn({ err: errText(e) }, 'reading deposit fees failed'))
        .finally(() => {
          this.#running = undefined;
          if (this.#timer) this.#timer = setTimeout(tick, this.opts.intervalMs).unref();
        });
    };
    this.#timer = setTimeout(tick, this.opts.intervalMs).unref();
  }

  async stop(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }
}
