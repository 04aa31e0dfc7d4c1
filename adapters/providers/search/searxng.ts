import { Clock, Duration, Effect, Option, Schema } from "effect"
import { HttpClientRequest } from "effect/http"
import type { Provider } from "../../../src/capabilities/Provider.ts"
import type { SearchInput } from "../../../src/capabilities/schemas.ts"
import {
  answerDecoder,
  clip,
  decodeOrUndefined,
  type ErrorDetail,
  exchangeJson,
  failure,
  perCallProvider,
  type UpstreamOptions,
  upstreamSettings
} from "../kit/index.ts"
import { type Candidate, normalize } from "../kit/searchResults.ts"
import { env, httpUrl, nothing, one, type ProviderConfig, unitPriceOf } from "../kit/config.ts"
import { UpstreamClient } from "../kit/index.ts"

/**
 * `search` through a self-hosted SearXNG instance (its JSON search API; no key).
 *
 * Request: `GET {baseUrl}/search?q=<query>&format=json`, plus `pageno=<k>` for
 * the pages after the first. The `json` format must be listed under
 * `search.formats` in the instance's settings.yml; otherwise SearXNG answers
 * 403, reported as "JSON output is disabled on this SearXNG instance". An
 * instance meant for this use should also run without the bot limiter, which
 * answers 429 to clients that are not browsers.
 *
 * Answer: `{ query, number_of_results, results: [{ url, title, content,
 * engine, engines, score, category, ... }], answers, corrections, infoboxes,
 * suggestions, unresponsive_engines: [[engine, reason], ...] }`; the snippet
 * is `content`. `totalResults` is `number_of_results` when the engines
 * reported one (> 0), else the number of results returned. A first page with
 * no results while engines failed is reported as `unavailable`, so that
 * nobody pays for an empty answer caused by broken engines.
 *
 * SearXNG has no result count: a page holds whatever its engines returned.
 * When the first page has fewer results than asked for, the next pages are
 * read (at most `MAX_PAGES` in all, within the same time limit) until there
 * are enough or a page adds nothing new. Those later pages are a bonus: if one
 * fails or time runs out, the results gathered so far are the answer.
 */

export const PROVIDER_NAME = "searxng"
export const SEARCH_PATH = "/search"
/** Pages read at most for one call. */
export const MAX_PAGES = 5

export const DEFAULT_NUM_RESULTS = 10
export const DEFAULT_TIMEOUT_MS = 15_000
export const DEFAULT_MAX_RESPONSE_BYTES = 2 * 1024 * 1024

export const JSON_DISABLED_MESSAGE = "JSON output is disabled on this SearXNG instance"

/** Default name "searxng", timeout 15 s for the whole call (every page), answers up to 2 MiB per page; a flat price per query. */
export interface SearXNGOptions extends UpstreamOptions {
  /** The instance: scheme, host and optional path prefix, e.g. `http://127.0.0.1:8888`. */
  readonly baseUrl: string
}

// ---------------------------------------------------------------------------
// SearXNG's answer

const errorBodyOf = decodeOrUndefined(Schema.Struct({ error: Schema.optional(Schema.Unknown), message: Schema.optional(Schema.Unknown) }))

/**
 * SearXNG's errors are mostly HTML or plain text pages, whose text is kept
 * (`errorText: "page"`); a JSON one says `error` or `message`.
 */
const searxngErrorDetail = (body: unknown): ErrorDetail | undefined => {
  const decoded = errorBodyOf(body)
  for (const text of [decoded?.error, decoded?.message]) if (typeof text === "string") return { message: text }
  return undefined
}

const hitOf = decodeOrUndefined(Schema.Struct({
  title: Schema.optional(Schema.Unknown),
  url: Schema.optional(Schema.Unknown),
  content: Schema.optional(Schema.Unknown)
}))

const PageAnswer = Schema.Struct({
  results: Schema.Array(Schema.Unknown),
  number_of_results: Schema.optional(Schema.Unknown),
  unresponsive_engines: Schema.optional(Schema.Unknown)
})
const decodePage = answerDecoder(PageAnswer)

interface Page {
  readonly candidates: ReadonlyArray<Candidate>
  /** `number_of_results` when it is a positive count. */
  readonly reportedTotal: number | undefined
  /** Engines that failed, as "engine (reason)". */
  readonly unresponsive: ReadonlyArray<string>
}

