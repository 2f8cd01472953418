import pg from 'pg';

/**
 * Removes a PostgreSQL URL (and its password alone) from a text: the URL carries the password, so
 * it never reaches output, an error or a log, whatever the error echoes.
 */
export function hideUrl(text: string, url: string): string {
  let out = text.split(url).join('postgres://[ledger url]');
  let password = '';
  try {
    password = decodeURIComponent(new URL(url).password);
  } catch {
    // Not a URL: nothing more to hide than the text itself.
  }
  for (const secret of [password, encodeURIComponent(password)]) if (secret.length >= 4) out = out.split(secret).join('[password]');
  return out;
}

/** Runs fn with a client connected to `url`, closed afterwards; an error's message has the URL hidden. */
export async function withPostgres<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  if (!/^postgres(ql)?:\/\//.test(url)) throw new Error('the ledger URL must start with postgres:// or postgresql://');
  const client = new pg.Client({ connectionString: url });
  // A connection lost while idle is reported by the query that follows; this keeps it from
  // crashing the process as an unhandled 'error' event.
  client.on('error', () => {});
  try {
    await client.connect();
    return await fn(client);
  } catch (e) {
    const err = e as Error;
    err.message = hideUrl(err.message, url);
    if (err.stack) err.stack = hideUrl(err.stack, url);
    throw err;
  } finally {
    await client.end().catch(() => {});
  }
}
