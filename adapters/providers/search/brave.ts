import { Effect, type Redacted, Result } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import type { Provider, ProviderFailure, UnitPrice } from "../../../src/capabilities/Provider.ts"
import type { SearchInput, SearchOutput } from "../../../src/capabilities/schemas.ts"
import {
  baseUrlOf,
  checkUnitPrice,
  clip,
  credential,
  defectsUnavailable,
  type ErrorDetail,
  exchangeJson,
  failure,
  isRecord,
  positiveInteger,
  positiveNumber,
  providerName,
  type Upstream
} from "../kit/index.ts"
import { type Candidate, describe, normalize, type SearchResult } from "./results.ts"

export { MAX_UPSTREAM_MESSAGE_CHARS } from "../kit/index.ts"
export { MAX_SNIPPET_CHARS, MAX_TITLE_CHARS, MAX_URL_CHARS } from "./results.ts"

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

export interface BraveOptions {
  /** Provider name in the catalogue and in failures; default "brave". */
  readonly name?: string | undefined
  /** Scheme, host and optional path prefix; default https://api.search.brave.com. */
  readonly baseUrl?: string | undefined
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

/** Brave's error text: `error.detail` (with `error.code`). */
const braveErrorDetail = (body: unknown): ErrorDetail | undefined => {
  if (!isRecord(body) || !isRecord(body.error)) return undefined
  const { code, detail } = body.error
  const text = [typeof code === "string" ? code : "", typeof detail === "string" ? detail : ""]
    .filter((part) => part !== "")
    .join(": ")
  return text === "" ? undefined : { message: text }
}

/** Checks the options once; a bad value is a deployment error (a defect naming it). */
const settingsOf = (options: BraveOptions): Settings => {
  const name = providerName("Brave", options.name ?? PROVIDER_NAME)
  const url = baseUrlOf(name, options.baseUrl ?? DEFAULT_BASE_URL) + SEARCH_PATH
  const apiKey = credential(name, "API key", options.apiKey)
  const unitPrice = checkUnitPrice(name, options.unitPrice, "query")
  const upstream: Upstream = {
    provider: name,
    timeoutMs: positiveNumber(name, "timeoutMs", options.timeoutMs, DEFAULT_TIMEOUT_MS),
    maxResponseBytes: positiveInteger(name, "maxResponseBytes", options.maxResponseBytes, DEFAULT_MAX_RESPONSE_BYTES),
    secrets: [apiKey],
    errorDetail: braveErrorDetail,
    errorText: "page"
  }
  return { name, url, apiKey, unitPrice, upstream }
}

// ---------------------------------------------------------------------------
// Brave's answer

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

const parseAnswer = (settings: Settings, json: unknown, limit: number): Result.Result<Array<SearchResult>, ProviderFailure> => {
  const malformed = (what: string) => Result.fail(failure(settings.name, "malformed", `${settings.name}'s answer ${what}`, [settings.apiKey]))
  if (!isRecord(json)) return malformed("is not a JSON object")
  if (json.type !== "search") return malformed(`has type ${JSON.stringify(clip(String(json.type), 40))}, not "search"`)
  if (json.web === undefined || json.web === null) return Result.succeed([])
  if (!isRecord(json.web)) return malformed(`has a "web" that is ${describe(json.web)}`)
  const results = json.web.results
  if (!Array.isArray(results)) return malformed(`has "web.results" ${describe(results)}, not an array`)
  const candidates = results.filter(isRecord).map((item): Candidate => ({
    title: item.title,
    url: item.url,
    snippet: item.description
  }))
  return Result.succeed(normalize(candidates, limit, cleanBraveText))
}

// ---------------------------------------------------------------------------
// The provider

export const make = (options: BraveOptions): Effect.Effect<Provider<"search">, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() => settingsOf(options))
    const client = yield* HttpClient.HttpClient
    const price = settings.unitPrice.priceMicroUsd

    const run = Effect.fn("Brave.run")(
      function*(input: SearchInput) {
        const limit = input.numResults ?? DEFAULT_NUM_RESULTS
        const request = HttpClientRequest.get(settings.url, {
          urlParams: { q: input.query, count: String(Math.min(limit, MAX_COUNT)) },
          headers: { [KEY_HEADER]: settings.apiKey },
          acceptJson: true
        })
        const json = yield* exchangeJson(client, settings.upstream, request)
        const results = parseAnswer(settings, json, limit)
        if (Result.isFailure(results)) return yield* results.failure
        const output: SearchOutput = { results: results.success, query: input.query, totalResults: results.success.length }
        return { output, actualMicroUsd: price }
      },
      // The key header is redacted from spans, and no trace headers go to Brave (http.ts).
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
