import { Effect, Option, Redacted, Schema } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import type { Provider } from "../../../src/capabilities/Provider.ts"
import type { SearchInput } from "../../../src/capabilities/schemas.ts"
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
import { env, nothing, perCallService, type ProviderConfig, unitPriceOf } from "../kit/config.ts"

/**
 * `search` through Tavily's Search API.
 *
 * Request: `POST {baseUrl}/search` with `Authorization: Bearer tvly-...` and the
 * JSON body `{ query, max_results, search_depth: "basic" }` (a basic search is
 * one API credit). Earlier versions of the API took the key as `api_key` in
 * the body; the current reference (and Tavily's own clients) send it as a
 * bearer token, which is what is done here: the key never goes in a body.
 *
 * Answer: `{ query, answer, images, results: [{ title, url, content, score,
 * raw_content, ... }], response_time, request_id, ... }`; the snippet is
 * `content`. Tavily reports no total, so `totalResults` is the number of
 * results returned.
 *
 * Errors: `{ detail: { error } }` (401 bad key, 429 rate or usage limit,
 * 432/433 plan limits), and FastAPI's `{ detail: [{ loc, msg, type }] }` for
 * a request it cannot validate.
 *
 * `max_results` is at most 20: larger `numResults` ask for 20 and return at
 * most 20.
 */

export const PROVIDER_NAME = "tavily"
export const DEFAULT_BASE_URL = "https://api.tavily.com"
export const SEARCH_PATH = "/search"
/** The most results Tavily returns for one request (`max_results`). */
export const MAX_RESULTS = 20

export const DEFAULT_NUM_RESULTS = 10
export const DEFAULT_TIMEOUT_MS = 15_000
export const DEFAULT_MAX_RESPONSE_BYTES = 2 * 1024 * 1024

/** Default name "tavily", base URL https://api.tavily.com, timeout 15 s, answers up to 2 MiB; a flat price per query. */
export interface TavilyOptions extends UpstreamOptions {
  /** `tvly-...` */
  readonly apiKey: Redacted.Redacted<string>
}

// ---------------------------------------------------------------------------
// Tavily's answer

const ErrorBody = Schema.Struct({
  detail: Schema.optional(Schema.Union([Schema.String, Schema.Struct({ error: Schema.String }), Schema.Array(Schema.Unknown)])),
  error: Schema.optional(Schema.Unknown),
  message: Schema.optional(Schema.Unknown)
})
const errorBodyOf = decodeOrUndefined(ErrorBody)
/** FastAPI's validation error, `{ loc, msg, type }`. */
const validationOf = decodeOrUndefined(Schema.Struct({ msg: Schema.String, loc: Schema.optional(Schema.Array(Schema.Unknown)) }))

/**
 * Tavily's error text: `detail.error`, a plain `detail`, the first message of
 * a validation error, or a top-level `error` or `message`.
 */
const tavilyErrorDetail = (body: unknown): ErrorDetail | undefined => {
  const decoded = errorBodyOf(body)
  if (decoded === undefined) return undefined
  const detail = decoded.detail
  if (typeof detail === "string") return { message: detail }
  if (Array.isArray(detail)) {
    const first = validationOf(detail[0])
    if (first !== undefined) return { message: `${first.loc === undefined ? "" : `${first.loc.map(String).join(".")}: `}${first.msg}` }
  } else if (detail !== undefined) {
    return { message: (detail as { readonly error: string }).error }
  }
  for (const text of [decoded.error, decoded.message]) if (typeof text === "string") return { message: text }
  return undefined
}

const Hit = Schema.Struct({
  title: Schema.optional(Schema.Unknown),
  url: Schema.optional(Schema.Unknown),
  content: Schema.optional(Schema.Unknown)
})
const hitOf = decodeOrUndefined(Hit)

const decodeAnswer = answerDecoder(Schema.Struct({ results: Schema.Array(Schema.Unknown) }))

// ---------------------------------------------------------------------------
// The provider

export const make = (options: TavilyOptions): Effect.Effect<Provider<"search">, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() =>
      upstreamSettings(options, {
        label: "Tavily",
        name: PROVIDER_NAME,
        baseUrl: DEFAULT_BASE_URL,
        per: "query",
        timeoutMs: DEFAULT_TIMEOUT_MS,
        maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES,
        secret: { label: "API key", value: options.apiKey },
        errors: { errorDetail: tavilyErrorDetail, errorText: "page" }
      })
    )
    const client = yield* HttpClient.HttpClient
    const url = settings.baseUrl + SEARCH_PATH
    // The bearer token is redacted from spans, and no trace headers go to Tavily (exchange.ts).
    return perCallProvider("search", settings, "Tavily.run", (input: SearchInput) =>
      Effect.gen(function*() {
        const limit = input.numResults ?? DEFAULT_NUM_RESULTS
        const request = HttpClientRequest.bearerToken(
          jsonPost(url, { query: input.query, max_results: Math.min(limit, MAX_RESULTS), search_depth: "basic" }),
          settings.secret
        )
        const answer = yield* Effect.fromResult(decodeAnswer(settings.name, yield* exchangeJson(client, settings.upstream, request)))
        const hits = answer.results.flatMap((item) => hitOf(item) ?? [])
        return searchOutput(input.query, normalize(hits.map((hit) => ({ title: hit.title, url: hit.url, snippet: hit.content })), limit))
      }))
  })

// ---------------------------------------------------------------------------
// Configuration

/** TAVILY_API_KEY: the `tavily` price card (per query); the proxy offers the search endpoint. */
export const fromConfig: ProviderConfig = (cards) =>
  Effect.gen(function*() {
    const key = yield* env("TAVILY_API_KEY")
    if (Option.isNone(key)) return nothing
    const unitPrice = yield* unitPriceOf(cards, PROVIDER_NAME, "search")
    return {
      providers: [{ name: PROVIDER_NAME, capability: "search", build: make({ apiKey: Redacted.make(key.value), unitPrice }) }],
      services: [perCallService({
        slug: PROVIDER_NAME,
        name: "Tavily",
        description: "Tavily search with the operator's credentials",
        baseUrl: DEFAULT_BASE_URL,
        capability: "search",
        path: SEARCH_PATH,
        method: "POST",
        endpoint: "Search",
        unitPrice,
        credentials: { authorization: `Bearer ${key.value}` }
      })]
    }
  })
