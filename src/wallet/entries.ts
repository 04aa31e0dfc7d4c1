import type { UnhashedAuditRecord } from "../audit/chain.ts"
import type { Reservation, Transaction } from "../domain/Ledger.ts"
import { MicroUsd, Msat } from "../domain/Money.ts"
import { capturedDescription, type CreditInput, type RefundInput, type ReserveInput, type SettleInput, settleIdsOf } from "../ports/Store.ts"
import { type HoldPlan, type LateSettlePlan, planLateSettle, planSettle, type SettlePlan } from "./decide.ts"
import type { RefundPlan } from "./refund.ts"

/**
 * What the ledger records for each step, built once here so that every
 * Store implementation writes exactly the same rows and audit records.
 * (Sequence numbers and hashes are added by the store, which holds the
 * account's chain head under its lock.)
 */

export type AuditDraft = Omit<UnhashedAuditRecord, "seq" | "prevHash">

export const heldReservation = (input: ReserveInput, plan: HoldPlan): Reservation => ({
  id: input.reservationId,
  accountId: input.accountId,
  agentId: input.agentId,
  capability: input.capability,
  provider: input.provider,
  quotedMicroUsd: input.quotedMicroUsd,
  heldUsdMicroUsd: plan.fromUsdMicroUsd,
  heldSatsMsat: plan.fromSatsMsat,
  rateMicroUsdPerBtc: input.rate?.rate.microUsdPerBtc ?? null,
  day: input.day,
  status: "held",
  settledMicroUsd: null,
  createdAt: input.now,
  expiresAt: input.expiresAt
})

export const reserveAudit = (input: ReserveInput, plan: HoldPlan): AuditDraft => ({
  id: input.auditId,
  accountId: input.accountId,
  kind: "reserve",
  agentId: input.agentId,
  reservationId: input.reservationId,
  transactionId: null,
  amountMicroUsd: input.quotedMicroUsd,
  usdDeltaMicroUsd: -plan.fromUsdMicroUsd,
  satsDeltaMsat: -plan.fromSatsMsat,
  details: JSON.stringify({ capability: input.capability, provider: input.provider }),
  createdAt: input.now
})

/** The charge of a settled call and its settle record: what a settle and a late settle share. */
const chargeEntries = (
  reservation: Reservation,
  charge: {
    readonly chargedMicroUsd: MicroUsd
    readonly chargeUsdMicroUsd: MicroUsd
    readonly chargeSatsMsat: Msat
  },
  /** What the settle record moves in each pocket. */
  delta: { readonly usdMicroUsd: bigint; readonly satsMsat: bigint },
  input: SettleInput,
  late: boolean
): { readonly transaction: Transaction; readonly audit: AuditDraft; readonly reservation: Reservation } => ({
  transaction: {
    id: input.transactionId,
    accountId: reservation.accountId,
    agentId: reservation.agentId,
    type: "charge",
    amountMicroUsd: charge.chargedMicroUsd,
    usdMicroUsd: charge.chargeUsdMicroUsd,
    satsMsat: charge.chargeSatsMsat,
    rateMicroUsdPerBtc: reservation.rateMicroUsdPerBtc,
    description: input.description,
    capability: reservation.capability,
    provider: reservation.provider,
    auditId: input.auditId,
    refundOf: null,
    createdAt: input.now
  },
  audit: {
    id: input.auditId,
    accountId: reservation.accountId,
    kind: "settle",
    agentId: reservation.agentId,
    reservationId: reservation.id,
    transactionId: input.transactionId,
    amountMicroUsd: charge.chargedMicroUsd,
    usdDeltaMicroUsd: delta.usdMicroUsd,
    satsDeltaMsat: delta.satsMsat,
    details: JSON.stringify({
      capability: reservation.capability,
      provider: reservation.provider,
      ...(late ? { late: true } : {})
    }),
    createdAt: input.now
  },
  reservation: { ...reservation, status: "settled", settledMicroUsd: charge.chargedMicroUsd }
})

/** A settle: the charge, and the rest of the hold returned to the pockets. */
export const settleEntries = (reservation: Reservation, plan: SettlePlan, input: SettleInput) =>
  chargeEntries(reservation, plan, { usdMicroUsd: plan.refundUsdMicroUsd, satsMsat: plan.refundSatsMsat }, input, false)

/** A settle after the sweep released the hold: the charge is a new debit of the pockets. */
export const lateSettleEntries = (
  reservation: Reservation,
  plan: Extract<LateSettlePlan, { readonly _tag: "Charge" }>,
  input: SettleInput
) => chargeEntries(reservation, plan, { usdMicroUsd: -plan.chargeUsdMicroUsd, satsMsat: -plan.chargeSatsMsat }, input, true)

/** A settle after the sweep that could not be charged: the owed amount, recorded; nothing moves. */
export const unpaidEntries = (
  reservation: Reservation,
  plan: Extract<LateSettlePlan, { readonly _tag: "Unpaid" }>,
  input: SettleInput
): { readonly audit: AuditDraft; readonly reservation: Reservation } => ({
  audit: {
    id: input.auditId,
    accountId: reservation.accountId,
    kind: "settle",
    agentId: reservation.agentId,
    reservationId: reservation.id,
    transactionId: null,
    amountMicroUsd: plan.owedMicroUsd,
    usdDeltaMicroUsd: 0n,
    satsDeltaMsat: 0n,
    details: JSON.stringify({
      capability: reservation.capability,
      provider: reservation.provider,
      late: true,
      unpaid: plan.refusal.code
    }),
    createdAt: input.now
  },
  reservation: { ...reservation, settledMicroUsd: plan.owedMicroUsd }
})

