// In-memory stand-in for the Hyperliquid-like perpetuals exchange (chain id 1337), on loopback.
//
//   POST /info      clearinghouseState | spotClearinghouseState | spotMeta | userNonFundingLedgerUpdates |
//                   preTransferCheck | subAccounts
//   POST /exchange  { action: sendAsset | usdSend | spotSend, nonce, signature: {r, s, v} }
//
// An API wallet (agent) the account approved (ExchangeState.approveAgent) moves value between the account's own
// balances with agentSendAsset (ExchangeState.applyAgentSend; its L1 wire signing is not modeled): the ledger shows the
// account's `send`, with the agent's nonce, which is checked in the agent's own 100 highest nonces, not the account's.
// `subAccounts` answers null (this exchange has none).
//
// usdSend and spotSend are the exchange's two other user-signed transfers (perps USD, and a spot token), as
// Hyperliquid has them (renamed as sendAsset is: `ExchangeTransaction:UsdSend` / `:SpotSend`, `exchangeChain`,
// the nonce is the action's `time`). The ledger shows them as their own update types: `internalTransfer`
// (`usdc`, no nonce) and `spotTransfer` (`token`, `amount`, `nonce`), not `send`.
//
// The activation fee, as Hyperliquid documents it: the first transfer to an account the exchange does not know
// costs 1 quote token, charged to the sender on top of the amount and shown as the update's `fee`. An account whose
// balances all reach zero is purged, and is new again. The stand-in charges the fee in perps USD (the audit reads it
// there); it does not model the sender's own first-send fee (every devnet account is funded before it sends).
//
// Balances are integers: perps USD in micro-USD (6 decimals), spot/named-DEX balances in the
// token's wei units (weiDecimals from spotMeta). sendAsset DEX names follow Hyperliquid:
// '' = the default USDC perps DEX, 'spot' = spot balance, anything else = a named DEX.
// Every sendAsset is verified by recovering the EIP-712 signer with viem; nothing in the body is
// trusted as the sender. Failures answer HTTP 200 {status:'err', response:'<message>'} like
// Hyperliquid; only malformed JSON (or a non-object body) is a 400.

import type { SendLedgerDelta, SpotTransferLedgerDelta } from '../../chains/exchange/client.ts';
import { requestWeight } from '../../chains/exchange/requestWeight.ts';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getAddress, isAddress, keccak256, recoverTypedDataAddress, toHex, type Address, type Hex } from 'viem';
import {
  DEFAULT_EXCHANGE_CHAIN,
  SEND_ASSET_ACTION_KEYS,
  chainIdFromHex,
  formatUnitsDecimal,
  joinSignature,
  sendAssetDomain,
  parseUnitsStrict,
  recoverSendAssetSigner,
  type SendAssetAction,
  type SplitSignature,
} from '../../chains/exchange/typedData.ts';
import { errText, RelayNodeError } from '../../lib/errors.ts';

// The most updates the exchange answers for a time range (its info endpoint's documented page).
const TIME_RANGE_LIMIT = 500;
// Hyperliquid keeps the 100 highest nonces each signer used: once it holds 100, a nonce must exceed the smallest of them
// (and may not repeat), so an action signed long enough before the signer's next 100 can never be applied.
export const NONCE_SET_SIZE = 100;
/** Hyperliquid's nonce window: (T - 2 days, T + 1 day). */
export const HYPERLIQUID_NONCE_WINDOW = { behindMs: 2 * 24 * 60 * 60_000, aheadMs: 24 * 60 * 60_000 };

export const PERPS_DECIMALS = 6;
const MAX_BODY_BYTES = 1 << 20;

export interface StandinToken {
  name: string;
  szDecimals: number;
  weiDecimals: number;
  index: number;
  tokenId: Hex;
  /** USD price in micro-USD per whole token, used for `usdcValue`. */
  priceMicroUsd: bigint;
  fullName: string | null;
}

/** Hyperliquid mainnet's USDC and HYPE metadata (index, tokenId, decimals). */
export const STANDIN_TOKENS: readonly StandinToken[] = [
  {
    name: 'USDC',
    szDecimals: 8,
    weiDecimals: 8,
    index: 0,
    tokenId: '0x6d1e7cde53ba9467b783cb7c530ce054',
    priceMicroUsd: 1_000_000n,
    fullName: null,
  },
  {
    name: 'HYPE',
    szDecimals: 2,
    weiDecimals: 8,
    index: 150,
    tokenId: '0x0d01dc56dcaaca66ad901c959b4011ec',
    priceMicroUsd: 25_000_000n,
    fullName: 'Hyperliquid',
  },
];

