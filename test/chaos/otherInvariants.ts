// The end conditions of a chaos run on the SVM chain and the exchange, read from them: every transfer
// the solver made there (SVM: its successful transactions, each carrying the order id in its memo; the
// exchange: the sends out of its account in the exchange's ledger, each tied to its payout by the
// signed action's nonce), counted per request: a fill there (the request's destination) or a refund
// there (its origin), at most one per request. Also which deposits each chain holds as successful.
// The books themselves are reconciled by svmAudit and exchangeAudit (invariants.ts runs them).
import { Connection, PublicKey } from '@solana/web3.js';
import type { Devnet } from '../../src/devnet/devnet.ts';
import { Ledger, type LedgerLocation } from '../../src/ledger/index.ts';

export interface OtherKindsScan {
  // Per request id (lower case): the solver's successful payouts on SVM or the exchange.
  paidPerRequest: Map<string, number>;
  chainOf: Map<string, number>;
  fills: Map<string, number>;
  refunds: Map<string, number>;
  // Deposit transactions that succeeded there (SVM signatures, exchange update hashes; lower case).
  deposits: Set<string>;
  svm?: { fills: number; refunds: number; solverTxs: number };
  exchange?: { fills: number; refunds: number; solverSends: number };
}

const ORDER_ID = /0x[0-9a-fA-F]{64}/;

export async function scanOtherKinds(devnet: Devnet, where: LedgerLocation, fail: (m: string) => void): Promise<OtherKindsScan> {
  const out: OtherKindsScan = { paidPerRequest: new Map(), chainOf: new Map(), fills: new Map(), refunds: new Map(), deposits: new Set() };
  if (!devnet.svm && !devnet.exchange) return out;
  const ledger = Ledger.connect(where, { readonly: true });
  try {
    const originOf = new Map(
      (ledger.db.prepare('SELECT id, origin_chain_id FROM requests').all() as { id: string; origin_chain_id: number }[]).map((r) => [
        r.id.toLowerCase(),
        r.origin_chain_id,
      ]),
    );
    const count = (chainId: number, requestId: string) => {
      const id = requestId.toLowerCase();
      out.paidPerRequest.set(id, (out.paidPerRequest.get(id) ?? 0) + 1);
      out.chainOf.set(id, chainId);
      const refund = originOf.get(id) === chainId;
      const m = refund ? out.refunds : out.fills;
      m.set(id, (m.get(id) ?? 0) + 1);
      return refund;
    };
    const ledgerDeposits = (chainId: number) => ledger.db.prepare('SELECT tx_hash FROM deposits WHERE chain_id = ?').all(chainId) as { tx_hash: string }[];

    if (devnet.svm) {
      const svm = devnet.svm;
      const conn = new Connection(svm.rpcUrl, 'confirmed');
      const solver = new PublicKey(svm.solver);
      const fig = { fills: 0, refunds: 0, solverTxs: 0 };
      for (let before: string | undefined; ; ) {
        const page = await conn.getSignaturesForAddress(solver, { before, limit: 1000 }, 'confirmed');
        for (const s of page) {
          if (s.err !== null) continue;
          const tx = await conn.getTransaction(s.signature, { commitment: 'confirmed', maxSupportedTransactionVersion: 0 });
          if (!tx || !tx.transaction.message.getAccountKeys().get(0)?.equals(solver)) continue;
          fig.solverTxs++;
          const id = (tx.meta?.logMessages ?? []).map((l) => ORDER_ID.exec(l)?.[0]).find((x) => x !== undefined);
          if (!id) {
            fail(`svm: solver transaction ${s.signature} carries no order id`);
            continue;
          }
          if (count(svm.id, id)) fig.refunds++;
          else fig.fills++;
        }
        if (page.length < 1000) break;
        before = page.at(-1)!.signature;
      }
      // The deposits the load recorded and the ledger holds on SVM: successful transactions.
      const sigs = ledgerDeposits(svm.id).map((d) => d.tx_hash);
      for (let i = 0; i < sigs.length; i += 200) {
        const st = await conn.getSignatureStatuses(sigs.slice(i, i + 200), { searchTransactionHistory: true });
        st.value.forEach((v, j) => v && v.err === null && out.deposits.add(sigs[i + j]!.toLowerCase()));
      }
      out.svm = fig;
    }

    if (devnet.exchange) {
      const ex = devnet.exchange;
      const solver = devnet.solver.toLowerCase();
      // The payout (and its request) each signed action of the solver belongs to, by nonce.
      const byNonce = new Map(
        (
          ledger.db
            .prepare('SELECT t.nonce AS nonce, p.request_id AS request_id FROM transactions t JOIN payouts p ON p.id = t.payout_id WHERE t.chain_id = ?')
            .all(ex.id) as { nonce: number; request_id: string | null }[]
        ).map((r) => [Number(r.nonce), r.request_id]),
      );
      const fig = { fills: 0, refunds: 0, solverSends: 0 };
      for (const u of ex.standin.state.ledger(solver)) {
        const d = u.delta as { type: string; user?: string; destination?: string; nonce?: number };
        if (d.type !== 'send') continue;
        if (d.destination?.toLowerCase() === solver) out.deposits.add(u.hash.toLowerCase());
        if (d.user?.toLowerCase() !== solver) continue;
        fig.solverSends++;
        const id = d.nonce === undefined ? undefined : byNonce.get(d.nonce);
        if (!id) {
          fail(`exchange: the solver's send ${u.hash} (nonce ${d.nonce}) is no request's payout in the ledger`);
          continue;
        }
        if (count(ex.id, id)) fig.refunds++;
        else fig.fills++;
      }
      out.exchange = fig;
    }
  } finally {
    ledger.close();
  }
  return out;
}
