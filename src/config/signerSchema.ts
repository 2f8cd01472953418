import { z } from 'zod';

// Where a keystore's passphrase comes from: a file (e.g. a mounted secret) or an environment variable.
const keystoreFields = {
  kind: z.literal('keystore'),
  // Path of a Web3 Secret Storage (keystore v3) JSON file.
  path: z.string().min(1),
  passphraseFile: z.string().min(1).optional(),
  passphraseEnv: z.string().min(1).optional(),
};
const onePassphrase = (k: { passphraseFile?: string; passphraseEnv?: string }) => Boolean(k.passphraseFile) !== Boolean(k.passphraseEnv);
const onePassphraseMessage = { message: 'give exactly one of "passphraseFile" or "passphraseEnv"', path: ['passphraseFile'] };

// A raw key, as solverKey takes it (kept for configs that name the kind).
const keyKind = z
  .object({ kind: z.literal('key'), env: z.string().min(1).optional(), file: z.string().min(1).optional() })
  .strict()
  .refine((k) => Boolean(k.env) !== Boolean(k.file), 'give exactly one of "env" or "file"');

/** An EVM signer: a raw key, an encrypted keystore file, or a remote JSON-RPC signer (web3signer, clef). */
export const evmSignerSource = z
  .discriminatedUnion('kind', [
    keyKind.innerType(),
    z.object(keystoreFields).strict(),
    z
      .object({
        kind: z.literal('remote'),
        // The signer's JSON-RPC endpoint; credentials in it (https://user:pass@host) are sent as Basic auth.
        url: z.string().url(),
        // The account the signer signs for: every signature is checked against it.
        address: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte hex address'),
        // Per chain id, another endpoint for that chain's transactions: for signers bound to one chain
        // (clef --chainid, anvil). Typed data and messages always go to url.
        chainUrls: z.record(z.string().regex(/^[1-9][0-9]*$/, 'keys must be chain ids'), z.string().url()).optional(),
        timeoutMs: z.number().int().min(100).max(120_000).default(10_000),
      })
      .strict(),
  ])
  .superRefine((s, ctx) => {
    if (s.kind === 'key' && Boolean(s.env) === Boolean(s.file)) ctx.addIssue({ code: 'custom', message: 'give exactly one of "env" or "file"' });
    if (s.kind === 'keystore' && !onePassphrase(s)) ctx.addIssue({ code: 'custom', ...onePassphraseMessage });
  });

/** The SVM solver's signer: its key encrypted in a keystore v3 file (see src/signers/keystore.ts). */
export const svmSignerSource = z
  .object(keystoreFields)
  .strict()
  .superRefine((s, ctx) => {
    if (!onePassphrase(s)) ctx.addIssue({ code: 'custom', ...onePassphraseMessage });
  });

export type EvmSignerSource = z.output<typeof evmSignerSource>;
export type SvmSignerSource = z.output<typeof svmSignerSource>;
