// The devnet's deployment gets every transaction included even when the chain's pool loses one of them: anvil's
// automine can strand a nonce chain sent at once from one key, and a devnet start then waited for a deployment
// that never came (CI: a startStack timed out, its chain 10 holding 7 transactions queued forever).
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublicClient, http, keccak256, type Hex } from 'viem';
import { mnemonicToAccount } from 'viem/accounts';
import { startAnvil, type AnvilHandle } from '../src/devnet/anvil.ts';
import { deployNodeContracts } from '../src/devnet/deploy.ts';
import { ANVIL_MNEMONIC } from '../src/devnet/devnet.ts';

const CHAIN_ID = 31_337_023;
let anvil: AnvilHandle;
let proxy: Server;

// A JSON-RPC proxy to anvil that answers the first eth_sendRawTransaction it sees with its hash, as if the pool
// took it, and never forwards it: the transactions behind it wait for a nonce that never comes.
async function losingFirstSend(target: string): Promise<{ url: string; lost: () => Hex | undefined }> {
  let lost: Hex | undefined;
  proxy = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', async () => {
      const parsed = JSON.parse(body);
      const calls: any[] = Array.isArray(parsed) ? parsed : [parsed];
      const swallowed = lost === undefined ? calls.find((c) => c.method === 'eth_sendRawTransaction') : undefined;
      if (swallowed) lost = keccak256(swallowed.params[0]);
      const forward = calls.filter((c) => c !== swallowed);
      const answers: any[] = forward.length
        ? await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(forward) }).then((r) => r.json())
        : [];
      if (swallowed) answers.push({ jsonrpc: '2.0', id: swallowed.id, result: lost });
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(Array.isArray(parsed) ? answers : answers[0]));
    });
  });
  proxy.listen(0, '127.0.0.1');
  await once(proxy, 'listening');
  return { url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, lost: () => lost };
}

beforeAll(async () => {
  anvil = await startAnvil({ chainId: CHAIN_ID });
});
afterAll(async () => {
  proxy?.close();
  await anvil?.stop();
});

describe('devnet deployment', () => {
  it('deploys and funds everything when the pool loses its first transaction', async () => {
    const { url, lost } = await losingFirstSend(anvil.rpcUrl);
    const key = (i: number) => `0x${Buffer.from(mnemonicToAccount(ANVIL_MNEMONIC, { addressIndex: i }).getHdKey().privateKey!).toString('hex')}` as Hex;
    const solver = mnemonicToAccount(ANVIL_MNEMONIC, { addressIndex: 1 }).address;
    const contracts = await deployNodeContracts({
      rpcUrl: url,
      chainId: CHAIN_ID,
      deployerKey: key(0),
      solver,
      allocator: mnemonicToAccount(ANVIL_MNEMONIC, { addressIndex: 2 }).address,
      fund: { accounts: [solver], nativeWei: 10n ** 21n, stablecoinUnits: 10n ** 12n },
    });
    // The lost one was the first deployment: it and everything behind it reached the chain after all.
    expect(lost()).toBeDefined();
    const chain = createPublicClient({ transport: http(anvil.rpcUrl) });
    expect((await chain.getTransactionReceipt({ hash: lost()! })).status).toBe('success');
    for (const address of [contracts.depository, contracts.filler, contracts.stablecoin, contracts.depositAddressFactory]) {
      expect((await chain.getCode({ address }))?.length).toBeGreaterThan(2);
    }
  }, 120_000);
});
