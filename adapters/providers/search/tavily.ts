import { Schema } from "effect"
import { HttpClientRequest } from "effect/http"
import { decodeOrUndefined, type ErrorDetail, jsonPost } from "../kit/index.ts"
import { keyedSearch, keyedSearchConfig, type KeyedSearchOptions, type SearchEngine } from "../kit/search.ts"

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

/** Default base URL https://api.tavily.com, timeout 15 s, answers up to 2 MiB; a flat price per query. The key is `tvly-...`. */
export type TavilyOptions = KeyedSearchOptions

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

const hitOf = decodeOrUndefined(Schema.Struct({
  title: Schema.optional(Schema.Unknown),
  url: Schema.optional(Schema.Unknown),
  content: Schema.optional(Schema.Unknown)
}))

const Answer = Schema.Struct({ results: Schema.Array(Schema.Unknown) })

// ---------------------------------------------------------------------------
// The provider

const engine: SearchEngine<typeof Answer> = {
  label: "Tavily",
  name: PROVIDER_NAME,
  baseUrl: DEFAULT_BASE_URL,
  path: SEARCH_PATH,
  method: "POST",
  maxResults: MAX_RESULTS,
  errors: { errorDetail: tavilyErrorDetail, errorText: "page" },
  request: (url, query, count, key) =>
    HttpClientRequest.bearerToken(jsonPost(url, { query, max_results: count, search_depth: "basic" }), key),
  answer: Answer,
  hits: (answer) =>
    answer.results.flatMap((item) => hitOf(item) ?? []).map((hit) => ({ title: hit.title, url: hit.url, snippet: hit.content })),
  keyVar: "TAVILY_API_KEY",
  service: {
    name: "Tavily",
    description: "Tavily search with the operator's credentials",
    endpoint: "Search",
    credentials: (key) => ({ authorization: `Bearer ${key}` })
  }
}

export const make = keyedSearch(engine)

/** TAVILY_API_KEY: the `tavily` price card (per query); the proxy offers the search endpoint. */
export const fromConfig = keyedSearchConfig(engine, make)
