import { Effect, Metric } from "effect"

/**
 * The spend pipeline's metrics, counted in one place (src/wallet/Spend.ts)
 * whatever route or tool made the call. They live in the process's metric
 * registry and are served in Prometheus text at GET /metrics
 * (adapters/http/observability.ts). Counts are per process: a fleet sums them.
 */

/** Settled charges, by capability and provider. */
export const chargesTotal = Metric.counter("spendgate_charges_total", {
  description: "Calls charged (settled), by capability and provider",
  incremental: true
})

/** What the settled charges came to, in micro-dollars, by capability and provider. */
export const chargedMicroUsdTotal = Metric.counter("spendgate_charged_micro_usd_total", {
  description: "Amount charged in micro-dollars (1e-6 USD), by capability and provider",
  incremental: true
})

/** Spend refused by the pipeline (budget, per-call limit, balance, kill switch, quotes), by error code. */
export const spendRefusalsTotal = Metric.counter("spendgate_spend_refusals_total", {
  description: "Calls refused by the spend pipeline (budget, limits, balance, kill switch, quotes), by error code",
  incremental: true
})

/** Holds taken and not yet settled or released by this process. */
export const holdsInFlight = Metric.gauge("spendgate_holds_in_flight", {
  description: "Holds taken by this process whose call has not yet been settled or released"
})

/** Requests refused by the request rate limits, by scope (agent, account, signup). */
export const rateLimitedTotal = Metric.counter("spendgate_rate_limited_total", {
  description: "Requests refused by a rate limit (429 RATE_LIMITED), by scope",
  incremental: true
})

export const countCharge = (capability: string, provider: string, microUsd: bigint): Effect.Effect<void> => {
  const attributes = { capability, provider }
  return Effect.andThen(
    Metric.update(Metric.withAttributes(chargesTotal, attributes), 1),
    Metric.update(Metric.withAttributes(chargedMicroUsdTotal, attributes), Number(microUsd))
  )
}

export const countSpendRefusal = (code: string): Effect.Effect<void> =>
  Metric.update(Metric.withAttributes(spendRefusalsTotal, { code }), 1)

export const countRateLimited = (scope: string): Effect.Effect<void> =>
  Metric.update(Metric.withAttributes(rateLimitedTotal, { scope }), 1)

export const holdTaken: Effect.Effect<void> = Metric.modify(holdsInFlight, 1)
export const holdEnded: Effect.Effect<void> = Metric.modify(holdsInFlight, -1)
