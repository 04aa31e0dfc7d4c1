import { Layer } from "effect"
import { Agents } from "./agents/Agents.ts"
import { Policies } from "./agents/Policies.ts"
import { Health } from "./Health.ts"
import { Idempotency } from "./idempotency/Idempotency.ts"
import type { IdempotencyStore } from "./ports/IdempotencyStore.ts"
import { Funding, paymentSinkLayer } from "./funding/Funding.ts"
import type { RateSource } from "./ports/RateSource.ts"
import type { CardRail, LightningRail, PaymentSink } from "./ports/Rails.ts"
import type { Store } from "./ports/Store.ts"
import { Spend } from "./wallet/Spend.ts"
import { Wallets } from "./wallet/Wallets.ts"

/**
 * The front door for embedders: every core service, given storage, a
 * RateSource and the payment rails.
 *
 * ```ts
 * const gateway = Gateway.layer.pipe(Layer.provide([
 *   MemoryStore.layer, RateSource.none,
 *   DevLightning.layer({ dataDir: undefined }), DevCard.layer({ publicUrl: "http://127.0.0.1:8080" })
 * ]))
 * ```
 *
 * `Spend.sweeper()` adds the periodic recovery sweep of expired holds; the
 * server runs it, an embedder decides.
 */
export type Services = Agents | Policies | Health | Spend | Wallets | Idempotency | Funding | PaymentSink

/** What the world must provide: storage, a BTC/USD rate source and the two payment rails. */
export type Requirements = Store | IdempotencyStore | RateSource | LightningRail | CardRail

export const layer: Layer.Layer<Services, never, Requirements> = Layer.mergeAll(
  Agents.layer,
  Policies.layer,
  Health.layer(),
  Spend.layer,
  Wallets.layer,
  Idempotency.layer(),
  Funding.layer,
  paymentSinkLayer
)
