import { randomBytes } from 'node:crypto';
import type { SqlDb as Db } from './sqlDb.ts';
import { hashApiKey } from './apiKeys.ts';
import type { PostponeReason } from './reasons.ts';

export interface AdminActionRow {
  id: number;
  action: string;
  target: string | null;
  actor: string;
  reason: string;
  detail: string | null;
  created_at: number;
}

export interface SwitchRow {
  name: string;
  actor: string;
  reason: string;
  since: number;
}

export interface PostponementRow {
  deposit_id: string;
  reason: PostponeReason;
  first_at: number;
  last_at: number;
}

export interface AdminKeyRow {
  id: string;
  name: string;
  created_at: number;
  revoked_at: number | null;
}

/** Switch names: what a pause or the dry-run mode is called in the ledger. */
export const switchName = {
  all: 'pause:all',
  chain: (chainId: number) => `pause:chain:${chainId}`,
  route: (origin: number, destination: number) => `pause:route:${origin}:${destination}`,
  dryRun: 'dry-run',
} as const;

/**
 * The operator's side of the ledger (migration 8): admin actions with who and why, the switches
 * they turn (pauses, dry run), deposits the solver holds back and why, dry-run decisions, admin keys.
 */
export class Operations {
  #act;
  #switchOn;
  #switchOff;
  #switches;
  #postpone;
  #unpostpone;
  #dry;
  constructor(private db: Db) {
    this.#act = db.prepare(`INSERT INTO admin_actions (action, target, actor, reason, detail, created_at)
      VALUES (@action, @target, @actor, @reason, @detail, @now) RETURNING id`);
    this.#switchOn = db.prepare(`INSERT INTO switches (name, actor, reason, since) VALUES (?, ?, ?, ?) ON CONFLICT(name) DO NOTHING`);
    this.#switchOff = db.prepare('DELETE FROM switches WHERE name = ?');
    this.#switches = db.prepare('SELECT * FROM switches ORDER BY name');
    this.#postpone = db.prepare(`INSERT INTO postponements (deposit_id, reason, first_at, last_at) VALUES (?, ?, ?, ?)
      ON CONFLICT(deposit_id) DO UPDATE SET reason = excluded.reason, last_at = excluded.last_at`);
    this.#unpostpone = db.prepare('DELETE FROM postponements WHERE deposit_id = ?');
    this.#dry = db.prepare(`INSERT INTO dry_run_decisions (deposit_id, decision, reason, detail, decided_at) VALUES (?, ?, ?, ?, ?)
      ON CONFLICT(deposit_id) DO NOTHING`);
  }

  /** Appends an admin action (who did what to which target, and why). Run it in the transaction of its effect. */
  record(a: { action: string; target?: string | null; actor: string; reason: string; detail?: unknown }, now = Date.now()): number {
    const detail = a.detail === undefined ? null : JSON.stringify(a.detail, (_k, v) => (typeof v === 'bigint' ? v.toString() : v));
    return Number((this.#act.get({ action: a.action, target: a.target ?? null, actor: a.actor, reason: a.reason, detail, now }) as { id: number | bigint }).id);
  }

  actions(limit = 100, target?: string): AdminActionRow[] {
    if (target) return this.db.prepare('SELECT * FROM admin_actions WHERE target = ? ORDER BY id DESC LIMIT ?').all(target, limit) as AdminActionRow[];
    return this.db.prepare('SELECT * FROM admin_actions ORDER BY id DESC LIMIT ?').all(limit) as AdminActionRow[];
  }

  /** Admin actions of one kind on one target, oldest first (e.g. the losses accepted on a chain). */
  actionsOf(action: string, target: string): AdminActionRow[] {
    return this.db.prepare('SELECT * FROM admin_actions WHERE action = ? AND target = ? ORDER BY id').all(action, target) as AdminActionRow[];
  }

  /** Turns a switch on; false when it was on already. */
  switchOn(name: string, actor: string, reason: string, now = Date.now()): boolean {
    return this.#switchOn.run(name, actor, reason, now).changes === 1;
  }
  /** Turns a switch off; false when it was off. */
  switchOff(name: string): boolean {
    return this.#switchOff.run(name).changes === 1;
  }
  switches(): SwitchRow[] {
    return this.#switches.all() as SwitchRow[];
  }

  /** A confirmed deposit the solver holds back, and the typed reason. */
  postpone(depositId: string, reason: PostponeReason, now = Date.now()): void {
    this.#postpone.run(depositId, reason, now, now);
  }
  postponement(depositId: string): PostponementRow | undefined {
    return this.db.prepare('SELECT * FROM postponements WHERE deposit_id = ?').get(depositId) as PostponementRow | undefined;
  }
  /** The deposit was decided: it is no longer held back. */
  release(depositId: string): void {
    this.#unpostpone.run(depositId);
  }
  postponed(): (PostponementRow & { chain_id: number; request_id: string | null; order_ref: string; amount: string; currency: string })[] {
    return this.db
      .prepare(`SELECT p.*, d.chain_id, d.request_id, d.order_ref, d.amount, d.currency FROM postponements p
        JOIN deposits d ON d.id = p.deposit_id WHERE d.state = 'confirmed' ORDER BY p.first_at`)
      .all() as never;
  }

  dryRunDecision(depositId: string, decision: string, reason: string | null, detail: unknown, now = Date.now()): void {
    this.#dry.run(depositId, decision, reason, detail === undefined ? null : JSON.stringify(detail), now);
  }
  dryRunDecisions(): { deposit_id: string; decision: string; reason: string | null; detail: string | null; decided_at: number }[] {
    return this.db.prepare('SELECT * FROM dry_run_decisions ORDER BY decided_at').all() as never;
  }

  /** Creates an admin key; the key itself is returned once and only its hash is kept. */
  createAdminKey(name: string, now = Date.now()): { id: string; key: string } {
    const id = `adm_${randomBytes(8).toString('hex')}`;
    const key = `rnadm_${randomBytes(24).toString('base64url')}`;
    this.db.prepare('INSERT INTO admin_keys (id, name, key_hash, created_at) VALUES (?, ?, ?, ?)').run(id, name, hashApiKey(key), now);
    return { id, key };
  }
  /** The live admin key a presented key is, if any. */
  adminKey(key: string): AdminKeyRow | undefined {
    const row = this.db.prepare('SELECT id, name, created_at, revoked_at FROM admin_keys WHERE key_hash = ?').get(hashApiKey(key)) as AdminKeyRow | undefined;
    return row && row.revoked_at === null ? row : undefined;
  }
  adminKeys(): AdminKeyRow[] {
    return this.db.prepare('SELECT id, name, created_at, revoked_at FROM admin_keys ORDER BY created_at, id').all() as AdminKeyRow[];
  }
  revokeAdminKey(id: string, now = Date.now()): boolean {
    return this.db.prepare('UPDATE admin_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL').run(now, id).changes === 1;
  }
}
