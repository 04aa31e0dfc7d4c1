import { Clock, Context, Effect, Layer } from "effect"

/**
 * Per-provider health, in process: recent outcomes and latencies, and a
 * circuit breaker. After `failureThreshold` consecutive failures the circuit
 * opens and the provider is skipped; after `cooldownMs` it half-opens and one
 * call is let through: success closes it, failure opens it again.
 */

export type CircuitState = "closed" | "open" | "half-open"

export interface HealthReport {
  readonly provider: string
  readonly circuit: CircuitState
  readonly calls: number
  readonly successRate: number | null
  readonly p50LatencyMs: number | null
  readonly p95LatencyMs: number | null
  readonly lastError: string | null
  readonly lastErrorAt: Date | null
}

export interface HealthOptions {
  readonly failureThreshold: number
  readonly cooldownMs: number
  /** Outcomes remembered per provider for the success rate and latencies. */
  readonly window: number
}

interface State {
  readonly outcomes: Array<{ readonly ok: boolean; readonly latencyMs: number }>
  consecutiveFailures: number
  openedAtMs: number | null
  trialInFlight: boolean
  lastError: string | null
  lastErrorAtMs: number | null
}

const percentile = (sorted: ReadonlyArray<number>, p: number): number | null =>
  sorted.length === 0 ? null : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!

export class ProviderHealth extends Context.Service<ProviderHealth, {
  /** Whether a call may go to this provider now (a half-open circuit admits one trial at a time). */
  readonly admit: (provider: string) => Effect.Effect<boolean>
  /** Whether the provider would be admitted, without taking the half-open trial. */
  readonly isHealthy: (provider: string) => Effect.Effect<boolean>
  /** A call that was admitted ended without an outcome (interrupted): frees a half-open trial. */
  readonly abandon: (provider: string) => Effect.Effect<void>
  readonly record: (provider: string, outcome: { readonly ok: boolean; readonly latencyMs: number; readonly error?: string }) => Effect.Effect<void>
  readonly report: (provider: string) => Effect.Effect<HealthReport>
}>()("spendgate/ProviderHealth") {
  static readonly layerWith = (options: Partial<HealthOptions> = {}) =>
    Layer.sync(ProviderHealth, () => {
      const { failureThreshold, cooldownMs, window } = { failureThreshold: 5, cooldownMs: 30_000, window: 100, ...options }
      const states = new Map<string, State>()
      const stateOf = (provider: string): State => {
        let state = states.get(provider)
        if (state === undefined) {
          state = { outcomes: [], consecutiveFailures: 0, openedAtMs: null, trialInFlight: false, lastError: null, lastErrorAtMs: null }
          states.set(provider, state)
        }
        return state
      }
      const circuit = (state: State, nowMs: number): CircuitState =>
        state.openedAtMs === null ? "closed" : nowMs - state.openedAtMs >= cooldownMs ? "half-open" : "open"

      return ProviderHealth.of({
        admit: (provider) =>
          Effect.map(Clock.currentTimeMillis, (nowMs) => {
            const state = stateOf(provider)
            switch (circuit(state, nowMs)) {
              case "closed":
                return true
              case "open":
                return false
              case "half-open":
                if (state.trialInFlight) return false
                state.trialInFlight = true
                return true
            }
          }),
        isHealthy: (provider) =>
          Effect.map(Clock.currentTimeMillis, (nowMs) => {
            const state = stateOf(provider)
            const now = circuit(state, nowMs)
            return now === "closed" || (now === "half-open" && !state.trialInFlight)
          }),
        abandon: (provider) => Effect.sync(() => void (stateOf(provider).trialInFlight = false)),
        record: (provider, outcome) =>
          Effect.map(Clock.currentTimeMillis, (nowMs) => {
            const state = stateOf(provider)
            state.outcomes.push({ ok: outcome.ok, latencyMs: outcome.latencyMs })
            if (state.outcomes.length > window) state.outcomes.shift()
            state.trialInFlight = false
            if (outcome.ok) {
              state.consecutiveFailures = 0
              state.openedAtMs = null
            } else {
              state.consecutiveFailures++
              state.lastError = outcome.error ?? "failed"
              state.lastErrorAtMs = nowMs
              if (state.openedAtMs !== null || state.consecutiveFailures >= failureThreshold) state.openedAtMs = nowMs
            }
          }),
        report: (provider) =>
          Effect.map(Clock.currentTimeMillis, (nowMs) => {
            const state = stateOf(provider)
            const latencies = state.outcomes.map((o) => o.latencyMs).sort((a, b) => a - b)
            const successes = state.outcomes.filter((o) => o.ok).length
            return {
              provider,
              circuit: circuit(state, nowMs),
              calls: state.outcomes.length,
              successRate: state.outcomes.length === 0 ? null : successes / state.outcomes.length,
              p50LatencyMs: percentile(latencies, 50),
              p95LatencyMs: percentile(latencies, 95),
              lastError: state.lastError,
              lastErrorAt: state.lastErrorAtMs === null ? null : new Date(state.lastErrorAtMs)
            }
          })
      })
    })

  static readonly layer = ProviderHealth.layerWith()
}

/**
 * Whether a provider can work at all here, as it found out at start-up (e.g.
 * the built-in sandbox needs bubblewrap). `ok: false`: it cannot, and is
 * never chosen. `degraded`: it works, but without a protection it would have
 * on a better equipped machine (the reason says which). Providers without a
 * check are taken as able.
 */
export type ProviderStatus =
  | { readonly ok: true; readonly degraded?: string | undefined }
  | { readonly ok: false; readonly reason: string }

/** Where a provider stands for a listing: usable, usable with less protection, or not usable here. */
export type ProviderAvailability =
  | { readonly status: "ok" }
  | { readonly status: "degraded"; readonly reason: string }
  | { readonly status: "unavailable"; readonly reason: string }

export const availabilityOf = (status: ProviderStatus | undefined): ProviderAvailability =>
  status === undefined
    ? { status: "ok" }
    : !status.ok
    ? { status: "unavailable", reason: status.reason }
    : status.degraded !== undefined
    ? { status: "degraded", reason: status.degraded }
    : { status: "ok" }

/**
 * What the operator's start-up probes found, per provider. The probes may
 * still be running when the server starts answering: `whenKnown` is what to
 * wait for before reading a provider's status (undefined when there is
 * nothing to wait for: no probe, or its verdict is in). Whatever states or
 * acts on availability (the capability listings, the choice of provider,
 * the operator's service health) waits, so none ever reports or acts on a
 * verdict not yet known.
 */
export class ProviderStatuses extends Context.Service<ProviderStatuses, {
  readonly of: (provider: string) => ProviderStatus | undefined
  readonly whenKnown?: ((provider: string) => Effect.Effect<void> | undefined) | undefined
}>()("spendgate/ProviderStatuses") {}

/** Waits for the start-up probes still running for these providers; undefined when none is. */
export const probesOf = (
  statuses: ProviderStatuses["Service"] | undefined,
  providers: ReadonlyArray<{ readonly name: string }>
): Effect.Effect<void> | undefined => {
  const whenKnown = statuses?.whenKnown
  if (whenKnown === undefined) return undefined
  let waits: Array<Effect.Effect<void>> | undefined
  for (const provider of providers) {
    const wait = whenKnown(provider.name)
    if (wait !== undefined) (waits ??= []).push(wait)
  }
  return waits === undefined ? undefined : Effect.all(waits, { discard: true })
}
