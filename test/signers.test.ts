// Signers outside the process (issue 17): an encrypted keystore file and a remote JSON-RPC signer
// (anvil answers eth_signTransaction / eth_signTypedData_v4 / personal_sign for its own accounts,
// as web3signer and clef do) each fill an order on the devnet; a wrong passphrase stops the start.
import { spawnSync } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWalletClient, getAddress, http, verifyMessage, verifyTypedData, type Address, type Hex } from 'viem';
import { mnemonicToAccount, privateKeyToAccount } from 'viem/accounts';
import { Keypair } from '@solana/web3.js';
import { OrderFillerAbi } from '../contracts-abi/index.ts';
import { buildConfig, ConfigError } from '../src/config/load.ts';
import { devnetChain } from '../src/devnet/deploy.ts';
import { DEVNET_SOLVER_KEY } from '../src/devnet/devnet.ts';
import { decryptKeystore, encryptKeystore, KeystoreError } from '../src/signers/keystore.ts';
import { remoteAccount } from '../src/signers/remote.ts';
import { api, executeSteps, startStack, until, waitForStatus, type Stack, nativeBridge } from './helpers/stack.ts';

const PASSPHRASE = 'correct horse battery staple 17';
const dir = mkdtempSync(join(tmpdir(), 'relay-signers-'));
const bytes = (h: Hex) => Buffer.from(h.slice(2), 'hex');

// A keystore as an operator makes it (cheap scrypt cost: the test pays it at every start).
function writeKeystore(name: string, secret: Uint8Array, passphrase = PASSPHRASE, address?: string): { path: string; passphraseFile: string } {
  const path = join(dir, `${name}.json`);
  writeFileSync(path, JSON.stringify(encryptKeystore(secret, passphrase, { scryptN: 1024, address })));
  const passphraseFile = join(dir, `${name}.pass`);
  writeFileSync(passphraseFile, `${passphrase}\n`);
  return { path, passphraseFile };
}

describe('keystore v3', () => {
  it('decrypts the Web3 Secret Storage test vector (pbkdf2)', () => {
    const vector = {
      crypto: {
        cipher: 'aes-128-ctr',
        cipherparams: { iv: '6087dab2f9fdbbfaddc31a909735c1e6' },
        ciphertext: '5318b4d5bcd28de64ee5559e671353e16f075ecae9f99c7a79a38af5f869aa46',
        kdf: 'pbkdf2',
        kdfparams: { c: 262144, dklen: 32, prf: 'hmac-sha256', salt: 'ae3cd4e7013836a3df6bd7241b12db061dbe2c6785853cce422d148a624ce0bd' },
        mac: '517ead924a9d0dc3124507e3393d175ce3ff7c1e96529c6c555ce9e51205e9b2',
      },
      id: '3198bc9c-6672-5ab3-d995-4942343ae5b6',
      version: 3,
    };
    expect(Buffer.from(decryptKeystore(vector, 'testpassword')).toString('hex')).toBe('7a28b5ba57c53603b0b07b56bba752f7784bf506fa95edc395f5cf6c7514fe9d');
    expect(() => decryptKeystore(vector, 'testpassword!')).toThrow(/wrong passphrase/);
  });

  it('round-trips with scrypt and pbkdf2, and refuses a wrong passphrase or a changed ciphertext', () => {
    for (const kdf of ['scrypt', 'pbkdf2'] as const) {
      const ks = encryptKeystore(bytes(DEVNET_SOLVER_KEY), PASSPHRASE, { kdf, scryptN: 1024, pbkdf2Iterations: 1000 });
      expect(ks.crypto.kdf).toBe(kdf);
      expect(JSON.stringify(ks)).not.toContain(DEVNET_SOLVER_KEY.slice(2));
      expect(Buffer.from(decryptKeystore(JSON.parse(JSON.stringify(ks)), PASSPHRASE)).toString('hex')).toBe(DEVNET_SOLVER_KEY.slice(2));
      expect(() => decryptKeystore(ks, 'wrong')).toThrow(KeystoreError);
      const flipped = { ...ks, crypto: { ...ks.crypto, ciphertext: `${ks.crypto.ciphertext[0] === '0' ? '1' : '0'}${ks.crypto.ciphertext.slice(1)}` } };
      expect(() => decryptKeystore(flipped, PASSPHRASE)).toThrow(/wrong passphrase/);
    }
  });
});

