/**
 * The built-in sandbox's configuration: on unless BUILTIN_EXECUTE=off, the
 * `sandbox` price card (per second), EXECUTE_MAX_TIMEOUT_MS (100 to 60000,
 * default 30000); probed once at start-up, in the background, for what the
 * machine allows.
 */
import { Effect } from "effect"
import { envOr, invalid, nothing, one, type ProviderConfig, switchedOn, unitPriceOf } from "../kit/config.ts"
import * as Sandbox from "./sandbox.ts"

export const fromConfig: ProviderConfig = (cards) =>
  Effect.gen(function*() {
    if (!(yield* switchedOn("BUILTIN_EXECUTE"))) return nothing
    const unitPrice = yield* unitPriceOf(cards, "sandbox", "execute", "second")
    const maxTimeoutMs = Number(yield* envOr("EXECUTE_MAX_TIMEOUT_MS", "30000"))
    if (!Number.isInteger(maxTimeoutMs) || maxTimeoutMs < 100 || maxTimeoutMs > 60_000) {
      return yield* invalid("EXECUTE_MAX_TIMEOUT_MS must be a whole number of milliseconds from 100 to 60000")
    }
    const options = { unitPrice, maxTimeoutMs }
    // One probe for the provider and the health endpoint: whichever asks first runs it, the other
    // joins it (each probe starts a sandbox per language, and the second ran beside the first).
    // The configuration runs it, and logs its verdict, once the server listens
    // (adapters/providersConfig.ts); the provider is built without running it, and its calls, the
    // listings and the choice of provider wait for the verdict.
    const probed = yield* Effect.cached(Sandbox.probe(options))
    const status = probed.pipe(
      Effect.tap((found) => Sandbox.logVerdict("sandbox", found)),
      Effect.map((found) =>
        found.ok
          ? { ok: true, ...(found.degraded === undefined ? {} : { degraded: found.degraded }) } as const
          : { ok: false, reason: found.reason } as const
      )
    )
    return one("sandbox", "execute", Sandbox.makeProbing(options, probed), status)
  })
