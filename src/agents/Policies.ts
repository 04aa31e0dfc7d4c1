import { Clock, Context, Effect, Layer, Option } from "effect"
import type { Policy, Principal } from "../domain/Agent.ts"
import { type Capability, capabilityNames } from "../domain/Capability.ts"
import { type Forbidden, NotFound } from "../domain/errors.ts"
import type { AgentId } from "../domain/ids.ts"
import { utcDay } from "../domain/Ledger.ts"
import { type PolicyPatch, type RecentActivity, Store } from "../ports/Store.ts"
import { requireOwner, requireSelfOrOwner } from "./Access.ts"

export interface PolicyView extends Policy {
  /** Spend of the current UTC day, in micro-dollars, held reservations included. */
  readonly dailySpentMicroUsd: bigint
  /** Spend of the current calendar month (UTC), held reservations included. */
  readonly monthlySpentMicroUsd: bigint
  /** Spend of the last 60 minutes and calls of the last 60 seconds (what the velocity limits count). */
  readonly recent: RecentActivity
}

/**
 * Canonical form of a policy change: a cap of 0 and a cap of null both mean
 * "no limit" and are stored as null; an empty list means "all capabilities";
 * capability lists are de-duplicated and kept in catalogue order.
 */
export const normalizePatch = (patch: PolicyPatch): PolicyPatch => {
  const cap = (value: bigint | null | undefined) => (value === undefined ? undefined : value === 0n ? null : value)
  const out: {
    maxPerCallMicroUsd?: bigint | null
    maxPerDayMicroUsd?: bigint | null
    maxPerMonthMicroUsd?: bigint | null
    maxPerHourMicroUsd?: bigint | null
    maxCallsPerMinute?: number | null
    autoKill?: boolean
    allowedCapabilities?: ReadonlyArray<Capability>
  } = {}
  const perCall = cap(patch.maxPerCallMicroUsd)
  if (perCall !== undefined) out.maxPerCallMicroUsd = perCall
  const perDay = cap(patch.maxPerDayMicroUsd)
  if (perDay !== undefined) out.maxPerDayMicroUsd = perDay
  const perMonth = cap(patch.maxPerMonthMicroUsd)
  if (perMonth !== undefined) out.maxPerMonthMicroUsd = perMonth
  const perHour = cap(patch.maxPerHourMicroUsd)
  if (perHour !== undefined) out.maxPerHourMicroUsd = perHour
  if (patch.maxCallsPerMinute !== undefined) {
    out.maxCallsPerMinute = patch.maxCallsPerMinute === 0 ? null : patch.maxCallsPerMinute
  }
  if (patch.autoKill !== undefined) out.autoKill = patch.autoKill
  if (patch.allowedCapabilities !== undefined) {
    const wanted = new Set(patch.allowedCapabilities)
    out.allowedCapabilities = capabilityNames.filter((name) => wanted.has(name))
  }
  return out
}

/**
 * PUT semantics: the original fields (per-call and daily caps, capability
 * list) not given are reset to "no limit" / "all" (the HTTP contract
 * requires them, so this happens only for core callers). The fields added
 * later (the monthly cap, the velocity limits and autoKill) are kept when not given, so a client written
 * before they existed never lifts one by replacing the policy; `null`
 * lifts them explicitly.
 */
export const replacementPatch = (patch: PolicyPatch): PolicyPatch => ({
  maxPerCallMicroUsd: patch.maxPerCallMicroUsd ?? null,
  maxPerDayMicroUsd: patch.maxPerDayMicroUsd ?? null,
  ...(patch.maxPerMonthMicroUsd !== undefined ? { maxPerMonthMicroUsd: patch.maxPerMonthMicroUsd } : {}),
  ...(patch.maxPerHourMicroUsd !== undefined ? { maxPerHourMicroUsd: patch.maxPerHourMicroUsd } : {}),
  ...(patch.maxCallsPerMinute !== undefined ? { maxCallsPerMinute: patch.maxCallsPerMinute } : {}),
  ...(patch.autoKill !== undefined ? { autoKill: patch.autoKill } : {}),
  allowedCapabilities: patch.allowedCapabilities ?? []
})

export class Policies extends Context.Service<Policies, {
  readonly get: (principal: Principal, agentId: AgentId) => Effect.Effect<PolicyView, Forbidden | NotFound>
  /** Replaces the policy: omitted fields are reset. Owner only. */
  readonly replace: (
    principal: Principal,
    agentId: AgentId,
    policy: PolicyPatch
  ) => Effect.Effect<PolicyView, Forbidden | NotFound>
  /** Changes only the given fields. Owner only. */
  readonly patch: (
    principal: Principal,
    agentId: AgentId,
    patch: PolicyPatch
  ) => Effect.Effect<PolicyView, Forbidden | NotFound>
}>()("spendgate/Policies") {
  static readonly layer = Layer.effect(
    Policies,
    Effect.gen(function*() {
      const store = yield* Store

      const view = (principal: Principal, agentId: AgentId, policy: Policy): Effect.Effect<PolicyView> =>
        Effect.gen(function*() {
          const now = new Date(yield* Clock.currentTimeMillis)
          const spend = yield* store.agentSpend(principal.agent.accountId, agentId, utcDay(now))
          const recent = yield* store.recentActivity(principal.agent.accountId, agentId, now)
          return {
            ...policy,
            dailySpentMicroUsd: spend.dailySpentMicroUsd,
            monthlySpentMicroUsd: spend.monthlySpentMicroUsd,
            recent
          }
        })

      const get = Effect.fn("Policies.get")(function*(principal: Principal, agentId: AgentId) {
        const found = yield* store.getAgent(principal.agent.accountId, agentId)
        if (Option.isNone(found)) return yield* new NotFound({ resource: "Agent" })
        yield* requireSelfOrOwner(principal, agentId, "read the policy of")
        return yield* view(principal, agentId, found.value.policy)
      })

      const change = (principal: Principal, agentId: AgentId, patch: PolicyPatch) =>
        Effect.gen(function*() {
          const found = yield* store.getAgent(principal.agent.accountId, agentId)
          if (Option.isNone(found)) return yield* new NotFound({ resource: "Agent" })
          yield* requireOwner(principal, "change policies")
          const updated = yield* store.updatePolicy(principal.agent.accountId, agentId, normalizePatch(patch))
          if (Option.isNone(updated)) return yield* new NotFound({ resource: "Agent" })
          return yield* view(principal, agentId, updated.value)
        })

      const replace = Effect.fn("Policies.replace")((principal: Principal, agentId: AgentId, policy: PolicyPatch) =>
        change(principal, agentId, replacementPatch(policy))
      )
      const patch = Effect.fn("Policies.patch")((principal: Principal, agentId: AgentId, patch: PolicyPatch) =>
        change(principal, agentId, patch)
      )

      return Policies.of({ get, replace, patch })
    })
  )
}
