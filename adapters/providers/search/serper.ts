import { Schema } from "effect"
import { decodeOrUndefined, type ErrorDetail, jsonPost } from "../kit/index.ts"
import { keyedSearch, keyedSearchConfig, type KeyedSearchOptions, type SearchEngine } from "../kit/search.ts"

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

/** Default base URL https://google.serper.dev, timeout 15 s, answers up to 2 MiB; a flat price per query. */
export type SerperOptions = KeyedSearchOptions

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

const Answer = Schema.Struct({ organic: Schema.optional(Schema.NullOr(Schema.Array(Schema.Unknown))) })

// ---------------------------------------------------------------------------
// The provider

const engine: SearchEngine<typeof Answer> = {
  label: "Serper",
  name: PROVIDER_NAME,
  baseUrl: DEFAULT_BASE_URL,
  path: SEARCH_PATH,
  method: "POST",
  maxResults: MAX_NUM,
  printableKey: true,
  errors: { errorDetail: serperErrorDetail, errorText: "page" },
  request: (url, q, num, key) => jsonPost(url, { q, num }, { "X-API-KEY": key }),
  answer: Answer,
  hits: (answer) =>
    (answer.organic ?? []).flatMap((item) => hitOf(item) ?? []).map((hit) => ({ title: hit.title, url: hit.link, snippet: hit.snippet })),
  keyVar: "SERPER_API_KEY",
  service: {
    name: "Serper",
    description: "Serper (Google web results) with the operator's credentials",
    endpoint: "Web search",
    credentials: (key) => ({ "x-api-key": key })
  }
}

export const make = keyedSearch(engine)

/** SERPER_API_KEY: the `serper` price card (per query); the proxy offers the search endpoint. */
export const fromConfig = keyedSearchConfig(engine, make)
