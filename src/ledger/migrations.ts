// Numbered, append-only. Amounts are TEXT holding base-10 integers in the smallest unit: uint256
// values do not fit SQLite's 64-bit integers. Times are INTEGER milliseconds since the epoch.
// rebuilds: the migration drops and recreates a table other tables reference (SQLite cannot alter a
// CHECK); it runs with foreign keys off, as SQLite's documented table-rebuild procedure requires, and
// is refused unless foreign_key_check finds nothing afterwards.
// The deposits the depository owes the solver (migration 16): handled, its fill succeeded, no
// refund of it, no excess of it still unpaid, not taken by a withdrawal; excess is what went back
// to the user. One definition for the first rows and for the triggers that keep them.
// notReorged (migration 34): nor a deposit whose request records DEPOSIT_REORGED (a reorg took it back after the
// solver paid: the depository does not hold it), as Withdrawals.owed() reads; before, a trigger firing after the
// reorg's write-off (its signed fill, an excess or a withdrawal settling) counted it owed again.
const owedSelect = (where: string, notReorged = false) => `
  INSERT INTO depository_owed (deposit_id, chain_id, currency, amount, excess)
    SELECT d.id, d.chain_id, d.currency, d.amount,
      (SELECT x.amount FROM payouts x WHERE x.deposit_id = d.id AND x.kind = 'excess' AND x.state = 'success')
    FROM deposits d
    WHERE ${where} AND d.state = 'handled'
      AND EXISTS (SELECT 1 FROM payouts f WHERE f.deposit_id = d.id AND f.kind = 'fill' AND f.state = 'success')
      AND NOT EXISTS (SELECT 1 FROM withdrawn_deposits w WHERE w.deposit_id = d.id)
      AND NOT EXISTS (SELECT 1 FROM payouts r WHERE r.deposit_id = d.id AND r.kind = 'refund')
      AND NOT EXISTS (SELECT 1 FROM payouts x WHERE x.deposit_id = d.id AND x.kind = 'excess' AND x.state != 'success')${
        notReorged
          ? `
      AND NOT EXISTS (SELECT 1 FROM requests q WHERE q.id = d.request_id AND q.fail_reason = 'DEPOSIT_REORGED')`
          : ''
      };`;

// One deposit's row of depository_owed recomputed, its change written as entries (-1 the old row, +1 the new).
const recomputeOwed = (id: string, notReorged = false) => `
  INSERT INTO depository_owed_entries (deposit_id, chain_id, currency, sign, amount, excess)
    SELECT deposit_id, chain_id, currency, -1, amount, excess FROM depository_owed WHERE deposit_id = ${id};
  DELETE FROM depository_owed WHERE deposit_id = ${id};${owedSelect(`d.id = ${id}`, notReorged)}
  INSERT INTO depository_owed_entries (deposit_id, chain_id, currency, sign, amount, excess)
    SELECT deposit_id, chain_id, currency, 1, amount, excess FROM depository_owed WHERE deposit_id = ${id};`;

// The five triggers of depository_owed as migration 34 makes them: migration 16's, with the conditions of
// migrations 20 and 24, over the select that leaves out reorged deposits. A migration that rebuilds payouts,
// deposits or withdrawn_deposits must make these again.
const owedTriggersNotReorged = `
DROP TRIGGER owed_payout_insert;
DROP TRIGGER owed_payout_state;
DROP TRIGGER owed_deposit_state;
DROP TRIGGER owed_withdrawn_insert;
DROP TRIGGER owed_withdrawn_delete;
CREATE TRIGGER owed_payout_insert AFTER INSERT ON payouts WHEN NEW.deposit_id IS NOT NULL BEGIN${recomputeOwed('NEW.deposit_id', true)}
END;
CREATE TRIGGER owed_payout_state AFTER UPDATE OF state ON payouts WHEN NEW.deposit_id IS NOT NULL AND (OLD.state = 'success' OR NEW.state = 'success') BEGIN${recomputeOwed('NEW.deposit_id', true)}
END;
CREATE TRIGGER owed_deposit_state AFTER UPDATE OF state ON deposits WHEN OLD.state = 'handled' OR NEW.state = 'handled' BEGIN${recomputeOwed('NEW.id', true)}
END;
CREATE TRIGGER owed_withdrawn_insert AFTER INSERT ON withdrawn_deposits BEGIN${recomputeOwed('NEW.deposit_id', true)}
END;
CREATE TRIGGER owed_withdrawn_delete AFTER DELETE ON withdrawn_deposits BEGIN${recomputeOwed('OLD.deposit_id', true)}
END;`;

// Rows counted owed though their deposit was written off (a trigger fired after the write-off): written off now.
const writeOffReorgedRows = `
INSERT INTO depository_owed_entries (deposit_id, chain_id, currency, sign, amount, excess)
  SELECT o.deposit_id, o.chain_id, o.currency, -1, o.amount, o.excess FROM depository_owed o JOIN deposits d ON d.id = o.deposit_id
  WHERE EXISTS (SELECT 1 FROM requests q WHERE q.id = d.request_id AND q.fail_reason = 'DEPOSIT_REORGED') ORDER BY o.deposit_id;
DELETE FROM depository_owed WHERE deposit_id IN (SELECT d.id FROM deposits d
  WHERE EXISTS (SELECT 1 FROM requests q WHERE q.id = d.request_id AND q.fail_reason = 'DEPOSIT_REORGED'));
`;

// Migration 38: each wallet's app balance as its balance_entries sum, one row kept by a trigger in the transaction of
// every entry (an entry refused by its ref fires nothing), so every writer (the stores, a migration, a copy's rebuild)
// keeps it; balance: every kind but holds, held: hold and hold_release (Balances.summary's split). Derived, never the
// truth: the audit (Balances.totalsDrift) and db copy compare it with the entries' sums. SQLite's CHECKs refuse an
// integer sum overflowing to REAL (its + does so silently); PostgreSQL's BIGINT refuses one by itself.
const balanceTotalsTable = (balance: string, held: string) => `
CREATE TABLE balance_totals (
  wallet TEXT PRIMARY KEY,
  balance ${balance},
  held ${held}
);`;
const HELD_KIND = `kind IN ('hold', 'hold_release')`;
const balanceTotalsUpsert = (alias: string) => `INSERT INTO balance_totals${alias ? ` AS ${alias}` : ''} (wallet, balance, held)
    VALUES (NEW.wallet, CASE WHEN NEW.${HELD_KIND} THEN 0 ELSE NEW.amount END, CASE WHEN NEW.${HELD_KIND} THEN NEW.amount ELSE 0 END)
    ON CONFLICT (wallet) DO UPDATE SET balance = ${alias || 'balance_totals'}.balance + excluded.balance, held = ${alias || 'balance_totals'}.held + excluded.held;`;
const balanceTotalsBackfill = `INSERT INTO balance_totals (wallet, balance, held)
  SELECT wallet, SUM(CASE WHEN ${HELD_KIND} THEN 0 ELSE amount END), SUM(CASE WHEN ${HELD_KIND} THEN amount ELSE 0 END)
  FROM balance_entries GROUP BY wallet;`;

// owed_deposit_state fires only where a deposit enters or leaves 'handled' (migration 20): a deposit
// has a depository_owed row only while handled, so any other change of its state changes nothing
// there, and confirming a backfill's thousands of deposits then runs no trigger. A migration that
// makes owedTriggers again must make this one after them.
const owedDepositStateTrigger = `
DROP TRIGGER owed_deposit_state;
CREATE TRIGGER owed_deposit_state AFTER UPDATE OF state ON deposits WHEN OLD.state = 'handled' OR NEW.state = 'handled' BEGIN${recomputeOwed('NEW.id')}
END;`;

