/**
 * The funding scan mark the EVM audit opens at: the block the node first started on the chain,
 * recorded by the adapter before it signs anything (src/audit/evmAudit.ts reads it back).
 */
export const AUDIT_OPENING = 'audit-opening';
