import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { defaultMaxConnections } from './connectionCap.ts';

describe('api.maxConnections by default', () => {
  it("is half the process's open-file limit, at most 10,000: the other half is the node's own", () => {
    const soft = Number(/^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'))![1]);
    expect(defaultMaxConnections()).toBe(Math.max(1, Math.min(10_000, Math.floor(soft / 2))));
    expect(defaultMaxConnections()).toBeLessThan(soft);
  });
});