// owed_payout_state fires only where a payout enters or leaves 'success' (migration 24): depository_owed
// reads payouts' state only as success or not (a fill succeeded; an excess paid or not yet; a refund by its
// existence, which the insert trigger sees), so a payout moving between queued, sent and failed changes
// nothing there, and recording and requeueing fills run no trigger. A migration that makes owedTriggers
// again must make this one after them.
const owedPayoutStateTrigger = `
DROP TRIGGER owed_payout_state;
CREATE TRIGGER owed_payout_state AFTER UPDATE OF state ON payouts WHEN NEW.deposit_id IS NOT NULL AND (OLD.state = 'success' OR NEW.state = 'success') BEGIN${recomputeOwed('NEW.deposit_id')}
END;`;

// The triggers that keep depository_owed (migration 16; made again by a migration that rebuilds payouts).
const owedTriggers = `
CREATE TRIGGER owed_payout_insert AFTER INSERT ON payouts WHEN NEW.deposit_id IS NOT NULL BEGIN${recomputeOwed('NEW.deposit_id')}
END;
CREATE TRIGGER owed_payout_state AFTER UPDATE OF state ON payouts WHEN NEW.deposit_id IS NOT NULL BEGIN${recomputeOwed('NEW.deposit_id')}
END;
CREATE TRIGGER owed_deposit_state AFTER UPDATE OF state ON deposits BEGIN${recomputeOwed('NEW.id')}
END;
CREATE TRIGGER owed_withdrawn_insert AFTER INSERT ON withdrawn_deposits BEGIN${recomputeOwed('NEW.deposit_id')}
END;
CREATE TRIGGER owed_withdrawn_delete AFTER DELETE ON withdrawn_deposits BEGIN${recomputeOwed('OLD.deposit_id')}
END;`;

/**
 * One numbered schema change. `sql` is SQLite's text. PostgreSQL starts from its baseline
 * (src/ledger/pgBaseline.ts), the schema after migration 20: a later migration must carry its
 * PostgreSQL text in `pg` (the type refuses one without), so both ledgers keep one schema.
 */
export type Migration =
  | { version: BaselineVersion; name: string; sql: string; rebuilds?: boolean; pg?: never }
  | { version: number; name: string; sql: string; rebuilds?: boolean; pg: string };
// The versions the PostgreSQL baseline stands for (PG_BASELINE_VERSION in pgBaseline.ts).
type BaselineVersion = 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 | 10 | 11 | 12 | 13 | 14 | 15 | 16 | 17 | 18 | 19 | 20;

// The quote given (the whole /quote answer, 5-70 KB) is written once and read by two routes (the listing, an
// authorization); on the request row, it made every read of the row decode it, and each status change (three or
// more per order) wrote a page of its overflow again (requestQuotes.test.ts). The same text for both ledgers
// (DROP COLUMN: SQLite 3.35+, and no index, view or trigger names the column).
const REQUEST_QUOTES = `
CREATE TABLE request_quotes (
  request_id TEXT PRIMARY KEY REFERENCES requests(id),
  quote TEXT NOT NULL
);
INSERT INTO request_quotes (request_id, quote) SELECT id, quote FROM requests WHERE quote IS NOT NULL;
ALTER TABLE requests DROP COLUMN quote;
`;

// PostgreSQL only (migration 26): each change of a request's Status record (what STATUS_BY_ID reads: the request
// row, the deposits it holds or that a waiting order has seen, its payouts' hashes) notifies channel relay_status
// with the request id. An API replica keeps Status records in memory and drops one on its notification
// (src/ledger/postgres/statusCache.ts). Notifications go out when their transaction commits, each distinct id
// once per transaction. Statement-level triggers over the changed rows: a backfill writes hundreds of deposits
// per statement, and a deposit notifies only when a request has its order reference. A request's insert notifies
// nothing: a replica keeps no record of an id it did not find.
/** The migration that makes the triggers below (an API replica keeps records only once it is applied). */
export const STATUS_NOTIFY_VERSION = 26;
// Each trigger names its changed rows `changed` (the new ones; the old ones of a delete), so one function per table
// serves its insert, update and delete.
const STATUS_NOTIFY = `
CREATE FUNCTION relay_status_of_requests() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('relay_status', id) FROM changed;
  RETURN NULL;
END $$;
CREATE FUNCTION relay_status_of_deposits() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('relay_status', x) FROM (SELECT request_id AS x FROM changed WHERE request_id IS NOT NULL
    UNION SELECT c.order_ref FROM changed c JOIN requests r ON r.id = c.order_ref) s;
  RETURN NULL;
END $$;
CREATE FUNCTION relay_status_of_payouts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('relay_status', x) FROM (SELECT DISTINCT request_id AS x FROM changed WHERE request_id IS NOT NULL) s;
  RETURN NULL;
END $$;
CREATE TRIGGER relay_status_requests_update AFTER UPDATE ON requests REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION relay_status_of_requests();
CREATE TRIGGER relay_status_requests_delete AFTER DELETE ON requests REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION relay_status_of_requests();
CREATE TRIGGER relay_status_deposits_insert AFTER INSERT ON deposits REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION relay_status_of_deposits();
CREATE TRIGGER relay_status_deposits_update AFTER UPDATE ON deposits REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION relay_status_of_deposits();
CREATE TRIGGER relay_status_deposits_delete AFTER DELETE ON deposits REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION relay_status_of_deposits();
CREATE TRIGGER relay_status_payouts_insert AFTER INSERT ON payouts REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION relay_status_of_payouts();
CREATE TRIGGER relay_status_payouts_update AFTER UPDATE ON payouts REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION relay_status_of_payouts();
CREATE TRIGGER relay_status_payouts_delete AFTER DELETE ON payouts REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION relay_status_of_payouts();
`;

