import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { startStack, type Stack } from './helpers/stack.ts';

// The shipped alert rules and Grafana dashboard only name metrics a running node exports, and
// compose wires them in.
const docker = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'docker');
const read = (f: string) => readFileSync(path.join(docker, f), 'utf8');

let s: Stack;
beforeAll(async () => {
  s = await startStack();
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

function referenced(exprs: string[]): Set<string> {
  const out = new Set<string>();
  for (const e of exprs) for (const m of e.matchAll(/\brelay_[a-z0-9_]+/g)) out.add(m[0].replace(/_(bucket|sum|count)$/, ''));
  return out;
}

describe('dashboards and alerts', () => {
  const rules = parse(read('alerts.yml')).groups.flatMap((g: any) => g.rules) as { alert: string; expr: string }[];
  const dashboard = JSON.parse(read('grafana/dashboards/relay-node.json'));
  const exprs = dashboard.panels.flatMap((p: any) => p.targets.map((t: any) => t.expr as string));

  it('alert on what the issue names: indexer lag, waiting payouts, failures, provider errors, breaker, audit difference, dead letters', () => {
    const names = referenced(rules.map((r) => r.expr));
    for (const m of [
      'relay_indexer_lag_blocks',
      'relay_payouts_waiting',
      'relay_fills_total',
      'relay_rpc_errors_total',
      'relay_loss_breaker_tripped',
      'relay_unexplained_loss_usd',
      'relay_webhook_deliveries_total',
    ]) {
      expect(names).toContain(m);
    }
  });

  it('name only metrics a running node exports', async () => {
    const text = await (await fetch(`${s.url}/metrics`)).text();
    const exported = new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
    const missing = [...referenced([...rules.map((r) => r.expr), ...exprs])].filter((n) => !exported.has(n));
    expect(missing).toEqual([]);
    expect(exprs.length).toBeGreaterThan(5);
  });

  it('are wired into compose: prometheus loads the rules, grafana the dashboard', () => {
    const compose = parse(read('compose.yml'));
    expect(parse(read('prometheus.yml')).rule_files).toEqual(['/etc/prometheus/alerts.yml']);
    expect(compose.services.prometheus.volumes.map((v: any) => v.source)).toContain('./alerts.yml');
    expect(compose.services.grafana.volumes.map((v: any) => v.source)).toEqual(['./grafana/provisioning', './grafana/dashboards']);
    const provider = parse(read('grafana/provisioning/dashboards/relay-node.yml'));
    expect(provider.providers[0].options.path).toBe('/var/lib/grafana/dashboards');
  });

  it('the PostgreSQL variant: two nodes on one ledger, an API replica on the streaming standby, all scraped', () => {
    const compose = parse(read('compose.postgres.yml'), { merge: true });
    const s = compose.services;
    for (const name of ['relay-node-a', 'relay-node-b']) {
      expect(s[name].command.slice(0, 3)).toEqual(['start', '--config', '/config/config.json']);
      expect(s[name].volumes[0].source).toBe('./config.ha.json');
      expect(s[name].environment.RELAY_LEDGER_URL).toMatch(/@postgres:5432\/relay$/);
      // A node that lost its lease exits (75): compose starts it again as a standby.
      expect(s[name].restart).toBe('unless-stopped');
    }
    expect(s['relay-api'].command[0]).toBe('api');
    expect(s['relay-api'].environment.RELAY_LEDGER_URL).toMatch(/@postgres-replica:5432\/relay$/);
    expect(s['postgres-replica'].entrypoint.join(' ')).toContain('pg_basebackup -h postgres');
    expect(s.postgres.volumes.map((v: any) => v.source)).toContain('./postgres/replication.sh');
    const scraped = parse(read('prometheus.postgres.yml')).scrape_configs[0].static_configs[0].targets;
    expect(scraped).toEqual(['relay-node-a:4000', 'relay-node-b:4000', 'relay-api:4000']);
    expect(s.prometheus.volumes.map((v: any) => v.source)).toEqual(['./prometheus.postgres.yml', './alerts.yml']);
  });
});
