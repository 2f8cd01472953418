import { existsSync } from 'node:fs';
import { join } from 'node:path';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { buildConfigWithKeys, checkStartKeys, ConfigError, loadConfigFile, type Config } from './config/load.ts';
import { migrate, openDb } from './ledger/db.ts';
import { copySqliteToPostgres } from './ledger/pgCopy.ts';
import { migratePostgres } from './ledger/pgMigrate.ts';
import { hideUrl, withPostgres } from './ledger/pgUrl.ts';
import { webhookUrlProblem } from './events/webhookUrl.ts';
import { Ledger, type LedgerLocation } from './ledger/index.ts';
import { createLogger } from './log.ts';
import { ledgerLocation, RelayNode } from './node.ts';
import { formatAudit, recordAudit, runAudit } from './audit/audit.ts';
import { adminCommands } from './admin/cli.ts';
import { createKeystoreFile, readSecretArg } from './signers/keystoreFile.ts';
import { resetDevnetLedger, startDevnet, writeDevnetDescription } from './devnet/devnet.ts';
import { errText } from './lib/errors.ts';
import { cliLedgerLocation, ledgerOptions, withLedger as withLedgerOf } from './cliLedger.ts';

// Ctrl-C or SIGTERM: a graceful stop (the node drains within its configured bound, then stops);
// a second signal exits at once. Either way nothing recorded is lost: the ledger commits each
// step before its effect, and a restarted node takes up what is queued or signed.
function onShutdown(stop: () => Promise<void>, boundMs: number): void {
  let stopping = false;
  const handler = (signal: string) => {
    if (stopping) {
      process.stderr.write(`${signal} again: exiting now\n`);
      process.exit(130);
    }
    stopping = true;
    process.stderr.write(`\n${signal}: draining (at most ${boundMs} ms; send it again to exit now)\n`);
    // A little beyond the drain's own bound for the closing of connections and the ledger.
    const deadline = new Promise<void>((resolve) => setTimeout(resolve, boundMs + 3000).unref());
    Promise.race([stop(), deadline])
      .catch((e) => process.stderr.write(`error while stopping: ${errText(e)}\n`))
      .finally(() => process.exit(0));
  };
  process.on('SIGINT', () => handler('SIGINT'));
  process.on('SIGTERM', () => handler('SIGTERM'));
}

function withOverrides(config: Config, argv: { port?: number; host?: string }): Config {
  return { ...config, api: { ...config.api, host: argv.host ?? config.api.host, port: argv.port ?? config.api.port } };
}

function fail(e: unknown): never {
  const msg = e instanceof ConfigError ? e.message : `${errText(e)}`;
  process.stderr.write(`relay-node: ${msg}\n`);
  process.exit(1);
}

/** The PostgreSQL ledger a command's flags name: --url, or the variable --url-env names. Undefined: none named. */
function postgresUrl(argv: { url?: string; urlEnv?: string }): string | undefined {
  if (argv.url) return argv.url;
  if (!argv.urlEnv) return undefined;
  const v = process.env[argv.urlEnv];
  if (!v) fail(new Error(`environment variable ${argv.urlEnv} is not set`));
  return v;
}

// Where the command's ledger is (src/cliLedger.ts); a bad config file stops the command with its message.
function locate(argv: { dataDir: string; config?: string }): LedgerLocation {
  try {
    return cliLedgerLocation(argv);
  } catch (e) {
    fail(e);
  }
}

// The command's ledger (src/cliLedger.ts); a bad config file stops the command with its message.
function withLedger(argv: { dataDir: string; config?: string }, fn: (ledger: Ledger) => void): void {
  withLedgerOf(argv, fail, fn);
}

// Every dead delivery (of one webhook, or of every live one) back to pending, a chunk per write: a running node
// sharing the ledger waits for one chunk at a time, never for the whole backlog.
function redeliverAllDead(ledger: Ledger, webhookId?: string): number {
  let n = 0;
  for (const id of webhookId === undefined ? ledger.events.webhooks().map((w) => w.id) : [webhookId]) {
    for (let more = true; more; ) {
      const chunk = ledger.events.redeliverDead(id, { limit: 1_000 });
      n += chunk.redelivered;
      more = chunk.more;
    }
  }
  return n;
}

