import { Layer } from "effect"
import { Agents } from "./agents/Agents.ts"
import { Policies } from "./agents/Policies.ts"
import { Health } from "./Health.ts"
import type { Store } from "./ports/Store.ts"

/**
 * The front door for embedders: every core service, given a Store layer.
 *
 * ```ts
 * const gateway = Gateway.layer.pipe(Layer.provide(MemoryStore.layer))
 * ```
 */
export const layer: Layer.Layer<Agents | Policies | Health, never, Store> = Layer.mergeAll(
  Agents.layer,
  Policies.layer,
  Health.layer()
)
