import type { SqlDb as Db } from './sqlDb.ts';

/** An SVM account's balance when the node first started on the chain: what the audit explains movements from. */
export interface SvmAuditOpening {
  owner: string;
  currency: string;
  slot: number;
  amount: string;
}

/** The audits' own tables: each run's result (audit_runs) and the SVM chains' opening balances (svm_audit_openings). */
export class Audits {
  #insertRun;
  #lastRun;
  #hasOpening;
  #putOpening;
  #opening;
  constructor(db: Db) {
    this.#insertRun = db.prepare('INSERT INTO audit_runs (ran_at, differences, report) VALUES (?, ?, ?)');
    this.#lastRun = db.prepare('SELECT ran_at, differences FROM audit_runs ORDER BY id DESC LIMIT 1');
    this.#hasOpening = db.prepare('SELECT 1 FROM svm_audit_openings WHERE chain_id = ? LIMIT 1');
    this.#putOpening = db.prepare('INSERT INTO svm_audit_openings (chain_id, owner, currency, slot, amount) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING');
    this.#opening = db.prepare('SELECT owner, currency, slot, amount FROM svm_audit_openings WHERE chain_id = ?');
  }

  /** Records one audit run: when, how many differences, and its report (JSON). */
  recordRun(ranAt: number, differences: number, report: string): void {
    this.#insertRun.run(ranAt, differences, report);
  }
  /** The last audit run's time and number of differences, if any ran. */
  lastRun(): { ran_at: number; differences: number } | undefined {
    return this.#lastRun.get() as { ran_at: number; differences: number } | undefined;
  }
  /** Whether the SVM chain's opening balances are recorded. */
  hasSvmOpening(chainId: number): boolean {
    return this.#hasOpening.get(chainId) !== undefined;
  }
  /** Records one account's opening balance on an SVM chain; a balance already recorded is kept. */
  putSvmOpening(chainId: number, o: SvmAuditOpening): void {
    this.#putOpening.run(chainId, o.owner, o.currency, o.slot, o.amount);
  }
  /** The SVM chain's opening balances (none before the node first started on it). */
  svmOpening(chainId: number): SvmAuditOpening[] {
    return this.#opening.all(chainId) as SvmAuditOpening[];
  }
}
