/**
 * A webhook endpoint: an absolute http or https URL, without credentials (they would end up in
 * logs and listings), at most MAX_WEBHOOK_URL_LENGTH characters. Returns the reason it is not.
 */
export const MAX_WEBHOOK_URL_LENGTH = 2048;

export function webhookUrlProblem(url: unknown): string | undefined {
  if (typeof url !== 'string') return url === undefined ? 'is required' : 'must be a string';
  if (url.length === 0) return 'is required';
  if (url.length > MAX_WEBHOOK_URL_LENGTH) return `must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`;
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'must be an absolute http or https URL';
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return 'must be an http or https URL';
  if (u.username || u.password) return 'must not carry credentials (user:password@)';
  if (!u.hostname) return 'must name a host';
  return undefined;
}
