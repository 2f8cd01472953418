// The smallest raw config that builds: one EVM chain whose contracts are placeholders and whose RPC is
// never called, and the solver key from the environment variable K (the config tests, the CLI tests).

/** One EVM chain (Base's id) with placeholder contracts. */
export const MINIMAL_CHAIN = {
  id: 8453,
  name: 'Base',
  rpcUrl: 'http://127.0.0.1:8545',
  depository: '0x0000000000000000000000000000000000000001',
  filler: '0x0000000000000000000000000000000000000002',
  nativeCurrency: { symbol: 'ETH', name: 'Ether', decimals: 18, usdPrice: '3000' },
};

/** MINIMAL_CHAIN and the solver key from K. */
export const MINIMAL_CONFIG = { solverKey: { env: 'K' }, chains: [MINIMAL_CHAIN] };
