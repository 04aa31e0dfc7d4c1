/**
 * A search engine behind an API key, priced per query: what Brave, Tavily
 * and Serper have in common. An engine says how its request is written, the
 * schema of its answer and where the hits are in it; this makes the provider
 * (settings, the exchange, decoding, normalized results) and its
 * `fromConfig` (the key's environment variable, the price card, the proxy's
 * service entry).
 */
import { Effect, Option, Redacted, type Schema } from "effect"
import type { HttpClientRequest } from "effect/http"
import type { Provider } from "../../../src/capabilities/Provider.ts"
import type { SearchInput } from "../../../src/capabilities/schemas.ts"
import { env, nothing, perCallService, type ProviderConfig, unitPriceOf } from "./config.ts"
import { answerDecoder } from "./decode.ts"
import { exchangeJson, type Upstream } from "./exchange.ts"
import { type Candidate, normalize, searchOutput } from "./searchResults.ts"
import { perCallProvider, type UpstreamOptions, upstreamSettings } from "./upstream.ts"
import { UpstreamClient } from "./exchange.ts"

export const DEFAULT_NUM_RESULTS = 10
export const DEFAULT_TIMEOUT_MS = 15_000
export const DEFAULT_MAX_RESPONSE_BYTES = 2 * 1024 * 1024

export interface KeyedSearchOptions extends UpstreamOptions {
  readonly apiKey: Redacted.Redacted<string>
}

export interface SearchEngine<S extends Schema.ConstraintDecoder<unknown>> {
  /** In messages about bad options ("Brave"). */
  readonly label: string
  /** The provider name and the price card's. */
  readonly name: string
  readonly baseUrl: string
  /** The search endpoint under the base URL. */
  readonly path: string
  readonly method: "GET" | "POST"
  /** The most results one request asks for; a call never pages. */
  readonly maxResults: number
  /** Whether the key may only hold printable characters (it goes in a header as it is). */
  readonly printableKey?: boolean | undefined
  /** How the engine's failures read (exchange.ts). */
  readonly errors: Pick<Upstream, "errorDetail" | "errorText" | "onErrorStatus">
  /** The request for `query`, asking for `count` results, with the key. */
  readonly request: (url: string, query: string, count: number, key: string) => HttpClientRequest.HttpClientRequest
  /** The answer's schema; an answer without it is `malformed`. */
  readonly answer: S
  /** The hits of a decoded answer, in the engine's order. */
  readonly hits: (answer: S["Type"]) => ReadonlyArray<Candidate>
  /** Cleans a title or snippet (highlighting, entities); default as it is. */
  readonly clean?: ((text: string) => string) | undefined
  /** The environment variable holding the operator's key. */
  readonly keyVar: string
  /** The proxy's entry: its display name and description, the endpoint's, and the key as headers. */
  readonly service: {
    readonly name: string
    readonly description: string
    readonly endpoint: string
    readonly credentials: (key: string) => Readonly<Record<string, string>>
  }
}

/** The provider of `engine`, from its options. */
export const keyedSearch = <S extends Schema.ConstraintDecoder<unknown>>(engine: SearchEngine<S>) => {
  const decode = answerDecoder(engine.answer)
  return (options: KeyedSearchOptions): Effect.Effect<Provider<"search">, never, UpstreamClient> =>
    Effect.gen(function*() {
      const settings = yield* Effect.sync(() =>
        upstreamSettings(options, {
          label: engine.label,
          name: engine.name,
          baseUrl: engine.baseUrl,
          per: "query",
          timeoutMs: DEFAULT_TIMEOUT_MS,
          maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES,
          secret: { label: "API key", value: options.apiKey, printable: engine.printableKey },
          errors: engine.errors
        })
      )
      const client = yield* UpstreamClient
      const url = settings.baseUrl + engine.path
      // No span is recorded for the exchange and no trace headers go upstream (exchange.ts).
      return perCallProvider("search", settings, `${engine.label}.run`, (input: SearchInput) =>
        Effect.gen(function*() {
          const limit = input.numResults ?? DEFAULT_NUM_RESULTS
          const request = engine.request(url, input.query, Math.min(limit, engine.maxResults), settings.secret)
          const json = yield* exchangeJson(client, settings.upstream, request)
          const answer = yield* Effect.fromResult(decode(settings.name, json, [settings.secret]))
          return searchOutput(input.query, normalize(engine.hits(answer), limit, engine.clean))
        }))
    })
}

/** `fromConfig` of `engine`: on with its key, priced by its card, offered through the proxy. */
export const keyedSearchConfig = <S extends Schema.ConstraintDecoder<unknown>>(
  engine: SearchEngine<S>,
  make: (options: KeyedSearchOptions) => Effect.Effect<Provider<"search">, never, UpstreamClient>
): ProviderConfig =>
(cards) =>
  Effect.gen(function*() {
    const key = yield* env(engine.keyVar)
    if (Option.isNone(key)) return nothing
    const unitPrice = yield* unitPriceOf(cards, engine.name, "search", "query")
    return {
      providers: [{ name: engine.name, capability: "search", build: make({ apiKey: Redacted.make(key.value), unitPrice }) }],
      services: [perCallService({
        slug: engine.name,
        name: engine.service.name,
        description: engine.service.description,
        baseUrl: engine.baseUrl,
        capability: "search",
        path: engine.path,
        method: engine.method,
        endpoint: engine.service.endpoint,
        unitPrice,
        credentials: engine.service.credentials(key.value)
      })]
    }
  })
