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

// A moment of the node's clock as a block: the exchange's ledger is final, nothing is replaced.
const timeBlock = (ms: number): SourceBlock => ({ number: ms, hash: `time:${ms}`, parentHash: `time:${ms - 1}` });

/** The exchange's transfers to the solver, read from its ledger updates. */
export class ExchangeDepositSource implements DepositSource {
  readonly rangeMethod = 'ledgerUpdates';

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
   * oldest transfer still waiting for its authorization (within the chain's orphan grace).
   */
  async deposits(from: number, _to: number): Promise<RangeRead> {
    const cursor = from - 1;
    const updates = await this.client.ledgerUpdates(this.solver, cursor);
    const now = Date.now();
    let next = cursor;
    let waiting: number | undefined;
    const deposits: (ChainDeposit & { seen_at: number })[] = [];
    for (const u of updates) {
      // What the exchange answers is input too: an entry the ledger cannot hold is skipped, loudly.
      if (typeof u?.time !== 'number' || !Number.isSafeInteger(u.time) || u.time < 0 || typeof u.hash !== 'string' || !/^0x[0-9a-fA-F]{64}$/.test(u.hash)) {
        this.log.error({ update: JSON.stringify(u).slice(0, 300) }, 'unreadable ledger update from the exchange; skipped');
        continue;
      }
      if (u.time > next) next = u.time;
      const t = transferToSolver(u.delta, this.solver);
      if (!t) continue;
      if (this.known(depositId(this.chain.id, u.hash))) continue;
      const sender = t.user;
      const mapping = t.nonce !== undefined ? this.nonces.get(sender, t.nonce) : undefined;
      // A transfer with no nonce (a usdSend) can have no authorization: it is an orphan at once.
      if (!mapping && t.nonce !== undefined && now - u.time < this.chain.orphanGraceMs) {
        // Its authorization may still be on its way: read this transfer again next time.
        waiting = Math.min(waiting ?? u.time, u.time);
        continue;
      }
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
        continue;
      }
      let amount: bigint;
      try {
        amount = parseDecimalFloor(t.amount as string, asset.decimals);
      } catch {
        this.log.error({ hash: u.hash, amount: t.amount }, 'transfer to the solver with an unreadable amount; manual action required');
        continue;
      }
      if (!mapping) {
        this.log.warn(
          { hash: u.hash, from: sender, nonce: t.nonce, type: u.delta?.type },
          'transfer to the solver with no authorized nonce: booked as an orphan deposit',
        );
      }
      deposits.push({
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
      });
    }
    return { deposits, entries: updates.length, blockHashes: new Map(), upTo: waiting !== undefined ? Math.min(waiting, next) : next };
  }

  /** Never asked: the exchange's ledger is final, so the driver keeps no unfinalized blocks to check deposits against. */
  async inclusion(_txHash: string): Promise<Inclusion | undefined> {
    throw new Error('the exchange ledger is final: no inclusion to check');
  }
}
