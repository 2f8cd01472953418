// Withdrawals from the perpetuals exchange to the solver, as a DepositSource. A withdrawal is the
// user's sendAsset to the solver: the source reads the solver's non-funding ledger updates from the
// driver's cursor (exchange time, ms) and associates a transfer to a request only through the nonce
// the user authorized (exchange_nonces); any other transfer is booked as an orphan deposit, which the
// solver refunds. The exchange's ledger is final: the driver confirms what it lists at once.
import { getAddress, isAddress, type Address, type Hex } from 'viem';
import type { ExchangeChainConfig } from '../../config/schema.ts';
import type { ChainDeposit } from '../../ledger/deposits.ts';
import type { DepositSource, Inclusion, RangeRead, SourceBlock } from '../../indexer/source.ts';
import type { Logger } from '../../log.ts';
import { UnknownAssetError, type ExchangeAssets } from './assets.ts';
import { parseDecimalFloor, type ExchangeClient, type LedgerUpdate } from './client.ts';
import type { Ledger } from '../../ledger/index.ts';
import { NONCE_AHEAD_MS, NONCE_BEHIND_MS } from './nonceWindow.ts';

// The order_ref of a transfer no authorization ties to a request: it matches no request.
const NO_REQUEST = `0x${'0'.repeat(64)}` as Hex;

/** What a ledger update moved from another account into the solver's, in sendAsset terms. */
interface TransferIn {
  user: Address;
  token: unknown;
  /** The DEX it credited: '' perps, 'spot', or a named DEX. */
  dex: unknown;
  amount: unknown;
  nonce: number | undefined;
}

/**
 * The transfer a ledger update made to the solver from another account, or undefined. Three kinds of update move
 * value between accounts: a sendAsset (`send`), a spotSend (`spotTransfer`: a spot token) and a usdSend
 * (`internalTransfer`: perps USD, its amount in `usdc`, no nonce). Each is a deposit: read as none, a usdSend or a
 * spotSend to the solver was never refunded.
 */
export function transferToSolver(delta: LedgerUpdate['delta'] | undefined, solver: Address): TransferIn | undefined {
  const d = delta as Record<string, unknown> | undefined;
  if (d?.type !== 'send' && d?.type !== 'spotTransfer' && d?.type !== 'internalTransfer') return undefined;
  if (!isAddress((d.destination as string) ?? '', { strict: false }) || !isAddress((d.user as string) ?? '', { strict: false })) return undefined;
  const user = getAddress(d.user as string);
  if (getAddress(d.destination as string) !== solver || user === solver) return undefined;
  const nonce = typeof d.nonce === 'number' ? d.nonce : undefined;
  if (d.type === 'send') return { user, token: d.token, dex: d.destinationDex, amount: d.amount, nonce };
  if (d.type === 'spotTransfer') return { user, token: d.token, dex: 'spot', amount: d.amount, nonce };
  return { user, token: 'USDC', dex: '', amount: d.usdc, nonce: undefined };
}

/** The ledger id of the exchange deposit made by the ledger update `hash`. */
export function depositId(chainId: number, hash: Hex | string): string {
  return `${chainId}:${hash.toLowerCase()}:0`;
}

// What the exchange answers is input too: an update the ledger can hold has a safe time and a 32-byte hash.
const readable = (u: LedgerUpdate | undefined): u is LedgerUpdate =>
  typeof u?.time === 'number' && Number.isSafeInteger(u.time) && u.time >= 0 && typeof u.hash === 'string' && /^0x[0-9a-fA-F]{64}$/.test(u.hash);

// Wallets read for a flooded millisecond in one pass (below). A ledger read weighs 20 of the 1,200 a minute Hyperliquid
// allows an address; the solver's own listing takes one a pass.
const WALLET_READS_PER_PASS = 5;

// A moment of the node's clock as a block: the exchange's ledger is final, nothing is replaced.
const timeBlock = (ms: number): SourceBlock => ({ number: ms, hash: `time:${ms}`, parentHash: `time:${ms - 1}` });

