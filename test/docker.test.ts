// Static checks of the container setup: docker/Dockerfile, docker/compose.yml and
// docker/prometheus.yml must agree with each other and with the repository. No Docker daemon needed.

import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dockerDir = path.join(root, 'docker');

// ---------- Dockerfile ----------

interface Instruction {
  keyword: string;
  args: string;
}
interface Stage {
  image: string;
  name?: string;
  instructions: Instruction[];
}

function parseDockerfile(text: string): Stage[] {
  // Comment lines are dropped, even inside a continuation; a trailing backslash joins lines.
  const logical: string[] = [];
  let current = '';
  for (const raw of text.split(/\r?\n/)) {
    const trimmed = raw.trim();
    if (trimmed.startsWith('#')) continue;
    if (trimmed.endsWith('\\')) {
      current += `${trimmed.slice(0, -1)} `;
      continue;
    }
    current += trimmed;
    if (current.trim()) logical.push(current.trim());
    current = '';
  }
  if (current.trim()) logical.push(current.trim());

  const stages: Stage[] = [];
  for (const line of logical) {
    const m = /^(\S+)\s*(.*)$/s.exec(line)!;
    const keyword = m[1]!.toUpperCase();
    const args = m[2]!.trim();
    if (keyword === 'FROM') {
      const parts = args.split(/\s+/).filter((p) => !p.startsWith('--'));
      const asIdx = parts.findIndex((p) => p.toUpperCase() === 'AS');
      stages.push({ image: parts[0]!, name: asIdx >= 0 ? parts[asIdx + 1] : undefined, instructions: [] });
      continue;
    }
    if (keyword === 'ARG' && stages.length === 0) continue;
    if (stages.length === 0) throw new Error(`${keyword} before the first FROM`);
    stages.at(-1)!.instructions.push({ keyword, args });
  }
  return stages;
}

function execForm(args: string): string[] {
  const parsed: unknown = JSON.parse(args);
  expect(Array.isArray(parsed), `expected exec (JSON array) form: ${args}`).toBe(true);
  return parsed as string[];
}

interface Copy {
  from?: string;
  sources: string[];
  dest: string;
}

function parseCopy(args: string): Copy {
  const tokens = args.split(/\s+/);
  const flags = tokens.filter((t) => t.startsWith('--'));
  const rest = tokens.filter((t) => !t.startsWith('--'));
  const paths = rest[0]?.startsWith('[') ? (JSON.parse(rest.join(' ')) as string[]) : rest;
  const from = flags.find((f) => f.startsWith('--from='))?.slice('--from='.length);
  return { from, sources: paths.slice(0, -1), dest: paths.at(-1)! };
}

const norm = (p: string) => p.replace(/^\.\//, '').replace(/\/+$/, '');

function instructions(stage: Stage, keyword: string): Instruction[] {
  return stage.instructions.filter((i) => i.keyword === keyword);
}
function last(stage: Stage, keyword: string): Instruction | undefined {
  return instructions(stage, keyword).at(-1);
}

function configArg(argv: string[]): string | undefined {
  const i = argv.indexOf('--config');
  if (i >= 0) return argv[i + 1];
  return argv.find((a) => a.startsWith('--config='))?.slice('--config='.length);
}

// ---------- compose ----------

interface ComposeService {
  build?: { context: string; dockerfile: string } | string;
  image?: string;
  command?: string | string[];
  environment?: Record<string, string | null> | string[];
  ports?: (string | number | { target: number; published?: string | number })[];
  volumes?: (string | { type?: string; source?: string; target: string; read_only?: boolean })[];
  depends_on?: string[] | Record<string, unknown>;
  restart?: string;
}
interface Compose {
  services: Record<string, ComposeService>;
}

interface Mount {
  source?: string;
  target: string;
  readOnly: boolean;
  bind: boolean;
}

function mounts(svc: ComposeService): Mount[] {
  return (svc.volumes ?? []).map((v) => {
    if (typeof v === 'string') {
      const [source, target, mode] = v.split(':');
      if (target === undefined) return { target: source!, readOnly: false, bind: false };
      const bind = /^[./~]/.test(source!);
      return { source, target, readOnly: (mode ?? '').split(',').includes('ro'), bind };
    }
    return { source: v.source, target: v.target, readOnly: v.read_only === true, bind: v.type === 'bind' };
  });
}

function containerPorts(svc: ComposeService): { published?: number; target: number }[] {
  return (svc.ports ?? []).map((p) => {
    if (typeof p === 'object') return { target: Number(p.target), published: p.published === undefined ? undefined : Number(p.published) };
    const parts = String(p)
      .replace(/\/(tcp|udp)$/, '')
      .split(':');
    const target = Number(parts.at(-1));
    return { target, published: parts.length > 1 ? Number(parts.at(-2)) : undefined };
  });
}

function commandArgv(cmd: string | string[] | undefined): string[] {
  if (cmd === undefined) return [];
  return Array.isArray(cmd) ? cmd : cmd.split(/\s+/);
}

function env(svc: ComposeService): Record<string, string | null> {
  const e = svc.environment ?? {};
  if (!Array.isArray(e)) return e;
  return Object.fromEntries(
    e.map((kv) => {
      const i = kv.indexOf('=');
      return i < 0 ? [kv, null] : [kv.slice(0, i), kv.slice(i + 1)];
    }),
  );
}

// ---------- prometheus ----------

interface PromConfig {
  global?: { scrape_interval?: string };
  scrape_configs: {
    job_name: string;
    metrics_path?: string;
    scrape_interval?: string;
    static_configs?: { targets: string[] }[];
  }[];
}

// ---------- fixtures ----------

const dockerfileText = readFileSync(path.join(dockerDir, 'Dockerfile'), 'utf8');
const stages = parseDockerfile(dockerfileText);
const runtime = stages.at(-1)!;
const compose = parse(readFileSync(path.join(dockerDir, 'compose.yml'), 'utf8')) as Compose;
const prom = parse(readFileSync(path.join(dockerDir, 'prometheus.yml'), 'utf8')) as PromConfig;
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
  dependencies?: Record<string, string>;
};

