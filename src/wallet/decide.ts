import { Result } from "effect"
import { checkCapability } from "../agents/Access.ts"
import type { Agent, Policy } from "../domain/Agent.ts"
import type { Capability } from "../domain/Capability.ts"
import {
  AgentKilled,
  BudgetExceeded,
  CapabilityNotAllowed,
  InsufficientBalance,
  MonthlyBudgetExceeded,
  CallRateExceeded,
  VelocityExceeded,
  PerCallLimitExceeded,
  RateUnavailable,
  type SpendRefusal
} from "../domain/errors.ts"
import type { Reservation, Wallet } from "../domain/Ledger.ts"
import { Msat, MicroUsd, msatToMicroUsdValue, splitCharge, spendableMicroUsd, usdToMsatForCharge } from "../domain/Money.ts"
import type { BtcUsdRate } from "../domain/Money.ts"

/**
 * The spending rules as pure functions. Storage calls `planHold` inside the
 * transaction that holds the wallet lock, so the decision and the hold it
 * leads to are one atomic step.
 */

const NO_MSAT = Msat.make(0n)

/** The actual cost as charged: never below zero, never above the quote. */
const clampToQuote = (actualMicroUsd: bigint, quotedMicroUsd: MicroUsd): MicroUsd =>
  actualMicroUsd < 0n ? MicroUsd.make(0n) : actualMicroUsd > quotedMicroUsd ? quotedMicroUsd : MicroUsd.make(actualMicroUsd)

/**
 * An agent's reservations created in (now - 1 h, now] and (now - 60 s, now]:
 * what the velocity limits of its policy count.
 */
export interface RecentActivity {
  /** Held quotes plus settled charges of the last 60 minutes (released holds count 0). */
  readonly spentLastHourMicroUsd: bigint
  /** Calls (holds, whatever became of them) started in the last 60 seconds. */
  readonly callsLastMinute: number
  /** When the oldest of those calls started (null when there is none). */
  readonly oldestCallLastMinuteAt: Date | null
}

export interface ReserveSnapshot {
  readonly agent: Agent
  readonly policy: Policy
  /** Held plus settled spend of the agent for the reservation's UTC day. */
  readonly dailySpentMicroUsd: bigint
  /** Held plus settled spend of the agent for the calendar month (UTC) of the reservation's day. */
  readonly monthlySpentMicroUsd: bigint
  /** The agent's calls of the last hour and minute before `now`. */
  readonly recent: RecentActivity
  /** The time of the reservation. */
  readonly now: Date
  readonly wallet: Wallet
}

