/**
 * The scan mark naming the head a ledger began indexing a chain at (written by the indexer before its first deposit):
 * deposits up to it were made before the ledger existed (a ledger started fresh over a depository or vault used before
 * reads them all again).
 */
export const LEDGER_BIRTH = 'ledger-birth';
