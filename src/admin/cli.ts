import type { Argv } from 'yargs';
import { ledgerOptions, withLedger as withLedgerOf } from '../cliLedger.ts';
import type { Ledger } from '../ledger/index.ts';
import { errText } from '../lib/errors.ts';

// `relay-node admin …`: admin keys are made on the ledger directly (there is no admin yet to ask);
// everything else asks the running node's admin API, so the node that holds the solver is the one
// that acts (it is the only writer of payouts), and the action is recorded under the key's name.

function fail(msg: string): never {
  process.stderr.write(`relay-node admin: ${msg}\n`);
  process.exit(1);
}

// The command's ledger (src/cliLedger.ts): the one the node runs on, PostgreSQL included.
function withLedger(argv: { dataDir: string; config?: string }, fn: (ledger: Ledger) => void): void {
  withLedgerOf(argv, (e) => fail(errText(e)), fn);
}

interface ApiArgs {
  url: string;
  'key-env': string;
}

// The key comes from the environment, never the command line (where `ps` would show it).
async function call(argv: ApiArgs, method: 'GET' | 'POST', path: string, body?: unknown): Promise<unknown> {
  const key = process.env[argv['key-env']];
  if (!key) fail(`set the admin key in the environment variable ${argv['key-env']} (relay-node admin keys create makes one)`);
  let res: Response;
  try {
    res = await fetch(argv.url.replace(/\/$/, '') + path, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    fail(`cannot reach the admin API at ${argv.url}: ${errText(e)}`);
  }
  const json = (await res.json().catch(() => ({}))) as { message?: string };
  if (!res.ok) fail(`${res.status}: ${json.message ?? 'request failed'}`);
  return json;
}

const print = (v: unknown): void => {
  process.stdout.write(`${JSON.stringify(v, null, 2)}\n`);
};

function apiOptions<T>(y: Argv<T>) {
  return y
    .option('url', {
      type: 'string',
      default: process.env.RELAY_ADMIN_URL ?? 'http://127.0.0.1:4001',
      describe: "the node's admin API (config admin.host/port)",
    })
    .option('key-env', { type: 'string', default: 'RELAY_ADMIN_KEY', describe: 'environment variable holding the admin key' });
}

function scopeOptions<T>(y: Argv<T>) {
  return apiOptions(y)
    .option('all', { type: 'boolean', default: false, describe: 'every payout' })
    .option('chain', { type: 'number', describe: 'payouts on this chain' })
    .option('route', { type: 'string', describe: 'fills of this route, origin:destination (e.g. 8453:10)' })
    .option('reason', { type: 'string', demandOption: true, describe: 'why (recorded with the action)' });
}

function scopeOf(argv: { all: boolean; chain?: number; route?: string; reason: string }) {
  const given = [argv.all, argv.chain !== undefined, argv.route !== undefined].filter(Boolean).length;
  if (given !== 1) fail('give exactly one of --all, --chain or --route');
  if (argv.all) return { scope: 'all', reason: argv.reason };
  if (argv.chain !== undefined) return { scope: 'chain', chainId: argv.chain, reason: argv.reason };
  const m = /^(\d+):(\d+)$/.exec(argv.route!);
  if (!m) fail('--route must be origin:destination chain ids, such as 8453:10');
  return { scope: 'route', originChainId: Number(m[1]), destinationChainId: Number(m[2]), reason: argv.reason };
}

const reasonOption = { type: 'string', demandOption: true, describe: 'why (recorded with the action)' } as const;

/** The `admin` command tree of the CLI. */
export function adminCommands(y: Argv): Argv {
  return y
    .command('keys', 'admin keys (create, list, revoke): distinct from integrator API keys', (k) =>
      k
        .command(
          'create',
          'create an admin key; printed once, only its hash is kept',
          (c) => ledgerOptions(c).option('name', { type: 'string', demandOption: true, describe: 'who holds it (recorded with every action)' }),
          (argv) =>
            withLedger(argv, (ledger) => {
              if (!argv.name.trim()) fail('keys create: --name must not be empty');
              const { id, key } = ledger.operations.createAdminKey(argv.name.trim());
              ledger.operations.record({ action: 'admin-key-create', target: id, actor: 'cli', reason: `admin key for ${argv.name.trim()}` });
              process.stdout.write(`created ${id} (${argv.name.trim()})\n${key}\nkeep it now: it is not shown again\n`);
            }),
        )
        .command(
          'list',
          'list admin keys (never the keys)',
          (c) => ledgerOptions(c),
          (argv) =>
            withLedger(argv, (ledger) => {
              for (const k of ledger.operations.adminKeys()) {
                process.stdout.write(`${k.id}\t${new Date(k.created_at).toISOString()}\t${k.revoked_at ? 'revoked' : 'active'}\t${k.name}\n`);
              }
            }),
        )
        .command(
          'revoke <id>',
          'revoke an admin key at once',
          (c) => ledgerOptions(c).positional('id', { type: 'string', demandOption: true }),
          (argv) =>
            withLedger(argv, (ledger) => {
              if (!ledger.operations.revokeAdminKey(argv.id)) fail(`keys revoke: no active admin key ${argv.id}`);
              ledger.operations.record({ action: 'admin-key-revoke', target: argv.id, actor: 'cli', reason: 'revoked' });
              process.stdout.write(`revoked ${argv.id}\n`);
            }),
        )
        .demandCommand(1, 'name an admin keys command: create, list or revoke'),
    )
    .command(
      'pause',
      'pause payouts: --all, --chain <id> or --route <origin:destination>',
      (c) => scopeOptions(c),
      async (argv) => print(await call(argv, 'POST', '/admin/pause', scopeOf(argv))),
    )
    .command(
      'resume',
      'resume payouts (also after the loss breaker tripped)',
      (c) => scopeOptions(c),
      async (argv) => print(await call(argv, 'POST', '/admin/resume', scopeOf(argv))),
    )
    .command(
      'dry-run <mode>',
      'dry-run mode on or off: index, decide and record, send nothing',
      (c) =>
        apiOptions(c)
          .positional('mode', { choices: ['on', 'off'] as const, demandOption: true })
          .option('reason', reasonOption),
      async (argv) => print(await call(argv, 'POST', '/admin/dry-run', { enabled: argv.mode === 'on', reason: argv.reason })),
    )
    .command(
      'payouts',
      'payouts waiting, retrying or failed, with their typed reason and age',
      (c) => apiOptions(c).option('state', { choices: ['waiting', 'retrying', 'failed'] as const }),
      async (argv) => print(await call(argv, 'GET', `/admin/payouts${argv.state ? `?state=${argv.state}` : ''}`)),
    )
    .command(
      'retry <depositId>',
      'decide a waiting deposit again now',
      (c) => apiOptions(c).positional('depositId', { type: 'string', demandOption: true }).option('reason', reasonOption),
      async (argv) => print(await call(argv, 'POST', `/admin/deposits/${encodeURIComponent(argv.depositId)}/retry`, { reason: argv.reason })),
    )
    .command(
      'refund <requestId>',
      "refund a request's deposit by hand (MANUAL_ADMIN_REFUND), or a filled one's unreturned excess",
      (c) =>
        apiOptions(c)
          .positional('requestId', { type: 'string', demandOption: true })
          .option('reason', reasonOption)
          .option('to', { type: 'string', describe: "pay this address on the deposit's chain instead (a recipient that refuses the refund)" }),
      async (argv) =>
        print(
          await call(argv, 'POST', `/admin/requests/${encodeURIComponent(argv.requestId)}/refund`, {
            reason: argv.reason,
            ...(argv.to === undefined ? {} : { to: argv.to }),
          }),
        ),
    )
    .command(
      'withdraw',
      "withdraw depository funds owed to the solver (deposits of filled orders) to the solver's wallet",
      (c) =>
        apiOptions(c)
          .option('chain', { type: 'number', demandOption: true, describe: 'chain id' })
          .option('currency', { type: 'string', demandOption: true, describe: 'currency address (0x000…0 for native)' })
          .option('amount', { type: 'string', describe: 'at most this much, smallest units (default: all that is owed)' })
          .option('deposit', { type: 'array', string: true, describe: 'exactly these deposit ids' })
          .option('reason', reasonOption),
      async (argv) =>
        print(
          await call(argv, 'POST', '/admin/withdrawals', {
            chainId: argv.chain,
            currency: argv.currency,
            ...(argv.amount === undefined ? {} : { amount: argv.amount }),
            ...(argv.deposit?.length ? { depositIds: argv.deposit.map(String) } : {}),
            reason: argv.reason,
          }),
        ),
    )
    .command(
      'reindex',
      "read a chain's deposits again over a block range its indexer has passed (a deposit it missed is recorded and decided)",
      (c) =>
        apiOptions(c)
          .option('chain', { type: 'number', demandOption: true, describe: 'chain id (EVM)' })
          .option('from', { type: 'number', demandOption: true, describe: 'first block' })
          .option('to', { type: 'number', demandOption: true, describe: 'last block (at most admin.reindexMaxBlocks in all)' })
          .option('reason', reasonOption),
      async (argv) => print(await call(argv, 'POST', '/admin/reindex', { chainId: argv.chain, fromBlock: argv.from, toBlock: argv.to, reason: argv.reason })),
    )
    .command(
      'inventory',
      "the solver's inventory per chain",
      (c) => apiOptions(c),
      async (argv) => print(await call(argv, 'GET', '/admin/inventory')),
    )
    .command(
      'actions',
      'the admin action log, newest first',
      (c) => apiOptions(c).option('limit', { type: 'number', default: 50 }),
      async (argv) => print(await call(argv, 'GET', `/admin/actions?limit=${argv.limit}`)),
    )
    .demandCommand(1, 'name an admin command: keys, pause, resume, dry-run, payouts, retry, refund, withdraw, reindex, inventory or actions');
}