const NODE_SERVICE = 'relay-node';
const node = compose.services[NODE_SERVICE]!;

const exposed = instructions(runtime, 'EXPOSE').flatMap((i) => i.args.split(/\s+/).map((p) => Number(p.replace(/\/(tcp|udp)$/, ''))));
const apiPort = exposed[0]!;

describe('Dockerfile', () => {
  it('is multi-stage on node:20-bookworm-slim', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    for (const s of stages) expect(s.image).toMatch(/^node:20[.\d]*-bookworm-slim$/);
  });

  it('build stage installs the node-gyp toolchain for better-sqlite3 and runs npm ci', () => {
    const build = stages.find((s) => instructions(s, 'RUN').some((r) => /\bnpm ci\b/.test(r.args)));
    expect(build, 'no stage runs npm ci').toBeDefined();
    expect(build).not.toBe(runtime);
    const runs = instructions(build!, 'RUN')
      .map((r) => r.args)
      .join('\n');
    for (const pkgName of ['python3', 'make', 'g++']) expect(runs).toMatch(new RegExp(`apt-get install[^\\n]*\\s${pkgName.replace(/\+/g, '\\+')}(\\s|$)`));
    // npm ci needs the lockfile in the build stage.
    const copied = instructions(build!, 'COPY').flatMap((c) => parseCopy(c.args).sources.map(norm));
    expect(copied).toEqual(expect.arrayContaining(['package.json', 'package-lock.json']));
  });

  it('runtime stage copies everything the node needs at run time', () => {
    const copies = instructions(runtime, 'COPY').map((c) => parseCopy(c.args));
    const dests = new Map<string, Copy>();
    for (const c of copies) for (const s of c.sources) dests.set(norm(s.replace(/^\/app\//, '')), c);
    for (const needed of ['node_modules', 'package.json', 'src', 'contracts-abi', 'config', 'bin']) {
      expect([...dests.keys()], `runtime stage does not COPY ${needed}`).toContain(needed);
    }
    // Native addons must come from the build stage (same base image), never from the host.
    const build = stages.find((s) => s !== runtime)!;
    expect(dests.get('node_modules')!.from).toBe(build.name ?? String(stages.indexOf(build)));
  });

  it('every COPY source taken from the build context exists in the repository', () => {
    for (const stage of stages) {
      for (const c of instructions(stage, 'COPY').map((i) => parseCopy(i.args))) {
        if (c.from !== undefined) continue;
        for (const s of c.sources) {
          if (norm(s) === 'node_modules') continue;
          expect(existsSync(path.join(root, s)), `COPY source ${s} does not exist in the repository`).toBe(true);
        }
      }
    }
  });

  it('ENTRYPOINT runs src/cli.ts with the tsx of the installed dependencies', () => {
    const entry = execForm(last(runtime, 'ENTRYPOINT')!.args);
    expect(entry).toEqual(['node_modules/.bin/tsx', 'src/cli.ts']);
    // The image installs production dependencies only, so tsx must be one of them.
    expect(pkg.dependencies?.tsx).toBeDefined();
    const workdir = last(runtime, 'WORKDIR')?.args;
    expect(workdir, 'relative ENTRYPOINT needs a WORKDIR').toBeDefined();
  });

  it('runs as a non-root user', () => {
    const user = last(runtime, 'USER')?.args;
    expect(user).toBeDefined();
    expect(user!.split(':')[0]).not.toMatch(/^(root|0)$/);
    // USER must come after the RUN steps that need root, i.e. it is set for the final process.
    const idx = runtime.instructions.findIndex((i) => i.keyword === 'USER');
    expect(runtime.instructions.slice(idx + 1).some((i) => i.keyword === 'USER' && /^(root|0)\b/.test(i.args))).toBe(false);
  });

  it('declares the data volume and exposes the API port', () => {
    expect(instructions(runtime, 'VOLUME').map((v) => v.args)).toContainEqual(expect.stringMatching(/(^|["\s[])\/data(["\s\]]|$)/));
    expect(exposed).toEqual([4000]);
  });

  it('healthcheck calls GET /health on the exposed port with node (no curl in slim images)', () => {
    const hc = last(runtime, 'HEALTHCHECK')!.args;
    expect(hc).toBeDefined();
    const cmd = hc.slice(hc.indexOf('CMD') + 3).trim();
    const text = cmd.startsWith('[') ? execForm(cmd).join(' ') : cmd;
    expect(text).toMatch(/^node\s/);
    expect(text).not.toMatch(/\b(curl|wget)\b/);
    expect(text).toContain(`http://127.0.0.1:${apiPort}/health`);
  });
});

describe('compose.yml', () => {
  it('builds relay-node from the repository root with docker/Dockerfile', () => {
    expect(node.build).toEqual({ context: '..', dockerfile: 'docker/Dockerfile' });
    const b = node.build as { context: string; dockerfile: string };
    expect(path.resolve(dockerDir, b.context, b.dockerfile)).toBe(path.join(dockerDir, 'Dockerfile'));
  });

  it('publishes the API port the Dockerfile EXPOSEs', () => {
    expect(containerPorts(node)).toContainEqual({ published: apiPort, target: apiPort });
  });

  it('listens on 0.0.0.0 inside the container', () => {
    const argv = commandArgv(node.command);
    expect(argv[argv.indexOf('--host') + 1]).toBe('0.0.0.0');
    expect(argv).toContain('--host');
  });

  it('mounts, read-only, the config path the command and the image CMD use', () => {
    const cmdConfig = configArg(commandArgv(node.command));
    const imageConfig = configArg(execForm(last(runtime, 'CMD')!.args));
    expect(imageConfig).toBeDefined();
    expect(cmdConfig).toBe(imageConfig);
    const m = mounts(node).find((x) => x.target === cmdConfig);
    expect(m, `nothing mounted at ${cmdConfig}`).toBeDefined();
    expect(m!.readOnly).toBe(true);
    expect(m!.source).toBe('../config/example.json');
  });

  it('the mounted config file exists', () => {
    for (const m of mounts(node).filter((x) => x.bind)) {
      expect(existsSync(path.resolve(dockerDir, m.source!)), `bind source ${m.source} does not exist`).toBe(true);
    }
  });

  it('persists /data in a volume', () => {
    expect(mounts(node).some((m) => m.target === '/data' && !m.readOnly)).toBe(true);
  });

  it('requires RELAY_SOLVER_KEY from the host environment, and the example config reads it', () => {
    expect(env(node).RELAY_SOLVER_KEY).toMatch(/^\$\{RELAY_SOLVER_KEY:\?[^}]+\}$/);
    const example = path.join(root, 'config/example.json');
    expect(existsSync(example), 'config/example.json does not exist').toBe(true);
    const cfg = JSON.parse(readFileSync(example, 'utf8')) as {
      solverKey?: { env?: string };
      dataDir?: string;
      api?: { port?: number };
    };
    expect(cfg.solverKey?.env).toBe('RELAY_SOLVER_KEY');
    // The container listens where compose publishes; the ledger lands on the /data volume
    // (./data is /app/data, a link to /data in the image).
    expect(cfg.api?.port ?? 4000).toBe(apiPort);
    expect(cfg.dataDir ?? './data').toMatch(/^(\.\/data|data|\/data)(\/|$)/);
  });

  it('restarts unless stopped', () => {
    expect(node.restart).toBe('unless-stopped');
  });

  it('runs prometheus with docker/prometheus.yml after relay-node', () => {
    const p = compose.services.prometheus!;
    expect(p.image).toMatch(/^prom\/prometheus(:|$)/);
    const m = mounts(p).find((x) => x.target === '/etc/prometheus/prometheus.yml');
    expect(m).toBeDefined();
    expect(path.resolve(dockerDir, m!.source!)).toBe(path.join(dockerDir, 'prometheus.yml'));
    expect(containerPorts(p)).toContainEqual({ published: 9090, target: 9090 });
    const deps = Array.isArray(p.depends_on) ? p.depends_on : Object.keys(p.depends_on ?? {});
    expect(deps).toContain(NODE_SERVICE);
  });
});

describe('prometheus.yml', () => {
  const job = prom.scrape_configs.find((j) => j.job_name === NODE_SERVICE);

  it('scrapes the relay-node service on its container port', () => {
    expect(job).toBeDefined();
    const targets = (job!.static_configs ?? []).flatMap((s) => s.targets);
    expect(targets).toHaveLength(1);
    const [host, port] = targets[0]!.split(':');
    expect(compose.services[host!], `scrape host ${host} is not a compose service`).toBeDefined();
    expect(host).toBe(NODE_SERVICE);
    expect(containerPorts(compose.services[host!]!).map((p) => p.target)).toContain(Number(port));
    expect(Number(port)).toBe(apiPort);
  });

  it('uses /metrics every 15s', () => {
    expect(job!.metrics_path).toBe('/metrics');
    expect(job!.scrape_interval ?? prom.global?.scrape_interval).toBe('15s');
  });
});
