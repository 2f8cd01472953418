import { type Connection, PublicKey } from '@solana/web3.js';
import { unpackAccount } from '@solana/spl-token';
import type { SvmChainConfig } from '../../config/schema.ts';
import type { Ledger } from '../../ledger/index.ts';
import { SVM_NATIVE } from '../../kinds/svm.ts';
import { ataOf, tokenProgramId } from './transactions.ts';

// The SVM audit's opening: the balances it explains, read at one slot and recorded by the adapter
// the first time the node starts on the chain (src/audit/svmAudit.ts reads them back).

/** A balance the SVM audit explains. */
export interface Audited {
  owner: 'solver' | 'vault';
  currency: string;
  /** The account that holds it: the owner itself (lamports) or its associated token account. */
  account: PublicKey;
  programId?: PublicKey;
}

/** The balances the audit explains: the solver's and the vault's lamports and each configured token. */
export function auditedAccounts(chain: SvmChainConfig, solver: PublicKey): Audited[] {
  const vault = new PublicKey(chain.vault);
  const out: Audited[] = [
    { owner: 'solver', currency: SVM_NATIVE, account: solver },
    { owner: 'vault', currency: SVM_NATIVE, account: vault },
  ];
  for (const c of chain.currencies) {
    if (c.address === SVM_NATIVE) continue;
    const programId = tokenProgramId(c.tokenProgram);
    const mint = new PublicKey(c.address);
    out.push({ owner: 'solver', currency: c.address, account: ataOf(solver, mint, programId), programId });
    out.push({ owner: 'vault', currency: c.address, account: ataOf(vault, mint, programId), programId });
  }
  return out;
}

/** Every audited balance in one answer, so all are as of one slot (a token account absent: 0). */
export async function readBalances(conn: Connection, list: Audited[]): Promise<{ slot: number; amounts: bigint[] }> {
  const r = await conn.getMultipleAccountsInfoAndContext(
    list.map((a) => a.account),
    'confirmed',
  );
  const amounts = r.value.map((info, i) => {
    const a = list[i]!;
    if (!info) return 0n;
    return a.programId ? unpackAccount(a.account, info, a.programId).amount : BigInt(info.lamports);
  });
  return { slot: r.context.slot, amounts };
}

/**
 * Records the SVM audit's opening balances (the solver's and the vault's, SOL and each configured
 * token, read at one slot) the first time the node starts on the chain, before it signs anything:
 * from that slot on, everything that moves them must be in the books. Written once.
 */
export async function recordSvmOpening(chain: SvmChainConfig, ledger: Ledger, conn: Connection, solver: PublicKey): Promise<void> {
  const has = () => ledger.audits.hasSvmOpening(chain.id);
  if (has()) return;
  const list = auditedAccounts(chain, solver);
  const { slot, amounts } = await readBalances(conn, list);
  ledger.tx(() => {
    if (has()) return;
    list.forEach((a, i) => ledger.audits.putSvmOpening(chain.id, { owner: a.owner, currency: a.currency, slot, amount: amounts[i]!.toString() }));
  });
}
