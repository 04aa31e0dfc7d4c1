import { Effect } from "effect"
import { sha256Hex } from "../domain/ids.ts"
import type { AuditRecord } from "../domain/Ledger.ts"

/**
 * The audit log is a hash chain per account: every record carries the hash of
 * the one before it (`prevHash`) and its own `hash` over its content and that
 * link. Changing any stored field of a record breaks its own hash; replacing
 * a record together with its hash breaks the next record's link.
 */

export const GENESIS_HASH = "0".repeat(64)

export type UnhashedAuditRecord = Omit<AuditRecord, "hash">

/** The exact text a record's hash covers: every field, in a fixed order, amounts as decimal strings. */
export const canonicalAuditText = (record: UnhashedAuditRecord): string =>
  JSON.stringify([
    "spendgate-audit-v1",
    record.id,
    record.accountId,
    record.seq.toString(),
    record.kind,
    record.agentId,
    record.reservationId,
    record.transactionId,
    record.amountMicroUsd.toString(),
    record.usdDeltaMicroUsd.toString(),
    record.satsDeltaMsat.toString(),
    record.details,
    record.createdAt.toISOString(),
    record.prevHash
  ])

/**
 * SHA-256 (lower-case hex) of the record's canonical text, computed in place:
 * a few hundred bytes take microseconds, where Web Crypto's `subtle.digest`
 * costs a round trip through the runtime's worker pool and a promise.
 */
export const auditHash = (record: UnhashedAuditRecord): Effect.Effect<string> =>
  Effect.sync(() => sha256Hex(canonicalAuditText(record)))

export const sealAuditRecord = (record: UnhashedAuditRecord): Effect.Effect<AuditRecord> =>
  Effect.map(auditHash(record), (hash) => ({ ...record, hash }))

export type ChainBreak =
  | { readonly _tag: "HashMismatch"; readonly seq: bigint; readonly id: string }
  | { readonly _tag: "BrokenLink"; readonly seq: bigint; readonly id: string }
  | { readonly _tag: "SequenceGap"; readonly seq: bigint; readonly expected: bigint }

/**
 * Checks consecutive records (ordered by seq) starting after `previous`
 * (null at the start of the chain). Returns the first break found, if any.
 */
export const verifyChainSegment = (
  previous: AuditRecord | null,
  records: ReadonlyArray<AuditRecord>
): Effect.Effect<ChainBreak | null> =>
  Effect.gen(function*() {
    let prev = previous
    for (const record of records) {
      const expectedSeq = prev === null ? 1n : prev.seq + 1n
      if (record.seq !== expectedSeq) return { _tag: "SequenceGap", seq: record.seq, expected: expectedSeq } as const
      if (record.prevHash !== (prev === null ? GENESIS_HASH : prev.hash)) {
        return { _tag: "BrokenLink", seq: record.seq, id: record.id } as const
      }
      const { hash, ...rest } = record
      if ((yield* auditHash(rest)) !== hash) return { _tag: "HashMismatch", seq: record.seq, id: record.id } as const
      prev = record
    }
    return null
  })
