// Adds lockfile entries for platform-specific optional packages that the registry
// this lockfile was generated against did not serve (npm/cli#4828). npm 11's `npm ci`
// refuses a lockfile missing any entry named in an optionalDependencies map, although
// on a given machine it installs only the one matching its os/cpu/libc.
import { readFileSync, writeFileSync } from 'node:fs';

const lock = JSON.parse(readFileSync('package-lock.json', 'utf8'));
const pkgs = lock.packages;
const CPU = { amd64: 'x64', x64: 'x64', arm64: 'arm64', arm: 'arm', ia32: 'ia32', loong64: 'loong64', ppc64: 'ppc64', riscv64: 'riscv64', s390x: 's390x' };
const OS = ['android', 'darwin', 'freebsd', 'linux', 'openbsd', 'openharmony', 'win32', 'netbsd', 'sunos', 'aix'];

function platformOf(name) {
  const parts = name.split('/').pop().split('-');
  const os = parts.find((p) => OS.includes(p));
  const cpu = parts.map((p) => CPU[p]).find(Boolean);
  const libc = parts.some((p) => p.startsWith('musl')) ? 'musl' : parts.some((p) => p.startsWith('gnu')) ? 'glibc' : undefined;
  if (!os || !cpu) throw new Error(`cannot tell the platform of ${name}`);
  return { os, cpu, libc };
}

let added = 0;
for (const [path, entry] of Object.entries(pkgs)) {
  for (const [dep, spec] of Object.entries(entry.optionalDependencies ?? {})) {
    const at = `${path ? `${path}/` : ''}node_modules/${dep}`;
    if (pkgs[at] || pkgs[`node_modules/${dep}`]) continue;
    const { os, cpu, libc } = platformOf(dep);
    pkgs[at] = { version: spec, cpu: [cpu], ...(libc ? { libc: [libc] } : {}), optional: true, os: [os] };
    added++;
  }
}
lock.packages = Object.fromEntries(Object.entries(pkgs).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a < b ? -1 : a > b ? 1 : 0)));
writeFileSync('package-lock.json', `${JSON.stringify(lock, null, 2)}\n`);
console.log(`added ${added} platform entries`);