async function runNode(config: Config, readOnly = false): Promise<RelayNode> {
  const node = new RelayNode(config, { readOnly });
  onShutdown(async () => {
    if (!readOnly) await node.drain();
    await node.stop();
  }, config.shutdown.drainTimeoutMs);
  await node.start();
  return node;
}

await yargs(hideBin(process.argv))
  .scriptName('relay-node')
  .option('port', { type: 'number', describe: 'API port' })
  .option('host', { type: 'string', describe: 'API host (127.0.0.1 by default)' })
  .command(
    'start',
    'run the node against the chains of a config file',
    (y) =>
      y
        .option('config', { type: 'string', demandOption: true, describe: 'config file (JSON)' })
        // Test hook: the crash tests kill the node at an exact point of the fill pipeline.
        .option('fault', { type: 'string', choices: ['crash-after-fill-recorded', 'crash-after-fill-broadcast', 'pause-after-fill-recorded'], hidden: true }),
    async (argv) => {
      let config: Config;
      try {
        config = withOverrides(loadConfigFile(argv.config), argv);
        checkStartKeys(config);
        config.faults = {
          crashAfterFillRecorded: argv.fault === 'crash-after-fill-recorded',
          crashAfterFillBroadcast: argv.fault === 'crash-after-fill-broadcast',
          pauseAfterFillRecorded: argv.fault === 'pause-after-fill-recorded',
        };
      } catch (e) {
        fail(e);
      }
      await runNode(config).catch(fail);
    },
  )
  .command(
    'api',
    'serve the read-only API over the ledger of a running node',
    (y) => y.option('config', { type: 'string', demandOption: true }),
    async (argv) => {
      let config: Config;
      try {
        // No private key needed: the replica takes the solver's address from solverAddress.
        config = withOverrides(loadConfigFile(argv.config, process.env, { readOnly: true }), argv);
      } catch (e) {
        fail(e);
      }
      await runNode(config, true).catch(fail);
    },
  )
  .command(
    'dev',
    'run the node on an embedded devnet of local chains',
    (y) =>
      y
        .option('data-dir', { type: 'string', default: './data' })
        .option('block-time', { type: 'number', default: 1, describe: 'seconds per block' })
        .option('instant', { type: 'boolean', default: false, describe: 'mine each transaction at once' })
        .option('confirmations', { type: 'number', default: 1 })
        .option('svm', { type: 'boolean', default: true, describe: 'run the SVM chain (792703809) on litesvm' })
        .option('log-level', { type: 'string', default: 'info' }),
    async (argv) => {
      const log = createLogger(argv.logLevel);
      const devnet = await startDevnet({
        dataDir: argv.dataDir,
        blockTime: argv.instant ? undefined : argv.blockTime,
        confirmations: argv.confirmations,
        svm: argv.svm,
      }).catch(fail);
      resetDevnetLedger(argv.dataDir);
      const config = buildConfigWithKeys(devnet.nodeConfig({ port: argv.port, host: argv.host, logLevel: argv.logLevel }), devnet.keys);
      const node = new RelayNode(config, { log });
      onShutdown(async () => {
        await node.drain();
        await node.stop();
        await devnet.stop();
      }, config.shutdown.drainTimeoutMs);
      await node.start().catch(async (e) => {
        await devnet.stop();
        fail(e);
      });
      const descPath = join(argv.dataDir, 'devnet.json');
      const devKey = node.ledger.apiKeys.create('devnet');
      writeDevnetDescription(devnet, descPath, node.url, devKey.key);
      process.stdout.write(
        `${[
          '',
          `relay-node devnet is up`,
          `  API      ${node.url}`,
          ...devnet.chains.map((c) => `  chain ${String(c.id).padEnd(5)} ${c.rpcUrl}  depository ${c.contracts.depository}  USDC ${c.contracts.stablecoin}`),
          ...(devnet.svm ? [`  chain ${devnet.svm.id} ${devnet.svm.rpcUrl}  vault ${devnet.svm.vault}  USDC ${devnet.svm.mint} (SVM)`] : []),
          ...(devnet.exchange
            ? [
                `  chain ${String(devnet.exchange.id).padEnd(5)} ${devnet.exchange.url}  perps USD ${devnet.exchange.currencies.perpsUSD}  HYPE ${devnet.exchange.currencies.spotHYPE} (exchange)`,
              ]
            : []),
          `  solver   ${devnet.solver}`,
          `  API key  ${devKey.key} (x-api-key; \`relay-node keys create\` makes more)`,
          `  devnet   ${descPath} (chains, contracts, funded test accounts)`,
          `  Ctrl-C stops everything`,
          '',
        ].join('\n')}\n`,
      );
    },
  )
  .command(
    'audit',
    'reconcile the ledger with the chains: credits, payouts, fill/refund/deposit events and balances (exit 1 on any difference)',
    (y) => y.option('config', { type: 'string', demandOption: true, describe: 'config file (JSON) of the node whose books to check' }),
    async (argv) => {
      let config: Config;
      try {
        config = loadConfigFile(argv.config);
      } catch (e) {
        fail(e);
      }
      const ledger = Ledger.connect(ledgerLocation(config));
      let code = 0;
      try {
        const result = await runAudit(config, ledger);
        recordAudit(ledger, result);
        process.stdout.write(`${formatAudit(result)}\n`);
        code = result.differences.length ? 1 : 0;
      } catch (e) {
        fail(e);
      } finally {
        ledger.close();
      }
      // Exits rather than waiting for the event loop to empty: a websocket provider's connection stays open.
      process.exit(code);
    },
  )
  .command('db', 'the ledger database: migrate (SQLite or PostgreSQL), copy (SQLite into PostgreSQL)', (y) =>
    y
      .command(
        'migrate',
        'create or upgrade the ledger: the SQLite file in --data-dir, or PostgreSQL (--url, --url-env, or ledger.url in --config)',
        (y) =>
          ledgerOptions(y)
            .option('url', { type: 'string', describe: 'a PostgreSQL ledger, postgres://… (visible to other users of this host: prefer --url-env)' })
            .option('url-env', { type: 'string', describe: 'the environment variable that holds the PostgreSQL ledger URL' }),
        async (argv) => {
          // --url or --url-env, else the ledger --config or --data-dir names.
          const flagged = postgresUrl(argv);
          const where = flagged === undefined ? locate(argv) : undefined;
          const url = flagged ?? where?.url;
          if (url === undefined) {
            const path = where!.path;
            const db = openDb(path);
            const ran = migrate(db);
            db.close();
            process.stdout.write(ran.length ? `applied migrations ${ran.join(', ')} to ${path}\n` : `ledger ${path} is up to date\n`);
            return;
          }
          try {
            const ran = await withPostgres(url, (client) => migratePostgres(client));
            process.stdout.write(ran.length ? `applied migrations ${ran.join(', ')} to the PostgreSQL ledger\n` : 'the PostgreSQL ledger is up to date\n');
          } catch (e) {
            fail(new Error(`db migrate: ${hideUrl(errText(e), url)}`));
          }
        },
      )
      .command(
        'copy',
        'copy a SQLite ledger into an empty PostgreSQL database, in one transaction, verified (row counts, money sums) before it commits',
        (y) =>
          y
            .option('from', { type: 'string', demandOption: true, describe: 'the SQLite ledger file (ledger.sqlite)' })
            .option('to', { type: 'string', describe: 'the PostgreSQL ledger, postgres://… (visible to other users of this host: prefer --to-env)' })
            .option('to-env', { type: 'string', describe: 'the environment variable that holds the PostgreSQL ledger URL' }),
        async (argv) => {
          const url = postgresUrl({ url: argv.to, urlEnv: argv.toEnv });
          if (url === undefined) fail(new Error('db copy: name the PostgreSQL ledger with --to or --to-env'));
          if (!existsSync(argv.from)) fail(new Error(`db copy: no SQLite ledger at ${argv.from}`));
          const source = openDb(argv.from, { readonly: true });
          try {
            const r = await withPostgres(url, (client) => copySqliteToPostgres(source, client, (line) => process.stdout.write(`copied ${line}\n`)));
            const rows = r.tables.reduce((n, t) => n + t.rows, 0);
            process.stdout.write(
              `verified: ${r.tables.length} tables, ${rows} rows, the same row count in each and the same money sums (${r.sums.length} sums of balance entries, app fee entries, payouts and deposits); committed\n`,
            );
          } catch (e) {
            fail(new Error(`db copy: ${hideUrl(errText(e), url)}`));
          } finally {
            source.close();
          }
        },
      )
      .demandCommand(1, 'name a db command: migrate or copy'),
  )
  .command('keys', 'manage API keys (create, list, revoke)', (y) =>
    y
      .command(
        'create',
        'create an API key; it is printed once and only its hash is kept',
        (c) => ledgerOptions(c).option('name', { type: 'string', demandOption: true, describe: 'who the key is for' }),
        (argv) =>
          withLedger(argv, (ledger) => {
            if (!argv.name.trim()) fail(new Error('keys create: --name must not be empty'));
            const { id, key } = ledger.apiKeys.create(argv.name.trim());
            process.stdout.write(`created ${id} (${argv.name.trim()})\n${key}\nkeep it now: it is not shown again\n`);
          }),
      )
      .command('list', 'list API keys (never the keys themselves)', ledgerOptions, (argv) =>
        withLedger(argv, (ledger) => {
          for (const k of ledger.apiKeys.list()) {
            const state = k.revoked_at ? `revoked ${new Date(k.revoked_at).toISOString()}` : 'active';
            process.stdout.write(`${k.id}\t${new Date(k.created_at).toISOString()}\t${state}\t${k.name}\n`);
          }
        }),
      )
      .command(
        'revoke <id>',
        'revoke an API key at once',
        (c) => ledgerOptions(c).positional('id', { type: 'string', demandOption: true }),
        (argv) =>
          withLedger(argv, (ledger) => {
            if (!ledger.apiKeys.revoke(argv.id)) fail(new Error(`keys revoke: no active key ${argv.id}`));
            process.stdout.write(`revoked ${argv.id}\n`);
          }),
      )
      .demandCommand(1, 'name a keys command: create, list or revoke'),
  )
  .command('webhooks', 'manage webhook endpoints of API keys (add, list, remove, deliveries, redeliver)', (y) =>
    y
      .command(
        'add',
        'add a webhook endpoint to an API key; its signing secret is printed once',
        (c) =>
          ledgerOptions(c)
            .option('key-id', { type: 'string', demandOption: true, describe: 'the API key (key_…) whose requests it receives' })
            .option('url', { type: 'string', demandOption: true, describe: 'http(s) URL the events are POSTed to' }),
        (argv) =>
          withLedger(argv, (ledger) => {
            const problem = webhookUrlProblem(argv.url);
            if (problem) fail(new Error(`webhooks add: --url ${problem}`));
            const key = ledger.apiKeys.get(argv.keyId);
            if (!key || key.revoked_at !== null) fail(new Error(`webhooks add: no active key ${argv.keyId}`));
            const w = ledger.events.addWebhook(key.id, argv.url);
            process.stdout.write(`created ${w.id} for ${key.id}\n${w.secret}\nkeep the secret now: it signs every delivery and is not shown again\n`);
          }),
      )
      .command(
        'list',
        'list live webhook endpoints (never their secrets)',
        (c) => ledgerOptions(c).option('key-id', { type: 'string', describe: 'only this API key' }),
        (argv) =>
          withLedger(argv, (ledger) => {
            for (const w of ledger.events.webhooks(argv.keyId)) {
              const n = ledger.events.deliveryCounts(w.id);
              process.stdout.write(`${w.id}\t${w.api_key_id}\t${new Date(w.created_at).toISOString()}\tpending ${n.pending}\tdead ${n.dead}\t${w.url}\n`);
            }
          }),
      )
      .command(
        'remove <id>',
        'remove a webhook endpoint; its pending deliveries end',
        (c) => ledgerOptions(c).positional('id', { type: 'string', demandOption: true }),
        (argv) =>
          withLedger(argv, (ledger) => {
            if (!ledger.events.removeWebhook(argv.id)) fail(new Error(`webhooks remove: no live webhook ${argv.id}`));
            // A write per chunk: a running node sharing the ledger waits for one chunk at a time.
            let ended: number;
            do ended = ledger.events.endPending(argv.id, 1_000);
            while (ended === 1_000);
            process.stdout.write(`removed ${argv.id}\n`);
          }),
      )
      .command(
        'deliveries <id>',
        'show the latest deliveries of a webhook',
        (c) =>
          ledgerOptions(c)
            .positional('id', { type: 'string', demandOption: true })
            .option('state', { type: 'string', choices: ['pending', 'delivered', 'dead'] as const })
            .option('limit', { type: 'number', default: 50 }),
        (argv) =>
          withLedger(argv, (ledger) => {
            if (!ledger.events.webhook(argv.id)) fail(new Error(`webhooks deliveries: no webhook ${argv.id}`));
            for (const d of ledger.events.deliveries(argv.id, { state: argv.state as 'pending' | 'delivered' | 'dead' | undefined, limit: argv.limit })) {
              process.stdout.write(
                `${d.event_id}\t${d.request_id}\t${d.status}\t${d.state}\tattempts ${d.attempts}\t${d.last_status ?? '-'}\t${d.last_error ?? ''}\n`,
              );
            }
          }),
      )
      .command(
        'redeliver [eventId]',
        'send an event again (to every webhook that had it, or --webhook), or every dead delivery with --dead',
        (c) =>
          ledgerOptions(c)
            .positional('eventId', { type: 'string', describe: 'the event (evt_…)' })
            .option('dead', { type: 'boolean', default: false, describe: 'redeliver every dead delivery' })
            .option('webhook', { type: 'string', describe: 'only to this webhook' }),
        (argv) =>
          withLedger(argv, (ledger) => {
            if (Boolean(argv.eventId) === argv.dead) fail(new Error('webhooks redeliver: give an event id or --dead, not both'));
            const n = argv.eventId ? ledger.events.redeliver({ eventId: argv.eventId, webhookId: argv.webhook }) : redeliverAllDead(ledger, argv.webhook);
            if (argv.eventId && n === 0) fail(new Error(`webhooks redeliver: no delivery of ${argv.eventId} to a live webhook`));
            process.stdout.write(`queued ${n} deliver${n === 1 ? 'y' : 'ies'} again; a running node sends them within its poll interval\n`);
          }),
      )
      .demandCommand(1, 'name a webhooks command: add, list, remove, deliveries or redeliver'),
  )
  .command('keystore', 'encrypt a key into a keystore v3 file for solverSigner / allocatorSigner / svmSolverSigner', (y) =>
    y
      .command(
        'create',
        'encrypt a raw key (EVM or SVM) into a new keystore file; prints its address',
        (c) =>
          c
            .option('kind', { choices: ['evm', 'svm'] as const, default: 'evm' as const })
            .option('key-env', { type: 'string', describe: 'environment variable holding the key' })
            .option('key-file', { type: 'string', describe: 'file holding the key' })
            .option('passphrase-env', { type: 'string' })
            .option('passphrase-file', { type: 'string' })
            .option('out', { type: 'string', demandOption: true, describe: 'path of the new keystore file' })
            .option('scrypt-n', { type: 'number', default: 262_144, describe: 'scrypt cost (a power of two)' }),
        (argv) => {
          try {
            const address = createKeystoreFile({
              kind: argv.kind,
              key: readSecretArg('key', argv.keyEnv, argv.keyFile),
              passphrase: readSecretArg('passphrase', argv.passphraseEnv, argv.passphraseFile),
              out: argv.out,
              scryptN: argv.scryptN,
            });
            process.stdout.write(`wrote ${argv.out} for ${address}\n`);
          } catch (e) {
            fail(e as Error);
          }
        },
      )
      .demandCommand(1, 'name a keystore command: create'),
  )
  .command('admin', 'operate a running node: pause, resume, dry run, stuck payouts, retry, refund, inventory; admin keys', adminCommands)
  .demandCommand(1, 'name a command: start, dev, api, keys, audit, admin or db migrate')
  .strict()
  .help()
  .parseAsync();
