/**
 * The providers the configuration turns on, walked from the registry
 * (providers/registry.ts): each provider reads its own environment variables
 * and price card and names the upstream the proxy may reach with the
 * operator's credentials. The price cards are loaded once (PRICES_FILE over
 * config/prices.json); URL_ALLOW_HOSTS lets the URL-safe fetcher reach named
 * private hosts.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Effect, Layer, Option } from "effect"
import { Providers } from "../src/capabilities/Capabilities.ts"
import { ProviderStatuses } from "../src/capabilities/ProviderHealth.ts"
import { OutboundHttp } from "../src/ports/Net.ts"
import type { ServiceTransport } from "../src/ports/ServiceTransport.ts"
import type { InvalidConfig } from "./config.ts"
import * as SafeHttp from "./net/SafeHttp.ts"
import { UpstreamClient } from "./net/upstreamClient.ts"
import { loadPriceCards } from "./priceCards.ts"
import { type Configured, env } from "./providers/kit/config.ts"
import { registry } from "./providers/registry.ts"
import * as Transport from "./services/transport.ts"

export interface ProvidersConfig {
  readonly builders: ReadonlyArray<Configured>
  readonly allowHosts: ReadonlyArray<string>
  /** Upstreams reachable through the proxy with the operator's credentials. */
  readonly operatorServices: ReadonlyArray<Transport.OperatorService>
}

export const loadProvidersConfig: Effect.Effect<ProvidersConfig, InvalidConfig> = Effect.gen(function*() {
  const cards = yield* loadPriceCards(Option.getOrUndefined(yield* env("PRICES_FILE")))
  const builders: Array<Configured> = []
  const operatorServices: Array<Transport.OperatorService> = []
  for (const fromConfig of registry) {
    const found = yield* fromConfig(cards)
    builders.push(...found.providers)
    operatorServices.push(...found.services)
  }
  const allowHosts = Option.match(yield* env("URL_ALLOW_HOSTS"), {
    onNone: () => [] as Array<string>,
    onSome: (list) => list.split(",").map((h) => h.trim()).filter((h) => h !== "")
  })
  return { builders, allowHosts, operatorServices }
})

/** OutboundHttp (URL safety), the configured providers and the proxy's transport, over Node's HTTP client. */
export const providersLayer = (
  config: ProvidersConfig
): Layer.Layer<Providers | OutboundHttp | ServiceTransport | ProviderStatuses> => {
  const outbound = SafeHttp.layer({ allowHosts: config.allowHosts })
  const http = NodeHttpClient.layerUndici
  // One connection pool for every metered upstream call (providers and the proxy).
  const upstream = UpstreamClient.layer
  const providers = Layer.effect(
    Providers,
    // Built side by side: a provider that probes its machine at start-up (the sandbox, speech) does
    // not hold up the others.
    Effect.map(Effect.forEach(config.builders, (b) => b.build, { concurrency: "unbounded" }), (all) => ({ all }))
  ).pipe(Layer.provide(Layer.mergeAll(upstream, outbound)))
  const transport = Transport.layer({ operatorServices: config.operatorServices, registry: { allowHosts: config.allowHosts } })
    .pipe(Layer.provide([http, upstream]))
  const statuses = Layer.effect(
    ProviderStatuses,
    Effect.gen(function*() {
      const found = new Map<string, { readonly ok: true } | { readonly ok: false; readonly reason: string }>()
      // The probes side by side, each reported in the builders' order.
      const probed = yield* Effect.forEach(
        config.builders.filter((b) => b.probe !== undefined),
        (b) => Effect.map(b.probe!, (status) => [b, status] as const),
        { concurrency: "unbounded" }
      )
      for (const [b, status] of probed) {
        found.set(b.name, status)
        if (!status.ok) yield* Effect.logWarning(`Provider ${b.name} (${b.capability}) is unavailable: ${status.reason}`)
      }
      return ProviderStatuses.of({ of: (name) => found.get(name) })
    })
  )
  return Layer.mergeAll(providers, outbound, transport, statuses)
}
