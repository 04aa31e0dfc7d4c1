import { Clock, Duration, Effect, Result } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import type { Provider, ProviderFailure, UnitPrice } from "../../../src/capabilities/Provider.ts"
import type { SearchInput, SearchOutput } from "../../../src/capabilities/schemas.ts"
import {
  baseUrlOf,
  checkUnitPrice,
  clip,
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
import { type Candidate, describe, normalize } from "./results.ts"

export { MAX_UPSTREAM_MESSAGE_CHARS } from "../kit/index.ts"
export { MAX_SNIPPET_CHARS, MAX_TITLE_CHARS, MAX_URL_CHARS } from "./results.ts"

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

export interface SearXNGOptions {
  /** Provider name in the catalogue and in failures; default "searxng". */
  readonly name?: string | undefined
  /** The instance: scheme, host and optional path prefix, e.g. `http://127.0.0.1:8888`. */
  readonly baseUrl: string
  /** Flat price per query, from the operator's price card. */
  readonly unitPrice: UnitPrice
  /** Limit for the whole call (every page), from connecting to the end of the last answer; default 15 s. */
  readonly timeoutMs?: number | undefined
  /** Largest answer accepted, per page; default 2 MiB. */
  readonly maxResponseBytes?: number | undefined
}

// ---------------------------------------------------------------------------
// Settings

interface Settings {
  readonly name: string
  readonly url: string
  readonly unitPrice: UnitPrice
  readonly timeoutMs: number
  readonly upstream: Upstream
}

/**
 * SearXNG's errors are mostly HTML or plain text pages, whose text is kept
 * (`errorText: "page"`); a JSON one says `error` or `message`.
 */
const searxngErrorDetail = (body: unknown): ErrorDetail | undefined => {
  if (!isRecord(body)) return undefined
  for (const key of ["error", "message"] as const) {
    if (typeof body[key] === "string") return { message: body[key] }
  }
  return undefined
}

/** Checks the options once; a bad value is a deployment error (a defect naming it). */
const settingsOf = (options: SearXNGOptions): Settings => {
  const name = providerName("SearXNG", options.name ?? PROVIDER_NAME)
  const url = baseUrlOf(name, options.baseUrl) + SEARCH_PATH
  const unitPrice = checkUnitPrice(name, options.unitPrice, "query")
  const timeoutMs = positiveNumber(name, "timeoutMs", options.timeoutMs, DEFAULT_TIMEOUT_MS)
  const upstream: Upstream = {
    provider: name,
    timeoutMs,
    maxResponseBytes: positiveInteger(name, "maxResponseBytes", options.maxResponseBytes, DEFAULT_MAX_RESPONSE_BYTES),
    errorDetail: searxngErrorDetail,
    errorText: "page",
    // Without `json` in the instance's `search.formats`, SearXNG answers 403 to every search.
    onErrorStatus: (status) => (status === 403 ? { message: JSON_DISABLED_MESSAGE } : undefined)
  }
  return { name, url, unitPrice, timeoutMs, upstream }
}

// ---------------------------------------------------------------------------
// SearXNG's answer

interface Page {
  readonly candidates: ReadonlyArray<Candidate>
  /** `number_of_results` when it is a positive count. */
  readonly reportedTotal: number | undefined
  /** Engines that failed, as "engine (reason)". */
  readonly unresponsive: ReadonlyArray<string>
}

const parsePage = (settings: Settings, json: unknown): Result.Result<Page, ProviderFailure> => {
  const malformed = (what: string) => Result.fail(failure(settings.name, "malformed", `${settings.name}'s answer ${what}`))
  if (!isRecord(json)) return malformed("is not a JSON object")
  if (!Array.isArray(json.results)) return malformed(`has "results" ${describe(json.results)}, not an array`)
  const total = json.number_of_results
  const reportedTotal = typeof total === "number" && Number.isFinite(total) && total >= 1 ? Math.floor(total) : undefined
  const unresponsive = Array.isArray(json.unresponsive_engines)
    ? json.unresponsive_engines.slice(0, 10).map((entry) =>
      Array.isArray(entry) ? `${String(entry[0])} (${String(entry[1])})` : String(entry)
    )
    : []
  const candidates = json.results.filter(isRecord).map((item): Candidate => ({
    title: item.title,
    url: item.url,
    snippet: item.content
  }))
  return Result.succeed({ candidates, reportedTotal, unresponsive })
}

// ---------------------------------------------------------------------------
// The provider

export const make = (options: SearXNGOptions): Effect.Effect<Provider<"search">, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() => settingsOf(options))
    const client = yield* HttpClient.HttpClient
    const price = settings.unitPrice.priceMicroUsd

    const timedOut = () =>
      failure(settings.name, "timeout", `${settings.name} did not answer within ${settings.timeoutMs} ms`)

    /** One page, within the time left before `deadline`. */
    const fetchPage = (query: string, pageno: number, deadline: number) =>
      Effect.gen(function*() {
        const remaining = deadline - (yield* Clock.currentTimeMillis)
        if (remaining <= 0) return yield* timedOut()
        const request = HttpClientRequest.get(settings.url, {
          urlParams: pageno === 1 ? { q: query, format: "json" } : { q: query, format: "json", pageno: String(pageno) },
          acceptJson: true
        })
        // The exchange's own limit is the whole call's; the pages share it.
        const json = yield* exchangeJson(client, settings.upstream, request).pipe(
          Effect.timeoutOrElse({ duration: Duration.millis(remaining), orElse: () => Effect.fail(timedOut()) })
        )
        const page = parsePage(settings, json)
        if (Result.isFailure(page)) return yield* page.failure
        return page.success
      })

    const run = Effect.fn("SearXNG.run")(
      function*(input: SearchInput) {
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
        const output: SearchOutput = {
          results,
          query: input.query,
          totalResults: first.reportedTotal ?? results.length
        }
        return { output, actualMicroUsd: price }
      },
      // No trace headers go to the instance (http.ts).
      defectsUnavailable(settings.name)
    )

    return {
      name: settings.name,
      capability: "search",
      unitPrice: settings.unitPrice,
      quote: () => Result.succeed({ microUsd: price }),
      run: (input) => run(input)
    } satisfies Provider<"search">
  })