/** The exchange's own wire shape, as the node's client reads it. */
export type SendDelta = SendLedgerDelta;
/** A usdSend's update (Hyperliquid's `internalTransfer`): perps USD, no nonce. */
export interface InternalTransferDelta {
  type: 'internalTransfer';
  usdc: string;
  user: Address;
  destination: Address;
  fee: string;
  nonce?: undefined;
}

export interface LedgerUpdate {
  time: number;
  hash: Hex;
  delta: SendDelta | SpotTransferLedgerDelta | InternalTransferDelta;
}

/** The exchange's other user-signed transfers: usdSend (perps USD) and spotSend (a spot token). */
export const USD_SEND_TYPES = {
  'ExchangeTransaction:UsdSend': [
    { name: 'exchangeChain', type: 'string' },
    { name: 'destination', type: 'string' },
    { name: 'amount', type: 'string' },
    { name: 'time', type: 'uint64' },
  ],
} as const;
export const SPOT_SEND_TYPES = {
  'ExchangeTransaction:SpotSend': [
    { name: 'exchangeChain', type: 'string' },
    { name: 'destination', type: 'string' },
    { name: 'token', type: 'string' },
    { name: 'amount', type: 'string' },
    { name: 'time', type: 'uint64' },
  ],
} as const;

/** A posted usdSend or spotSend action (the signed message plus `type` and `signatureChainId`). */
export interface SimpleSendAction {
  type: 'usdSend' | 'spotSend';
  signatureChainId: Hex;
  exchangeChain: string;
  destination: string;
  /** spotSend only: `NAME:0x<tokenId>`. */
  token?: string;
  amount: string;
  time: number;
}

/** The typed data a usdSend or spotSend is signed over. */
export function simpleSendTypedData(action: SimpleSendAction, domainName?: string) {
  const domain = sendAssetDomain(chainIdFromHex(action.signatureChainId), domainName);
  const base = { exchangeChain: action.exchangeChain, destination: action.destination, amount: action.amount, time: BigInt(action.time) };
  return action.type === 'usdSend'
    ? ({ domain, types: USD_SEND_TYPES, primaryType: 'ExchangeTransaction:UsdSend', message: base } as const)
    : ({ domain, types: SPOT_SEND_TYPES, primaryType: 'ExchangeTransaction:SpotSend', message: { ...base, token: action.token ?? '' } } as const);
}

type TransferKind = 'sendAsset' | 'usdSend' | 'spotSend';

export interface StartExchangeStandinOptions {
  host?: string;
  port?: number;
  /** When set, only these signature chain ids are accepted; otherwise any. */
  signatureChainIds?: number[];
  /** The activation fee in perps USD, decimal (default '1.0', Hyperliquid's 1 USDC). */
  activationFee?: string;
  /** Accepted `exchangeChain` value (default 'Mainnet'). */
  exchangeChain?: string;
  /** Named (non-spot, non-perps) DEXs that hold token balances. Default ['xyz']. */
  dexes?: string[];
  /** Clock for ledger timestamps (ms). Default Date.now. */
  now?: () => number;
  /**
   * EIP-712 domain names, besides the spec's `ExchangeSignTransaction`, that a client may ask a
   * sendAsset to be verified under with `POST /exchange?domainName=<name>` (the public SDK signs
   * under the production exchange's name). Default none: only the spec's name.
   */
  extraDomainNames?: string[];
  /**
   * Hyperliquid's limit per IP address: the request weight a minute (reads and actions together, weighed as the exchange
   * does), past which it answers HTTP 429. Default 0: no limit.
   */
  weightPerMinute?: number;
}

export interface CreditSpec {
  /** Decimal USD credited to the perps account. */
  perpsUsd?: string;
  /** token: name ('USDC') or tokenId; dex: '' / undefined / 'spot' = spot, else a named DEX. */
  spot?: { token: string; dex?: string; amount: string };
}

function lower(a: string): string {
  return a.toLowerCase();
}

