import { Clock, Context, Effect, Layer } from "effect"
import { Store } from "./ports/Store.ts"

export const VERSION = "0.1.0"

export interface HealthReport {
  readonly status: "ok" | "degraded"
  readonly version: string
  readonly storage: "ok" | "down"
  readonly uptimeSeconds: number
}

/** Liveness of the gateway: storage answers within `timeoutMs`, and how long it has run. */
export class Health extends Context.Service<Health, {
  readonly check: Effect.Effect<HealthReport>
}>()("spendgate/Health") {
  static readonly layer = (options: { readonly timeoutMs?: number } = {}) =>
    Layer.effect(
      Health,
      Effect.gen(function*() {
        const store = yield* Store
        const startedMs = yield* Clock.currentTimeMillis
        const timeoutMs = options.timeoutMs ?? 2_000
        const check = Effect.gen(function*() {
          const storageOk = yield* store.ping.pipe(
            Effect.timeout(timeoutMs),
            Effect.as(true),
            Effect.catchCause(() => Effect.succeed(false))
          )
          const uptimeSeconds = Math.floor(((yield* Clock.currentTimeMillis) - startedMs) / 1000)
          return {
            status: storageOk ? "ok" : "degraded",
            version: VERSION,
            storage: storageOk ? "ok" : "down",
            uptimeSeconds
          } satisfies HealthReport
        })
        return Health.of({ check })
      })
    )
}
