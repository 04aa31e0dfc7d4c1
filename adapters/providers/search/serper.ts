import { Effect, Option, Redacted, Schema } from "effect"
import { HttpClient } from "effect/http"
import type { Provider } from "../../../src/capabilities/Provider.ts"
import type { SearchInput } from "../../../src/capabilities/schemas.ts"
import { env, nothing, perCallService, type ProviderConfig, unitPriceOf } from "../kit/config.ts"
import {
  answerDecoder,
  decodeOrUndefined,
  type ErrorDetail,
  exchangeJson,
  jsonPost,
  perCallProvider,
  type UpstreamOptions,
  upstreamSettings
} from "../kit/index.ts"
import { normalize, searchOutput } from "../kit/searchResults.ts"

/**
 * `search` through Serper (serper.dev), Google's web results as JSON.
 *
 * Request: `POST {baseUrl}/search` with the key in `X-API-KEY` and the JSON
 * body `{ q, num }`.
 *
 * Answer: `{ searchParameters: { q, type, engine, ... }, organic: [{ title,
 * link, snippet, position, ... }], knowledgeGraph?, peopleAlsoAsk?, ... }`;
 * only `organic` is read. A query without web results has no (or an empty)
 * `organic`, which is an empty answer. Serper reports no total, so
 * `totalResults` is the number of results returned.
 *
 * Errors: `{ message, statusCode }` (a missing or unknown key is 403
 * "Unauthorized.", spent credits 400 "Not enough credits").
 *
 * A call asks for at most `MAX_NUM` results (one Google page), so one query
 * is one upstream request at the price card's price.
 */

export const PROVIDER_NAME = "serper"
export const DEFAULT_BASE_URL = "https://google.serper.dev"
export const SEARCH_PATH = "/search"
/** The most results one call asks Serper for (`num`). */
export const MAX_NUM = 10

export const DEFAULT_NUM_RESULTS = 10
export const DEFAULT_TIMEOUT_MS = 15_000
export const DEFAULT_MAX_RESPONSE_BYTES = 2 * 1024 * 1024

const KEY_HEADER = "X-API-KEY"

/** Default name "serper", base URL https://google.serper.dev, timeout 15 s, answers up to 2 MiB; a flat price per query. */
export interface SerperOptions extends UpstreamOptions {
  readonly apiKey: Redacted.Redacted<string>
}

// ---------------------------------------------------------------------------
// Serper's answer

const errorBodyOf = decodeOrUndefined(Schema.Struct({ message: Schema.String }))

const serperErrorDetail = (body: unknown): ErrorDetail | undefined => {
  const decoded = errorBodyOf(body)
  return decoded === undefined || decoded.message.trim() === "" ? undefined : { message: decoded.message }
}

const hitOf = decodeOrUndefined(Schema.Struct({
  title: Schema.optional(Schema.Unknown),
  link: Schema.optional(Schema.Unknown),
  snippet: Schema.optional(Schema.Unknown)
}))

const decodeAnswer = answerDecoder(Schema.Struct({ organic: Schema.optional(Schema.NullOr(Schema.Array(Schema.Unknown))) }))

// ---------------------------------------------------------------------------
// The provider

export const make = (options: SerperOptions): Effect.Effect<Provider<"search">, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() =>
      upstreamSettings(options, {
        label: "Serper",
        name: PROVIDER_NAME,
        baseUrl: DEFAULT_BASE_URL,
        per: "query",
        timeoutMs: DEFAULT_TIMEOUT_MS,
        maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES,
        secret: { label: "API key", value: options.apiKey, printable: true },
        errors: { errorDetail: serperErrorDetail, errorText: "page" }
      })
    )
    const client = yield* HttpClient.HttpClient
    const url = settings.baseUrl + SEARCH_PATH
    // The key header is redacted from spans, and no trace headers go to Serper (exchange.ts).
    return perCallProvider("search", settings, "Serper.run", (input: SearchInput) =>
      Effect.gen(function*() {
        const limit = input.numResults ?? DEFAULT_NUM_RESULTS
        const request = jsonPost(url, { q: input.query, num: Math.min(limit, MAX_NUM) }, { [KEY_HEADER]: settings.secret })
        const answer = yield* Effect.fromResult(decodeAnswer(settings.name, yield* exchangeJson(client, settings.upstream, request)))
        const hits = (answer.organic ?? []).flatMap((item) => hitOf(item) ?? [])
        return searchOutput(input.query, normalize(hits.map((hit) => ({ title: hit.title, url: hit.link, snippet: hit.snippet })), limit))
      }))
  })

// ---------------------------------------------------------------------------
// Configuration

/** SERPER_API_KEY: the `serper` price card (per query); the proxy offers the search endpoint. */
export const fromConfig: ProviderConfig = (cards) =>
  Effect.gen(function*() {
    const key = yield* env("SERPER_API_KEY")
    if (Option.isNone(key)) return nothing
    const unitPrice = yield* unitPriceOf(cards, PROVIDER_NAME, "search")
    return {
      providers: [{ name: PROVIDER_NAME, capability: "search", build: make({ apiKey: Redacted.make(key.value), unitPrice }) }],
      services: [perCallService({
        slug: PROVIDER_NAME,
        name: "Serper",
        description: "Serper (Google web results) with the operator's credentials",
        baseUrl: DEFAULT_BASE_URL,
        capability: "search",
        path: SEARCH_PATH,
        method: "POST",
        endpoint: "Web search",
        unitPrice,
        credentials: { "x-api-key": key.value }
      })]
    }
  })