/** All in-memory state of the stand-in. Public so tests and the devnet can inspect it. */
export class ExchangeState {
  readonly tokens: readonly StandinToken[];
  readonly dexes: readonly string[];
  /** key `${dex}|${tokenIndex}|${lowercase user}` → integer units (micro-USD for dex ''). */
  private readonly balances = new Map<string, bigint>();
  private readonly ledgers = new Map<string, LedgerUpdate[]>();
  private readonly usedNonces = new Map<string, Set<number>>();
  /** API wallets (agents), by lowercase address: the master account each acts for. */
  private readonly agents = new Map<string, string>();
  /** Each signer's highest nonces, ascending, at most NONCE_SET_SIZE. */
  private readonly highestNonces = new Map<string, number[]>();
  /**
   * Hyperliquid also takes a nonce only within (T - 2 days, T + 1 day) of its time T (HYPERLIQUID_NONCE_WINDOW). Off
   * unless a test sets it: tests sign with fixed nonces years old.
   */
  nonceWindow: { behindMs: number; aheadMs: number } | undefined;
  private seq = 0;

  constructor(
    tokens: readonly StandinToken[],
    dexes: readonly string[],
    readonly now: () => number,
    /** The activation fee, micro-USD. */
    readonly activationFee = 1_000_000n,
  ) {
    this.tokens = tokens;
    this.dexes = dexes;
  }

  get usdc(): StandinToken {
    return this.tokens[0]!;
  }

  /** Finds a token by name, tokenId, or Hyperliquid's `NAME:0x<tokenId>` form. */
  findToken(ref: string): StandinToken | undefined {
    const colon = ref.indexOf(':');
    if (colon >= 0) {
      const name = ref.slice(0, colon);
      const id = lower(ref.slice(colon + 1));
      return this.tokens.find((t) => t.name === name && t.tokenId === id);
    }
    return this.tokens.find((t) => t.name === ref || t.tokenId === lower(ref));
  }

  /** Decimals of a balance on `dex` ('' = perps: 6; otherwise the token's weiDecimals). */
  decimalsOf(dex: string, token: StandinToken): number {
    return dex === '' ? PERPS_DECIMALS : token.weiDecimals;
  }

  isKnownDex(dex: string): boolean {
    return dex === '' || dex === 'spot' || this.dexes.includes(dex);
  }

  balance(user: string, dex: string, token: StandinToken): bigint {
    return this.balances.get(`${dex}|${token.index}|${lower(user)}`) ?? 0n;
  }

  private setBalance(user: string, dex: string, token: StandinToken, value: bigint): void {
    if (value < 0n) throw new Error('negative balance');
    this.balances.set(`${dex}|${token.index}|${lower(user)}`, value);
  }

  /** Whether the exchange knows the account: it holds something somewhere (an emptied account is purged). */
  exists(user: string): boolean {
    return ['', 'spot', ...this.dexes].some((dex) => this.tokens.some((t) => this.balance(user, dex, t) > 0n));
  }

  /** Whether the account has sent a transfer (its ledger shows one from it). */
  hasSent(user: string): boolean {
    return this.ledger(user).some((u) => lower(u.delta.user) === lower(user));
  }

  /** Perps USD balance in micro-USD. */
  perpsUsd(user: string): bigint {
    return this.balance(user, '', this.usdc);
  }

  /** Balance of a token on spot ('' or 'spot') or a named DEX, in wei units. */
  spotBalance(user: string, token: string, dex = ''): bigint {
    const t = this.findToken(token);
    if (!t) throw new Error(`unknown token ${token}`);
    return this.balance(user, dex === '' ? 'spot' : dex, t);
  }

  /** Non-zero balances of a user on spot or a named DEX. */
  balancesOn(user: string, dex: string): { token: StandinToken; units: bigint }[] {
    return this.tokens.map((token) => ({ token, units: this.balance(user, dex, token) })).filter((b) => b.units > 0n);
  }

  credit(user: string, spec: CreditSpec): void {
    if (!isAddress(user, { strict: false })) throw new Error(`invalid user ${user}`);
    if (spec.perpsUsd !== undefined) {
      const units = parseUnitsStrict(spec.perpsUsd, PERPS_DECIMALS);
      this.setBalance(user, '', this.usdc, this.perpsUsd(user) + units);
    }
    if (spec.spot) {
      const token = this.findToken(spec.spot.token);
      if (!token) throw new Error(`unknown token ${spec.spot.token}`);
      const dex = !spec.spot.dex || spec.spot.dex === 'spot' ? 'spot' : spec.spot.dex;
      if (!this.isKnownDex(dex)) throw new Error(`unknown dex ${spec.spot.dex}`);
      const units = parseUnitsStrict(spec.spot.amount, token.weiDecimals);
      this.setBalance(user, dex, token, this.balance(user, dex, token) + units);
    }
  }

