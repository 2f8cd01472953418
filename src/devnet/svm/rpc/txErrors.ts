// Transaction and instruction errors in Solana's JSON and text shapes (litesvm's enums by name).

import type { Json } from './codec.ts';

/** The names of litesvm's fieldless transaction errors, in the order of its `TransactionErrorFieldless` (and `InstructionErrorFieldless`) const enums. */
export const TX_ERROR_NAMES = [
  'AccountInUse',
  'AccountLoadedTwice',
  'AccountNotFound',
  'ProgramAccountNotFound',
  'InsufficientFundsForFee',
  'InvalidAccountForFee',
  'AlreadyProcessed',
  'BlockhashNotFound',
  'CallChainTooDeep',
  'MissingSignatureForFee',
  'InvalidAccountIndex',
  'SignatureFailure',
  'InvalidProgramForExecution',
  'SanitizeFailure',
  'ClusterMaintenance',
  'AccountBorrowOutstanding',
  'WouldExceedMaxBlockCostLimit',
  'UnsupportedVersion',
  'InvalidWritableAccount',
  'WouldExceedMaxAccountCostLimit',
  'WouldExceedAccountDataBlockLimit',
  'TooManyAccountLocks',
  'AddressLookupTableNotFound',
  'InvalidAddressLookupTableOwner',
  'InvalidAddressLookupTableData',
  'InvalidAddressLookupTableIndex',
  'InvalidRentPayingAccount',
  'WouldExceedMaxVoteCostLimit',
  'WouldExceedAccountDataTotalLimit',
  'MaxLoadedAccountsDataSizeExceeded',
  'ResanitizationNeeded',
  'InvalidLoadedAccountsDataSizeLimit',
  'UnbalancedTransaction',
  'ProgramCacheHitMaxLimit',
  'CommitCancelled',
];
/** The names of litesvm's fieldless instruction errors, by their enum value. */
export const IX_ERROR_NAMES = [
  'GenericError',
  'InvalidArgument',
  'InvalidInstructionData',
  'InvalidAccountData',
  'AccountDataTooSmall',
  'InsufficientFunds',
  'IncorrectProgramId',
  'MissingRequiredSignature',
  'AccountAlreadyInitialized',
  'UninitializedAccount',
  'UnbalancedInstruction',
  'ModifiedProgramId',
  'ExternalAccountLamportSpend',
  'ExternalAccountDataModified',
  'ReadonlyLamportChange',
  'ReadonlyDataModified',
  'DuplicateAccountIndex',
  'ExecutableModified',
  'RentEpochModified',
  'NotEnoughAccountKeys',
  'AccountDataSizeChanged',
  'AccountNotExecutable',
  'AccountBorrowFailed',
  'AccountBorrowOutstanding',
  'DuplicateAccountOutOfSync',
  'InvalidError',
  'ExecutableDataModified',
  'ExecutableLamportChange',
  'ExecutableAccountNotRentExempt',
  'UnsupportedProgramId',
  'CallDepth',
  'MissingAccount',
  'ReentrancyNotAllowed',
  'MaxSeedLengthExceeded',
  'InvalidSeeds',
  'InvalidRealloc',
  'ComputationalBudgetExceeded',
  'PrivilegeEscalation',
  'ProgramEnvironmentSetupFailure',
  'ProgramFailedToComplete',
  'ProgramFailedToCompile',
  'Immutable',
  'IncorrectAuthority',
  'AccountNotRentExempt',
  'InvalidAccountOwner',
  'ArithmeticOverflow',
  'UnsupportedSysvar',
  'IllegalOwner',
  'MaxAccountsDataAllocationsExceeded',
  'MaxAccountsExceeded',
  'MaxInstructionTraceLengthExceeded',
  'BuiltinProgramsMustConsumeComputeUnits',
  'BorshIoError',
];
/** The text Solana prints for a transaction error. */
export const TX_ERROR_TEXT: Record<string, string> = {
  AccountInUse: 'Account in use',
  AccountLoadedTwice: 'Account loaded twice',
  AccountNotFound: 'Attempt to debit an account but found no record of a prior credit.',
  ProgramAccountNotFound: 'Attempt to load a program that does not exist',
  InsufficientFundsForFee: 'Insufficient funds for fee',
  InvalidAccountForFee: 'This account may not be used to pay transaction fees',
  AlreadyProcessed: 'This transaction has already been processed',
  BlockhashNotFound: 'Blockhash not found',
  SignatureFailure: 'Transaction did not pass signature verification',
  InvalidProgramForExecution: 'This program may not be used for executing instructions',
  SanitizeFailure: 'Transaction failed to sanitize accounts offsets correctly',
  UnsupportedVersion: 'Transaction version is unsupported',
  AddressLookupTableNotFound: "Transaction loads an address table account that doesn't exist",
};
/** The text Solana prints for an instruction error. */
export const IX_ERROR_TEXT: Record<string, string> = {
  GenericError: 'generic instruction error',
  InvalidArgument: 'invalid program argument',
  InvalidInstructionData: 'invalid instruction data',
  InvalidAccountData: 'invalid account data for instruction',
  AccountDataTooSmall: 'account data too small for instruction',
  InsufficientFunds: 'insufficient funds for instruction',
  IncorrectProgramId: 'incorrect program id for instruction',
  MissingRequiredSignature: 'missing required signature for instruction',
  AccountAlreadyInitialized: 'instruction requires an uninitialized account',
  UninitializedAccount: 'instruction requires an initialized account',
  ComputationalBudgetExceeded: 'Computational budget exceeded',
  ProgramFailedToComplete: 'Program failed to complete',
  IllegalOwner: 'Provided owner is not allowed',
};
// ---------------------------------------------------------------------------------------------------------
// Transaction errors