/** The exchange's transfers to the solver, read from its ledger updates. */
export class ExchangeDepositSource implements DepositSource {
  readonly rangeMethod = 'ledgerUpdates';
  readonly clockHeads = true;
  // By millisecond the solver's ledger could not be listed past: the wallets read whole there with nothing (left) for
  // the solver, and those whose own ledger the exchange cannot list whole there either.
  readonly #flooded = new Map<number, { nothing: Set<string>; unreadable: Set<string> }>();

  constructor(
    private chain: ExchangeChainConfig,
    private client: ExchangeClient,
    private assets: ExchangeAssets,
    private nonces: Ledger['exchangeNonces'],
    private solver: Address,
    // Whether the ledger already holds this deposit id.
    private known: (depositId: string) => boolean,
    private log: Logger,
  ) {}

  /** Now, on the node's clock: the driver reads every update from its cursor on. */
  async head(): Promise<SourceBlock> {
    return timeBlock(Date.now());
  }

  /** A moment (final: never replaced). */
  async block(n: number): Promise<SourceBlock> {
    return timeBlock(n);
  }

  /**
   * The transfers to the solver listed from the cursor (`from - 1`, read again inclusively: updates of
   * the same millisecond may be listed late) on. `upTo` is the newest update time read, held back to the
   * oldest transfer still waiting for its authorization (within the chain's orphan grace), and to a millisecond
   * the exchange could not list whole (below).
   */
  async deposits(from: number, _to: number): Promise<RangeRead> {
    const cursor = from - 1;
    const truncated: number[] = [];
    const updates = await this.client.ledgerUpdates(this.solver, cursor, undefined, truncated);
    const now = Date.now();
    let next = cursor;
    let waiting: number | undefined;
    const wait = (t: number) => {
      waiting = Math.min(waiting ?? t, t);
    };
    const deposits = new Map<string, ChainDeposit & { seen_at: number }>();
    let entries = updates.length;
    const take = async (u: LedgerUpdate) => {
      const read = await this.#deposit(u, now);
      if (read === 'waiting') wait(u.time);
      else if (read) deposits.set(read.tx_hash, read);
    };
    for (const u of updates) {
      // What the exchange answers is input too: an entry the ledger cannot hold is skipped, loudly.
      if (!readable(u)) {
        this.log.error({ update: JSON.stringify(u).slice(0, 300) }, 'unreadable ledger update from the exchange; skipped');
        continue;
      }
      if (u.time > next) next = u.time;
      await take(u);
    }
    // A millisecond holding a full page of the solver's updates cannot be listed past them, and anyone adds updates to
    // the solver's ledger (a dust transfer to it): a user's transfer past them is read from the user's own ledger. Every
    // wallet that authorized a nonce the exchange could take in that millisecond, for a request whose transfer may still
    // come (waiting, or fast-filled: exchangeNonces.awaiting), is read for it, the nearest nonces first and at most
    // WALLET_READS_PER_PASS a pass: each read counts against the exchange's rate limit, and anyone may authorize as
    // many requests as they like (all read in one pass, they failed it whole, and with it what came after the flood).
    // The cursor stays at the millisecond until every such wallet is read, and for the orphan grace (an authorization
    // may still come).
    for (const t of truncated) {
      const wallets = [
        ...new Set(
          this.nonces
            .awaiting(this.chain.id, t - NONCE_BEHIND_MS - NONCE_AHEAD_MS, t - NONCE_BEHIND_MS, t + NONCE_AHEAD_MS)
            // An authorization made after the grace counts for no transfer of then (one read whole is an orphan by
            // then): the wallets to read are fixed once it has passed, and new authorizations cannot hold the cursor.
            .filter((m) => m.created_at <= t + this.chain.orphanGraceMs)
            .sort((a, b) => Math.abs(a.nonce - t) - Math.abs(b.nonce - t))
            .map((m) => m.wallet),
        ),
      ];
      // A wallet's ledger at a past millisecond is final: one read whole with nothing in it for the solver but what the
      // ledger holds already is not read again (a transfer found is read again until the ledger holds it: it is booked
      // by a pass the driver commits, which this source does not see), nor one the exchange cannot list whole either.
      const done = this.#flooded.get(t) ?? { nothing: new Set<string>(), unreadable: new Set<string>() };
      this.#flooded.set(t, done);
      let reads = 0;
      let more = false;
      for (const wallet of wallets) {
        if (done.nothing.has(wallet) || done.unreadable.has(wallet)) continue;
        if (reads++ === WALLET_READS_PER_PASS) {
          more = true;
          break;
        }
        const partial: number[] = [];
        const own = (await this.client.ledgerUpdates(wallet as Address, t, t, partial)).filter((u) => readable(u) && u.time === t);
        entries += own.length;
        for (const u of own) await take(u);
        if (partial.length) done.unreadable.add(wallet);
        else if (own.every((u) => !transferToSolver(u.delta, this.solver) || this.known(depositId(this.chain.id, u.hash)))) done.nothing.add(wallet);
      }
      if (more || now - t < this.chain.orphanGraceMs) wait(t);
      else
        this.log.error(
          { time: t, unreadWallets: [...done.unreadable] },
          'the exchange could not list every update of the solver at this time: transfers in it that no open request authorized, and those of these wallets, are not booked; manual action required',
        );
    }
    for (const t of this.#flooded.keys()) if (!truncated.includes(t)) this.#flooded.delete(t);
    return { deposits: [...deposits.values()], entries, blockHashes: new Map(), upTo: waiting !== undefined ? Math.min(waiting, next) : next };
  }

  /** The deposit a ledger update makes, 'waiting' while its authorization may still come, or undefined. */
  async #deposit(u: LedgerUpdate, now: number): Promise<(ChainDeposit & { seen_at: number }) | 'waiting' | undefined> {
    const t = transferToSolver(u.delta, this.solver);
    if (!t) return undefined;
    if (this.known(depositId(this.chain.id, u.hash))) return undefined;
    const sender = t.user;
    const mapping = t.nonce !== undefined ? this.nonces.get(sender, t.nonce) : undefined;
    // A transfer with no nonce (a usdSend) can have no authorization: it is an orphan at once.
    // Otherwise its authorization may still be on its way: read this transfer again next time.
    if (!mapping && t.nonce !== undefined && now - u.time < this.chain.orphanGraceMs) return 'waiting';
    // A failing spotMeta read throws (the pass is retried, the cursor stays); an unknown token does not.
    const asset =
      typeof t.token === 'string' && typeof t.dex === 'string'
        ? await this.assets.ofTransfer(t.token, t.dex).catch((e) => {
            if (e instanceof UnknownAssetError) return undefined;
            throw e;
          })
        : undefined;
    if (!asset) {
      this.log.error(
        { hash: u.hash, token: t.token, dex: t.dex, from: sender },
        'transfer to the solver in a token the exchange does not list; manual action required',
      );
      return undefined;
    }
    let amount: bigint;
    try {
      amount = parseDecimalFloor(t.amount as string, asset.decimals);
    } catch {
      this.log.error({ hash: u.hash, amount: t.amount }, 'transfer to the solver with an unreadable amount; manual action required');
      return undefined;
    }
    if (!mapping) {
      this.log.warn(
        { hash: u.hash, from: sender, nonce: t.nonce, type: u.delta?.type },
        'transfer to the solver with no authorized nonce: booked as an orphan deposit',
      );
    }
    return {
      tx_hash: u.hash.toLowerCase() as Hex,
      log_index: 0,
      block_number: u.time,
      block_hash: u.hash.toLowerCase() as Hex,
      depositor: sender,
      currency: asset.currency,
      amount: amount.toString(),
      order_ref: (mapping?.request_id ?? NO_REQUEST) as Hex,
      // When the exchange applied it, not when the node read it.
      seen_at: u.time,
    };
  }

  /** Never asked: the exchange's ledger is final, so the driver keeps no unfinalized blocks to check deposits against. */
  async inclusion(_txHash: string): Promise<Inclusion | undefined> {
    throw new Error('the exchange ledger is final: no inclusion to check');
  }
}
