import { Effect, Option } from "effect"
import { auditHash, type ChainBreak, GENESIS_HASH, verifyChainSegment } from "../../src/audit/chain.ts"
import type { AccountId, AgentId } from "../../src/domain/ids.ts"
import type { AuditKind, AuditRecord } from "../../src/domain/Ledger.ts"
import { CliFailure, type Connection, EXIT_REFUSED, request } from "./client.ts"

/**
 * `spendgate receipt verify`: checks an audit record the way the server
 * does (src/audit/chain.ts), on this machine, from what the API answers:
 * its hash over its own content, and its link to the record before it
 * (the genesis hash for the first; with the admin token, the previous
 * record itself, whose own hash is checked too). Without the admin token
 * the previous record cannot be fetched, so the link is the server's word
 * (`verified`), and the output says so.
 */

interface WireRecord {
  readonly id: string
  readonly accountId?: string
  readonly seq: number
  readonly kind: string
  readonly agentId: string | null
  readonly reservationId: string | null
  readonly transactionId: string | null
  readonly amountUsdCents: number
  readonly pocketChange: { readonly usdCents: number; readonly sats: number }
  readonly details: unknown
  readonly createdAt: string
  readonly prevHash: string
  readonly hash: string
  readonly verified?: boolean
}

/** A JSON number with at most `decimals` decimals as an integer of 10^-decimals units (exact within the API's ranges). */
export const toScaled = (value: number, decimals: number): bigint => {
  const text = value.toFixed(decimals)
  const negative = text.startsWith("-")
  const units = BigInt(text.replace("-", "").replace(".", ""))
  return negative ? -units : units
}

/**
 * The stored records a wire record can come from: the API answers `details`
 * parsed when the stored text is JSON (as it always is when written by the
 * service), else as the text itself.
 */
export const storedCandidates = (wire: WireRecord, accountId: string): ReadonlyArray<AuditRecord> => {
  const detailTexts = typeof wire.details === "string"
    ? [JSON.stringify(wire.details), wire.details]
    : [JSON.stringify(wire.details)]
  return detailTexts.map((details) => ({
    id: wire.id,
    accountId: accountId as AccountId,
    seq: BigInt(wire.seq),
    kind: wire.kind as AuditKind,
    agentId: wire.agentId as AgentId | null,
    reservationId: wire.reservationId,
    transactionId: wire.transactionId,
    amountMicroUsd: toScaled(wire.amountUsdCents, 4),
    usdDeltaMicroUsd: toScaled(wire.pocketChange.usdCents, 4),
    satsDeltaMsat: toScaled(wire.pocketChange.sats, 3),
    details,
    createdAt: new Date(wire.createdAt),
    prevHash: wire.prevHash,
    hash: wire.hash
  }))
}

/** The stored record whose recomputed hash is its `hash`, if any. */
const hashed = (wire: WireRecord, accountId: string): Effect.Effect<Option.Option<AuditRecord>> =>
  Effect.gen(function*() {
    for (const candidate of storedCandidates(wire, accountId)) {
      const { hash, ...rest } = candidate
      if ((yield* auditHash(rest)) === hash) return Option.some(candidate)
    }
    return Option.none()
  })

const describeBreak = (broken: ChainBreak): string =>
  broken._tag === "SequenceGap"
    ? `sequence gap: seq ${broken.seq}, expected ${broken.expected}`
    : broken._tag === "BrokenLink"
    ? `prevHash of seq ${broken.seq} is not the previous record's hash`
    : `hash of seq ${broken.seq} does not match its content`

/** The previous record (seq - 1) of the account, from the admin API. */
const findPrevious = (connection: Connection, accountId: string, seq: number): Effect.Effect<Option.Option<WireRecord>, CliFailure> =>
  Effect.gen(function*() {
    const page = (offset: number, limit: number) =>
      request(connection, "/v1/admin/audit-logs", { auth: "admin", query: { accountId, limit, offset } }) as Effect.Effect<
        { auditLogs: ReadonlyArray<WireRecord>; total: number },
        CliFailure
      >
    const first = yield* page(0, 1)
    // Newest first: seq s is near offset total - s; look there, then everywhere.
    const guess = Math.max(0, first.total - (seq - 1) - 50)
    const near = yield* page(guess, 100)
    const hit = near.auditLogs.find((r) => r.seq === seq - 1)
    if (hit !== undefined) return Option.some(hit)
    for (let offset = 0; offset < first.total; offset += 100) {
      const rows = yield* page(offset, 100)
      const found = rows.auditLogs.find((r) => r.seq === seq - 1)
      if (found !== undefined) return Option.some(found)
      if (rows.auditLogs.length === 0) break
    }
    return Option.none()
  })

export interface Verdict {
  readonly record: unknown
  readonly hash: "ok" | "mismatch"
  readonly link: "ok" | "broken" | "server-verified" | "server-not-verified"
  readonly linkDetail: string
  readonly verified: boolean
}

export const verifyReceipt = (connection: Connection, auditId: string): Effect.Effect<Verdict, CliFailure> =>
  Effect.gen(function*() {
    const wire = (yield* request(connection, `/v1/audit/${encodeURIComponent(auditId)}`, { auth: "key" })) as WireRecord
    if (wire.id !== auditId) {
      return yield* new CliFailure({ message: `the server answered record ${wire.id} for ${auditId}`, exitCode: EXIT_REFUSED })
    }
    const wallet = (yield* request(connection, "/v1/wallet", { auth: "key" })) as { accountId: string }
    const record = yield* hashed(wire, wallet.accountId)
    const hash = Option.isSome(record) ? "ok" as const : "mismatch" as const
    const stored = Option.getOrElse(record, () => storedCandidates(wire, wallet.accountId)[0]!)

    let link: Verdict["link"]
    let linkDetail: string
    if (wire.seq === 1) {
      const broken = yield* verifyChainSegment(null, [stored])
      const ok = broken === null || broken._tag === "HashMismatch"
      link = ok && wire.prevHash === GENESIS_HASH ? "ok" : "broken"
      linkDetail = link === "ok" ? "first record of the account: links to the genesis hash" : "first record, but prevHash is not the genesis hash"
    } else if (connection.adminToken !== undefined && Option.isSome(connection.adminToken)) {
      const previousWire = yield* findPrevious(connection, wallet.accountId, wire.seq)
      if (Option.isNone(previousWire)) {
        link = "broken"
        linkDetail = `no record with seq ${wire.seq - 1} in the account`
      } else {
        const previous = yield* hashed(previousWire.value, wallet.accountId)
        if (Option.isNone(previous)) {
          link = "broken"
          linkDetail = `the previous record ${previousWire.value.id} (seq ${wire.seq - 1}) does not match its own hash`
        } else {
          const broken = yield* verifyChainSegment(previous.value, [stored])
          link = broken === null || broken._tag === "HashMismatch" ? "ok" : "broken"
          linkDetail = link === "ok"
            ? `prevHash is the hash of ${previous.value.id} (seq ${wire.seq - 1}), itself checked`
            : describeBreak(broken!)
        }
      }
    } else {
      link = wire.verified === true ? "server-verified" : "server-not-verified"
      linkDetail = wire.verified === true
        ? "checked by the server (give --admin-token to check the previous record here too)"
        : "the server reports the chain broken at this record"
    }
    const verified = hash === "ok" && (link === "ok" || link === "server-verified")
    return { record: wire, hash, link, linkDetail, verified }
  })
