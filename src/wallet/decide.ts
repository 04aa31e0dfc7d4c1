import { Result } from "effect"
import { checkCapability } from "../agents/Access.ts"
import type { Agent, Policy } from "../domain/Agent.ts"
import type { Capability } from "../domain/Capability.ts"
import {
  AgentKilled,
  BudgetExceeded,
  CapabilityNotAllowed,
  InsufficientBalance,
  PerCallLimitExceeded,
  RateUnavailable,
  type SpendRefusal
} from "../domain/errors.ts"
import type { Reservation, Wallet } from "../domain/Ledger.ts"
import { type Msat, type MicroUsd, splitCharge, spendableMicroUsd, usdToMsatForCharge } from "../domain/Money.ts"
import type { BtcUsdRate } from "../domain/Money.ts"

/**
 * The spending rules as pure functions. Storage calls `planHold` inside the
 * transaction that holds the wallet lock, so the decision and the hold it
 * leads to are one atomic step.
 */

export interface ReserveSnapshot {
  readonly agent: Agent
  readonly policy: Policy
  /** Held plus settled spend of the agent for the reservation's UTC day. */
  readonly dailySpentMicroUsd: bigint
  readonly wallet: Wallet
}

export interface HoldPlan {
  readonly fromUsdMicro: bigint
  readonly fromSatsMsat: bigint
}

/** Checks that need no storage: the capability list and the per-call cap. */
export const checkPolicy = (
  policy: Policy,
  capability: Capability,
  quotedMicroUsd: bigint
): Result.Result<void, CapabilityNotAllowed | PerCallLimitExceeded> => {
  const allowed = checkCapability(policy, capability)
  if (Result.isFailure(allowed)) return Result.fail(allowed.failure)
  if (policy.maxPerCallMicroUsd !== null && quotedMicroUsd > policy.maxPerCallMicroUsd) {
    return Result.fail(
      new PerCallLimitExceeded({ perCallCapMicroUsd: policy.maxPerCallMicroUsd, quotedMicroUsd })
    )
  }
  return Result.void
}

/**
 * Decides whether `quotedMicroUsd` may be held for this call and from which
 * pockets: kill switch, allowed capabilities, per-call cap, daily cap
 * (`dailySpent + quote <= cap`), then balance (usd pocket first, the rest from
 * the sats pocket at the rate snapshot, rounded up to the msat).
 */
export const planHold = (
  snapshot: ReserveSnapshot,
  capability: Capability,
  quotedMicroUsd: bigint,
  rate: BtcUsdRate | null
): Result.Result<HoldPlan, SpendRefusal> => {
  if (snapshot.agent.killed) return Result.fail(new AgentKilled())
  const policy = checkPolicy(snapshot.policy, capability, quotedMicroUsd)
  if (Result.isFailure(policy)) return Result.fail(policy.failure)
  const cap = snapshot.policy.maxPerDayMicroUsd
  if (cap !== null && snapshot.dailySpentMicroUsd + quotedMicroUsd > cap) {
    return Result.fail(
      new BudgetExceeded({
        dailySpentMicroUsd: snapshot.dailySpentMicroUsd,
        dailyCapMicroUsd: cap,
        quotedMicroUsd
      })
    )
  }
  const { usdMicro, satsMsat } = snapshot.wallet
  if (usdMicro >= quotedMicroUsd) return Result.succeed({ fromUsdMicro: quotedMicroUsd, fromSatsMsat: 0n })
  if (rate === null) {
    return Result.fail(
      satsMsat > 0n
        ? new RateUnavailable()
        : new InsufficientBalance({ balanceMicroUsd: usdMicro, quotedMicroUsd })
    )
  }
  const split = splitCharge({
    priceMicroUsd: quotedMicroUsd as MicroUsd,
    usdPocketMicroUsd: usdMicro as MicroUsd,
    satsPocketMsat: satsMsat as Msat,
    rate
  })
  if (Result.isFailure(split)) {
    return Result.fail(
      new InsufficientBalance({
        balanceMicroUsd: spendableMicroUsd(usdMicro as MicroUsd, satsMsat as Msat, rate),
        quotedMicroUsd
      })
    )
  }
  return Result.succeed({ fromUsdMicro: split.success.fromUsdMicroUsd, fromSatsMsat: split.success.fromSatsMsat })
}

export interface SettlePlan {
  /** What the charge takes from each pocket. */
  readonly chargeUsdMicro: bigint
  readonly chargeSatsMsat: bigint
  /** What goes back to each pocket. */
  readonly refundUsdMicro: bigint
  readonly refundSatsMsat: bigint
  /** The charged price: the actual cost, never more than the quote. */
  readonly chargedMicroUsd: bigint
}

/**
 * Splits the actual cost over what the reservation held: usd first, the rest
 * in sats at the reservation's rate snapshot (rounded up to the msat, never
 * more than was held); everything not charged goes back.
 */
export const planSettle = (reservation: Reservation, actualMicroUsd: bigint): SettlePlan => {
  const charged = actualMicroUsd < 0n
    ? 0n
    : actualMicroUsd > reservation.quotedMicroUsd
    ? reservation.quotedMicroUsd
    : actualMicroUsd
  const chargeUsdMicro = charged < reservation.heldUsdMicro ? charged : reservation.heldUsdMicro
  const remainder = charged - chargeUsdMicro
  let chargeSatsMsat = 0n
  if (remainder > 0n && reservation.rateMicroUsdPerBtc !== null) {
    chargeSatsMsat = usdToMsatForCharge(remainder as MicroUsd, { microUsdPerBtc: reservation.rateMicroUsdPerBtc })
    if (chargeSatsMsat > reservation.heldSatsMsat) chargeSatsMsat = reservation.heldSatsMsat
  }
  return {
    chargeUsdMicro,
    chargeSatsMsat,
    refundUsdMicro: reservation.heldUsdMicro - chargeUsdMicro,
    refundSatsMsat: reservation.heldSatsMsat - chargeSatsMsat,
    chargedMicroUsd: charged
  }
}