  ledger(user: string): readonly LedgerUpdate[] {
    return this.ledgers.get(lower(user)) ?? [];
  }

  isNonceUsed(signer: string, nonce: number): boolean {
    return this.usedNonces.get(lower(signer))?.has(nonce) ?? false;
  }

  /**
   * Applies a verified transfer atomically. Returns an error message or the ledger update.
   */
  applySend(signer: Address, action: SendAssetAction): string | LedgerUpdate {
    return this.#apply(signer, action, 'sendAsset');
  }

  /** `master` approves `agent` as its API wallet (Hyperliquid's approveAgent, signed by the master). */
  approveAgent(master: string, agent: string): void {
    if (!isAddress(master, { strict: false }) || !isAddress(agent, { strict: false })) throw new Error('approveAgent: invalid address');
    this.agents.set(lower(agent), lower(master));
  }

  /**
   * An agentSendAsset an approved API wallet signed for its master: Hyperliquid's L1 action that moves a token between the
   * master's own balances (its destination is the master itself). Its nonce is the agent's: an API wallet is a signer of
   * its own, with its own 100 highest nonces, apart from the master's. The ledger shows it as the master's `send` (the
   * update names no signer). The L1 action's wire signing (msgpack, phantom agent) is not modeled: the agent is taken as
   * verified.
   */
  applyAgentSend(
    agent: string,
    action: Pick<SendAssetAction, 'destination' | 'sourceDex' | 'destinationDex' | 'token' | 'amount' | 'nonce'>,
  ): string | LedgerUpdate {
    const master = this.agents.get(lower(agent));
    if (!master) return `User or API Wallet ${agent} does not exist.`;
    if (!isAddress(action.destination, { strict: false }) || lower(action.destination) !== master) {
      return "agentSendAsset moves value only between the account's own balances";
    }
    return this.#apply(getAddress(master), { ...action, fromSubAccount: '' }, 'sendAsset', agent);
  }

