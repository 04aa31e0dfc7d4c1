import { Effect, type Redacted, Result } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import type { Provider, ProviderFailure, UnitPrice } from "../../../src/capabilities/Provider.ts"
import type { SearchInput, SearchOutput } from "../../../src/capabilities/schemas.ts"
import {
  baseUrlOf,
  checkUnitPrice,
  credential,
  defectsUnavailable,
  type ErrorDetail,
  exchangeJson,
  failure,
  isRecord,
  jsonPost,
  positiveInteger,
  positiveNumber,
  providerName,
  type Upstream
} from "../kit/index.ts"
import { type Candidate, describe, normalize, type SearchResult } from "./results.ts"

export { MAX_UPSTREAM_MESSAGE_CHARS } from "../kit/index.ts"
export { MAX_SNIPPET_CHARS, MAX_TITLE_CHARS, MAX_URL_CHARS } from "./results.ts"

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

export interface TavilyOptions {
  /** Provider name in the catalogue and in failures; default "tavily". */
  readonly name?: string | undefined
  /** Scheme, host and optional path prefix; default https://api.tavily.com. */
  readonly baseUrl?: string | undefined
  /** `tvly-...` */
  readonly apiKey: Redacted.Redacted<string>
  /** Flat price per query, from the operator's price card. */
  readonly unitPrice: UnitPrice
  /** Limit for the whole call, from connecting to the end of the answer; default 15 s. */
  readonly timeoutMs?: number | undefined
  /** Largest answer accepted; default 2 MiB. */
  readonly maxResponseBytes?: number | undefined
}

// ---------------------------------------------------------------------------
// Settings

interface Settings {
  readonly name: string
  readonly url: string
  readonly apiKey: string
  readonly unitPrice: UnitPrice
  readonly upstream: Upstream
}

/**
 * Tavily's error text: `detail.error`, a plain `detail`, the first message of
 * a validation error, or a top-level `error` or `message`.
 */
const tavilyErrorDetail = (body: unknown): ErrorDetail | undefined => {
  if (!isRecord(body)) return undefined
  const detail = body.detail
  if (isRecord(detail) && typeof detail.error === "string") return { message: detail.error }
  if (typeof detail === "string") return { message: detail }
  if (Array.isArray(detail) && isRecord(detail[0]) && typeof detail[0].msg === "string") {
    const where = Array.isArray(detail[0].loc) ? `${detail[0].loc.map(String).join(".")}: ` : ""
    return { message: `${where}${detail[0].msg}` }
  }
  for (const key of ["error", "message"] as const) {
    if (typeof body[key] === "string") return { message: body[key] }
  }
  return undefined
}

/** Checks the options once; a bad value is a deployment error (a defect naming it). */
const settingsOf = (options: TavilyOptions): Settings => {
  const name = providerName("Tavily", options.name ?? PROVIDER_NAME)
  const url = baseUrlOf(name, options.baseUrl ?? DEFAULT_BASE_URL) + SEARCH_PATH
  const apiKey = credential(name, "API key", options.apiKey)
  const unitPrice = checkUnitPrice(name, options.unitPrice, "query")
  const upstream: Upstream = {
    provider: name,
    timeoutMs: positiveNumber(name, "timeoutMs", options.timeoutMs, DEFAULT_TIMEOUT_MS),
    maxResponseBytes: positiveInteger(name, "maxResponseBytes", options.maxResponseBytes, DEFAULT_MAX_RESPONSE_BYTES),
    secrets: [apiKey],
    errorDetail: tavilyErrorDetail,
    errorText: "page"
  }
  return { name, url, apiKey, unitPrice, upstream }
}

// ---------------------------------------------------------------------------
// Tavily's answer

const parseAnswer = (settings: Settings, json: unknown, limit: number): Result.Result<Array<SearchResult>, ProviderFailure> => {
  const malformed = (what: string) => Result.fail(failure(settings.name, "malformed", `${settings.name}'s answer ${what}`))
  if (!isRecord(json)) return malformed("is not a JSON object")
  if (!Array.isArray(json.results)) return malformed(`has "results" ${describe(json.results)}, not an array`)
  const candidates = json.results.filter(isRecord).map((item): Candidate => ({
    title: item.title,
    url: item.url,
    snippet: item.content
  }))
  return Result.succeed(normalize(candidates, limit))
}

// ---------------------------------------------------------------------------
// The provider

export const make = (options: TavilyOptions): Effect.Effect<Provider<"search">, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() => settingsOf(options))
    const client = yield* HttpClient.HttpClient
    const price = settings.unitPrice.priceMicroUsd

    const run = Effect.fn("Tavily.run")(
      function*(input: SearchInput) {
        const limit = input.numResults ?? DEFAULT_NUM_RESULTS
        const request = HttpClientRequest.bearerToken(
          jsonPost(settings.url, { query: input.query, max_results: Math.min(limit, MAX_RESULTS), search_depth: "basic" }),
          settings.apiKey
        )
        const json = yield* exchangeJson(client, settings.upstream, request)
        const results = parseAnswer(settings, json, limit)
        if (Result.isFailure(results)) return yield* results.failure
        const output: SearchOutput = { results: results.success, query: input.query, totalResults: results.success.length }
        return { output, actualMicroUsd: price }
      },
      // The bearer token is redacted from spans, and no trace headers go to Tavily (http.ts).
      defectsUnavailable(settings.name, [settings.apiKey])
    )

    return {
      name: settings.name,
      capability: "search",
      unitPrice: settings.unitPrice,
      quote: () => Result.succeed({ microUsd: price }),
      run: (input) => run(input)
    } satisfies Provider<"search">
  })
