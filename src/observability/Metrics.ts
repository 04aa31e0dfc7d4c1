import { type Context, Effect, Metric } from "effect"

/**
 * The spend pipeline's metrics, counted in one place (src/wallet/Spend.ts)
 * whatever route or tool made the call. They live in the process's metric
 * registry and are served in Prometheus text at GET /metrics
 * (adapters/http/observability.ts). Counts are per process: a fleet sums them.
 */

const chargesOptions = {
  description: "Calls charged (settled), by capability and provider",
  incremental: true
} as const

const chargedMicroUsdOptions = {
  description: "Amount charged in micro-dollars (1e-6 USD), by capability and provider",
  incremental: true
} as const

const spendRefusalsOptions = {
  description: "Calls refused by the spend pipeline (budget, limits, balance, kill switch, quotes), by error code",
  incremental: true
} as const

/** Settled charges, by capability and provider. */
export const chargesTotal = Metric.counter("spendgate_charges_total", chargesOptions)

/** What the settled charges came to, in micro-dollars, by capability and provider. */
export const chargedMicroUsdTotal = Metric.counter("spendgate_charged_micro_usd_total", chargedMicroUsdOptions)

/** Spend refused by the pipeline (budget, per-call limit, balance, kill switch, quotes), by error code. */
export const spendRefusalsTotal = Metric.counter("spendgate_spend_refusals_total", spendRefusalsOptions)

/** Holds taken and not yet settled or released by this process. */
export const holdsInFlight = Metric.gauge("spendgate_holds_in_flight", {
  description: "Holds taken by this process whose call has not yet been settled or released"
})

/** Requests refused by the request rate limits, by scope (agent, account, signup). */
export const rateLimitedTotal = Metric.counter("spendgate_rate_limited_total", {
  description: "Requests refused by a rate limit (429 RATE_LIMITED), by scope",
  incremental: true
})

/**
 * A metric per label set, made by `make` the first time the set (named by
 * `key`) is seen, and kept: the same series as `Metric.withAttributes(metric,
 * labels)`, whose every update merges the labels and rebuilds the series key
 * (a sort and a JSON text), and whose metric caches one key only, so label
 * sets that alternate rebuild it each time. At most `max` sets are kept; past
 * that a set's metric is made at each use (the same series, only slower).
 */
export const seriesCache = <M>(make: (attributes: Record<string, string>) => M, max = 1000) => {
  const made = new Map<string, M>()
  return (key: string, attributes: () => Record<string, string>): M => {
    let metric = made.get(key)
    if (metric === undefined) {
      metric = make(attributes())
      if (made.size < max) made.set(key, metric)
    }
    return metric
  }
}

const chargesSeries = seriesCache((attributes) =>
  Metric.counter("spendgate_charges_total", { ...chargesOptions, attributes })
)
const chargedMicroUsdSeries = seriesCache((attributes) =>
  Metric.counter("spendgate_charged_micro_usd_total", { ...chargedMicroUsdOptions, attributes })
)
const spendRefusalsSeries = seriesCache((attributes) =>
  Metric.counter("spendgate_spend_refusals_total", { ...spendRefusalsOptions, attributes })
)

/**
 * Updates made in one fiber step: `Metric.update` and `Metric.modify` are a
 * step (and an effect) each, and a metered call makes several.
 */
export const metricStep = (apply: (context: Context.Context<never>) => void): Effect.Effect<void> =>
  Effect.contextWith((context: Context.Context<never>) => {
    apply(context)
    return Effect.void
  })

const chargeUpdates = (capability: string, provider: string, microUsd: bigint, context: Context.Context<never>) => {
  const key = `${capability}\u0000${provider}`
  const attributes = () => ({ capability, provider })
  chargesSeries(key, attributes).updateUnsafe(1, context)
  chargedMicroUsdSeries(key, attributes).updateUnsafe(Number(microUsd), context)
}

export const countCharge = (capability: string, provider: string, microUsd: bigint): Effect.Effect<void> =>
  metricStep((context) => chargeUpdates(capability, provider, microUsd, context))

/** A settled call's metrics, in one step: its hold ended (`holdEnded`) and its charge is counted (`countCharge`). */
export const countSettledCharge = (capability: string, provider: string, microUsd: bigint): Effect.Effect<void> =>
  metricStep((context) => {
    holdsInFlight.modifyUnsafe(-1, context)
    chargeUpdates(capability, provider, microUsd, context)
  })

export const countSpendRefusal = (code: string): Effect.Effect<void> =>
  Metric.update(spendRefusalsSeries(code, () => ({ code })), 1)

export const countRateLimited = (scope: string): Effect.Effect<void> =>
  Metric.update(Metric.withAttributes(rateLimitedTotal, { scope }), 1)

export const holdTaken: Effect.Effect<void> = metricStep((context) => holdsInFlight.modifyUnsafe(1, context))
export const holdEnded: Effect.Effect<void> = metricStep((context) => holdsInFlight.modifyUnsafe(-1, context))