/** A transaction error in the RPC's JSON shape. */
export type TxErrJson = string | Record<string, Json>;

/** A litesvm instruction error in the RPC's JSON shape. */
export function instructionErrorJson(e: unknown): Json {
  if (typeof e === 'number') return IX_ERROR_NAMES[e] ?? `InstructionError${e}`;
  const o = e as { code?: number; msg?: string };
  if (typeof o.code === 'number') return { Custom: o.code };
  if (typeof o.msg === 'string') return { BorshIoError: o.msg };
  return 'GenericError';
}

/** A litesvm transaction error in the RPC's JSON shape. */
export function txErrorJson(err: unknown): TxErrJson {
  if (typeof err === 'number') return TX_ERROR_NAMES[err] ?? `TransactionError${err}`;
  const o = err as { index?: number; accountIndex?: number; err?: () => unknown; constructor?: { name?: string } };
  if (typeof o.index === 'number' && typeof o.err === 'function') return { InstructionError: [o.index, instructionErrorJson(o.err())] };
  if (typeof o.index === 'number') return { DuplicateInstruction: o.index };
  if (typeof o.accountIndex === 'number') {
    const name = o.constructor?.name?.includes('Restricted') ? 'ProgramExecutionTemporarilyRestricted' : 'InsufficientFundsForRent';
    return { [name]: { account_index: o.accountIndex } };
  }
  return 'SanitizeFailure';
}

/** The text Solana prints for a transaction error (a preflight failure's message). */
export function txErrorText(err: TxErrJson): string {
  if (typeof err === 'string') return TX_ERROR_TEXT[err] ?? err;
  if ('InstructionError' in err) {
    const [i, ie] = err.InstructionError as [number, Json];
    let t: string;
    if (typeof ie === 'string') t = IX_ERROR_TEXT[ie] ?? ie;
    else if (ie && typeof ie === 'object' && 'Custom' in ie) t = `custom program error: 0x${(ie as { Custom: number }).Custom.toString(16)}`;
    else t = JSON.stringify(ie);
    return `Error processing Instruction ${i}: ${t}`;
  }
  if ('InsufficientFundsForRent' in err) {
    return `Transaction results in an account (${(err.InsufficientFundsForRent as { account_index: number }).account_index}) with insufficient funds for rent`;
  }
  return JSON.stringify(err);
}
