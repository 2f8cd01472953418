// Compile contracts/**/*.sol with solc-js (standard JSON) and write contracts-abi/<Name>.json plus
// contracts-abi/index.ts. Output is deterministic: re-running on unchanged sources produces no diff.
//
//   npm run contracts

import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

interface SolcError {
  severity: 'error' | 'warning' | 'info';
  type: string;
  formattedMessage?: string;
  message: string;
}
interface SolcContractOutput {
  abi: unknown[];
  evm: { bytecode: { object: string } };
}
interface SolcOutput {
  errors?: SolcError[];
  contracts?: Record<string, Record<string, SolcContractOutput>>;
}
interface Solc {
  compile(input: string, callbacks?: { import: (p: string) => { contents: string } | { error: string } }): string;
  version(): string;
}

const require = createRequire(import.meta.url);
const solc = require('solc') as Solc;

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const contractsDir = path.join(root, 'contracts');
const outDir = path.join(root, 'contracts-abi');

function listSolFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir).sort()) {
    const full = path.join(dir, entry);
    if (statSync(full).isDirectory()) out.push(...listSolFiles(full));
    else if (entry.endsWith('.sol')) out.push(full);
  }
  return out;
}

/** Source unit names are POSIX paths relative to the repo root, e.g. `contracts/RelayDepository.sol`. */
function unitName(file: string): string {
  return path.relative(root, file).split(path.sep).join('/');
}

function main(): void {
  const files = listSolFiles(contractsDir);
  if (files.length === 0) throw new Error(`no .sol files under ${contractsDir}`);

  // A file opts into the IR pipeline with a line `// solc: viaIR` (only where the legacy code generator
  // runs out of stack, e.g. ABI-decoding deeply nested calldata structs). Each group compiles separately.
  const groups = new Map<boolean, Record<string, { content: string }>>();
  for (const file of files) {
    const content = readFileSync(file, 'utf8');
    const viaIR = /^\s*\/\/\s*solc:\s*viaIR\s*$/m.test(content);
    const group = groups.get(viaIR) ?? {};
    group[unitName(file)] = { content };
    groups.set(viaIR, group);
  }

  const findImports = (importPath: string): { contents: string } | { error: string } => {
    const resolved = path.resolve(root, importPath);
    if (!resolved.startsWith(root + path.sep)) return { error: `import outside the repo: ${importPath}` };
    try {
      return { contents: readFileSync(resolved, 'utf8') };
    } catch {
      return { error: `file not found: ${importPath}` };
    }
  };

  const started = Date.now();
  const output: Required<SolcOutput> = { errors: [], contracts: {} };
  for (const viaIR of [false, true]) {
    const sources = groups.get(viaIR);
    if (!sources) continue;
    const input = {
      language: 'Solidity',
      sources,
      settings: {
        evmVersion: 'cancun',
        ...(viaIR ? { viaIR: true } : {}),
        optimizer: { enabled: true, runs: 200 },
        outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
      },
    };
    const result = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports })) as SolcOutput;
    output.errors.push(...(result.errors ?? []));
    // Keep only this group's own units (imports from the other group are compiled there).
    for (const unit of Object.keys(sources)) {
      const contracts = result.contracts?.[unit];
      if (contracts) output.contracts[unit] = contracts;
    }
  }

  const problems = output.errors;
  for (const p of problems.filter((e) => e.severity !== 'error')) {
    console.warn(p.formattedMessage ?? p.message);
  }
  const errors = problems.filter((e) => e.severity === 'error');
  if (errors.length > 0) {
    for (const e of errors) console.error(e.formattedMessage ?? `${e.type}: ${e.message}`);
    throw new Error(`solc ${solc.version()}: ${errors.length} error(s)`);
  }

  // Deployable contracts only (interfaces and abstract contracts have no bytecode).
  const artifacts = new Map<string, { abi: unknown[]; bytecode: string; source: string }>();
  for (const source of Object.keys(output.contracts).sort()) {
    const unit = output.contracts[source]!;
    for (const name of Object.keys(unit).sort()) {
      const bytecode = unit[name]!.evm.bytecode.object;
      if (!bytecode) continue;
      const existing = artifacts.get(name);
      if (existing) throw new Error(`contract name ${name} defined in both ${existing.source} and ${source}`);
      artifacts.set(name, { abi: unit[name]!.abi, bytecode: `0x${bytecode}`, source });
    }
  }
  if (artifacts.size === 0) throw new Error('solc produced no deployable contracts');

  mkdirSync(outDir, { recursive: true });
  const names = [...artifacts.keys()].sort();

  // Remove artifacts of contracts that no longer exist.
  for (const entry of readdirSync(outDir)) {
    if (entry.endsWith('.json') && !artifacts.has(entry.slice(0, -'.json'.length))) {
      rmSync(path.join(outDir, entry));
    }
  }

  const index: string[] = [
    '// Generated by scripts/compile-contracts.ts from contracts/**/*.sol. Do not edit; run `npm run contracts`.',
    `// solc ${solc.version()}, evmVersion cancun, optimizer runs 200 (viaIR only for files marked \`// solc: viaIR\`).`,
    '',
  ];
  for (const name of names) {
    const { abi, bytecode } = artifacts.get(name)!;
    writeFileSync(path.join(outDir, `${name}.json`), `${JSON.stringify({ abi, bytecode }, null, 2)}\n`);
    index.push(`export const ${name}Abi = ${JSON.stringify(abi, null, 2)} as const;`, '');
    index.push(`export const ${name}Bytecode = '${bytecode}' as const;`, '');
  }
  writeFileSync(path.join(outDir, 'index.ts'), index.join('\n'));

  console.log(`compiled ${files.length} file(s) in ${Date.now() - started} ms: ${names.join(', ')}`);
}

try {
  main();
} catch (err) {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
}
