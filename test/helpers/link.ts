import type { PrivateKeyAccount } from 'viem/accounts';
import { api } from './stack.ts';

/**
 * Links `wallet`'s app balance to an API key as a dashboard would: asks the node for the message
 * (it carries a nonce and an expiry), signs it, posts it. Returns the answer and what was posted.
 */
export async function linkWallet(url: string, apiKey: string, wallet: PrivateKeyAccount) {
  const ask = await api(url, '/app-balance/link', { apiKey, body: { wallet: wallet.address } });
  if (ask.status !== 200) throw new Error(`link ask: ${ask.status} ${JSON.stringify(ask.body)}`);
  const d = ask.body.steps[0].items[0].data;
  const body = { ...d.post.body, signature: await wallet.signMessage({ message: d.sign.message }) };
  const r = await api(url, d.post.endpoint, { apiKey, body });
  return { ...r, posted: body, message: d.sign.message as string };
}
