// The builder lives in the ledger (the events outbox writes the record at every status change).
export { statusRecord, type StatusRecord } from '../ledger/statusRecord.ts';
