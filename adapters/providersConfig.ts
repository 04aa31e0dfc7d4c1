/**
 * The providers the configuration turns on, walked from the registry
 * (providers/registry.ts): each provider reads its own environment variables
 * and price card and names the upstream the proxy may reach with the
 * operator's credentials. The price cards are loaded once (PRICES_FILE over
 * config/prices.json); URL_ALLOW_HOSTS lets the URL-safe fetcher reach named
 * private hosts.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Cause, Deferred, Effect, Exit, Layer, Option } from "effect"
import { Providers } from "../src/capabilities/Capabilities.ts"
import { type ProviderStatus, ProviderStatuses } from "../src/capabilities/ProviderHealth.ts"
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
  config: ProvidersConfig,
  /** What the start-up probes wait for before they start (the server listening; see probedStatuses). */
  probesAfter: Effect.Effect<void> = Effect.void
): Layer.Layer<Providers | OutboundHttp | ServiceTransport | ProviderStatuses> => {
  const outbound = SafeHttp.layer({ allowHosts: config.allowHosts })
  const http = NodeHttpClient.layerUndici
  // One connection pool for every metered upstream call (providers and the proxy).
  const upstream = UpstreamClient.layer
  const providers = Layer.effect(
    Providers,
    // Built side by side; none waits for its start-up probe (probedStatuses runs them in the background).
    Effect.map(Effect.forEach(config.builders, (b) => b.build, { concurrency: "unbounded" }), (all) => ({ all }))
  ).pipe(Layer.provide(Layer.mergeAll(upstream, outbound)))
  const transport = Transport.layer({ operatorServices: config.operatorServices, registry: { allowHosts: config.allowHosts } })
    .pipe(Layer.provide([http, upstream]))
  const statuses = probedStatuses(config.builders, probesAfter)
  return Layer.mergeAll(providers, outbound, transport, statuses)
}

/**
 * What the configured providers' start-up probes find (ProviderStatuses). The probes run in the
 * background, side by side, once `after` is done (the server passes its listening, so that they
 * do not share the two cores with the rest of its start), for as long as the layer lives: the
 * server answers meanwhile. Whatever reads a provider's status waits for its verdict first
 * (`whenKnown`), so nothing reports or acts on one not yet known. A probe that dies makes its
 * provider unavailable, with why.
 */
export const probedStatuses = (
  builders: ReadonlyArray<Configured>,
  after: Effect.Effect<void> = Effect.void
): Layer.Layer<ProviderStatuses> =>
  Layer.effect(
    ProviderStatuses,
    Effect.gen(function*() {
      const found = new Map<string, ProviderStatus>()
      const probing = new Map<string, Deferred.Deferred<void>>()
      const probed = builders.filter((b) => b.probe !== undefined)
      for (const b of probed) probing.set(b.name, Deferred.makeUnsafe<void>())
      yield* Effect.andThen(after, Effect.forEach(
        probed,
        (b) =>
          Effect.exit(b.probe!).pipe(
            Effect.flatMap((exit) => {
              // A probe that died says the provider cannot be trusted here: unavailable, with why.
              const status: ProviderStatus = Exit.isSuccess(exit)
                ? exit.value
                : { ok: false, reason: `its start-up check failed: ${Cause.pretty(exit.cause).split("\n")[0]}` }
              found.set(b.name, status)
              return status.ok ? Effect.void : Effect.logWarning(`Provider ${b.name} (${b.capability}) is unavailable: ${status.reason}`)
            }),
            Effect.ensuring(Effect.sync(() => {
              Deferred.doneUnsafe(probing.get(b.name)!, Effect.void)
              probing.delete(b.name)
            }))
          ),
        { concurrency: "unbounded", discard: true }
      )).pipe(Effect.forkScoped)
      return ProviderStatuses.of({
        of: (name) => found.get(name),
        whenKnown: (name) => {
          const probe = probing.get(name)
          return probe === undefined ? undefined : Deferred.await(probe)
        }
      })
    })
  )
