// Which process listens on a loopback port. A free port is picked, then bound by a child a moment later: in between
// another process (a parallel test's anvil, for one) can take it, and then the child's readiness probe is answered by
// that other process, which may even be a chain with the same id. Asking the kernel who holds the listening socket
// tells them apart.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/**
 * Whether process `pid` holds the listening TCP socket on 127.0.0.1:`port` (Linux: /proc/net/tcp and the process's
 * file descriptors). Undefined where /proc cannot tell (another OS): the caller then goes by the answer alone.
 */
export function listensOn(pid: number, port: number): boolean | undefined {
  let table: string;
  try {
    table = readFileSync('/proc/net/tcp', 'utf8');
  } catch {
    return undefined;
  }
  // Columns: sl, local address (hex IPv4:port), remote address, state (0A = LISTEN), queues, timer, retransmits, uid,
  // timeout, inode.
  const local = `0100007F:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  const inodes = new Set<string>();
  for (const line of table.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f[1] === local && f[3] === '0A' && f[9]) inodes.add(f[9]);
  }
  if (inodes.size === 0) return false;
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return false;
  }
  for (const fd of fds) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m && inodes.has(m[1]!)) return true;
    } catch {
      // closed meanwhile
    }
  }
  return false;
}