const pageOf = (json: typeof PageAnswer.Type): Page => {
  const total = json.number_of_results
  const reportedTotal = typeof total === "number" && Number.isFinite(total) && total >= 1 ? Math.floor(total) : undefined
  const engines = json.unresponsive_engines
  const unresponsive = Array.isArray(engines)
    ? engines.slice(0, 10).map((entry: unknown) => Array.isArray(entry) ? `${String(entry[0])} (${String(entry[1])})` : String(entry))
    : []
  const candidates = json.results.flatMap((item) => hitOf(item) ?? []).map((hit): Candidate => ({
    title: hit.title,
    url: hit.url,
    snippet: hit.content
  }))
  return { candidates, reportedTotal, unresponsive }
}

// ---------------------------------------------------------------------------
// The provider

export const make = (options: SearXNGOptions): Effect.Effect<Provider<"search">, never, UpstreamClient> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() =>
      upstreamSettings(options, {
        label: "SearXNG",
        name: PROVIDER_NAME,
        per: "query",
        timeoutMs: DEFAULT_TIMEOUT_MS,
        maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES,
        errors: {
          errorDetail: searxngErrorDetail,
          errorText: "page",
          // Without `json` in the instance's `search.formats`, SearXNG answers 403 to every search.
          onErrorStatus: (status) => (status === 403 ? { message: JSON_DISABLED_MESSAGE } : undefined)
        }
      })
    )
    const client = yield* UpstreamClient
    const url = settings.baseUrl + SEARCH_PATH

    const timedOut = () =>
      failure(settings.name, "timeout", `${settings.name} did not answer within ${settings.timeoutMs} ms`)

    /** One page, within the time left before `deadline`. */
    const fetchPage = (query: string, pageno: number, deadline: number) =>
      Effect.gen(function*() {
        const remaining = deadline - (yield* Clock.currentTimeMillis)
        if (remaining <= 0) return yield* timedOut()
        const request = HttpClientRequest.get(url, {
          urlParams: pageno === 1 ? { q: query, format: "json" } : { q: query, format: "json", pageno: String(pageno) },
          acceptJson: true
        })
        // The exchange's own limit is the whole call's; the pages share it.
        const json = yield* exchangeJson(client, settings.upstream, request).pipe(
          Effect.timeoutOrElse({ duration: Duration.millis(remaining), orElse: () => Effect.fail(timedOut()) })
        )
        return pageOf(yield* Effect.fromResult(decodePage(settings.name, json)))
      })

    // No trace headers go to the instance (exchange.ts).
    return perCallProvider("search", settings, "SearXNG.run", (input: SearchInput) =>
      Effect.gen(function*() {
        const limit = input.numResults ?? DEFAULT_NUM_RESULTS
        const deadline = (yield* Clock.currentTimeMillis) + settings.timeoutMs
        const first = yield* fetchPage(input.query, 1, deadline)
        const candidates: Array<Candidate> = [...first.candidates]
        let results = normalize(candidates, limit)
        if (results.length === 0 && first.unresponsive.length > 0) {
          return yield* failure(
            settings.name,
            "unavailable",
            clip(`${settings.name} found nothing: its engines failed: ${first.unresponsive.join(", ")}`)
          )
        }
        for (let pageno = 2; pageno <= MAX_PAGES && results.length > 0 && results.length < limit; pageno++) {
          const page = yield* Effect.option(fetchPage(input.query, pageno, deadline))
          if (page._tag === "None") break
          candidates.push(...page.value.candidates)
          const before = results.length
          results = normalize(candidates, limit)
          if (results.length === before) break
        }
        return { results, query: input.query, totalResults: first.reportedTotal ?? results.length }
      }))
  })

// ---------------------------------------------------------------------------
// Configuration

/** SEARXNG_URL: a self-hosted instance, the `searxng` price card (per query); not offered through the proxy. */
export const fromConfig: ProviderConfig = (cards) =>
  Effect.gen(function*() {
    const url = yield* env("SEARXNG_URL")
    if (Option.isNone(url)) return nothing
    const baseUrl = yield* httpUrl("SEARXNG_URL", url.value)
    const unitPrice = yield* unitPriceOf(cards, PROVIDER_NAME, "search", "query")
    return one(PROVIDER_NAME, "search", make({ baseUrl, unitPrice }))
  })
