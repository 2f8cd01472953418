// A fresh ledger over an SVM vault used before, and a deposit reported through POST /transactions/index before the SVM
// indexer's first pass. The indexer notes where the ledger began on its chain (ledger-birth) on its first pass, and a
// deposit naming no order of the ledger made before that is left to an operator (a ledger before this one may have
// filled it). But the API listens before the chains start, and an SVM deposit reported there is recorded at once: one
// reported before the first pass was decided with no birth mark, and refunded as any orphan: paid twice when an
// earlier ledger had filled it.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Connection, PublicKey, SystemProgram, Transaction } from '@solana/web3.js';
import { keccak256, toHex } from 'viem';
import { SvmDepositSource } from '../../src/chains/svm/depositSource.ts';
import { memoInstruction, orderMemo } from '../../src/chains/svm/transactions.ts';
import { buildConfigWithKeys } from '../../src/config/load.ts';
import { startDevnet, type Devnet } from '../../src/devnet/devnet.ts';
import { createLogger } from '../../src/log.ts';
import { RelayNode } from '../../src/node.ts';
import { api } from '../helpers/stack.ts';
import { until } from '../helpers/until.ts';

let devnet: Devnet;
let node: RelayNode | undefined;
const SVM = 792703809;
const orderId = keccak256(toHex('an SVM order of a ledger before this one'));

beforeAll(async () => {
  devnet = await startDevnet({ dataDir: mkdtempSync(join(tmpdir(), 'relay-svm-birth-')), exchange: false, svm: true });
}, 120_000);
afterAll(async () => {
  await node?.stop();
  await devnet?.stop();
});

describe('an SVM deposit from before the ledger, reported before the indexer first ran', () => {
  it('is left to an operator, never refunded by itself', { timeout: 120_000 }, async () => {
    const svm = devnet.svm!;
    const conn = new Connection(svm.rpcUrl, 'confirmed');
    const user = svm.keypair(1);
    const { blockhash } = await conn.getLatestBlockhash('confirmed');
    const tx = new Transaction({ feePayer: user.publicKey, recentBlockhash: blockhash }).add(
      SystemProgram.transfer({ fromPubkey: user.publicKey, toPubkey: new PublicKey(svm.vault), lamports: 50_000_000 }),
      memoInstruction(orderMemo(orderId)),
    );
    tx.sign(user);
    const signature = await conn.sendRawTransaction(tx.serialize());
    await until(
      async () => (['confirmed', 'finalized'].includes((await conn.getSignatureStatus(signature)).value?.confirmationStatus ?? '') ? true : undefined),
      'the deposit confirmed',
    );

    // The SVM indexer's first pass is held (its head read waits) while the wallet reports its deposit.
    const head = SvmDepositSource.prototype.head;
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    SvmDepositSource.prototype.head = async function (this: SvmDepositSource) {
      await gate;
      return head.call(this);
    };
    try {
      const raw = devnet.nodeConfig({ port: 0, dataDir: mkdtempSync(join(tmpdir(), 'relay-svm-birth-node-')) });
      node = await new RelayNode(buildConfigWithKeys(raw, devnet.keys), { log: createLogger('silent') }).start();
      const reported = api(node.url, '/transactions/index', { body: { chainId: SVM, txHash: signature } });
      // Before: recorded and decided at once, with no birth mark: refunded to the depositor.
      await Promise.race([reported, new Promise((r) => setTimeout(r, 2_000))]);
      release();
      expect((await reported).status).toBe(200);
    } finally {
      release();
      SvmDepositSource.prototype.head = head;
    }
    const n = node!;
    const r = await until(() => {
      const d = n.ledger.deposits.byOrderRef(orderId)[0];
      return d?.state === 'handled' && d.request_id ? n.ledger.requests.get(d.request_id) : undefined;
    }, 'the deposit decided');
    expect(r).toMatchObject({ kind: 'orphan', status: 'failure', refund_fail_reason: 'MANUAL_REFUND_REQUIRED' });
    expect(n.ledger.payouts.forRequest(r.id).filter((p) => p.kind === 'refund')).toEqual([]);
  });
});
