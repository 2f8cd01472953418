import { getAddress, zeroAddress } from 'viem';
import { AUDIT_OPENING, solverBooks } from './evmAudit.ts';
import type { AuditReader, ChainPorts } from '../chains/ports.ts';
import type { Currency, Registry } from '../config/registry.ts';
import type { Ledger } from '../ledger/index.ts';
import type { Logger } from '../log.ts';
import { usdMicro } from '../lib/money.ts';
import type { PriceSource } from '../quote/prices.ts';
import type { UnexplainedMovement } from '../solver/lossBreaker.ts';
import { errText } from '../lib/errors.ts';

/** The admin action that accepts a chain's unexplained loss at a resume (detail: amount per currency). */
export const LOSS_ACCEPTED = 'loss-accepted';

type Amounts = Map<string, bigint>;
const add = (m: Amounts, k: string, v: bigint) => m.set(k, (m.get(k) ?? 0n) + v);

/**
 * The audit's difference on an EVM chain (src/audit/evmAudit.ts), as the loss breaker reads it: the
 * solver wallet's balance of each currency against its balance at the audit's opening block plus
 * what the books say moved it since (funding + withdrawals − fills − claims − the fees of its
 * recorded transactions), less the losses an operator accepted when resuming the chain. Anchored
 * in the ledger, not in a reading the process took: money taken while the node was stopped, or
 * before a restart, is missing all the same. Payouts signed but not seen made, and transactions
 * not yet included, are allowed for, so a payment caught between the chain and the ledger never
 * reads as a loss. Costs two balance reads per currency per check (the opening one once per start).
 * Chains without an EVM audit (SVM, the exchange) and a chain whose opening state cannot be read
 * (a provider without the archive state) are measured by `fallback`.
 */
export class AuditDifference implements UnexplainedMovement {
  // Balances at the opening block, per chain and currency (fixed: read once per start).
  #opening = new Map<string, bigint>();
  #warned = new Set<number>();

  constructor(
    private ledger: Ledger,
    private registry: Registry,
    private chains: Pick<ChainPorts, 'audit'>,
    private prices: PriceSource,
    private fallback: UnexplainedMovement,
    private log: Logger,
  ) {}

  async unexplainedLossUsd(chainId: number): Promise<bigint> {
    const missing = await this.#missing(chainId);
    if (!missing) return this.fallback.unexplainedLossUsd(chainId);
    let loss = 0n;
    for (const c of this.registry.currenciesOf(chainId)) {
      const m = missing.get(getAddress(c.address)) ?? 0n;
      if (m > 0n) loss += usdMicro(m, c.decimals, await this.prices.usdPrice(c));
    }
    return loss;
  }