export const migrations: Migration[] = [
  {
    version: 1,
    name: 'requests, deposits, payouts, transactions, indexer state',
    sql: `
CREATE TABLE requests (
  id TEXT PRIMARY KEY,
  parent_id TEXT REFERENCES requests(id),
  kind TEXT NOT NULL CHECK (kind IN ('order', 'orphan', 'extra')),
  request_type TEXT NOT NULL,
  status TEXT NOT NULL,
  fail_reason TEXT,
  refund_fail_reason TEXT,
  details TEXT,
  user TEXT,
  recipient TEXT,
  refund_to TEXT,
  origin_chain_id INTEGER NOT NULL,
  destination_chain_id INTEGER NOT NULL,
  origin_currency TEXT NOT NULL,
  destination_currency TEXT NOT NULL,
  trade_type TEXT,
  amount_in TEXT NOT NULL,
  amount_out TEXT NOT NULL,
  min_amount_out TEXT NOT NULL,
  pricing TEXT,
  order_data TEXT,
  quote TEXT,
  expires_at INTEGER,
  fill_deadline INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX requests_parent ON requests(parent_id);
CREATE INDEX requests_created ON requests(created_at);

CREATE TABLE deposits (
  id TEXT PRIMARY KEY,
  chain_id INTEGER NOT NULL,
  tx_hash TEXT NOT NULL,
  log_index INTEGER NOT NULL,
  block_number INTEGER NOT NULL,
  block_hash TEXT NOT NULL,
  depositor TEXT NOT NULL,
  currency TEXT NOT NULL,
  amount TEXT NOT NULL,
  order_ref TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('unconfirmed', 'confirmed', 'handled', 'reorged')),
  request_id TEXT REFERENCES requests(id),
  seen_at INTEGER NOT NULL,
  confirmed_at INTEGER
);
CREATE INDEX deposits_state ON deposits(state, chain_id, block_number);
CREATE INDEX deposits_order_ref ON deposits(order_ref);
CREATE INDEX deposits_request ON deposits(request_id);
CREATE INDEX deposits_tx ON deposits(tx_hash);

-- One row per payment the node decides to make. The primary key makes "at most one fill per
-- order" and "at most one refund per request" hold in the ledger itself.
CREATE TABLE payouts (
  id TEXT PRIMARY KEY,
  -- sweep: moves what reached a deposit address into the depository (not the solver's money);
  -- excess: returns what a deposit address received beyond the quote.
  -- deposit: a depositor's signed (permit) deposit, submitted by the node on the origin chain.
  kind TEXT NOT NULL CHECK (kind IN ('fill', 'refund', 'claim', 'sweep', 'excess', 'deposit')),
  -- null for claims of app fees, which belong to no request
  request_id TEXT REFERENCES requests(id),
  deposit_id TEXT REFERENCES deposits(id),
  chain_id INTEGER NOT NULL,
  recipient TEXT NOT NULL,
  currency TEXT NOT NULL,
  amount TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('queued', 'sent', 'success', 'failed')),
  tx_hash TEXT,
  fail_reason TEXT,
  decided_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX payouts_queue ON payouts(chain_id, state, decided_at);
CREATE INDEX payouts_request ON payouts(request_id);

-- Every transaction the node signs, recorded before it is broadcast. Replacements share the
-- payout and the nonce.
CREATE TABLE transactions (
  hash TEXT PRIMARY KEY,
  payout_id TEXT NOT NULL REFERENCES payouts(id),
  chain_id INTEGER NOT NULL,
  sender TEXT NOT NULL,
  nonce INTEGER NOT NULL,
  raw TEXT NOT NULL,
  gas_limit TEXT NOT NULL,
  max_fee_per_gas TEXT NOT NULL,
  max_priority_fee_per_gas TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('signed', 'broadcast', 'included', 'reverted', 'replaced', 'dropped')),
  sent_block INTEGER,
  block_number INTEGER,
  gas_used TEXT,
  fee TEXT,
  error TEXT,
  created_at INTEGER NOT NULL,
  broadcast_at INTEGER,
  updated_at INTEGER NOT NULL
);
CREATE INDEX transactions_open ON transactions(chain_id, state);
CREATE INDEX transactions_payout ON transactions(payout_id);
CREATE INDEX transactions_nonce ON transactions(chain_id, sender, nonce);

CREATE TABLE cursors (
  chain_id INTEGER NOT NULL,
  source TEXT NOT NULL,
  block_number INTEGER NOT NULL,
  PRIMARY KEY (chain_id, source)
);

-- Recent block hashes per chain, for reorg detection inside the unfinalized window.
CREATE TABLE chain_blocks (
  chain_id INTEGER NOT NULL,
  number INTEGER NOT NULL,
  hash TEXT NOT NULL,
  parent_hash TEXT NOT NULL,
  PRIMARY KEY (chain_id, number)
);
`,
  },
  {
    version: 2,
    name: 'api keys, request attribution',
    sql: `
-- Keys are shown once at creation; only their SHA-256 is kept (they are 192-bit random strings,
-- so a fast hash is enough: there is nothing to brute-force).
CREATE TABLE api_keys (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  key_hash TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
);
-- The key that quoted a request: its events, and the authenticated fields of its record, are
-- that key's alone.
ALTER TABLE requests ADD COLUMN api_key_id TEXT;
ALTER TABLE requests ADD COLUMN referrer TEXT;
`,
  },
  {
    version: 3,
    name: 'request search: denormalised columns and indexes for the request listing',
    sql: `
-- Kept on the request row so that every listing filter and sort reads one indexed table.
-- USD values are INTEGER micro-USD; null where the node fixed no price.
ALTER TABLE requests ADD COLUMN amount_usd INTEGER;
ALTER TABLE requests ADD COLUMN app_fees_usd INTEGER;
ALTER TABLE requests ADD COLUMN currency_in_symbol TEXT;
ALTER TABLE requests ADD COLUMN currency_out_symbol TEXT;
-- Set when the deposit is handled: who sent it and in which block.
ALTER TABLE requests ADD COLUMN sender TEXT;
ALTER TABLE requests ADD COLUMN deposit_block INTEGER;
ALTER TABLE requests ADD COLUMN deposit_address TEXT;
-- Milliseconds from the deposit being seen to the fill succeeding.
ALTER TABLE requests ADD COLUMN fill_time_ms INTEGER;
DROP INDEX requests_created;
CREATE INDEX requests_created ON requests(created_at, id);
CREATE INDEX requests_updated ON requests(updated_at, id);
CREATE INDEX requests_amount_usd ON requests(IFNULL(amount_usd, -1), id);
CREATE INDEX requests_user ON requests(user, created_at);
CREATE INDEX requests_sender ON requests(sender, created_at);
CREATE INDEX requests_recipient ON requests(recipient, created_at);
CREATE INDEX requests_deposit_address ON requests(deposit_address) WHERE deposit_address IS NOT NULL;
CREATE INDEX requests_status ON requests(status, created_at);
CREATE INDEX requests_api_key ON requests(api_key_id, created_at);
CREATE INDEX payouts_tx ON payouts(tx_hash);
`,
  },
  {
    version: 4,
    name: 'exchange nonce mappings (withdrawals from the perpetuals exchange)',
    sql: `
-- A withdrawal's authorize step: the wallet's signed NonceMapping ties the nonce of its transfer
-- to the solver to one request. Recorded once per (wallet, nonce); the exchange indexer associates
-- a transfer to a request only through this table.
CREATE TABLE exchange_nonces (
  nonce INTEGER NOT NULL,
  wallet TEXT NOT NULL,
  request_id TEXT NOT NULL REFERENCES requests(id),
  signature TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (wallet, nonce)
);
CREATE UNIQUE INDEX exchange_nonces_request ON exchange_nonces(request_id);
`,
  },
  {
    version: 6,
    name: 'money: app balance entries, sponsor links, app fee entries, fast fill holds',
    sql: `
-- An app balance is the sum of these entries, in micro-USD (the 6-decimal stablecoin unit of
-- maxSubsidizationAmount). Entries are never updated; ref makes each movement happen once.
-- kind: credit (+, on-chain funding), sponsorship (-, fees paid for a request),
-- sponsorship_reversal (+, the sponsored fill did not happen), permanent_debit (-, a fast fill
-- whose deposit never landed or fell short), claim (-), hold (+ held) and hold_release (- held):
-- holds do not change the balance, they reduce what is available to fast fills and claims.
CREATE TABLE balance_entries (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  wallet TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('credit', 'sponsorship', 'sponsorship_reversal', 'permanent_debit', 'claim', 'hold', 'hold_release')),
  -- micro-USD fits a 64-bit integer up to 9.2 trillion dollars; read back as bigint.
  amount INTEGER NOT NULL,
  request_id TEXT,
  ref TEXT NOT NULL UNIQUE,
  detail TEXT,
  created_at INTEGER NOT NULL
);
CREATE INDEX balance_entries_wallet ON balance_entries(wallet, kind);
CREATE INDEX balance_entries_request ON balance_entries(request_id);

-- App fees accrued to their recipients, in the currency of the fill, and their claims.
CREATE TABLE app_fee_entries (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  recipient TEXT NOT NULL,
  chain_id INTEGER NOT NULL,
  currency TEXT NOT NULL,
  amount TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('accrual', 'claim', 'claim_reversal')),
  request_id TEXT,
  ref TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL
);
CREATE INDEX app_fee_entries_recipient ON app_fee_entries(recipient, chain_id, currency);

-- The wallet whose app balance sponsors an API key's requests, linked by the wallet's signature.
CREATE TABLE sponsor_links (
  api_key_id TEXT PRIMARY KEY,
  wallet TEXT NOT NULL,
  message TEXT NOT NULL,
  signature TEXT NOT NULL,
  linked_at INTEGER NOT NULL
);

-- What the quote fixed about money beyond pricing: sponsor, app fees, top-up (JSON), and the
-- request's feature flags (JSON array), both read by the solver and the request record.
ALTER TABLE requests ADD COLUMN money TEXT;
ALTER TABLE requests ADD COLUMN features TEXT NOT NULL DEFAULT '[]';
-- Fast fill: the hold's deadline; the request was filled before its deposit.
ALTER TABLE requests ADD COLUMN fast_fill_deadline INTEGER;
-- Native currency delivered with an ERC-20 fill (gas top-up), in the chain's smallest unit.
ALTER TABLE payouts ADD COLUMN native_topup TEXT;
-- Destination calls the fill runs (JSON [{to, value, data}]) and the gas the quote priced them at.
ALTER TABLE payouts ADD COLUMN calls TEXT;
ALTER TABLE payouts ADD COLUMN max_gas TEXT;
-- The calldata of a fill that reverted (EXECUTION_REVERTED), for the request record.
ALTER TABLE requests ADD COLUMN failed_call_data TEXT;
`,
  },
  {
    version: 7,
    name: 'signed deposits submitted by the node',
    sql: `
-- What authorizes a node-submitted deposit (an EIP-2612 permit: deadline and signature), JSON.
ALTER TABLE payouts ADD COLUMN authorization TEXT;
`,
  },
  {
    version: 5,
    name: 'status events: outbox, webhooks, deliveries',
    sql: `
-- Webhook endpoints of an API key. The secret signs deliveries (HMAC-SHA256), so it is kept as
-- is; it is shown once at creation and never logged.
CREATE TABLE webhooks (
  id TEXT PRIMARY KEY,
  api_key_id TEXT NOT NULL,
  url TEXT NOT NULL,
  secret TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  removed_at INTEGER
);
CREATE INDEX webhooks_key ON webhooks(api_key_id) WHERE removed_at IS NULL;

-- The outbox: one row per status change of a request, written in the transaction of the change.
-- seq orders everything (the websocket stream and the webhooks see the same sequence).
CREATE TABLE events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  request_id TEXT NOT NULL,
  api_key_id TEXT,
  type TEXT NOT NULL,
  status TEXT NOT NULL,
  -- the Status record at the change (JSON)
  payload TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX events_request ON events(request_id, seq);

-- One row per event and webhook. request_id and event_seq are copied from the event so that
-- "no earlier pending event of the same request to the same webhook" reads one index.
CREATE TABLE event_deliveries (
  event_id TEXT NOT NULL REFERENCES events(id),
  webhook_id TEXT NOT NULL REFERENCES webhooks(id),
  request_id TEXT NOT NULL,
  event_seq INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'dead')),
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER NOT NULL,
  last_status INTEGER,
  last_error TEXT,
  delivered_at INTEGER,
  PRIMARY KEY (event_id, webhook_id)
);
CREATE INDEX event_deliveries_due ON event_deliveries(state, next_attempt_at);
CREATE INDEX event_deliveries_order ON event_deliveries(webhook_id, request_id, state, event_seq);
`,
  },
  {
    version: 8,
    name: 'app balance funding: evidence of each credit, credit reversals',
    sql: `
-- balance_entries gains the kind credit_reversal (-, a reorg removed the transfer a credit was
-- booked for). SQLite cannot alter a CHECK: the table is rebuilt with its rows and ids as they are.
CREATE TABLE balance_entries_v8 (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  wallet TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('credit', 'credit_reversal', 'sponsorship', 'sponsorship_reversal', 'permanent_debit', 'claim', 'hold', 'hold_release')),
  amount INTEGER NOT NULL,
  request_id TEXT,
  ref TEXT NOT NULL UNIQUE,
  detail TEXT,
  created_at INTEGER NOT NULL
);
INSERT INTO balance_entries_v8 (id, wallet, kind, amount, request_id, ref, detail, created_at)
  SELECT id, wallet, kind, amount, request_id, ref, detail, created_at FROM balance_entries;
DROP TABLE balance_entries;
ALTER TABLE balance_entries_v8 RENAME TO balance_entries;
CREATE INDEX balance_entries_wallet ON balance_entries(wallet, kind);
CREATE INDEX balance_entries_request ON balance_entries(request_id);

-- The on-chain evidence of each app balance credit: the successful transaction, its block, and
-- what moved to the solver in it (parts: JSON [{currency, amount, logIndex}], token units; logIndex
-- -1 for the transaction's native value). credit_ref is the balance entry it booked; the credit is
-- reversed when an entry 'credit_reversal:' || credit_ref exists.
CREATE TABLE funding_credits (
  credit_ref TEXT PRIMARY KEY,
  chain_id INTEGER NOT NULL,
  tx_hash TEXT NOT NULL,
  block_number INTEGER NOT NULL,
  block_hash TEXT NOT NULL,
  sender TEXT NOT NULL,
  wallet TEXT NOT NULL,
  parts TEXT NOT NULL,
  micro INTEGER NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX funding_credits_tx ON funding_credits(chain_id, tx_hash);
CREATE INDEX funding_credits_block ON funding_credits(chain_id, block_number);

-- The hash of the last block a block scanner (the funding watcher) read, to notice a reorg under it.
CREATE TABLE scan_marks (
  chain_id INTEGER NOT NULL,
  source TEXT NOT NULL,
  block_number INTEGER NOT NULL,
  block_hash TEXT NOT NULL,
  PRIMARY KEY (chain_id, source)
);

-- Each run of relay-node audit: when, how many differences, and the report (JSON), for the metrics.
CREATE TABLE audit_runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  ran_at INTEGER NOT NULL,
  differences INTEGER NOT NULL,
  report TEXT NOT NULL
);
`,
  },
  {
    version: 9,
    name: 'single-use signed messages',
    sql: `
-- Nonces of the signed messages the node acted on (app-balance link and unlink, app-fee claim):
-- a signature authorizes one action once. key is purpose:wallet(lower-case):nonce. Rows past
-- expires_at may be deleted: an expired message is refused before its nonce is looked at.
CREATE TABLE signature_nonces (
  key TEXT PRIMARY KEY,
  purpose TEXT NOT NULL CHECK (purpose IN ('link', 'unlink', 'claim')),
  wallet TEXT NOT NULL,
  nonce TEXT NOT NULL,
  expires_at INTEGER NOT NULL,
  used_at INTEGER NOT NULL
);
`,
  },
  {
    version: 10,
    name: 'one transaction may pay several payouts (batched fills)',
    sql: `
-- A batched fill pays several orders in one transaction: the transaction is recorded once per payout
-- it carries (same hash, nonce and bytes), so every payout keeps its own row and state.
CREATE TABLE transactions_v8 (
  hash TEXT NOT NULL,
  payout_id TEXT NOT NULL REFERENCES payouts(id),
  chain_id INTEGER NOT NULL,
  sender TEXT NOT NULL,
  nonce INTEGER NOT NULL,
  raw TEXT NOT NULL,
  gas_limit TEXT NOT NULL,
  max_fee_per_gas TEXT NOT NULL,
  max_priority_fee_per_gas TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('signed', 'broadcast', 'included', 'reverted', 'replaced', 'dropped')),
  sent_block INTEGER,
  block_number INTEGER,
  gas_used TEXT,
  fee TEXT,
  error TEXT,
  created_at INTEGER NOT NULL,
  broadcast_at INTEGER,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (hash, payout_id)
);
INSERT INTO transactions_v8 SELECT hash, payout_id, chain_id, sender, nonce, raw, gas_limit, max_fee_per_gas,
  max_priority_fee_per_gas, state, sent_block, block_number, gas_used, fee, error, created_at, broadcast_at, updated_at FROM transactions;
DROP TABLE transactions;
ALTER TABLE transactions_v8 RENAME TO transactions;
CREATE INDEX transactions_open ON transactions(chain_id, state);
CREATE INDEX transactions_payout ON transactions(payout_id);
CREATE INDEX transactions_nonce ON transactions(chain_id, sender, nonce);
`,
  },
  {
    version: 11,
    name: 'operating: admin actions, switches (pauses, dry run), postponed deposits, dry-run decisions, admin keys',
    sql: `
-- Every admin action (and every trip of the loss breaker), with who and why. Append-only.
CREATE TABLE admin_actions (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  action TEXT NOT NULL,
  target TEXT,
  actor TEXT NOT NULL,
  reason TEXT NOT NULL,
  detail TEXT,
  created_at INTEGER NOT NULL
);
CREATE INDEX admin_actions_target ON admin_actions(target, id);

-- What is switched on now: 'pause:all', 'pause:chain:<id>', 'pause:route:<origin>:<destination>',
-- 'dry-run'. Each row is written and removed in the transaction of its admin_actions entry.
CREATE TABLE switches (
  name TEXT PRIMARY KEY,
  actor TEXT NOT NULL,
  reason TEXT NOT NULL,
  since INTEGER NOT NULL
);

-- Confirmed deposits the solver holds back, with the typed reason it last gave.
CREATE TABLE postponements (
  deposit_id TEXT PRIMARY KEY REFERENCES deposits(id),
  reason TEXT NOT NULL,
  first_at INTEGER NOT NULL,
  last_at INTEGER NOT NULL
);

-- What the solver would have done with a deposit in dry-run mode (the first decision is kept).
CREATE TABLE dry_run_decisions (
  deposit_id TEXT PRIMARY KEY REFERENCES deposits(id),
  decision TEXT NOT NULL,
  reason TEXT,
  detail TEXT,
  decided_at INTEGER NOT NULL
);

-- Admin API keys, distinct from integrators' api_keys; only their hash is kept.
CREATE TABLE admin_keys (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  key_hash TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
);
`,
  },
  {
    version: 12,
    name: 'deposit transaction fees',
    sql: `
-- What the depositor paid for its deposit transaction (gasUsed x effectiveGasPrice, in the origin
-- chain's native smallest unit), read once from the receipt and kept: the record's inTxs[].fee.
ALTER TABLE deposits ADD COLUMN tx_fee TEXT;
`,
  },
  {
    version: 13,
    name: 'API usage per key',
    sql: `
-- Calls per API key, minute, route, status and error code (GET /metrics/usage). Counted in memory
-- and added here every few seconds, so a call costs no write of its own.
CREATE TABLE api_usage (
  api_key_id TEXT NOT NULL,
  minute INTEGER NOT NULL,
  endpoint TEXT NOT NULL,
  status_code INTEGER NOT NULL,
  error_code TEXT NOT NULL DEFAULT '',
  count INTEGER NOT NULL,
  PRIMARY KEY (api_key_id, minute, endpoint, status_code, error_code)
);
`,
  },
  {
    version: 14,
    name: 'indexes for the timers on the main thread',
    sql: `
-- The solver's hold expiry (every 2 s) and the quote pruner read these on the node's event loop:
-- without them each read scanned every request (~1.5 s on 1,000,000).
CREATE INDEX requests_fast_fill_deadline ON requests(fast_fill_deadline) WHERE fast_fill_deadline IS NOT NULL;
CREATE INDEX requests_prunable ON requests(expires_at)
  WHERE status = 'waiting' AND kind = 'order' AND parent_id IS NULL AND deposit_address IS NULL AND expires_at IS NOT NULL;
-- The deposit fee reader's queue: recent deposits whose transaction fee is not read yet.
CREATE INDEX deposits_fee_unread ON deposits(seen_at) WHERE tx_fee IS NULL;
`,
  },
  {
    version: 15,
    name: 'withdrawals: depository funds of filled orders back to the solver',
    rebuilds: true,
    sql: `
-- payouts gains the kind withdrawal: an allocator-signed call request that moves what the depository
-- holds for filled orders to the solver's wallet. The table is rebuilt with its rows as they are.
CREATE TABLE payouts_v15 (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('fill', 'refund', 'claim', 'sweep', 'excess', 'deposit', 'withdrawal')),
  request_id TEXT REFERENCES requests(id),
  deposit_id TEXT REFERENCES deposits(id),
  chain_id INTEGER NOT NULL,
  recipient TEXT NOT NULL,
  currency TEXT NOT NULL,
  amount TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('queued', 'sent', 'success', 'failed')),
  tx_hash TEXT,
  fail_reason TEXT,
  decided_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  native_topup TEXT,
  calls TEXT,
  max_gas TEXT,
  authorization TEXT
);
INSERT INTO payouts_v15 (id, kind, request_id, deposit_id, chain_id, recipient, currency, amount, state, tx_hash, fail_reason,
  decided_at, updated_at, native_topup, calls, max_gas, authorization)
  SELECT id, kind, request_id, deposit_id, chain_id, recipient, currency, amount, state, tx_hash, fail_reason,
  decided_at, updated_at, native_topup, calls, max_gas, authorization FROM payouts;
DROP TABLE payouts;
ALTER TABLE payouts_v15 RENAME TO payouts;
CREATE INDEX payouts_queue ON payouts(chain_id, state, decided_at);
CREATE INDEX payouts_request ON payouts(request_id);
CREATE INDEX payouts_tx ON payouts(tx_hash);

-- Which deposits a withdrawal took out of the depository: each deposit at most once (the primary
-- key), so nothing is withdrawn twice. A failed withdrawal's rows are deleted in the transaction
-- that records its failure, and its deposits are owed to the solver again.
CREATE TABLE withdrawn_deposits (
  deposit_id TEXT PRIMARY KEY REFERENCES deposits(id),
  payout_id TEXT NOT NULL REFERENCES payouts(id)
);
CREATE INDEX withdrawn_deposits_payout ON withdrawn_deposits(payout_id);
`,
  },
  {
    version: 16,
    name: 'what the depository owes the solver, kept as it changes',
    sql: `
-- Payouts by deposit: the solver's and the withdrawals' checks per deposit (a scan of every payout before).
CREATE INDEX payouts_deposit ON payouts(deposit_id, kind, state) WHERE deposit_id IS NOT NULL;

-- The deposits the depository holds for the solver now, one row each, kept by the triggers below in
-- the transaction of every change that decides it (a payout, the deposit's state, a withdrawal). A
-- withdrawal walks these rows only, not every deposit ever filled.
CREATE TABLE depository_owed (
  deposit_id TEXT PRIMARY KEY REFERENCES deposits(id),
  chain_id INTEGER NOT NULL,
  currency TEXT NOT NULL,
  amount TEXT NOT NULL,
  excess TEXT
);
CREATE INDEX depository_owed_chain ON depository_owed(chain_id);
-- Every change of it as an immutable entry (+1 when a deposit becomes owed, -1 when it stops): the
-- node's per-currency totals follow the entries after the last one they read, so the inventory
-- metric and the withdrawal threshold cost what changed, not what the ledger holds.
CREATE TABLE depository_owed_entries (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  deposit_id TEXT NOT NULL,
  chain_id INTEGER NOT NULL,
  currency TEXT NOT NULL,
  sign INTEGER NOT NULL CHECK (sign IN (1, -1)),
  amount TEXT NOT NULL,
  excess TEXT
);

-- A table rebuild drops its triggers: a migration that rebuilds payouts, deposits or
-- withdrawn_deposits must create these again.
${owedTriggers}

-- What is owed today, as the first entries.${owedSelect('1')}
INSERT INTO depository_owed_entries (deposit_id, chain_id, currency, sign, amount, excess)
  SELECT deposit_id, chain_id, currency, 1, amount, excess FROM depository_owed ORDER BY deposit_id;
`,
  },
  {
    version: 17,
    name: 'SVM audit opening balances',
    sql: `
-- The SVM audit's baseline (src/audit/svmAudit.ts): the solver's and the vault's balance of each
-- currency, read in one answer at one slot when the node first started on the chain. A chain keeps
-- no past balances to read later (unlike an EVM archive node): they are written once, never changed.
CREATE TABLE svm_audit_openings (
  chain_id INTEGER NOT NULL,
  owner TEXT NOT NULL,
  currency TEXT NOT NULL,
  slot INTEGER NOT NULL,
  amount TEXT NOT NULL,
  PRIMARY KEY (chain_id, owner, currency)
);
`,
  },
  {
    version: 18,
    name: 'gasless relays: the node sends a sponsored user call (EIP-7702) from its own key',
    rebuilds: true,
    sql: `
-- payouts gains the kind relay: POST /execute rawCalls, a user's call (with its EIP-7702
-- authorization list, in the authorization column) sent as a type-4 transaction from the solver's key
-- and paid for by the sponsoring key's app balance. The table is rebuilt with its rows as they are.
-- Migration 16's triggers all read payouts: dropped first (a rename re-reads them), made again below.
DROP TRIGGER owed_payout_insert;
DROP TRIGGER owed_payout_state;
DROP TRIGGER owed_deposit_state;
DROP TRIGGER owed_withdrawn_insert;
DROP TRIGGER owed_withdrawn_delete;
CREATE TABLE payouts_v18 (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('fill', 'refund', 'claim', 'sweep', 'excess', 'deposit', 'withdrawal', 'relay')),
  request_id TEXT REFERENCES requests(id),
  deposit_id TEXT REFERENCES deposits(id),
  chain_id INTEGER NOT NULL,
  recipient TEXT NOT NULL,
  currency TEXT NOT NULL,
  amount TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('queued', 'sent', 'success', 'failed')),
  tx_hash TEXT,
  fail_reason TEXT,
  decided_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  native_topup TEXT,
  calls TEXT,
  max_gas TEXT,
  authorization TEXT
);
INSERT INTO payouts_v18 (id, kind, request_id, deposit_id, chain_id, recipient, currency, amount, state, tx_hash, fail_reason,
  decided_at, updated_at, native_topup, calls, max_gas, authorization)
  SELECT id, kind, request_id, deposit_id, chain_id, recipient, currency, amount, state, tx_hash, fail_reason,
  decided_at, updated_at, native_topup, calls, max_gas, authorization FROM payouts;
DROP TABLE payouts;
ALTER TABLE payouts_v18 RENAME TO payouts;
CREATE INDEX payouts_queue ON payouts(chain_id, state, decided_at);
CREATE INDEX payouts_request ON payouts(request_id);
CREATE INDEX payouts_tx ON payouts(tx_hash);
CREATE INDEX payouts_deposit ON payouts(deposit_id, kind, state) WHERE deposit_id IS NOT NULL;
-- Migration 16's triggers, as they were.
${owedTriggers}

-- Each signed EIP-7702 authorization is relayed once: (chain, signer, nonce) is its identity, and a
-- second request carrying it is refused before anything is sent or charged.
CREATE TABLE relayed_authorizations (
  chain_id INTEGER NOT NULL,
  authority TEXT NOT NULL,
  nonce TEXT NOT NULL,
  request_id TEXT NOT NULL REFERENCES requests(id),
  PRIMARY KEY (chain_id, authority, nonce)
);
`,
  },
  {
    version: 19,
    name: 'a fee-capped transaction can be cancelled at its nonce: cancel rows among a payout transactions',
    sql: `
-- A cancel (feeCapPolicy 'cancel'): a zero-value transfer to the solver itself at the nonce of a payout's
-- transaction held at the fee cap, recorded as a row of that payout before it is broadcast. It never pays
-- the payout: when it lands the payout goes back to the queue, and its fee is what it spent.
ALTER TABLE transactions ADD COLUMN cancel INTEGER NOT NULL DEFAULT 0 CHECK (cancel IN (0, 1));
`,
  },
  {
    version: 20,
    name: 'the deposit state trigger of depository_owed runs only where a deposit enters or leaves handled',
    sql: owedDepositStateTrigger,
  },
  {
    version: 21,
    name: 'active/standby nodes: the leader lease (holder, epoch, expiry) and the epoch each payout was recorded under',
    sql: `
-- One row: which node acts on the chains (holder), under which epoch (raised by one at every
-- takeover, never reused), until when (ms since the epoch, on the clock of the node that wrote it).
-- holder NULL: nobody holds it (never taken, or released by a clean stop). Plain SQL (PostgreSQL too).
CREATE TABLE leader_lease (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  holder TEXT,
  epoch INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
);
INSERT INTO leader_lease (id, holder, epoch, expires_at) VALUES (1, NULL, 0, 0);
-- The epoch under which a payout was recorded (NULL: recorded without a lease, by a single node
-- or before this migration).
ALTER TABLE payouts ADD COLUMN epoch INTEGER;
`,
    pg: `
CREATE TABLE leader_lease (id BIGINT PRIMARY KEY CHECK (id = 1), holder TEXT, epoch BIGINT NOT NULL, expires_at BIGINT NOT NULL);
INSERT INTO leader_lease (id, holder, epoch, expires_at) VALUES (1, NULL, 0, 0);
ALTER TABLE payouts ADD COLUMN epoch BIGINT;
`,
  },
  {
    version: 22,
    name: 'the listing index on amount_usd over COALESCE, the spelling both SQLite and PostgreSQL know',
    sql: `
-- The request listing sorts by COALESCE(amount_usd, -1) (PostgreSQL has no IFNULL), and SQLite uses an
-- index on an expression only for the same function name: the index follows.
DROP INDEX requests_amount_usd;
CREATE INDEX requests_amount_usd ON requests(COALESCE(amount_usd, -1), id);
`,
    pg: `-- Nothing: PostgreSQL's baseline made requests_amount_usd over COALESCE already.`,
  },
  {
    version: 23,
    name: "a transaction's signed bytes stored once, keyed by its hash, not once per payout it carries",
    sql: `
-- A batched fill is one transaction with a row per payout it carries: with its bytes on every row, each
-- update of its state (broadcast, included...) rewrote them all (about 200 KB for 40 fills). The bytes are
-- written once, with the first row, in the same ledger transaction (before broadcast); the rows keep the
-- state. Every row's hash must have its bytes (the key). Two different byte strings under one hash (never:
-- the hash is their keccak, or the signature they carry) would fail this migration on the primary key.
CREATE TABLE transaction_bytes (
  hash TEXT PRIMARY KEY,
  raw TEXT NOT NULL
);
INSERT INTO transaction_bytes (hash, raw) SELECT DISTINCT hash, raw FROM transactions;
CREATE TABLE transactions_v23 (
  hash TEXT NOT NULL REFERENCES transaction_bytes(hash),
  payout_id TEXT NOT NULL REFERENCES payouts(id),
  chain_id INTEGER NOT NULL,
  sender TEXT NOT NULL,
  nonce INTEGER NOT NULL,
  gas_limit TEXT NOT NULL,
  max_fee_per_gas TEXT NOT NULL,
  max_priority_fee_per_gas TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('signed', 'broadcast', 'included', 'reverted', 'replaced', 'dropped')),
  sent_block INTEGER,
  block_number INTEGER,
  gas_used TEXT,
  fee TEXT,
  error TEXT,
  created_at INTEGER NOT NULL,
  broadcast_at INTEGER,
  updated_at INTEGER NOT NULL,
  cancel INTEGER NOT NULL DEFAULT 0 CHECK (cancel IN (0, 1)),
  PRIMARY KEY (hash, payout_id)
);
INSERT INTO transactions_v23 (hash, payout_id, chain_id, sender, nonce, gas_limit, max_fee_per_gas, max_priority_fee_per_gas, state,
  sent_block, block_number, gas_used, fee, error, created_at, broadcast_at, updated_at, cancel)
  SELECT hash, payout_id, chain_id, sender, nonce, gas_limit, max_fee_per_gas, max_priority_fee_per_gas, state,
  sent_block, block_number, gas_used, fee, error, created_at, broadcast_at, updated_at, cancel FROM transactions;
DROP TABLE transactions;
ALTER TABLE transactions_v23 RENAME TO transactions;
CREATE INDEX transactions_open ON transactions(chain_id, state);
CREATE INDEX transactions_payout ON transactions(payout_id);
CREATE INDEX transactions_nonce ON transactions(chain_id, sender, nonce);
`,
    pg: `
CREATE TABLE transaction_bytes (hash TEXT PRIMARY KEY, raw TEXT NOT NULL);
INSERT INTO transaction_bytes (hash, raw) SELECT DISTINCT hash, raw FROM transactions;
ALTER TABLE transactions DROP COLUMN raw;
ALTER TABLE transactions ADD FOREIGN KEY (hash) REFERENCES transaction_bytes(hash) DEFERRABLE INITIALLY IMMEDIATE;
`,
  },
  {
    version: 24,
    name: 'the payout state trigger of depository_owed runs only where a payout enters or leaves success',
    sql: owedPayoutStateTrigger,
    pg: `
DROP TRIGGER owed_payout_state ON payouts;
CREATE TRIGGER owed_payout_state AFTER UPDATE OF state ON payouts FOR EACH ROW
  WHEN (NEW.deposit_id IS NOT NULL AND (OLD.state = 'success' OR NEW.state = 'success')) EXECUTE FUNCTION owed_on_payout();
`,
  },
  {
    version: 25,
    name: "a request's quote in a table of its own, written once",
    sql: REQUEST_QUOTES,
    pg: REQUEST_QUOTES,
  },
  {
    version: STATUS_NOTIFY_VERSION,
    name: "PostgreSQL notifies each change of a request's Status record (channel relay_status), for the API replicas' caches",
    sql: `-- Nothing: an API replica on SQLite reads the file itself, and keeps nothing in memory.`,
    pg: STATUS_NOTIFY,
  },
  {
    version: 27,
    name: "the input a request's fast fill was priced at: its app fees are earned on it",
    sql: 'ALTER TABLE requests ADD COLUMN fast_fill_input TEXT;',
    pg: 'ALTER TABLE requests ADD COLUMN fast_fill_input TEXT;',
  },
  {
    version: 28,
    name: 'each EIP-2612 permit funds one request: (chain, token, owner, nonce, deadline) recorded with the deposit it authorizes, never released',
    sql: `
-- A permit is not tied to its request: the depository skips \`permit\` when the owner's allowance
-- already covers the amount, so the token never consumes its nonce and the signature, public once
-- posted, would pass again for another request of the same owner, token and amount. Written in the
-- ledger transaction that records the signed deposit; never deleted (unlike signature_nonces, whose
-- rows expire): the permit's nonce may stay the token's current one for ever.
CREATE TABLE used_permits (
  chain_id INTEGER NOT NULL,
  token TEXT NOT NULL,
  owner TEXT NOT NULL,
  nonce TEXT NOT NULL,
  deadline TEXT NOT NULL,
  request_id TEXT NOT NULL REFERENCES requests(id),
  used_at INTEGER NOT NULL,
  PRIMARY KEY (chain_id, token, owner, nonce, deadline)
);
`,
    pg: `
CREATE TABLE used_permits (
  chain_id BIGINT NOT NULL,
  token TEXT NOT NULL,
  owner TEXT NOT NULL,
  nonce TEXT NOT NULL,
  deadline TEXT NOT NULL,
  request_id TEXT NOT NULL REFERENCES requests(id) DEFERRABLE INITIALLY IMMEDIATE,
  used_at BIGINT NOT NULL,
  PRIMARY KEY (chain_id, token, owner, nonce, deadline)
);
`,
  },
  {
    version: 29,
    name: "webhook deliveries due, by webhook: each key's share is picked without walking another key's backlog",
    sql: `CREATE INDEX event_deliveries_webhook_due ON event_deliveries(webhook_id, next_attempt_at, event_seq) WHERE state = 'pending';`,
    pg: `CREATE INDEX event_deliveries_webhook_due ON event_deliveries(webhook_id, next_attempt_at, event_seq) WHERE state = 'pending';`,
  },
  {
    version: 30,
    name: 'live deposit addresses by API key: the caps on them are counted without reading every request of a key',
    sql: `CREATE INDEX requests_watched ON requests(api_key_id, created_at) WHERE deposit_address IS NOT NULL AND parent_id IS NULL;`,
    pg: `CREATE INDEX requests_watched ON requests(api_key_id, created_at) WHERE deposit_address IS NOT NULL AND parent_id IS NULL;`,
  },
  {
    version: 31,
    name: "deposits by order ref through the ref's last 8 hex digits: a short index, not a second copy of every 66-character ref",
    // Refs are random (hashes): each range of a backfill rewrote most of the full index, about half of its write.
    // Lookups name the digits beside the ref (orderRefIs in deposits.ts), so they stay exact.
    sql: `DROP INDEX deposits_order_ref;
CREATE INDEX deposits_order_key ON deposits(substr(order_ref, 59));`,
    pg: `DROP INDEX deposits_order_ref;
CREATE INDEX deposits_order_key ON deposits(substr(order_ref, 59));`,
  },
  {
    version: 32,
    name: "a swap's fill records the rate it paid at: the app fees it accrues are those it charged, not the quote's",
    sql: `ALTER TABLE payouts ADD COLUMN rate TEXT;`,
    pg: `ALTER TABLE payouts ADD COLUMN rate TEXT;`,
  },
  {
    version: 33,
    name: "a webhook's dead deliveries, by request and sequence: redelivering them goes in bounded chunks without reading its delivered ones",
    sql: `CREATE INDEX event_deliveries_dead ON event_deliveries(webhook_id, request_id, event_seq) WHERE state = 'dead';`,
    pg: `CREATE INDEX event_deliveries_dead ON event_deliveries(webhook_id, request_id, event_seq) WHERE state = 'dead';`,
  },
  {
    version: 34,
    name: 'depository_owed leaves out a deposit a reorg took back after the solver paid, whatever settles after the write-off',
    sql: `${owedTriggersNotReorged}
${writeOffReorgedRows}`,
    pg: `
CREATE OR REPLACE FUNCTION recompute_depository_owed(p_deposit TEXT) RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN${recomputeOwed('p_deposit', true)}
END
$fn$;
${writeOffReorgedRows}`,
  },
  {
    version: 35,
    name: 'app_fee_entries gains the kind accrual_reversal: the fee of a fill whose deposit a reorg took back is taken back',
    sql: `
-- accrual_reversal (-, once per accrual): a reorg took back the deposit of the paid fill that accrued the fee
-- (DEPOSIT_REORGED), so the fee was never earned. SQLite cannot alter a CHECK: the table is rebuilt with its rows
-- and ids as they are (no table references it).
CREATE TABLE app_fee_entries_v35 (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  recipient TEXT NOT NULL,
  chain_id INTEGER NOT NULL,
  currency TEXT NOT NULL,
  amount TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('accrual', 'accrual_reversal', 'claim', 'claim_reversal')),
  request_id TEXT,
  ref TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL
);
INSERT INTO app_fee_entries_v35 (id, recipient, chain_id, currency, amount, kind, request_id, ref, created_at)
  SELECT id, recipient, chain_id, currency, amount, kind, request_id, ref, created_at FROM app_fee_entries;
DROP TABLE app_fee_entries;
ALTER TABLE app_fee_entries_v35 RENAME TO app_fee_entries;
CREATE INDEX app_fee_entries_recipient ON app_fee_entries(recipient, chain_id, currency);
`,
    pg: `
ALTER TABLE app_fee_entries DROP CONSTRAINT app_fee_entries_kind_check;
ALTER TABLE app_fee_entries ADD CONSTRAINT app_fee_entries_kind_check CHECK (kind IN ('accrual', 'accrual_reversal', 'claim', 'claim_reversal'));
`,
  },
  {
    version: 36,
    name: "a sponsored relay's payout records the fee cap its hold was computed at: it is never signed nor bumped above it",
    // Beside max_gas: the hold covers max_gas at this max fee per gas; a relay sent at a market past it charged its sponsor past the hold.
    sql: `ALTER TABLE payouts ADD COLUMN max_fee_per_gas TEXT;`,
    pg: `ALTER TABLE payouts ADD COLUMN max_fee_per_gas TEXT;`,
  },
  {
    version: 37,
    name: "payouts by chain, kind and decision time: the hourly outflow budget sums the last hour's fills, claims and relays",
    // Read inside every fill's and claim's decision: payouts_queue seeks the chain alone (state != 'failed' is no range).
    sql: `CREATE INDEX payouts_outflow ON payouts(chain_id, kind, decided_at);`,
    pg: `CREATE INDEX payouts_outflow ON payouts(chain_id, kind, decided_at);`,
  },
  {
    version: 38,
    name: "each wallet's app balance totals, kept with every entry: a summary reads one row, not the wallet's history",
    // Balances.summary runs on the node's event loop for every sponsored quote, relay admission, fast fill and claim:
    // summing the wallet's entries made each slower with every request the app ever paid for. The trigger is created
    // before the backfill, in the migration's one transaction: no entry is counted twice nor missed.
    sql: `
${balanceTotalsTable("INTEGER NOT NULL CHECK (typeof(balance) = 'integer')", "INTEGER NOT NULL CHECK (typeof(held) = 'integer')")}
CREATE TRIGGER balance_totals_insert AFTER INSERT ON balance_entries BEGIN
  ${balanceTotalsUpsert('')}
END;
${balanceTotalsBackfill}`,
    pg: `
${balanceTotalsTable('BIGINT NOT NULL', 'BIGINT NOT NULL')}
CREATE FUNCTION balance_totals_on_entry() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  ${balanceTotalsUpsert('t')}
  RETURN NULL;
END
$fn$;
CREATE TRIGGER balance_totals_insert AFTER INSERT ON balance_entries FOR EACH ROW EXECUTE FUNCTION balance_totals_on_entry();
${balanceTotalsBackfill}`,
  },
  {
    version: 39,
    name: "live deposit addresses by chain: each head's watcher read seeks its chain's recent addresses, not every request",
    // Requests.depositAddresses runs on every head of every EVM chain. Without statistics SQLite took requests_parent
    // (parent_id IS NULL: every top-level request the ledger has); requests_watched (migration 30) leads by API key.
    sql: `CREATE INDEX requests_watched_chain ON requests(origin_chain_id, created_at) WHERE deposit_address IS NOT NULL AND parent_id IS NULL;`,
    pg: `CREATE INDEX requests_watched_chain ON requests(origin_chain_id, created_at) WHERE deposit_address IS NOT NULL AND parent_id IS NULL;`,
  },
  {
    version: 40,
    name: "indexes for the ledger's periodic reads: a sender's transactions, the quote pruner's candidates, open withdrawals",
    // On SQLite without statistics each read on a timer sought an index that bounds nothing it asks for, and read more
    // with every transaction, request or withdrawal the ledger ever had (periodicPlans.test):
    // - a sender's transactions on a chain, the sender compared case-insensitively (the loss breaker's fees, the
    //   audit's costs and hashes, on every check): transactions_nonce sought the chain alone, every sender's;
    // - the quote pruner's candidates (every 300 s): requests_prunable, led by expires_at alone, lost to requests_status
    //   (status=?), every waiting request read and sorted before the LIMIT. Led by its status (one value in it), it is
    //   sought by that equality and gives the candidates in expiry order. Its NOT EXISTS of an app fee entry scanned
    //   app_fee_entries for each candidate;
    // - an open withdrawal of a chain's currency (the solver's inventory check): payouts_outflow sought the chain's
    //   withdrawals in every state; payouts_withdrawal_open holds only the open ones.
    sql: `
CREATE INDEX transactions_sender ON transactions(chain_id, lower(sender));
DROP INDEX requests_prunable;
CREATE INDEX requests_prunable ON requests(status, expires_at)
  WHERE status = 'waiting' AND kind = 'order' AND parent_id IS NULL AND deposit_address IS NULL AND expires_at IS NOT NULL;
CREATE INDEX app_fee_entries_request ON app_fee_entries(request_id);
CREATE INDEX payouts_withdrawal_open ON payouts(chain_id, lower(currency)) WHERE kind = 'withdrawal' AND state IN ('queued', 'sent');
`,
    pg: `
CREATE INDEX transactions_sender ON transactions(chain_id, lower(sender));
DROP INDEX requests_prunable;
CREATE INDEX requests_prunable ON requests(status, expires_at)
  WHERE status = 'waiting' AND kind = 'order' AND parent_id IS NULL AND deposit_address IS NULL AND expires_at IS NOT NULL;
CREATE INDEX app_fee_entries_request ON app_fee_entries(request_id);
CREATE INDEX payouts_withdrawal_open ON payouts(chain_id, lower(currency)) WHERE kind = 'withdrawal' AND state IN ('queued', 'sent');
`,
  },
];
