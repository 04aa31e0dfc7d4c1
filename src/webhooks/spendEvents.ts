import { Result } from "effect"
import type { SpendRefusal } from "../domain/errors.ts"
import { Msat, MicroUsd, microUsdToCents, spendableMicroUsd } from "../domain/Money.ts"
import type { ReserveInput } from "../ports/Store.ts"
import type { HoldPlan, ReserveSnapshot } from "../wallet/decide.ts"
import { makeEvent, type OutboxEvent } from "./events.ts"

/**
 * The events of a reservation, decided from the snapshot the store read
 * under the wallet lock and the rule's answer, and written by the store in
 * the same transaction:
 *
 * - `agent.budget_threshold`: the hold takes the day's spend (held and
 *   settled) across `BUDGET_THRESHOLD_PERCENT` of the daily cap; once per
 *   agent and day.
 * - `agent.daily_cap_reached`: the hold takes the day's spend to the cap, or
 *   a call is refused by the daily cap; once per agent and day.
 * - `spend.refused`: any refusal; at most one per agent and minute (a
 *   refused agent retrying in a loop does not flood the endpoints).
 * - `wallet.low_balance`: the hold takes the wallet's value (the usd pocket
 *   plus the sats pocket at the call's rate) from at or above the owner's
 *   threshold to below it.
 *
 * Once-per-period events carry a dedupe key; the outbox keeps the first.
 */

export const BUDGET_THRESHOLD_PERCENT = 80

const valueOf = (usd: bigint, sats: bigint, input: Pick<ReserveInput, "rate">): bigint =>
  input.rate === null ? usd : spendableMicroUsd(MicroUsd.make(usd), Msat.make(sats), input.rate.rate)

export const reserveEvents = (
  input: Pick<ReserveInput, "accountId" | "agentId" | "capability" | "quotedMicroUsd" | "day" | "now" | "rate">,
  snapshot: ReserveSnapshot,
  decision: Result.Result<HoldPlan, SpendRefusal>,
  lowBalanceThresholdMicroUsd: bigint | null
): ReadonlyArray<OutboxEvent> => {
  const events: Array<OutboxEvent> = []
  const { accountId, agentId, day, now } = input
  const cap = snapshot.policy.maxPerDayMicroUsd
  const capReached = (spent: bigint) =>
    events.push({
      ...makeEvent(accountId, "agent.daily_cap_reached", now, {
        agentId,
        dailySpentUsdCents: microUsdToCents(spent),
        dailyCapUsdCents: microUsdToCents(cap ?? 0n),
        day
      }),
      dedupeKey: `agent.daily_cap_reached:${agentId}:${day}`
    })

  if (Result.isFailure(decision)) {
    const refusal = decision.failure
    const minute = Math.floor(now.getTime() / 60_000)
    events.push({
      ...makeEvent(accountId, "spend.refused", now, {
        agentId,
        code: refusal.code,
        capability: input.capability,
        quotedUsdCents: microUsdToCents(input.quotedMicroUsd)
      }),
      dedupeKey: `spend.refused:${agentId}:${minute}`
    })
    if (refusal._tag === "BudgetExceeded") capReached(snapshot.dailySpentMicroUsd)
    return events
  }

  const plan = decision.success
  if (cap !== null && cap > 0n) {
    const before = snapshot.dailySpentMicroUsd
    const after = before + input.quotedMicroUsd
    const threshold = (cap * BigInt(BUDGET_THRESHOLD_PERCENT)) / 100n
    if (before < threshold && after >= threshold) {
      events.push({
        ...makeEvent(accountId, "agent.budget_threshold", now, {
          agentId,
          dailySpentUsdCents: microUsdToCents(after),
          dailyCapUsdCents: microUsdToCents(cap),
          thresholdPercent: BUDGET_THRESHOLD_PERCENT,
          day
        }),
        dedupeKey: `agent.budget_threshold:${agentId}:${day}`
      })
    }
    if (after >= cap) capReached(after)
  }
  if (lowBalanceThresholdMicroUsd !== null) {
    const wallet = snapshot.wallet
    const before = valueOf(wallet.usdMicroUsd, wallet.satsMsat, input)
    const after = valueOf(wallet.usdMicroUsd - plan.fromUsdMicroUsd, wallet.satsMsat - plan.fromSatsMsat, input)
    if (before >= lowBalanceThresholdMicroUsd && after < lowBalanceThresholdMicroUsd) {
      events.push(makeEvent(accountId, "wallet.low_balance", now, {
        balanceUsdCents: microUsdToCents(after),
        thresholdUsdCents: microUsdToCents(lowBalanceThresholdMicroUsd)
      }))
    }
  }
  return events
}
