// Query parameters whose value is a credential, by name: the API takes a raw key as `apiKey` on
// GET /metrics/usage, and a caller may put one in any parameter. Matched on the decoded name (the
// router decodes `api%4Bey` to apiKey) and on the raw one.
const SECRET_PARAM = /key|token|secret|password|signature|auth/i;
// An API key itself (src/ledger/apiKeys.ts mints `rn_` + base64url), wherever in the URL it sits.
const API_KEY = /rn_[A-Za-z0-9_-]{8,}/g;
const CENSOR = '[secret]';

/**
 * A request URL fit for a log line: the path and query as received, with the value of every
 * credential-named query parameter, and anything shaped like an API key, replaced by `[secret]`.
 * A URL is logged to find a failing request again; a key in it would hand the key to whoever reads
 * the logs.
 */
export function loggedUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url.replace(API_KEY, CENSOR);
  const parts = url
    .slice(q + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      if (eq < 0) return pair;
      const raw = pair.slice(0, eq);
      return SECRET_PARAM.test(raw) || SECRET_PARAM.test(decoded(raw)) ? `${raw}=${CENSOR}` : pair;
    });
  return `${url.slice(0, q)}?${parts.join('&')}`.replace(API_KEY, CENSOR);
}

function decoded(s: string): string {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    // Not valid percent-encoding: the raw name was tested already.
    return s;
  }
}
