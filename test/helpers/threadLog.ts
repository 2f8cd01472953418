/** A log for the ledger's threads (checkpointer.ts, rangeWriter.ts) that keeps what they report, for tests to read. */
export function threadLog() {
  const lines: { level: string; msg: string; obj: object }[] = [];
  return {
    lines,
    warn: (obj: object, msg: string) => lines.push({ level: 'warn', obj, msg }),
    error: (obj: object, msg: string) => lines.push({ level: 'error', obj, msg }),
  };
}
