import { Result } from "effect"
import { NotRefundable, RefundExceedsCharge, RefundPocketFull, type RefundRefusal } from "../domain/errors.ts"
import type { Transaction } from "../domain/Ledger.ts"
import { ceilDivide, creditFits, MicroUsd, MSAT_PER_BTC, Msat } from "../domain/Money.ts"

/**
 * Refunds of a charge, as a pure rule. The store reads a snapshot under the
 * wallet lock (the charge, what its earlier refunds gave back, the pockets)
 * and applies the plan; memory, PGlite and PostgreSQL cannot disagree.
 *
 * The amount: a full refund is what remains (the charge's amount minus what
 * earlier refunds gave back); a partial one is a positive amount no larger
 * than that.
 *
 * The split back to the pockets: after refunds totalling R, the charge keeps
 * in each pocket exactly what a charge of `amount - R` would have taken at
 * the charge's own split and rate snapshot (`keptByCharge`): usd first, the
 * rest in sats at the snapshot, rounded UP to the msat as a charge is. So a
 * refund gives back the sats part first, then the usd part (the reverse of
 * the order the charge took them), and the sats given back are rounded DOWN
 * (a credit is never rounded up).
 *
 * Each refund is the difference between what the charge kept before and what
 * it keeps after; `kept` only goes down as R goes up, and `kept(0)` is the
 * whole charge. So any sequence of partial refunds gives back, in each
 * pocket, at most what the charge took, and a sequence that reaches the
 * charge's amount gives back exactly that, to the msat: rounding can neither
 * create money nor strand it.
 */

/** What refunds of one charge have given back so far, in total. */
export interface Refunded {
  /** The USD value refunded (the sum of the refunds' amounts). */
  readonly microUsd: bigint
  /** What each pocket got back. */
  readonly usdMicroUsd: bigint
  readonly satsMsat: bigint
}

export const NOTHING_REFUNDED: Refunded = { microUsd: 0n, usdMicroUsd: 0n, satsMsat: 0n }

/** What the store reads under the wallet lock before a refund. */
export interface RefundSnapshot {
  readonly charge: Transaction
  readonly refunded: Refunded
  /** Each pocket plus what its held reservations will give back (the bound a credit is checked against). */
  readonly bounded: { readonly usdMicroUsd: bigint; readonly satsMsat: bigint }
}

export interface RefundPlan {
  /** The refund's USD value. */
  readonly amountMicroUsd: MicroUsd
  /** What goes back to each pocket. */
  readonly usdMicroUsd: MicroUsd
  readonly satsMsat: Msat
  /** The charge's refunded totals once this refund is applied. */
  readonly refundedAfter: Refunded
}

/** What may still be refunded of a charge. */
export const remainingOf = (charge: Transaction, refunded: Refunded): bigint => {
  const left = charge.amountMicroUsd - refunded.microUsd
  return left < 0n ? 0n : left
}

/**
 * What a charge keeps in each pocket when `netMicroUsd` of its amount is
 * left after refunds: usd first (never more than the charge took from usd),
 * the rest in sats at the charge's rate snapshot, rounded UP to the msat
 * (never more than the charge took from sats).
 */
export const keptByCharge = (
  charge: Pick<Transaction, "amountMicroUsd" | "usdMicroUsd" | "satsMsat" | "rateMicroUsdPerBtc">,
  netMicroUsd: bigint
): { readonly usdMicroUsd: bigint; readonly satsMsat: bigint } => {
  if (netMicroUsd >= charge.amountMicroUsd) return { usdMicroUsd: charge.usdMicroUsd, satsMsat: charge.satsMsat }
  const net = netMicroUsd < 0n ? 0n : netMicroUsd
  const usdMicroUsd = net < charge.usdMicroUsd ? net : charge.usdMicroUsd
  const rest = net - usdMicroUsd
  if (rest === 0n) return { usdMicroUsd, satsMsat: 0n }
  // A charge that took sats always carries its rate; without one, the sats are kept until the rest is refunded.
  const sats = charge.rateMicroUsdPerBtc === null
    ? charge.satsMsat
    : ceilDivide(rest * MSAT_PER_BTC, charge.rateMicroUsdPerBtc)
  return { usdMicroUsd, satsMsat: sats < charge.satsMsat ? sats : charge.satsMsat }
}

/**
 * Plans a refund of `requestedMicroUsd` (undefined: all that remains) of the
 * snapshot's charge. Refused: a transaction that is not a charge, an amount
 * above what remains (a full refund of a fully refunded charge included),
 * and a refund that would take a pocket above its maximum.
 */
export const planRefund = (
  snapshot: RefundSnapshot,
  requestedMicroUsd: bigint | undefined
): Result.Result<RefundPlan, RefundRefusal> => {
  const { charge, refunded } = snapshot
  if (charge.type !== "charge") return Result.fail(new NotRefundable({ type: charge.type }))
  const remaining = remainingOf(charge, refunded)
  const amount = requestedMicroUsd ?? remaining
  if (amount <= 0n || amount > remaining) {
    return Result.fail(
      new RefundExceedsCharge({
        chargedMicroUsd: charge.amountMicroUsd,
        refundedMicroUsd: refunded.microUsd,
        remainingMicroUsd: remaining,
        requestedMicroUsd: amount
      })
    )
  }
  const after = refunded.microUsd + amount
  const kept = keptByCharge(charge, charge.amountMicroUsd - after)
  const usdBack = charge.usdMicroUsd - kept.usdMicroUsd - refunded.usdMicroUsd
  const satsBack = charge.satsMsat - kept.satsMsat - refunded.satsMsat
  // Earlier refunds were planned by this same rule, so neither can be negative; a store that says otherwise is broken.
  if (usdBack < 0n || satsBack < 0n) throw new Error(`refund of ${charge.id}: refunded totals disagree with the rule`)
  if (!creditFits("usd", snapshot.bounded.usdMicroUsd, usdBack) || !creditFits("sats", snapshot.bounded.satsMsat, satsBack)) {
    return Result.fail(new RefundPocketFull())
  }
  return Result.succeed({
    amountMicroUsd: MicroUsd.make(amount),
    usdMicroUsd: MicroUsd.make(usdBack),
    satsMsat: Msat.make(satsBack),
    refundedAfter: {
      microUsd: after,
      usdMicroUsd: refunded.usdMicroUsd + usdBack,
      satsMsat: refunded.satsMsat + satsBack
    }
  })
}