export const releaseAudit = (reservation: Reservation, auditId: string, reason: string, now: Date): AuditDraft => ({
  id: auditId,
  accountId: reservation.accountId,
  kind: "release",
  agentId: reservation.agentId,
  reservationId: reservation.id,
  transactionId: null,
  amountMicroUsd: reservation.quotedMicroUsd,
  usdDeltaMicroUsd: reservation.heldUsdMicroUsd,
  satsDeltaMsat: reservation.heldSatsMsat,
  details: JSON.stringify({ reason }),
  createdAt: now
})

export const creditEntries = (
  input: CreditInput
): { readonly transaction: Transaction; readonly audit: AuditDraft; readonly usdMicroUsd: MicroUsd; readonly satsMsat: Msat } => {
  // The store refused a credit that is not positive before it gets here.
  const usdMicroUsd = MicroUsd.make(input.pocket === "usd" ? input.amount : 0n)
  const satsMsat = Msat.make(input.pocket === "sats" ? input.amount : 0n)
  return {
    usdMicroUsd,
    satsMsat,
    transaction: {
      id: input.transactionId,
      accountId: input.accountId,
      agentId: input.agentId,
      type: "credit",
      amountMicroUsd: MicroUsd.make(input.valueMicroUsd),
      usdMicroUsd,
      satsMsat,
      rateMicroUsdPerBtc: input.rateMicroUsdPerBtc,
      description: input.description,
      capability: null,
      provider: null,
      auditId: input.auditId,
      refundOf: null,
      createdAt: input.now
    },
    audit: {
      id: input.auditId,
      accountId: input.accountId,
      kind: "credit",
      agentId: input.agentId,
      reservationId: null,
      transactionId: input.transactionId,
      amountMicroUsd: input.valueMicroUsd,
      usdDeltaMicroUsd: usdMicroUsd,
      satsDeltaMsat: satsMsat,
      details: JSON.stringify({ key: input.creditKey }),
      createdAt: input.now
    }
  }
}

/**
 * What a reservation counts for in the velocity limits' spend: the quote
 * while held, the charge once settled, nothing once released (an amount
 * recorded as owed on a released hold was not paid).
 */
export const reservationSpend = (reservation: Reservation): bigint =>
  reservation.status === "held"
    ? reservation.quotedMicroUsd
    : reservation.status === "settled"
    ? reservation.settledMicroUsd ?? 0n
    : 0n

/** A refund of a charge: the `refund` transaction (linked to the charge) and its audit record. */
export const refundEntries = (
  charge: Transaction,
  plan: RefundPlan,
  input: RefundInput
): { readonly transaction: Transaction; readonly audit: AuditDraft } => ({
  transaction: {
    id: input.refundTransactionId,
    accountId: charge.accountId,
    agentId: charge.agentId,
    type: "refund",
    amountMicroUsd: plan.amountMicroUsd,
    usdMicroUsd: plan.usdMicroUsd,
    satsMsat: plan.satsMsat,
    rateMicroUsdPerBtc: charge.rateMicroUsdPerBtc,
    description: `Refund of ${charge.id}: ${input.reason}`,
    capability: charge.capability,
    provider: charge.provider,
    auditId: input.auditId,
    refundOf: charge.id,
    createdAt: input.now
  },
  audit: {
    id: input.auditId,
    accountId: charge.accountId,
    kind: "refund",
    agentId: charge.agentId,
    reservationId: null,
    transactionId: input.refundTransactionId,
    amountMicroUsd: plan.amountMicroUsd,
    usdDeltaMicroUsd: plan.usdMicroUsd,
    satsDeltaMsat: plan.satsMsat,
    details: JSON.stringify({ refundOf: charge.id, reason: input.reason }),
    createdAt: input.now
  }
})

/**
 * Recovery's capture of a hold whose settle never landed: the settle of the
 * call at its quote (all it held is charged), under the ids the call's
 * receipt named (`settleIdsOf`).
 */
export const captureSettleInput = (reservation: Reservation, now: Date): SettleInput => ({
  reservationId: reservation.id,
  accountId: reservation.accountId,
  actualMicroUsd: reservation.quotedMicroUsd,
  ...settleIdsOf(reservation.id),
  description: capturedDescription(reservation.capability, reservation.provider),
  now,
  plan: (held) => planSettle(held, held.quotedMicroUsd),
  standardRules: true,
  onlyHeld: true,
  planLate: (swept, snapshot) => planLateSettle(swept, swept.quotedMicroUsd, snapshot)
})

/** Whether the sweep leaves an expired hold alone: its settle is queued in this process (see `SweepCapture.settling`). */
export const settleQueuedHere = (reservation: Reservation, capture: { readonly settling?: ReadonlySet<string> | undefined } | undefined): boolean =>
  capture?.settling?.has(reservation.id) === true

/** Whether recovery captures an expired hold (see `LedgerStore.sweepExpired`). */
export const capturesOnExpiry = (reservation: Reservation, running: ReadonlySet<string>): boolean =>
  reservation.capability !== "pay" && !running.has(reservation.id)