  /**
   * The operator resumed the chain: what is missing now is accepted (an admin entry in the
   * resumer's name). Exact, not allowed for: what the solver's transactions took in blocks up to
   * the one the balance is read at, and the books do not count yet, is read from their receipts, so
   * neither a payout in flight at the resume nor its gas is accepted as lost (or reads as lost later).
   */
  async rebase(chainId: number): Promise<void> {
    await this.fallback.rebase(chainId);
    const at = this.#evm(chainId);
    if (!at) return;
    const { a, mark, currencies } = at;
    const opening = await Promise.all(currencies.map((c) => this.#openingBalance(a, c, mark)));
    const books = this.#books(chainId, a.solver, mark, currencies, opening);
    const head = await a.head();
    const held = await Promise.all(currencies.map((c) => a.balanceAt(a.solver, c.address, head)));
    // Read after the balance: a transaction signed since the books were read is in the ledger too
    // (each is recorded before it is broadcast).
    const native = zeroAddress as string;
    const left: Amounts = new Map();
    for (const hash of this.#txHashes(chainId, a.solver)) {
      if (books.counted.has(hash)) continue;
      const r = await a.receipt(hash).catch(() => undefined);
      if (!r || r.blockNumber > head) continue;
      add(left, native, r.fee);
      if (!r.success) continue;
      const carried = this.ledger.payouts
        .rowsOfTx(hash)
        .flatMap((t) => this.ledger.payouts.get(t.payout_id) ?? [])
        .filter((p) => !books.paid.has(p.id));
      for (const c of currencies) {
        const m = solverBooks(carried, [], c.address);
        add(left, getAddress(c.address), m.fills + m.claims + m.relayed - m.withdrawn);
      }
    }
    const accepted: Record<string, string> = {};
    currencies.forEach((c, i) => {
      const cur = getAddress(c.address);
      const missing = (books.expected.get(cur) ?? 0n) - held[i]! - (left.get(cur) ?? 0n) - (books.accepted.get(cur) ?? 0n);
      if (missing > 0n) accepted[cur] = missing.toString();
    });
    if (!Object.keys(accepted).length) return;
    const target = `chain:${chainId}`;
    this.ledger.tx(() => {
      const resume = this.ledger.operations.actions(1000, target).find((x) => x.action === 'resume');
      this.ledger.operations.record({
        action: LOSS_ACCEPTED,
        target,
        actor: resume?.actor ?? 'unknown',
        reason: `loss accepted by resuming the chain${resume ? ` (${resume.reason})` : ''}`,
        detail: { amounts: accepted, atBlock: head, resumeAction: resume?.id ?? null },
      });
    });
    this.log.warn({ chain: chainId, accepted, atBlock: Number(head) }, 'unexplained loss accepted by the resume: measured from here');
  }

  // The chain's audit reader (the registry hands one out where the chain has an audit) and its opening block.
  #evm(chainId: number): { a: AuditReader; mark: number; currencies: Currency[] } | undefined {
    const a = this.chains.audit(chainId);
    const mark = this.ledger.funding.scanMark(chainId, AUDIT_OPENING);
    if (!a || !mark) return undefined;
    return { a, mark: mark.block_number, currencies: this.registry.currenciesOf(chainId) };
  }

  // Per currency: what the books explain minus what the wallet holds, in-flight payouts and the
  // accepted losses (positive: missing). Undefined when the chain has no EVM audit to read.
  async #missing(chainId: number): Promise<Amounts | undefined> {
    const at = this.#evm(chainId);
    if (!at) return undefined;
    const { a, mark, currencies } = at;
    let opening: bigint[], held: bigint[];
    try {
      opening = await Promise.all(currencies.map((c) => this.#openingBalance(a, c, mark)));
      held = await Promise.all(currencies.map((c) => a.balanceOf(a.solver, c.address)));
    } catch (e) {
      if (!this.#warned.has(chainId)) {
        this.#warned.add(chainId);
        this.log.warn({ chain: chainId, err: errText(e) }, 'loss breaker cannot read the audit balances; comparing balance drift instead');
      }
      return undefined;
    }
    // The ledger is read after the chain: a payment made in between counts as spent, never as lost.
    const books = this.#books(chainId, a.solver, mark, currencies, opening);
    const out: Amounts = new Map();
    currencies.forEach((c, i) => {
      const cur = getAddress(c.address);
      out.set(cur, (books.expected.get(cur) ?? 0n) - held[i]! - (books.allowance.get(cur) ?? 0n) - (books.accepted.get(cur) ?? 0n));
    });
    return out;
  }

  // The books of the solver's wallet on the chain, per currency: what it should hold (opening +
  // funding + withdrawals − fills − claims − fees of included transactions), what payouts signed
  // and not yet seen made may have taken already (amounts, and the most their transactions cost),
  // and the losses accepted at resumes. `counted`: transactions whose fee is in; `paid`: payouts made.
  #books(chainId: number, solver: string, mark: number, currencies: Currency[], opening: bigint[]) {
    // Only what the books need (calls: whether there are any): this runs every check, over every payout made on the chain.
    const payouts = this.ledger.payouts.made(chainId);
    const credits = this.ledger.funding.all().filter((c) => c.chain_id === chainId && c.block_number > mark && !c.reversed);
    // One row per payout a transaction carries (a batch has several), each with the whole fee.
    const txs = this.ledger.payouts.txCostsOfSender(chainId, solver);
    let fees = 0n;
    let gas = 0n;
    const counted = new Set<string>();
    for (const t of txs) {
      if (t.fee !== null) {
        fees += BigInt(t.fee);
        counted.add(t.hash);
      } else if (t.state === 'signed' || t.state === 'broadcast') gas += BigInt(t.gas_limit) * BigInt(t.max_fee_per_gas);
    }
    const accepted: Amounts = new Map();
    for (const act of this.ledger.operations.actionsOf(LOSS_ACCEPTED, `chain:${chainId}`)) {
      for (const [k, v] of Object.entries((JSON.parse(act.detail ?? '{}') as { amounts?: Record<string, string> }).amounts ?? {}))
        add(accepted, getAddress(k), BigInt(v));
    }
    const paid = payouts.filter((p) => p.state === 'success');
    const sent = payouts.filter((p) => p.state === 'sent');
    const expected: Amounts = new Map();
    const allowance: Amounts = new Map();
    currencies.forEach((c, i) => {
      const cur = getAddress(c.address);
      const native = cur === zeroAddress;
      const b = solverBooks(paid, credits, cur);
      expected.set(cur, opening[i]! + b.funding + b.withdrawn - b.fills - b.claims - b.relayed - (native ? fees : 0n));
      const p = solverBooks(sent, [], cur);
      allowance.set(cur, p.fills + p.claims + p.relayed + (native ? gas : 0n));
    });
    return { expected, allowance, accepted, counted, paid: new Set(paid.map((p) => p.id)) };
  }

  #txHashes(chainId: number, solver: string): string[] {
    return this.ledger.payouts.hashesOfSender(chainId, solver);
  }

  async #openingBalance(a: AuditReader, c: Currency, block: number): Promise<bigint> {
    const k = `${a.chainId}:${getAddress(c.address)}`;
    let v = this.#opening.get(k);
    if (v === undefined) {
      v = await a.balanceAt(a.solver, c.address, BigInt(block));
      this.#opening.set(k, v);
    }
    return v;
  }
}
