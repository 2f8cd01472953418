// anvil's default accounts (its public test mnemonic, never funded anywhere real), derived rather
// than written out, for tests that start a bare anvil without the devnet.
import { toHex, type Hex } from 'viem';
import { mnemonicToAccount } from 'viem/accounts';
import { ANVIL_MNEMONIC } from '../../src/devnet/devnet.ts';

/** The private key of anvil's default account `index` (0: the deployer anvil funds first). */
export function anvilKey(index: number): Hex {
  return toHex(mnemonicToAccount(ANVIL_MNEMONIC, { addressIndex: index }).getHdKey().privateKey!);
}