  /** Applies a verified usdSend (perps USD) or spotSend (a spot token): a transfer the ledger shows as its own type. */
  applySimpleSend(signer: Address, action: SimpleSendAction): string | LedgerUpdate {
    const dex = action.type === 'usdSend' ? '' : 'spot';
    const token = action.type === 'usdSend' ? `${this.usdc.name}:${this.usdc.tokenId}` : (action.token ?? '');
    const nonce = action.time;
    return this.#apply(
      signer,
      { destination: action.destination, sourceDex: dex, destinationDex: dex, token, amount: action.amount, fromSubAccount: '', nonce },
      action.type,
    );
  }

  #apply(
    signer: Address,
    action: Pick<SendAssetAction, 'destination' | 'sourceDex' | 'destinationDex' | 'token' | 'amount' | 'fromSubAccount' | 'nonce'>,
    kind: TransferKind,
    // Whose nonce set the action's nonce is checked against and kept in: the account's own key's, or an agent's.
    nonceSigner: string = signer,
  ): string | LedgerUpdate {
    const token = this.findToken(action.token);
    if (!token || !action.token.includes(':')) {
      return `Unknown token ${action.token}; expected NAME:0x<tokenId> as listed by spotMeta`;
    }
    for (const [field, dex] of [
      ['sourceDex', action.sourceDex],
      ['destinationDex', action.destinationDex],
    ] as const) {
      if (!this.isKnownDex(dex)) return `Unknown ${field} ${JSON.stringify(dex)}`;
      if (dex === '' && token.index !== this.usdc.index) {
        return `Token ${token.name} cannot be held on the perps DEX (only USDC)`;
      }
    }
    if (action.fromSubAccount !== '') return 'Sub-accounts are not supported by this exchange';
    let debit: bigint;
    let credit: bigint;
    try {
      debit = parseUnitsStrict(action.amount, this.decimalsOf(action.sourceDex, token));
      credit = parseUnitsStrict(action.amount, this.decimalsOf(action.destinationDex, token));
    } catch (err) {
      return `Invalid amount: ${errText(err)}`;
    }
    if (debit === 0n) return 'Amount must be positive';
    if (this.isNonceUsed(nonceSigner, action.nonce)) return `Invalid nonce: duplicate nonce ${action.nonce}`;
    if (this.nonceWindow && (action.nonce <= this.now() - this.nonceWindow.behindMs || action.nonce >= this.now() + this.nonceWindow.aheadMs)) {
      return `Invalid nonce: ${action.nonce} is outside the window the exchange takes at ${this.now()}`;
    }
    const highest = this.highestNonces.get(lower(nonceSigner)) ?? [];
    if (highest.length >= NONCE_SET_SIZE && action.nonce <= highest[0]!) {
      return `Invalid nonce: ${action.nonce} is not above the smallest of the signer's ${NONCE_SET_SIZE} highest nonces (${highest[0]})`;
    }
    const destination = getAddress(action.destination);
    const available = this.balance(signer, action.sourceDex, token);
    if (available < debit) {
      return `Insufficient balance: ${signer} has ${formatUnitsDecimal(available, this.decimalsOf(action.sourceDex, token))} ${token.name} on dex ${JSON.stringify(action.sourceDex)}, needs ${action.amount}`;
    }
    const fee = lower(destination) === lower(signer) || this.exists(destination) ? 0n : this.activationFee;
    // The fee is perps USD: from what is left of the source when the transfer is perps USD itself.
    const feeFrom = (action.sourceDex === '' ? available - debit : this.perpsUsd(signer)) - fee;
    if (feeFrom < 0n)
      return `Insufficient USDC balance for token transfer gas: activating ${destination} costs ${formatUnitsDecimal(fee, PERPS_DECIMALS)} USDC`;
    // All checks passed: mutate.
    this.setBalance(signer, action.sourceDex, token, available - debit);
    if (fee > 0n) this.setBalance(signer, '', this.usdc, this.perpsUsd(signer) - fee);
    this.setBalance(destination, action.destinationDex, token, this.balance(destination, action.destinationDex, token) + credit);
    let nonces = this.usedNonces.get(lower(nonceSigner));
    if (!nonces) this.usedNonces.set(lower(nonceSigner), (nonces = new Set()));
    nonces.add(action.nonce);
    const at = highest.findIndex((n) => n > action.nonce);
    highest.splice(at < 0 ? highest.length : at, 0, action.nonce);
    if (highest.length > NONCE_SET_SIZE) highest.shift();
    this.highestNonces.set(lower(nonceSigner), highest);

    const wei = parseUnitsStrict(action.amount, token.weiDecimals);
    const usdMicro = (wei * token.priceMicroUsd) / 10n ** BigInt(token.weiDecimals);
    const common = { user: signer, destination, fee: formatUnitsDecimal(fee, PERPS_DECIMALS) };
    const usdcValue = formatUnitsDecimal(usdMicro, PERPS_DECIMALS);
    const feeToken = fee > 0n ? this.usdc.name : '';
    const delta: LedgerUpdate['delta'] =
      kind === 'usdSend'
        ? { type: 'internalTransfer', usdc: action.amount, ...common }
        : kind === 'spotSend'
          ? { type: 'spotTransfer', token: token.name, amount: action.amount, usdcValue, ...common, nativeTokenFee: '0.0', nonce: action.nonce, feeToken }
          : {
              type: 'send',
              user: signer,
              destination,
              sourceDex: action.sourceDex,
              destinationDex: action.destinationDex,
              token: token.name,
              amount: action.amount,
              usdcValue,
              fee: common.fee,
              nativeTokenFee: '0.0',
              nonce: action.nonce,
              feeToken,
            };
    const update: LedgerUpdate = {
      time: this.now(),
      hash: keccak256(toHex(`standin-${kind === 'sendAsset' ? 'send' : kind}:${++this.seq}:${signer}:${action.nonce}`)),
      delta,
    };
    this.pushLedger(signer, update);
    if (lower(destination) !== lower(signer)) this.pushLedger(destination, update);
    return update;
  }

  private pushLedger(user: string, update: LedgerUpdate): void {
    let list = this.ledgers.get(lower(user));
    if (!list) this.ledgers.set(lower(user), (list = []));
    list.push(update);
  }
}

export interface ExchangeStandin {
  url: string;
  port: number;
  state: ExchangeState;
  credit(user: string, spec: CreditSpec): void;
  /** Requests answered 429 for the weight limit (weightPerMinute). */
  readonly rateLimited: number;
  stop(): Promise<void>;
}

