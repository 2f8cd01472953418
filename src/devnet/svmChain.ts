// The devnet's SVM chain: litesvm behind the local JSON-RPC endpoint (src/devnet/svm/rpc.ts), with a
// 6-decimal test mint, a vault (its token account created, its account rent-exempt), a funded solver
// and funded test keypairs. Keys are derived from public strings: they hold no value anywhere.
import { createHash } from 'node:crypto';
import { Keypair } from '@solana/web3.js';
import { SVM_NATIVE } from '../chains/address.ts';
import { base58Encode } from '../chains/svm/transactions.ts';
import { startSvmRpc, type SvmRpc } from './svm/rpc.ts';

/** The protocol's id for Solana. */
export const SVM_DEVNET_CHAIN_ID = 792703809;
const LAMPORTS_PER_SOL = 1_000_000_000n;

export interface SvmTestKeypair {
  publicKey: string;
  /** base58 of the 64-byte secret key, as wallets import it. */
  secretKey: string;
}

export interface SvmDevnet {
  id: number;
  name: string;
  rpc: SvmRpc;
  rpcUrl: string;
  wsUrl: string;
  /** The 6-decimal SPL test token (symbol USDC on the devnet). */
  mint: string;
  vault: string;
  solver: string;
  /** base58 secret key of the solver (the node's svmSolverKey on the devnet). */
  solverKey: string;
  accounts: SvmTestKeypair[];
  keypair(i: number): Keypair;
  stop(): Promise<void>;
}

export function devnetSvmKeypair(label: string): Keypair {
  return Keypair.fromSeed(createHash('sha256').update(`relay-node devnet svm ${label}`).digest());
}

export async function startSvmDevnet(opts: { testAccounts?: number; slotIntervalMs?: number } = {}): Promise<SvmDevnet> {
  const rpc = await startSvmRpc({ slotIntervalMs: opts.slotIntervalMs ?? 200 });
  try {
    const solver = devnetSvmKeypair('solver');
    const vault = devnetSvmKeypair('vault');
    const tests = Array.from({ length: opts.testAccounts ?? 5 }, (_, i) => devnetSvmKeypair(`test ${i}`));
    const mint = rpc.createMint(6);
    // The vault must be rent-exempt before it takes a SOL deposit smaller than the minimum; funded
    // outside any transaction so that the funding is not read as a deposit.
    rpc.svm.setAccount({
      address: vault.publicKey.toBase58() as never,
      lamports: LAMPORTS_PER_SOL as never,
      programAddress: SVM_NATIVE as never,
      executable: false,
      space: 0n,
      data: new Uint8Array(0),
    });
    rpc.mintTo(mint, vault.publicKey, 0);
    rpc.airdrop(solver.publicKey, 10_000n * LAMPORTS_PER_SOL);
    rpc.mintTo(mint, solver.publicKey, 1_000_000n * 10n ** 6n);
    for (const t of tests) {
      rpc.airdrop(t.publicKey, 1_000n * LAMPORTS_PER_SOL);
      rpc.mintTo(mint, t.publicKey, 1_000_000n * 10n ** 6n);
    }
    return {
      id: SVM_DEVNET_CHAIN_ID,
      name: 'Solana (devnet)',
      rpc,
      rpcUrl: rpc.url,
      wsUrl: rpc.wsUrl,
      mint: mint.toBase58(),
      vault: vault.publicKey.toBase58(),
      solver: solver.publicKey.toBase58(),
      solverKey: base58Encode(solver.secretKey),
      accounts: tests.map((k) => ({ publicKey: k.publicKey.toBase58(), secretKey: base58Encode(k.secretKey) })),
      keypair: (i) => tests[i]!,
      stop: () => rpc.stop(),
    };
  } catch (e) {
    await rpc.stop();
    throw e;
  }
}

/** The node's config entry for the devnet's SVM chain. */
export function svmChainConfig(d: SvmDevnet, o: { pollIntervalMs?: number } = {}) {
  return {
    id: d.id,
    name: d.name,
    kind: 'svm' as const,
    rpcUrl: d.rpcUrl,
    vault: d.vault,
    commitment: 'confirmed' as const,
    pollIntervalMs: o.pollIntervalMs ?? 100,
    nativeCurrency: { symbol: 'SOL', name: 'Solana', decimals: 9, usdPrice: '150' },
    currencies: [{ address: d.mint, symbol: 'USDC', name: 'Test USD Coin (SPL)', decimals: 6, usdPrice: '1', tokenProgram: 'spl-token' as const }],
  };
}

/** What data/devnet.json says about the SVM chain. */
export function svmDescription(d: SvmDevnet) {
  return {
    id: d.id,
    name: d.name,
    kind: 'svm',
    rpcUrl: d.rpcUrl,
    wsUrl: d.wsUrl,
    vault: d.vault,
    solver: d.solver,
    currencies: { native: SVM_NATIVE, USDC: d.mint },
    mint: { address: d.mint, decimals: 6, tokenProgram: 'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA' },
    testKeypairs: d.accounts,
  };
}