export interface HoldPlan {
  readonly fromUsdMicroUsd: MicroUsd
  readonly fromSatsMsat: Msat
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

const MINUTE_MS = 60_000

/**
 * Whether a hold's decision reads the agent's recent activity at all: only a
 * velocity limit does (`checkVelocity`), so a store need not look up the
 * last hour's reservations for a policy without one.
 */
export const usesRecentActivity = (policy: Pick<Policy, "maxPerHourMicroUsd" | "maxCallsPerMinute">): boolean =>
  policy.maxPerHourMicroUsd !== null || policy.maxCallsPerMinute !== null

/**
 * The velocity limits: calls started in the last 60 seconds
 * (`callsLastMinute + 1 <= maxCallsPerMinute`) and the spend of the last 60
 * minutes (`spentLastHour + quote <= maxPerHour`). With `autoKill`, a
 * refusal kills an agent of role `agent` (never an owner, so an account can
 * always be administered).
 */
export const checkVelocity = (
  snapshot: Pick<ReserveSnapshot, "agent" | "policy" | "recent" | "now">,
  quotedMicroUsd: bigint
): VelocityExceeded | CallRateExceeded | undefined => {
  const { policy, recent } = snapshot
  const killsAgent = policy.autoKill && snapshot.agent.role === "agent"
  if (policy.maxCallsPerMinute !== null && recent.callsLastMinute + 1 > policy.maxCallsPerMinute) {
    const oldest = recent.oldestCallLastMinuteAt ?? snapshot.now
    const resetAt = new Date(Math.max(oldest.getTime() + MINUTE_MS, snapshot.now.getTime() + 1))
    return new CallRateExceeded({
      limit: policy.maxCallsPerMinute,
      resetAt,
      retryAfterSeconds: Math.max(1, Math.ceil((resetAt.getTime() - snapshot.now.getTime()) / 1000)),
      killsAgent
    })
  }
  const hourly = policy.maxPerHourMicroUsd
  if (hourly !== null && recent.spentLastHourMicroUsd + quotedMicroUsd > hourly) {
    return new VelocityExceeded({
      spentLastHourMicroUsd: recent.spentLastHourMicroUsd,
      hourlyCapMicroUsd: hourly,
      quotedMicroUsd,
      killsAgent
    })
  }
  return undefined
}

/** Whether a refusal of `planHold` kills the agent (velocity with `autoKill`). */
export const refusalKillsAgent = (refusal: SpendRefusal): boolean =>
  (refusal._tag === "VelocityExceeded" || refusal._tag === "CallRateExceeded") && refusal.killsAgent

/**
 * The daily and monthly caps, both as `spent + amount <= cap`: the daily one
 * first, so an amount over both is named by the daily cap.
 */
const checkPeriodCaps = (
  policy: Policy,
  spent: { readonly dailySpentMicroUsd: bigint; readonly monthlySpentMicroUsd: bigint },
  amountMicroUsd: bigint
): BudgetExceeded | MonthlyBudgetExceeded | undefined => {
  const daily = policy.maxPerDayMicroUsd
  if (daily !== null && spent.dailySpentMicroUsd + amountMicroUsd > daily) {
    return new BudgetExceeded({
      dailySpentMicroUsd: spent.dailySpentMicroUsd,
      dailyCapMicroUsd: daily,
      quotedMicroUsd: amountMicroUsd
    })
  }
  const monthly = policy.maxPerMonthMicroUsd
  if (monthly !== null && spent.monthlySpentMicroUsd + amountMicroUsd > monthly) {
    return new MonthlyBudgetExceeded({
      monthlySpentMicroUsd: spent.monthlySpentMicroUsd,
      monthlyCapMicroUsd: monthly,
      quotedMicroUsd: amountMicroUsd
    })
  }
  return undefined
}

/**
 * Decides whether `quotedMicroUsd` may be held for this call and from which
 * pockets: kill switch (a deleted agent is refused like a killed one),
 * allowed capabilities, per-call cap, velocity (calls per minute, then spend
 * of the last hour), daily cap (`dailySpent + quote <= cap`),
 * monthly cap (`monthlySpent + quote <= cap`), then balance (usd pocket first, the rest from
 * the sats pocket at the rate snapshot, rounded up to the msat).
 */
export const planHold = (
  snapshot: ReserveSnapshot,
  capability: Capability,
  quotedMicroUsd: MicroUsd,
  rate: BtcUsdRate | null
): Result.Result<HoldPlan, SpendRefusal> => {
  if (snapshot.agent.killed || snapshot.agent.deletedAt !== null) return Result.fail(new AgentKilled())
  const policy = checkPolicy(snapshot.policy, capability, quotedMicroUsd)
  if (Result.isFailure(policy)) return Result.fail(policy.failure)
  const tooFast = checkVelocity(snapshot, quotedMicroUsd)
  if (tooFast !== undefined) return Result.fail(tooFast)
  const overCap = checkPeriodCaps(snapshot.policy, snapshot, quotedMicroUsd)
  if (overCap !== undefined) return Result.fail(overCap)
  const { usdMicroUsd, satsMsat } = snapshot.wallet
  if (usdMicroUsd >= quotedMicroUsd) return Result.succeed({ fromUsdMicroUsd: quotedMicroUsd, fromSatsMsat: NO_MSAT })
  if (rate === null) {
    return Result.fail(
      satsMsat > 0n
        ? new RateUnavailable()
        : new InsufficientBalance({ balanceMicroUsd: usdMicroUsd, quotedMicroUsd })
    )
  }
  const split = splitCharge({
    priceMicroUsd: quotedMicroUsd,
    usdPocketMicroUsd: usdMicroUsd,
    satsPocketMsat: satsMsat,
    rate
  })
  if (Result.isFailure(split)) {
    return Result.fail(
      new InsufficientBalance({
        balanceMicroUsd: spendableMicroUsd(usdMicroUsd, satsMsat, rate),
        quotedMicroUsd
      })
    )
  }
  return Result.succeed({ fromUsdMicroUsd: split.success.fromUsdMicroUsd, fromSatsMsat: split.success.fromSatsMsat })
}

export interface SettlePlan {
  /** What the charge takes from each pocket. */
  readonly chargeUsdMicroUsd: MicroUsd
  readonly chargeSatsMsat: Msat
  /** What goes back to each pocket. */
  readonly refundUsdMicroUsd: MicroUsd
  readonly refundSatsMsat: Msat
  /** The charged price: the actual cost, never more than the quote. */
  readonly chargedMicroUsd: MicroUsd
}

/**
 * Splits the actual cost over what the reservation held: usd first, the rest
 * in sats at the reservation's rate snapshot (rounded up to the msat, never
 * more than was held); everything not charged goes back.
 */
export const planSettle = (reservation: Reservation, actualMicroUsd: bigint): SettlePlan => {
  const charged = clampToQuote(actualMicroUsd, reservation.quotedMicroUsd)
  const chargeUsdMicroUsd = charged < reservation.heldUsdMicroUsd ? charged : reservation.heldUsdMicroUsd
  const remainder = MicroUsd.make(charged - chargeUsdMicroUsd)
  let chargeSatsMsat = NO_MSAT
  if (remainder > 0n && reservation.rateMicroUsdPerBtc !== null) {
    chargeSatsMsat = usdToMsatForCharge(remainder, { microUsdPerBtc: reservation.rateMicroUsdPerBtc })
    if (chargeSatsMsat > reservation.heldSatsMsat) chargeSatsMsat = reservation.heldSatsMsat
  }
  return {
    chargeUsdMicroUsd,
    chargeSatsMsat,
    refundUsdMicroUsd: MicroUsd.make(reservation.heldUsdMicroUsd - chargeUsdMicroUsd),
    refundSatsMsat: Msat.make(reservation.heldSatsMsat - chargeSatsMsat),
    chargedMicroUsd: charged
  }
}

/** What a late settle reads under the wallet lock: the wallet, policy and day's spend as they are now. */
export interface LateSettleSnapshot {
  readonly policy: Policy
  /** Held plus settled spend of the agent for the reservation's UTC day, now (the sweep already took the quote off). */
  readonly dailySpentMicroUsd: bigint
  /** The same for the calendar month (UTC) of the reservation's day. */
  readonly monthlySpentMicroUsd: bigint
  readonly wallet: Wallet
}

export type LateSettlePlan =
  /** A new debit: the pockets pay the charge now (usd first, the rest in sats at the reservation's rate). */
  | {
    readonly _tag: "Charge"
    readonly chargeUsdMicroUsd: MicroUsd
    readonly chargeSatsMsat: Msat
    readonly chargedMicroUsd: MicroUsd
  }
  /** Nothing can be taken: the amount is recorded as owed (audit, reservation) and the caller refused. */
  | {
    readonly _tag: "Unpaid"
    readonly owedMicroUsd: MicroUsd
    readonly refusal: BudgetExceeded | MonthlyBudgetExceeded | InsufficientBalance
  }

/**
 * Settling a call whose hold the recovery sweep already returned (the call
 * outlived `expiresAt`): the money it held is back in the wallet, so the
 * charge is taken again, as a new debit, when the wallet and the daily cap
 * allow it, all or nothing:
 *
 * - the charge is the actual cost clamped to the quote, as in `planSettle`;
 * - the daily and monthly caps are checked against the spend as it is now
 *   (`dailySpent + charge <= cap`, `monthlySpent + charge <= cap`); the per-call cap and the allowed
 *   capabilities were checked on the quote when the hold was made, and the
 *   kill switch stops new calls, not the charge of one already made;
 * - the usd pocket pays first, the rest comes from the sats pocket at the
 *   reservation's rate snapshot, rounded up to the msat.
 *
 * Otherwise the call is `Unpaid`: the owed amount is recorded on the
 * reservation and in the audit log for the operator, nothing moves, and the
 * caller gets the refusal instead of the result. A slow call is never free
 * and never silently so.
 */
export const planLateSettle = (
  reservation: Reservation,
  actualMicroUsd: bigint,
  snapshot: LateSettleSnapshot
): LateSettlePlan => {
  const charged = clampToQuote(actualMicroUsd, reservation.quotedMicroUsd)
  const overCap = charged > 0n ? checkPeriodCaps(snapshot.policy, snapshot, charged) : undefined
  if (overCap !== undefined) return { _tag: "Unpaid", owedMicroUsd: charged, refusal: overCap }
  const { usdMicroUsd, satsMsat } = snapshot.wallet
  const chargeUsdMicroUsd = charged < usdMicroUsd ? charged : usdMicroUsd
  const remainder = MicroUsd.make(charged - chargeUsdMicroUsd)
  if (remainder === 0n) return { _tag: "Charge", chargeUsdMicroUsd, chargeSatsMsat: NO_MSAT, chargedMicroUsd: charged }
  const rate = reservation.rateMicroUsdPerBtc
  const chargeSatsMsat = rate === null ? null : usdToMsatForCharge(remainder, { microUsdPerBtc: rate })
  if (chargeSatsMsat === null || chargeSatsMsat > satsMsat) {
    return {
      _tag: "Unpaid",
      owedMicroUsd: charged,
      refusal: new InsufficientBalance({
        balanceMicroUsd: usdMicroUsd + (rate === null ? 0n : msatToMicroUsdValue(satsMsat, { microUsdPerBtc: rate })),
        quotedMicroUsd: charged
      })
    }
  }
  return { _tag: "Charge", chargeUsdMicroUsd, chargeSatsMsat, chargedMicroUsd: charged }
}
