import { Effect, Option, Redacted, Schema } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import type { Provider } from "../../../src/capabilities/Provider.ts"
import type { SearchInput } from "../../../src/capabilities/schemas.ts"
import {
  answerDecoder,
  decodeOrUndefined,
  type ErrorDetail,
  exchangeJson,
  perCallProvider,
  type UpstreamOptions,
  upstreamSettings
} from "../kit/index.ts"
import { normalize, searchOutput } from "../kit/searchResults.ts"
import { env, nothing, perCallService, type ProviderConfig, unitPriceOf } from "../kit/config.ts"

/**
 * `search` through the Brave Search API (web search).
 *
 * Request: `GET {baseUrl}/res/v1/web/search?q=<query>&count=<n>` with the key
 * in `X-Subscription-Token` and `Accept: application/json`.
 *
 * Answer (WebSearchApiResponse): `{ type: "search", query: { original, ... },
 * web: { type: "search", results: [{ title, url, description, ... }] }, ... }`.
 * Brave leaves `web` out when a query has no web results, so a missing `web`
 * is an empty answer, not a malformed one. Titles and descriptions carry
 * Brave's `<strong>` highlighting and may carry HTML entities; both are removed. Brave
 * reports no total, so `totalResults` is the number of results returned.
 *
 * Errors: `{ type: "ErrorResponse", error: { id, status, code, detail, meta },
 * time }`; a missing or unknown key is 422 `SUBSCRIPTION_TOKEN_INVALID` (401
 * on some plans), too many requests 429 `RATE_LIMITED`.
 *
 * Brave's `count` is at most 20 and its `offset` skips whole pages of `count`
 * results. More than 20 results would take one billed upstream request per
 * page for a query the caller pays once, so a call asks for at most 20 and
 * returns at most 20, whatever `numResults` says.
 */

export const PROVIDER_NAME = "brave"
export const DEFAULT_BASE_URL = "https://api.search.brave.com"
export const SEARCH_PATH = "/res/v1/web/search"
/** The most results Brave returns for one request (`count`). */
export const MAX_COUNT = 20

export const DEFAULT_NUM_RESULTS = 10
export const DEFAULT_TIMEOUT_MS = 15_000
export const DEFAULT_MAX_RESPONSE_BYTES = 2 * 1024 * 1024

const KEY_HEADER = "X-Subscription-Token"

/** Default name "brave", base URL https://api.search.brave.com, timeout 15 s, answers up to 2 MiB; a flat price per query. */
export interface BraveOptions extends UpstreamOptions {
  readonly apiKey: Redacted.Redacted<string>
}

// ---------------------------------------------------------------------------
// Brave's answer

const ErrorBody = Schema.Struct({
  error: Schema.Struct({ code: Schema.optional(Schema.Unknown), detail: Schema.optional(Schema.Unknown) })
})

/** Brave's error text: `error.detail` (with `error.code`). */
const braveErrorDetail = (body: unknown): ErrorDetail | undefined => {
  const error = decodeOrUndefined(ErrorBody)(body)?.error
  if (error === undefined) return undefined
  const text = [error.code, error.detail].filter((part) => typeof part === "string" && part !== "").join(": ")
  return text === "" ? undefined : { message: text }
}

const Hit = Schema.Struct({
  title: Schema.optional(Schema.Unknown),
  url: Schema.optional(Schema.Unknown),
  description: Schema.optional(Schema.Unknown)
})
const hitOf = decodeOrUndefined(Hit)

/** A missing or null `web` is a query without web results. */
const decodeAnswer = answerDecoder(Schema.Struct({
  type: Schema.Literal("search"),
  web: Schema.optional(Schema.NullOr(Schema.Struct({ results: Schema.Array(Schema.Unknown) })))
}))

const NAMED_ENTITIES: Readonly<Record<string, string>> = {
  amp: "&",
  lt: "<",
  gt: ">",
  quot: "\"",
  apos: "'",
  nbsp: " "
}

const decodeEntities = (text: string): string =>
  text.replace(/&(#[xX][0-9a-fA-F]{1,6}|#[0-9]{1,7}|[a-zA-Z]{2,8});/g, (whole, body: string) => {
    if (body.startsWith("#")) {
      const code = body[1] === "x" || body[1] === "X" ? parseInt(body.slice(2), 16) : parseInt(body.slice(1), 10)
      const valid = code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff)
      return valid ? String.fromCodePoint(code) : whole
    }
    return NAMED_ENTITIES[body.toLowerCase()] ?? whole
  })

/** Brave's highlighting out, then its entities decoded (so an escaped `&lt;strong&gt;` stays text). */
export const cleanBraveText = (text: string): string => decodeEntities(text.replace(/<\/?strong>/gi, ""))

// ---------------------------------------------------------------------------
// The provider

export const make = (options: BraveOptions): Effect.Effect<Provider<"search">, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() =>
      upstreamSettings(options, {
        label: "Brave",
        name: PROVIDER_NAME,
        baseUrl: DEFAULT_BASE_URL,
        per: "query",
        timeoutMs: DEFAULT_TIMEOUT_MS,
        maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES,
        secret: { label: "API key", value: options.apiKey },
        errors: { errorDetail: braveErrorDetail, errorText: "page" }
      })
    )
    const client = yield* HttpClient.HttpClient
    const url = settings.baseUrl + SEARCH_PATH
    // The key header is redacted from spans, and no trace headers go to Brave (exchange.ts).
    return perCallProvider("search", settings, "Brave.run", (input: SearchInput) =>
      Effect.gen(function*() {
        const limit = input.numResults ?? DEFAULT_NUM_RESULTS
        const request = HttpClientRequest.get(url, {
          urlParams: { q: input.query, count: String(Math.min(limit, MAX_COUNT)) },
          headers: { [KEY_HEADER]: settings.secret },
          acceptJson: true
        })
        const answer = yield* Effect.fromResult(decodeAnswer(settings.name, yield* exchangeJson(client, settings.upstream, request), [settings.secret]))
        const hits = (answer.web?.results ?? []).flatMap((item) => hitOf(item) ?? [])
        const candidates = hits.map((hit) => ({ title: hit.title, url: hit.url, snippet: hit.description }))
        return searchOutput(input.query, normalize(candidates, limit, cleanBraveText))
      }))
  })

// ---------------------------------------------------------------------------
// Configuration

/** BRAVE_API_KEY: the `brave` price card (per query); the proxy offers the web search endpoint. */
export const fromConfig: ProviderConfig = (cards) =>
  Effect.gen(function*() {
    const key = yield* env("BRAVE_API_KEY")
    if (Option.isNone(key)) return nothing
    const unitPrice = yield* unitPriceOf(cards, PROVIDER_NAME, "search")
    return {
      providers: [{ name: PROVIDER_NAME, capability: "search", build: make({ apiKey: Redacted.make(key.value), unitPrice }) }],
      services: [perCallService({
        slug: PROVIDER_NAME,
        name: "Brave Search",
        description: "Brave Search web results with the operator's credentials",
        baseUrl: DEFAULT_BASE_URL,
        capability: "search",
        path: SEARCH_PATH,
        method: "GET",
        endpoint: "Web search",
        unitPrice,
        credentials: { [KEY_HEADER.toLowerCase()]: key.value }
      })]
    }
  })
