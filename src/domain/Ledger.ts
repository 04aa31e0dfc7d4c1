import type { Capability } from "./Capability.ts"
import type { AccountId, AgentId } from "./ids.ts"
import type { BtcUsdRate, MicroUsd, Msat } from "./Money.ts"
import { sortableRandomId } from "./ids.ts"

/**
 * The wallet and its ledger, in internal units (docs/money.md). One wallet per
 * account with two pockets: `usd` in micro-dollars and `sats` in millisatoshis.
 */

export interface Wallet {
  readonly accountId: AccountId
  readonly usdMicroUsd: MicroUsd
  readonly satsMsat: Msat
}

export type Pocket = "usd" | "sats"

export type TransactionType = "charge" | "credit" | "refund"

export interface Transaction {
  readonly id: string
  readonly accountId: AccountId
  readonly agentId: AgentId | null
  readonly type: TransactionType
  /** The full amount in USD (a charge's price; a credit's USD value when known, else 0). */
  readonly amountMicroUsd: MicroUsd
  /** What each pocket gained (credit, refund) or lost (charge), as a positive number. */
  readonly usdMicroUsd: MicroUsd
  readonly satsMsat: Msat
  /** The BTC/USD rate snapshot the amount was converted at, when sats were involved or known. */
  readonly rateMicroUsdPerBtc: bigint | null
  readonly description: string
  readonly capability: Capability | null
  readonly provider: string | null
  readonly auditId: string
  /** For a `refund`: the charge it gives money back for; null otherwise. */
  readonly refundOf: string | null
  readonly createdAt: Date
}

export type ReservationStatus = "held" | "settled" | "released"

export interface Reservation {
  readonly id: string
  readonly accountId: AccountId
  readonly agentId: AgentId
  readonly capability: Capability
  readonly provider: string
  readonly quotedMicroUsd: MicroUsd
  /** What the hold took from each pocket. */
  readonly heldUsdMicroUsd: MicroUsd
  readonly heldSatsMsat: Msat
  readonly rateMicroUsdPerBtc: bigint | null
  /** UTC calendar day (YYYY-MM-DD) the reservation counts against. */
  readonly day: string
  readonly status: ReservationStatus
  /**
   * `settled`: what was charged. `released` by the sweep and then settled by a
   * call that outlived its hold but could not be charged: what is owed (unpaid).
   */
  readonly settledMicroUsd: MicroUsd | null
  readonly createdAt: Date
  /** After this instant the recovery sweep may release the hold. */
  readonly expiresAt: Date
}

export type AuditKind = "reserve" | "settle" | "release" | "credit" | "refund"

export interface AuditRecord {
  readonly id: string
  readonly accountId: AccountId
  readonly seq: bigint
  readonly kind: AuditKind
  readonly agentId: AgentId | null
  readonly reservationId: string | null
  readonly transactionId: string | null
  /** The amount the record is about, in micro-dollars (quote, charge, release or credit value). */
  readonly amountMicroUsd: bigint
  /** Signed change of each pocket. */
  readonly usdDeltaMicroUsd: bigint
  readonly satsDeltaMsat: bigint
  /** Free-form context (capability, provider, reason), as canonical JSON text. */
  readonly details: string
  readonly createdAt: Date
  readonly prevHash: string
  readonly hash: string
}

export const newTransactionId = () => `txn_${sortableRandomId()}`
export const newReservationId = () => `rsv_${sortableRandomId()}`
export const newAuditId = () => `aud_${sortableRandomId()}`

const DAY_MS = 86_400_000
let lastDayNumber = Number.NaN
let lastDay = ""

/**
 * The UTC calendar day of an instant, as YYYY-MM-DD. The last day's text is
 * kept: every metered call asks for it, and nearly always for the same day.
 */
export const utcDay = (at: Date): string => {
  const dayNumber = Math.floor(at.getTime() / DAY_MS)
  if (dayNumber !== lastDayNumber) {
    lastDay = at.toISOString().slice(0, 10)
    lastDayNumber = dayNumber
  }
  return lastDay
}

/** The rate snapshot carried through a call. */
export interface RateSnapshot {
  readonly rate: BtcUsdRate
  readonly asOf: Date
}
