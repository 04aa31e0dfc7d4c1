import { Layer } from "effect"
import { Agents } from "./agents/Agents.ts"
import { Policies } from "./agents/Policies.ts"
import { Health } from "./Health.ts"
import { Idempotency } from "./idempotency/Idempotency.ts"
import type { IdempotencyStore } from "./ports/IdempotencyStore.ts"
import { Capabilities, type Providers } from "./capabilities/Capabilities.ts"
import { ProviderHealth } from "./capabilities/ProviderHealth.ts"
import { Funding, paymentSinkLayer } from "./funding/Funding.ts"
import { L402Payments } from "./l402/Pay.ts"
import type { RateSource } from "./ports/RateSource.ts"
import type { RegistryStore } from "./ports/RegistryStore.ts"
import type { ServiceTransport } from "./ports/ServiceTransport.ts"
import { Services as ServiceCatalog } from "./services/Services.ts"
import type { CardRail, LightningRail, PaymentSink } from "./ports/Rails.ts"
import type { Store } from "./ports/Store.ts"
import { Spend } from "./wallet/Spend.ts"
import { Wallets } from "./wallet/Wallets.ts"
import { Webhooks } from "./webhooks/Webhooks.ts"

/**
 * Every core service, given what {@link Requirements} lists: storage, a
 * RateSource, the payment rails, the capability providers and the proxy's
 * transport. Embedders rarely build this by hand: the package entry point's
 * ready layers (`Spendgate.memory()`, `Spendgate.pglite(dataDir)`,
 * `Spendgate.postgres(url)`, in adapters/embed/Spendgate.ts) provide all of
 * it with defaults, e.g.
 *
 * ```ts
 * Gateway.layer.pipe(Layer.provide([
 *   MemoryStore.layer, RateSource.none, Providers.make([]), registryOnly,
 *   devRails({ dataDir: undefined, publicUrl: "http://127.0.0.1:8080" })
 * ]))
 * ```
 *
 * `Spend.sweeper()` adds the periodic recovery sweep of expired holds and
 * `Funding.expirer()` invoice expiry; the server and the ready layers run
 * both. `L402Payments.resolver()` resolves outbound L402 payments a crash
 * left pending (the server runs it). `L402PaymentStore` (outbound L402 records) is
 * used when present: the SQL stores provide it; without it the records live
 * in memory.
 */
export type Services =
  | Agents
  | Policies
  | Health
  | Spend
  | Wallets
  | Idempotency
  | Funding
  | PaymentSink
  | Capabilities
  | ProviderHealth
  | ServiceCatalog
  | Webhooks
  | L402Payments

/**
 * What the world must provide: storage, a BTC/USD rate source, the two
 * payment rails and the capability providers. `OutboundHttp` (URL safety)
 * is used when present: provide it whenever a provider fetches URLs that
 * callers choose. `WebhookTransport` likewise: without it webhook endpoints
 * cannot be created and nothing is delivered (`Webhooks.worker()` runs the
 * delivery worker).
 */
export type Requirements =
  | Store
  | IdempotencyStore
  | RegistryStore
  | RateSource
  | LightningRail
  | CardRail
  | Providers
  | ServiceTransport

const spend = Spend.layer
const health = ProviderHealth.layer
/** One instance (one token cache) for `pay` and the proxy's L402 services. */
const l402 = L402Payments.layer.pipe(Layer.provide(spend))

export interface GatewayOptions {
  /** How long a binding quote (`POST /v1/quotes`) can be used: default 60 s, from 1 s to 1 h. */
  readonly quoteTtlMs?: number | undefined
}

/** `layer` with options. */
export const layerWith = (options: GatewayOptions = {}): Layer.Layer<Services, never, Requirements> => Layer.mergeAll(
  Agents.layer,
  Policies.layer,
  Health.layer(),
  spend,
  Wallets.layer,
  Idempotency.layer(),
  Funding.layer,
  paymentSinkLayer,
  health,
  Capabilities.layerWith(options.quoteTtlMs === undefined ? {} : { quoteTtlMs: options.quoteTtlMs }).pipe(
    Layer.provide([spend, health])
  ),
  ServiceCatalog.layer.pipe(Layer.provide([spend, l402])),
  Webhooks.layer,
  l402
)

export const layer: Layer.Layer<Services, never, Requirements> = layerWith()
