import pino, { type Logger } from 'pino';

export type { Logger };

// Keys are wrapped in Secret (which prints as a placeholder); the redaction list is a second line of
// defence for anything that carries a key under a conventional name.
const REDACT = [
  'privateKey',
  '*.privateKey',
  'solverKey',
  '*.solverKey',
  'allocatorKey',
  '*.allocatorKey',
  'apiKey',
  '*.apiKey',
  'headers["x-api-key"]',
  'req.headers["x-api-key"]',
  'req.headers.authorization',
  // The PostgreSQL ledger's URL carries its password (held as a Secret; this is the second line).
  'ledger.url',
  '*.ledger.url',
];

/**
 * A logger whose every line names the request it is about, under the one field `requestId` (what an
 * operator searches the logs by); the logger itself when there is no request.
 */
export function forRequest(log: Logger, requestId: string | null | undefined): Logger {
  return requestId ? log.child({ requestId }) : log;
}

export function createLogger(level = 'info', destination?: pino.DestinationStream): Logger {
  return pino({ level, base: { service: 'relay-node' }, redact: { paths: REDACT, censor: '[secret]' } }, destination);
}
