import { Schema } from "effect"
import { HttpClientRequest } from "effect/http"
import { decodeOrUndefined, type ErrorDetail } from "../kit/index.ts"
import { keyedSearch, keyedSearchConfig, type KeyedSearchOptions, type SearchEngine } from "../kit/search.ts"

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

/** Default base URL https://api.search.brave.com, timeout 15 s, answers up to 2 MiB; a flat price per query. */
export type BraveOptions = KeyedSearchOptions

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

const hitOf = decodeOrUndefined(Schema.Struct({
  title: Schema.optional(Schema.Unknown),
  url: Schema.optional(Schema.Unknown),
  description: Schema.optional(Schema.Unknown)
}))

/** A missing or null `web` is a query without web results. */
const Answer = Schema.Struct({
  type: Schema.Literal("search"),
  web: Schema.optional(Schema.NullOr(Schema.Struct({ results: Schema.Array(Schema.Unknown) })))
})

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

const engine: SearchEngine<typeof Answer> = {
  label: "Brave",
  name: PROVIDER_NAME,
  baseUrl: DEFAULT_BASE_URL,
  path: SEARCH_PATH,
  method: "GET",
  maxResults: MAX_COUNT,
  errors: { errorDetail: braveErrorDetail, errorText: "page" },
  request: (url, q, count, key) =>
    HttpClientRequest.get(url, { urlParams: { q, count: String(count) }, headers: { "X-Subscription-Token": key }, acceptJson: true }),
  answer: Answer,
  hits: (answer) =>
    (answer.web?.results ?? []).flatMap((item) => hitOf(item) ?? []).map((hit) => ({ title: hit.title, url: hit.url, snippet: hit.description })),
  clean: cleanBraveText,
  keyVar: "BRAVE_API_KEY",
  service: {
    name: "Brave Search",
    description: "Brave Search web results with the operator's credentials",
    endpoint: "Web search",
    credentials: (key) => ({ "x-subscription-token": key })
  }
}

export const make = keyedSearch(engine)

/** BRAVE_API_KEY: the `brave` price card (per query); the proxy offers the web search endpoint. */
export const fromConfig = keyedSearchConfig(engine, make)
