import { Layer } from "effect"
import { Agents } from "./agents/Agents.ts"
import { Policies } from "./agents/Policies.ts"
import { Health } from "./Health.ts"
import { Idempotency } from "./idempotency/Idempotency.ts"
import type { IdempotencyStore } from "./ports/IdempotencyStore.ts"
import type { RateSource } from "./ports/RateSource.ts"
import type { Store } from "./ports/Store.ts"
import { Spend } from "./wallet/Spend.ts"
import { Wallets } from "./wallet/Wallets.ts"

/**
 * The front door for embedders: every core service, given a Store and a
 * RateSource layer.
 *
 * ```ts
 * const gateway = Gateway.layer.pipe(Layer.provide([MemoryStore.layer, RateSource.none]))
 * ```
 *
 * `Spend.sweeper()` adds the periodic recovery sweep of expired holds; the
 * server runs it, an embedder decides.
 */
export type Services = Agents | Policies | Health | Spend | Wallets | Idempotency

export const layer: Layer.Layer<Services, never, Store | IdempotencyStore | RateSource> = Layer.mergeAll(
  Agents.layer,
  Policies.layer,
  Health.layer(),
  Spend.layer,
  Wallets.layer,
  Idempotency.layer()
)
