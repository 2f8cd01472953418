// Every place the chains' code sends something signed (an EVM raw transaction, an SVM transaction, an
// exchange action) asks the broadcast gate first, in the lines right before: an active/standby node
// past its lease deadline must send nothing (src/lease/leadership.ts). A new send without the gate fails here.
import { describe, expect, it } from 'vitest';
import { sourceFiles } from '../../test/helpers/sources.ts';

const SEND = /\bsendRawTransaction\(|\.client\.submit\(/;
const GATE = /gate(?: \?\? OPEN_GATE\))?\.check\(\)/;

describe('broadcast gate', () => {
  it('is asked within the 8 lines before every send of signed data to a chain', () => {
    const sends: string[] = [];
    const offenders: string[] = [];
    for (const { rel, text } of sourceFiles()) {
      if (!rel.startsWith('chains/')) continue;
      const lines = text.split('\n');
      lines.forEach((line, i) => {
        if (!SEND.test(line) || /^\s*(\/\/|\*)/.test(line)) return;
        sends.push(`${rel}:${i + 1}`);
        if (!lines.slice(Math.max(0, i - 8), i).some((l) => GATE.test(l))) offenders.push(`${rel}:${i + 1}: ${line.trim()}`);
      });
    }
    // The EVM's broadcast and its allowance approvals, the SVM's send, the exchange's post.
    expect(sends.length).toBeGreaterThanOrEqual(4);
    expect(offenders).toEqual([]);
  });
});