class BadRequest extends RelayNodeError {
  override name = 'BadRequest';
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function requireUser(body: Record<string, unknown>, field = 'user'): Address {
  const user = body[field];
  if (typeof user !== 'string' || !isAddress(user, { strict: false })) {
    throw new BadRequest(`Failed to deserialize the JSON body: field \`${field}\` must be a 0x-prefixed 20-byte address`);
  }
  return getAddress(user);
}

function optionalTime(body: Record<string, unknown>, key: string): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    throw new BadRequest(`Failed to deserialize the JSON body: field \`${key}\` must be a non-negative integer (ms)`);
  }
  return v;
}

function handleInfo(state: ExchangeState, body: Record<string, unknown>): unknown {
  switch (body.type) {
    case 'spotMeta':
      return {
        tokens: state.tokens.map((t) => ({
          name: t.name,
          szDecimals: t.szDecimals,
          weiDecimals: t.weiDecimals,
          index: t.index,
          tokenId: t.tokenId,
          isCanonical: true,
          evmContract: null,
          fullName: t.fullName,
          deployerTradingFeeShare: '0.0',
        })),
        universe: state.tokens.slice(1).map((t, i) => ({
          tokens: [t.index, state.usdc.index],
          name: i === 0 ? `${t.name}/USDC` : `@${i}`,
          index: i,
          isCanonical: i === 0,
        })),
      };
    case 'clearinghouseState': {
      const user = requireUser(body);
      if (body.dex !== undefined && body.dex !== '') throw new BadRequest(`Unknown perps dex ${JSON.stringify(body.dex)}`);
      const usd = formatUnitsDecimal(state.perpsUsd(user), PERPS_DECIMALS);
      const summary = { accountValue: usd, totalNtlPos: '0.0', totalRawUsd: usd, totalMarginUsed: '0.0' };
      return {
        marginSummary: summary,
        crossMarginSummary: { ...summary },
        crossMaintenanceMarginUsed: '0.0',
        withdrawable: usd,
        assetPositions: [],
        time: state.now(),
      };
    }
    case 'spotClearinghouseState': {
      const user = requireUser(body);
      // Stand-in extension: `dex` selects a named DEX's token balances ('' / absent = spot).
      const dex = body.dex === undefined || body.dex === '' ? 'spot' : body.dex;
      if (typeof dex !== 'string' || dex === '' || !state.isKnownDex(dex)) {
        throw new BadRequest(`Unknown dex ${JSON.stringify(body.dex)}`);
      }
      return {
        balances: state.balancesOn(user, dex).map(({ token, units }) => ({
          coin: token.name,
          token: token.index,
          total: formatUnitsDecimal(units, token.weiDecimals),
          hold: '0.0',
          entryNtl: '0.0',
        })),
      };
    }
    case 'preTransferCheck': {
      const user = requireUser(body);
      requireUser(body, 'source');
      const userExists = state.exists(user);
      return {
        fee: formatUnitsDecimal(userExists ? 0n : state.activationFee, PERPS_DECIMALS),
        isSanctioned: false,
        userExists,
        userHasSentTx: state.hasSent(user),
      };
    }
    case 'subAccounts':
      // Hyperliquid answers null for an account with no sub-accounts; this exchange has none (fromSubAccount is refused).
      requireUser(body);
      return null;
    case 'userNonFundingLedgerUpdates': {
      const user = requireUser(body);
      const start = optionalTime(body, 'startTime') ?? 0;
      const end = optionalTime(body, 'endTime') ?? Number.MAX_SAFE_INTEGER;
      // As the exchange documents: a time range answers at most 500 updates, the oldest first; the next
      // page starts at the last one's time.
      return state
        .ledger(user)
        .filter((u) => u.time >= start && u.time <= end)
        .slice(0, TIME_RANGE_LIMIT);
    }
    default:
      throw new BadRequest(`Unknown info request type ${JSON.stringify(body.type)}`);
  }
}

/** Validates the shape of a posted sendAsset action; returns an error message or the typed action. */
function parseSendAsset(action: Record<string, unknown>): string | SendAssetAction {
  for (const key of Object.keys(action)) {
    if (!(SEND_ASSET_ACTION_KEYS as readonly string[]).includes(key)) return `Unexpected field in sendAsset action: ${key}`;
  }
  for (const key of ['signatureChainId', 'exchangeChain', 'destination', 'sourceDex', 'destinationDex', 'token', 'amount', 'fromSubAccount'] as const) {
    if (typeof action[key] !== 'string') return `sendAsset action field ${key} must be a string`;
  }
  if (typeof action.nonce !== 'number' || !Number.isSafeInteger(action.nonce) || action.nonce <= 0) {
    return 'sendAsset action field nonce must be a positive integer';
  }
  if (!isAddress(action.destination as string, { strict: false })) return 'sendAsset destination must be a 0x-prefixed 20-byte address';
  return action as unknown as SendAssetAction;
}

