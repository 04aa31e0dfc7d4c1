/**
 * What a provider's `fromConfig` is given and gives back. Each provider reads
 * its own environment variables and its own price card, and says which
 * upstream the proxy may reach with the operator's credentials (base URL,
 * path, headers); the registry (../registry.ts) walks them in order.
 */
import { Config, Effect, Option, Redacted } from "effect"
import type { UpstreamClient } from "./exchange.ts"
import type { AnyProvider, ModelInfo, UnitPrice } from "../../../src/capabilities/Provider.ts"
import type { Capability } from "../../../src/domain/Capability.ts"
import type { OutboundHttp } from "../../../src/ports/Net.ts"
import { InvalidConfig } from "../../config.ts"
import type { PriceEntry } from "../../priceCards.ts"
import type { OperatorService } from "../../services/transport.ts"
import { checkUnitPrice } from "./settings.ts"

/** Every provider's exchanges go through the upstream client; page readers fetch through OutboundHttp. */
export type Builder = Effect.Effect<AnyProvider, never, UpstreamClient | OutboundHttp>
export type Probe = Effect.Effect<{ readonly ok: true; readonly degraded?: string } | { readonly ok: false; readonly reason: string }>

/** One provider turned on by the configuration. */
export interface Configured {
  readonly name: string
  readonly capability: Capability
  readonly build: Builder
  /** Whether the provider can work at all here (checked once at start-up). */
  readonly probe?: Probe | undefined
}

/** What `fromConfig` finds: providers to build, and upstreams the proxy may reach. */
export interface FromConfig {
  readonly providers: ReadonlyArray<Configured>
  readonly services: ReadonlyArray<OperatorService>
}

export const nothing: FromConfig = { providers: [], services: [] }

/** The price cards, as loaded (config/prices.json, or PRICES_FILE). */
export type PriceCards = ReadonlyMap<string, PriceEntry>

export type ProviderConfig = (cards: PriceCards) => Effect.Effect<FromConfig, InvalidConfig>

export const invalid = (message: string) => Effect.fail(new InvalidConfig({ message: `Invalid configuration: ${message}` }))

/** An environment variable; unset or blank is none. */
export const env = (name: string): Effect.Effect<Option.Option<string>> =>
  Effect.map(
    Effect.orElseSucceed(Config.option(Config.String(name)), () => Option.none<string>()),
    (value) => Option.filter(value, (v: string) => v.trim() !== "")
  )

/** An environment variable with a default. */
export const envOr = (name: string, fallback: string): Effect.Effect<string> =>
  Effect.map(env(name), Option.getOrElse(() => fallback))

/** A switch that is on unless set to "off". */
export const switchedOn = (name: string): Effect.Effect<boolean> => Effect.map(envOr(name, "on"), (value) => value !== "off")

/** An http(s) URL from `name`, or a failure naming it. */
export const httpUrl = (name: string, value: string) =>
  /^https?:\/\//.test(value) ? Effect.succeed(value) : invalid(`${name} must be an http(s) URL`)

/** The models of a `reason` price card. */
export const modelsOf = (cards: PriceCards, name: string) => {
  const card = cards.get(name)
  return card?.kind === "models"
    ? Effect.succeed<ReadonlyArray<ModelInfo>>(card.models)
    : invalid(`no reason price card (models) for provider "${name}" in the price cards`)
}

/**
 * The unit price of a price card for `capability`, checked (by the one price
 * checker, `checkUnitPrice`) to be `per` the unit the provider charges by: a
 * card per another unit is a configuration error naming it.
 */
export const unitPriceOf = (cards: PriceCards, name: string, capability: Capability, per: string) => {
  const card = cards.get(name)
  if (card?.kind !== "unit" || card.capability !== capability) {
    return invalid(`no ${capability} price card for provider "${name}" in the price cards`)
  }
  return Effect.try({
    try: () => checkUnitPrice(`the ${capability} price card of "${name}"`, card.unitPrice, per),
    catch: (error) => new InvalidConfig({ message: `Invalid configuration: ${error instanceof Error ? error.message : String(error)}` })
  })
}

/** A proxy entry for an upstream priced per call (search and the like). */
export const perCallService = (entry: {
  readonly slug: string
  readonly name: string
  readonly description: string
  readonly baseUrl: string
  readonly capability: Capability
  readonly path: string
  readonly method: "GET" | "POST"
  readonly endpoint: string
  readonly unitPrice: UnitPrice
  readonly credentials: Readonly<Record<string, string>>
}): OperatorService => ({
  service: {
    slug: entry.slug,
    name: entry.name,
    description: entry.description,
    baseUrl: entry.baseUrl,
    capabilities: [entry.capability],
    origin: "operator",
    endpoints: [{
      path: entry.path,
      method: entry.method,
      description: entry.endpoint,
      price: { kind: "perCall", priceMicroUsd: entry.unitPrice.priceMicroUsd }
    }]
  },
  credentials: secretHeaders(entry.credentials)
})

/** A proxy entry for a chat upstream priced by tokens. */
export const tokenService = (entry: {
  readonly slug: string
  readonly name: string
  readonly baseUrl: string
  readonly path: string
  readonly format: "openai-chat" | "anthropic-messages"
  readonly models: ReadonlyArray<ModelInfo>
  readonly credentials: Readonly<Record<string, string>>
  /** OpenAI format: the field the completion cap is added in when the caller gives none. */
  readonly tokenLimitField?: "max_tokens" | "max_completion_tokens" | undefined
}): OperatorService => ({
  service: {
    slug: entry.slug,
    name: entry.name,
    description: `${entry.name} ${entry.format === "openai-chat" ? "chat completions" : "messages"} with the operator's credentials`,
    baseUrl: entry.baseUrl,
    capabilities: ["reason"],
    origin: "operator",
    endpoints: [{
      path: entry.path,
      method: "POST",
      description: "Create a completion",
      price: {
        kind: "tokens",
        format: entry.format,
        models: entry.models,
        ...(entry.tokenLimitField === undefined ? {} : { tokenLimitField: entry.tokenLimitField })
      }
    }]
  },
  credentials: secretHeaders(entry.credentials)
})

const secretHeaders = (headers: Readonly<Record<string, string>>): Record<string, Redacted.Redacted<string>> =>
  Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, Redacted.make(value)]))

/** One provider turned on, not offered through the proxy. */
export const one = (
  name: string,
  capability: Capability,
  build: Builder,
  probe?: Probe
): FromConfig => ({ providers: [probe === undefined ? { name, capability, build } : { name, capability, build, probe }], services: [] })