describe('signer config', () => {
  const chain = {
    id: 8453,
    name: 'Base',
    rpcUrl: 'http://127.0.0.1:1',
    depository: '0x0000000000000000000000000000000000000001',
    filler: '0x0000000000000000000000000000000000000002',
    nativeCurrency: { symbol: 'ETH', name: 'Ether', decimals: 18, usdPrice: '3000' },
  };
  const solver = privateKeyToAccount(DEVNET_SOLVER_KEY).address;

  it('builds a keystore solver (passphrase from a file or the environment) and a remote solver', () => {
    const ks = writeKeystore('cfg', bytes(DEVNET_SOLVER_KEY), PASSPHRASE, solver.slice(2).toLowerCase());
    const fromFile = buildConfig({ solverSigner: { kind: 'keystore', ...ks }, chains: [chain] }, {});
    expect(fromFile.solverSigner.address).toBe(solver);
    expect(fromFile.solverAddress).toBe(solver);
    const fromEnv = buildConfig({ solverSigner: { kind: 'keystore', path: ks.path, passphraseEnv: 'PASS' }, chains: [chain] }, { PASS: PASSPHRASE });
    expect(fromEnv.solverSigner.address).toBe(solver);
    const remote = buildConfig({ solverSigner: { kind: 'remote', url: 'http://u:hunter2@127.0.0.1:1', address: solver.toLowerCase() }, chains: [chain] }, {});
    expect(remote.solverSigner.address).toBe(solver);
    expect(JSON.stringify(remote)).not.toContain('hunter2');
  });

  it('refuses, naming the field and never the secret: a wrong passphrase, a missing one, two sources, an address that is not the key', () => {
    const ks = writeKeystore('bad', bytes(DEVNET_SOLVER_KEY));
    const err = (raw: Record<string, unknown>, env: Record<string, string> = {}) => {
      try {
        buildConfig({ chains: [chain], ...raw }, env);
      } catch (e) {
        expect(e).toBeInstanceOf(ConfigError);
        const m = (e as Error).message;
        expect(m).not.toContain(PASSPHRASE);
        expect(m).not.toContain('hunter2');
        expect(m).not.toContain(DEVNET_SOLVER_KEY.slice(2));
        return m;
      }
      throw new Error('no error');
    };
    expect(err({ solverSigner: { kind: 'keystore', path: ks.path, passphraseEnv: 'PASS' } }, { PASS: 'not it' })).toMatch(/^solverSigner: .*wrong passphrase/);
    expect(err({ solverSigner: { kind: 'keystore', path: ks.path, passphraseEnv: 'PASS' } })).toMatch(
      /solverSigner\.passphraseEnv: environment variable PASS is not set/,
    );
    expect(err({ solverSigner: { kind: 'keystore', path: ks.path, passphraseEnv: 'PASS', passphraseFile: ks.passphraseFile } })).toMatch(
      /solverSigner\.passphraseFile: give exactly one/,
    );
    expect(err({ solverSigner: { kind: 'keystore', path: join(dir, 'none.json'), passphraseFile: ks.passphraseFile } })).toMatch(
      /solverSigner\.path: cannot read .*ENOENT/,
    );
    expect(err({ solverKey: { env: 'K' }, solverSigner: { kind: 'keystore', ...ks } }, { K: DEVNET_SOLVER_KEY })).toMatch(
      /solverSigner: give solverKey or solverSigner, not both/,
    );
    expect(err({ solverSigner: { kind: 'remote', url: 'http://u:hunter2@127.0.0.1:1', address: 'nope' } })).toMatch(
      /solverSigner\.address: must be a 0x-prefixed/,
    );
    const lying = writeKeystore('lying', bytes(DEVNET_SOLVER_KEY), PASSPHRASE, '00'.repeat(20));
    expect(err({ solverSigner: { kind: 'keystore', ...lying } })).toMatch(/address field is not the address of its key/);
  });

  it('reads the SVM solver key from a keystore', () => {
    const kp = Keypair.generate();
    const ks = writeKeystore('svm', kp.secretKey, PASSPHRASE, kp.publicKey.toBase58());
    const c = buildConfig({ solverKey: { env: 'K' }, svmSolverSigner: { kind: 'keystore', ...ks }, chains: [chain] }, { K: DEVNET_SOLVER_KEY });
    expect(Keypair.fromSecretKey(Uint8Array.from(JSON.parse(c.svmSolverKey!.reveal()))).publicKey.toBase58()).toBe(kp.publicKey.toBase58());
    expect(`${c.svmSolverKey}`).toBe('[secret]');
    const wrong = writeKeystore('svm-wrong', kp.secretKey, PASSPHRASE, Keypair.generate().publicKey.toBase58());
    expect(() => buildConfig({ solverKey: { env: 'K' }, svmSolverSigner: { kind: 'keystore', ...wrong }, chains: [chain] }, { K: DEVNET_SOLVER_KEY })).toThrow(
      /svmSolverSigner: .*not the public key/,
    );
  });

  it('relay-node keystore create encrypts an SVM key into a 0600 file the config reads; it never overwrites', () => {
    const kp = Keypair.generate();
    const out = join(dir, 'svm-cli.json');
    const passFile = join(dir, 'svm-cli.pass');
    writeFileSync(passFile, `${PASSPHRASE}\n`);
    const secret = JSON.stringify(Array.from(kp.secretKey));
    const run = () =>
      spawnSync(
        process.execPath,
        ['bin/relay-node.js', 'keystore', 'create', '--kind', 'svm', '--key-env', 'SVM_KEY', '--passphrase-file', passFile, '--out', out, '--scrypt-n', '1024'],
        {
          env: { ...process.env, SVM_KEY: secret },
          encoding: 'utf8',
          timeout: 90_000,
        },
      );
    const r = run();
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe(`wrote ${out} for ${kp.publicKey.toBase58()}\n`);
    expect(statSync(out).mode & 0o777).toBe(0o600);
    expect(readFileSync(out, 'utf8')).not.toContain(secret);
    const c = buildConfig(
      { solverKey: { env: 'K' }, svmSolverSigner: { kind: 'keystore', path: out, passphraseFile: passFile }, chains: [chain] },
      { K: DEVNET_SOLVER_KEY },
    );
    expect(Keypair.fromSecretKey(Uint8Array.from(JSON.parse(c.svmSolverKey!.reveal()))).publicKey.toBase58()).toBe(kp.publicKey.toBase58());
    const again = run();
    expect(again.status).toBe(1);
    expect(again.stderr).toMatch(/exists; it is not overwritten/);
  }, 120_000);

  it('relay-node start refuses a wrong passphrase with a clear error and exits', () => {
    const ks = writeKeystore('start', bytes(DEVNET_SOLVER_KEY));
    const path = join(dir, 'start-config.json');
    writeFileSync(
      path,
      JSON.stringify({
        dataDir: join(dir, 'data'),
        solverSigner: { kind: 'keystore', path: ks.path, passphraseEnv: 'RELAY_PASS' },
        allocatorKey: { env: 'A' },
        chains: [chain],
      }),
    );
    const r = spawnSync(process.execPath, ['bin/relay-node.js', 'start', '--config', path], {
      env: { ...process.env, RELAY_PASS: 'guess', A: '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a' },
      encoding: 'utf8',
      timeout: 90_000,
    });
    const out = r.stdout + r.stderr;
    expect(r.status).toBe(1);
    expect(out).toMatch(/solverSigner: .*wrong passphrase/);
    expect(out).not.toContain('guess');
    expect(out).not.toContain(DEVNET_SOLVER_KEY.slice(2));
  }, 120_000);
});

