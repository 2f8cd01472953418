// An API replica alongside the nodes of a PostgreSQL chaos run: `relay-node api` on the same ledger, which keeps the
// Status records it reads between their changes (src/ledger/postgres/statusCache.ts), here for an hour, so a change
// whose notification it missed would still show at the end. During the load it reads the records of requests drawn
// at random (each read may be kept at whatever status the request had); after it, every request's record must be
// the ledger's.
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '../../src/devnet/freePort.ts';
import { Ledger } from '../../src/ledger/index.ts';
import { NodeProcess, type NodeCommand } from './nodeProcess.ts';

/** Kept an hour: nothing a replica kept during the run is refreshed by age before the comparison. */
const KEPT_MS = 3_600_000;
const POLL_MS = 150;

export interface ReplicaReport {
  /** Status reads sent to the replica during the load. */
  reads: number;
  /** Requests whose record was compared after the load, and those whose record differed from the ledger's. */
  compared: number;
  differed: string[];
}

export class ChaosReplica {
  readonly #process: NodeProcess;
  readonly #ledgerUrl: string;
  #poller: NodeJS.Timeout | undefined;
  #client: pg.Client | undefined;
  #reads = 0;

  private constructor(process: NodeProcess, ledgerUrl: string) {
    this.#process = process;
    this.#ledgerUrl = ledgerUrl;
  }

  /** Starts `relay-node api` on `config` with the ledger at `ledgerUrl` (records kept an hour). */
  static async start(opts: {
    root: string;
    dataDir: string;
    config: Record<string, unknown>;
    ledgerUrl: string;
    env: NodeJS.ProcessEnv;
    write(path: string, json: unknown): void;
  }): Promise<ChaosReplica> {
    const configPath = join(opts.dataDir, 'config-replica.json');
    opts.write(configPath, { ...opts.config, ha: undefined, ledger: { url: opts.ledgerUrl, statusCacheMaxAgeMs: KEPT_MS } });
    const port = await freePort();
    const command: NodeCommand = {
      args: () => [join(opts.root, 'bin/relay-node.js'), 'api', '--config', configPath, '--port', String(port)],
      env: opts.env,
      cwd: opts.root,
    };
    const p = new NodeProcess(command, port, join(opts.dataDir, 'replica.log'), 'replica');
    await p.start();
    const replica = new ChaosReplica(p, opts.ledgerUrl);
    replica.#client = new pg.Client({ connectionString: opts.ledgerUrl });
    await replica.#client.connect();
    return replica;
  }

  /** Reads the records of requests drawn at random, every 150 ms, until `stopPolling`. */
  poll(): void {
    const tick = async () => {
      try {
        const { rows } = await this.#client!.query<{ id: string }>('SELECT id FROM requests ORDER BY random() LIMIT 10');
        await Promise.all(
          rows.map((r) =>
            this.#status(r.id).then(
              () => this.#reads++,
              () => {},
            ),
          ),
        );
      } catch {
        // the next tick reads again
      }
      if (this.#poller) this.#poller = setTimeout(tick, POLL_MS);
    };
    this.#poller = setTimeout(tick, POLL_MS);
  }

  stopPolling(): void {
    clearTimeout(this.#poller);
    this.#poller = undefined;
  }

  /**
   * Every request's record from the replica against the ledger's own read (after the nodes stopped: nothing
   * changes any more). A record that differs is read again for up to 2 s (a notification on its way) before it counts.
   */
  async compare(): Promise<ReplicaReport> {
    this.stopPolling();
    const ledger = Ledger.connect({ path: '', url: this.#ledgerUrl }, { readonly: true });
    const differed: string[] = [];
    try {
      const { rows } = await this.#client!.query<{ id: string }>('SELECT id FROM requests ORDER BY id');
      for (const { id } of rows) {
        const want = JSON.stringify(ledger.requests.status(id));
        let same = false;
        for (let i = 0; i < 10 && !same; i++) {
          same = JSON.stringify(await this.#status(id).catch(() => undefined)) === want;
          if (!same) await new Promise((r) => setTimeout(r, 200));
        }
        if (!same) differed.push(id);
      }
      return { reads: this.#reads, compared: rows.length, differed };
    } finally {
      ledger.close();
    }
  }

  async stop(): Promise<void> {
    this.stopPolling();
    await this.#client?.end().catch(() => {});
    await this.#process.kill('SIGTERM');
  }

  async #status(id: string): Promise<unknown> {
    const r = await fetch(`${this.#process.url}/intents/status/v3?requestId=${id}`, { signal: AbortSignal.timeout(5_000) });
    if (r.status !== 200) throw new Error(`status ${r.status}`);
    return r.json();
  }
}