function parseSignature(sig: unknown): string | SplitSignature {
  if (!isObject(sig)) return 'Missing signature {r, s, v}';
  const hex32 = /^0x[0-9a-fA-F]{1,64}$/;
  if (typeof sig.r !== 'string' || !hex32.test(sig.r) || typeof sig.s !== 'string' || !hex32.test(sig.s)) {
    return 'Signature r and s must be 32-byte hex strings';
  }
  if (typeof sig.v !== 'number' || !Number.isInteger(sig.v)) return 'Signature v must be a number';
  const pad = (h: string) => `0x${h.slice(2).padStart(64, '0')}` as Hex;
  return { r: pad(sig.r), s: pad(sig.s), v: sig.v };
}

// What /exchange is configured with, and what it answers.
type ExchangeOpts = { signatureChainIds?: number[]; exchangeChain: string; extraDomainNames: string[] };
type ExchangeAnswer = { status: 'ok'; response: { type: 'default' } } | { status: 'err'; response: string };

// What every user-signed transfer is checked for before its signature: this exchange's chain, an accepted
// signature chain id, and a known domain name. Undefined when it passes.
function envelopeRefusal(opts: ExchangeOpts, action: { exchangeChain: string; signatureChainId: Hex }, domainName: string | undefined): string | undefined {
  if (action.exchangeChain !== opts.exchangeChain) {
    return `Wrong exchangeChain ${JSON.stringify(action.exchangeChain)}; this exchange is ${JSON.stringify(opts.exchangeChain)}`;
  }
  let chainId: number;
  try {
    chainId = chainIdFromHex(action.signatureChainId);
  } catch (e) {
    return errText(e);
  }
  if (opts.signatureChainIds && !opts.signatureChainIds.includes(chainId)) return `signatureChainId ${action.signatureChainId} is not accepted`;
  if (domainName !== undefined && !opts.extraDomainNames.includes(domainName)) return `Unknown domainName ${JSON.stringify(domainName)}`;
  return undefined;
}

async function handleExchange(state: ExchangeState, opts: ExchangeOpts, body: Record<string, unknown>, domainName?: string): Promise<ExchangeAnswer> {
  const err = (response: string) => ({ status: 'err' as const, response });
  if (!isObject(body.action)) return err('Missing action');
  if (body.vaultAddress !== undefined && body.vaultAddress !== null) return err('vaultAddress is not supported for sendAsset');
  if (body.action.type === 'usdSend' || body.action.type === 'spotSend') return handleSimpleSend(state, opts, body, domainName);
  if (body.action.type !== 'sendAsset') return err(`Unsupported action type ${JSON.stringify(body.action.type)}`);
  const action = parseSendAsset(body.action);
  if (typeof action === 'string') return err(action);
  const signature = parseSignature(body.signature);
  if (typeof signature === 'string') return err(signature);
  if (body.nonce !== action.nonce) return err(`Request nonce ${String(body.nonce)} does not match action nonce ${action.nonce}`);
  const refused = envelopeRefusal(opts, action, domainName);
  if (refused) return err(refused);
  let signer: Address;
  try {
    signer = await recoverSendAssetSigner(action, signature, domainName);
  } catch (e) {
    return err(`Invalid signature: ${errText(e)}`);
  }
  const result = state.applySend(signer, action);
  if (typeof result === 'string') return err(result);
  return { status: 'ok', response: { type: 'default' } };
}