describe('a remote signer that signs something else', () => {
  it('is refused: another key, or another nonce than asked', async () => {
    const asked = {
      type: 'eip1559' as const,
      chainId: 10,
      nonce: 7,
      to: '0x000000000000000000000000000000000000dEaD' as Address,
      value: 1n,
      gas: 21_000n,
      maxFeePerGas: 2n,
      maxPriorityFeePerGas: 1n,
      data: '0x' as Hex,
    };
    const solver = privateKeyToAccount(DEVNET_SOLVER_KEY);
    const other = privateKeyToAccount(`0x${'11'.repeat(32)}`);
    let answer: Hex = '0x';
    // A real HTTP JSON-RPC endpoint on 127.0.0.1 that answers eth_signTransaction with a chosen raw transaction.
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.end(JSON.stringify({ jsonrpc: '2.0', id: 1, result: answer })));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    try {
      const account = remoteAccount({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, address: solver.address, label: 'solverSigner' });
      answer = await solver.signTransaction(asked);
      expect(await account.signTransaction(asked)).toBe(answer);
      answer = await other.signTransaction(asked);
      await expect(account.signTransaction(asked)).rejects.toThrow(/signed by .*, not /);
      answer = await solver.signTransaction({ ...asked, nonce: 8 });
      await expect(account.signTransaction(asked)).rejects.toThrow(/another transaction than the one asked for/);
      answer = await solver.signTransaction({ ...asked, to: other.address });
      await expect(account.signTransaction(asked)).rejects.toThrow(/another transaction than the one asked for/);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});

describe('signers fill orders on the devnet', () => {
  let s: Stack;
  const logLines: string[] = [];
  const A = 8453;
  const B = 10;
  // The remote signer's account: one anvil holds unlocked (from its default mnemonic), made a solver of B's filler.
  const remote = mnemonicToAccount('test test test test test test test test test test test junk', { addressIndex: 9 });
  let signer: Record<string, unknown>;
  const ks = writeKeystore('e2e', bytes(DEVNET_SOLVER_KEY));

  beforeAll(async () => {
    signer = { kind: 'keystore', ...ks };
    s = await startStack({ logLines, configure: (c) => ({ ...c, solverSigner: signer }) });
  }, 180_000);
  afterAll(async () => {
    await s?.stop();
  });

  async function bridge(account: number, recipient: Address): Promise<{ status: string; txHashes: Hex[] }> {
    const q = await api(s.url, '/quote/v2', {
      body: nativeBridge(s.devnet.accounts[account]!.address, recipient, A, B, '100000000000000000'),
    });
    expect(q.status).toBe(200);
    const [txHash] = await executeSteps(s, q.body, account);
    await api(s.url, '/transactions/index', { body: { txHash, chainId: A } });
    return waitForStatus(s.url, q.body.steps[0].requestId, ['success', 'failure', 'refund'], 60_000);
  }

  it('a keystore-configured solver fills an order; neither passphrase nor key reaches the log', async () => {
    expect(s.node.config.solverAddress).toBe(privateKeyToAccount(DEVNET_SOLVER_KEY).address);
    const done = await bridge(1, '0x000000000000000000000000000000000000dEaD');
    expect(done.status).toBe('success');
    const tx = await s.publicClient(B).getTransaction({ hash: done.txHashes[0]! });
    expect(tx.from.toLowerCase()).toBe(s.devnet.solver.toLowerCase());
    const log = logLines.join('\n');
    expect(log.length).toBeGreaterThan(0);
    expect(log).not.toContain(PASSPHRASE);
    expect(log).not.toContain(DEVNET_SOLVER_KEY.slice(2));
  }, 120_000);

  it('anvil as a remote signer signs typed data and messages the solver can verify', async () => {
    const account = remoteAccount({ url: s.devnet.chains.find((c) => c.id === B)!.rpcUrl, address: remote.address });
    const typedData = {
      domain: { name: 'Probe', version: '1', chainId: B, verifyingContract: '0x0000000000000000000000000000000000000002' as Address },
      types: {
        Probe: [
          { name: 'amount', type: 'uint256' },
          { name: 'who', type: 'address' },
        ],
      },
      primaryType: 'Probe' as const,
      message: { amount: 12345678901234567890n, who: remote.address },
    };
    const sig = await account.signTypedData(typedData);
    expect(sig).toBe(await remote.signTypedData(typedData));
    expect(await verifyTypedData({ address: remote.address, signature: sig, ...typedData })).toBe(true);
    const msg = await account.signMessage({ message: 'relay-node' });
    expect(await verifyMessage({ address: remote.address, message: 'relay-node', signature: msg })).toBe(true);
    // An account the signer does not hold: refused by the signer, with the reason and without the URL.
    const stranger = remoteAccount({
      url: s.devnet.chains.find((c) => c.id === B)!.rpcUrl.replace('http://', 'http://op:hunter2@'),
      address: privateKeyToAccount(DEVNET_SOLVER_KEY).address,
      label: 'solverSigner',
    });
    const e = await stranger.signMessage({ message: 'x' }).then(
      () => undefined,
      (x: Error) => x,
    );
    expect(e?.message).toMatch(/^solverSigner: personal_sign refused/);
    expect(e?.message).not.toContain('hunter2');
  });

  it('a remote signer (anvil, eth_signTransaction) fills an order', async () => {
    const b = s.devnet.chains.find((c) => c.id === B)!;
    // The remote account becomes a solver of B's filler (the deployer owns it).
    const owner = createWalletClient({
      account: privateKeyToAccount(s.devnet.accounts[0]!.privateKey),
      chain: devnetChain(B, b.rpcUrl),
      transport: http(b.rpcUrl),
    });
    const hash = await owner.writeContract({ address: b.contracts.filler, abi: OrderFillerAbi, functionName: 'addSolver', args: [remote.address] });
    await s.publicClient(B).waitForTransactionReceipt({ hash });
    // Credentials in the signer's URL go as Basic auth (anvil ignores them) and never into the log.
    // anvil signs for its own chain only (as clef --chainid does): chain A's transactions go to A's anvil.
    const a = s.devnet.chains.find((c) => c.id === A)!;
    signer = { kind: 'remote', url: b.rpcUrl.replace('http://', 'http://op:hunter2@'), chainUrls: { [A]: a.rpcUrl }, address: remote.address };
    logLines.length = 0;
    await s.restartNode();
    expect(s.node.config.solverAddress).toBe(remote.address);
    const recipient = '0x000000000000000000000000000000000000bEEF' as Address;
    const before = await s.publicClient(B).getBalance({ address: recipient });
    const done = await bridge(2, recipient);
    expect(done.status).toBe('success');
    const tx = await s.publicClient(B).getTransaction({ hash: done.txHashes[0]! });
    expect(getAddress(tx.from)).toBe(remote.address);
    await until(async () => ((await s.publicClient(B).getBalance({ address: recipient })) > before ? true : undefined), 'the recipient paid');
    expect(logLines.join('\n')).not.toContain('hunter2');
  }, 120_000);
});