// A usdSend or spotSend: the same checks as a sendAsset (chain, signature chain id, domain, signer), over its own struct.
async function handleSimpleSend(state: ExchangeState, opts: ExchangeOpts, body: Record<string, unknown>, domainName?: string): Promise<ExchangeAnswer> {
  const err = (response: string) => ({ status: 'err' as const, response });
  const a = body.action as Record<string, unknown>;
  const keys = ['type', 'signatureChainId', 'exchangeChain', 'destination', ...(a.type === 'spotSend' ? ['token'] : []), 'amount', 'time'];
  for (const key of Object.keys(a)) if (!keys.includes(key)) return err(`Unexpected field in ${String(a.type)} action: ${key}`);
  for (const key of keys.filter((k) => k !== 'time')) if (typeof a[key] !== 'string') return err(`${String(a.type)} action field ${key} must be a string`);
  if (typeof a.time !== 'number' || !Number.isSafeInteger(a.time) || a.time <= 0) return err(`${String(a.type)} action field time must be a positive integer`);
  if (!isAddress(a.destination as string, { strict: false })) return err(`${String(a.type)} destination must be a 0x-prefixed 20-byte address`);
  const action = a as unknown as SimpleSendAction;
  const signature = parseSignature(body.signature);
  if (typeof signature === 'string') return err(signature);
  if (body.nonce !== action.time) return err(`Request nonce ${String(body.nonce)} does not match action time ${action.time}`);
  const refused = envelopeRefusal(opts, action, domainName);
  if (refused) return err(refused);
  let signer: Address;
  try {
    signer = await recoverTypedDataAddress({ ...simpleSendTypedData(action, domainName), signature: joinSignature(signature) } as never);
  } catch (e) {
    return err(`Invalid signature: ${errText(e)}`);
  }
  const result = state.applySimpleSend(signer, action);
  if (typeof result === 'string') return err(result);
  return { status: 'ok', response: { type: 'default' } };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        reject(new BadRequest('Request body too large'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, status: number, payload: unknown): void {
  const text = JSON.stringify(payload);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export async function startExchangeStandin(options: StartExchangeStandinOptions = {}): Promise<ExchangeStandin> {
  const host = options.host ?? '127.0.0.1';
  const dexes = options.dexes ?? ['xyz'];
  for (const d of dexes) {
    if (d === '' || d === 'spot' || !/^[a-z0-9]{1,16}$/.test(d)) throw new Error(`invalid named dex ${JSON.stringify(d)}`);
  }
  const state = new ExchangeState(STANDIN_TOKENS, dexes, options.now ?? Date.now, parseUnitsStrict(options.activationFee ?? '1.0', PERPS_DECIMALS));
  const exOpts = {
    signatureChainIds: options.signatureChainIds,
    exchangeChain: options.exchangeChain ?? DEFAULT_EXCHANGE_CHAIN,
    extraDomainNames: options.extraDomainNames ?? [],
  };
  let chain: Promise<unknown> = Promise.resolve();
  // The weight each address spent over the last minute, request by request (weightPerMinute).
  const spent = new Map<string, { at: number; weight: number }[]>();
  let rateLimited = 0;
  const overLimit = (ip: string, weight: number): boolean => {
    const limit = options.weightPerMinute ?? 0;
    if (limit <= 0) return false;
    const now = Date.now();
    const recent = (spent.get(ip) ?? []).filter((r) => r.at > now - 60_000);
    spent.set(ip, recent);
    if (recent.reduce((sum, r) => sum + r.weight, 0) + weight > limit) return true;
    recent.push({ at: now, weight });
    return false;
  };

  const server = createServer((req, res) => {
    const [path, search] = (req.url ?? '').split('?') as [string, string?];
    const domainName = new URLSearchParams(search ?? '').get('domainName') ?? undefined;
    if (req.method !== 'POST' || (path !== '/info' && path !== '/exchange')) {
      send(res, 404, { error: `Not found: ${req.method} ${path}` });
      return;
    }
    void (async () => {
      let body: unknown;
      try {
        body = JSON.parse(await readBody(req));
      } catch (e) {
        send(res, 400, { error: e instanceof BadRequest ? e.message : 'Malformed JSON body' });
        return;
      }
      if (!isObject(body)) {
        send(res, 400, { error: 'Request body must be a JSON object' });
        return;
      }
      const parsed = body;
      if (overLimit(req.socket.remoteAddress ?? '', requestWeight(path, parsed))) {
        rateLimited++;
        send(res, 429, { error: 'Too many requests' });
        return;
      }
      const work = async () => {
        try {
          if (path === '/info') send(res, 200, handleInfo(state, parsed));
          else send(res, 200, await handleExchange(state, exOpts, parsed, domainName));
        } catch (e) {
          if (e instanceof BadRequest) send(res, 400, { error: e.message });
          else send(res, 500, { error: 'Internal error' });
        }
      };
      // Handled one at a time so that balance and nonce checks cannot interleave.
      chain = chain.then(work, work).catch(() => undefined);
    })();
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  let stopped: Promise<void> | undefined;
  return {
    url: `http://${host}:${port}`,
    port,
    state,
    credit: (user, spec) => state.credit(user, spec),
    get rateLimited() {
      return rateLimited;
    },
    stop() {
      stopped ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return stopped;
    },
  };
}
