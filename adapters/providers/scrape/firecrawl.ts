/**
 * `scrape` through Firecrawl's scrape endpoint, API v2, the current one (v1
 * is still served for existing integrations; its `metadata` has no `url` or
 * `contentType`, which the mapping below would do without).
 *
 * Request: `POST {baseUrl}/v2/scrape` (default base https://api.firecrawl.dev)
 * with `Authorization: Bearer fc-…` and the JSON body
 * `{ url, formats: ["rawHtml", "links"], onlyMainContent: false, timeout }`:
 * the page as the site sent it (the cleaned `html` format drops `<head>`,
 * scripts and, by default, everything outside the main content, which CSS
 * selectors written against the real page would then miss), and Firecrawl's
 * own list of the page's links. `timeout` (Firecrawl's limit for loading the
 * page) is a few seconds under ours, so a slow page comes back as Firecrawl's
 * 408 rather than as our own timeout.
 *
 * Answer: `{ success: true, data: { rawHtml, links: [url…], metadata: {
 * title, statusCode, contentType, sourceURL, url, … } } }`. It maps to
 * `ScrapeOutput` like the built-in scraper's result: `url` is
 * `metadata.url` (after redirects; else `sourceURL`, else the URL asked),
 * `status` `metadata.statusCode`, `contentType` `metadata.contentType` (else
 * text/html), and `extracted` and `links` come from `rawHtml` parsed with
 * linkedom, exactly as the built-in scraper does it; Firecrawl's link list
 * adds the URLs the markup did not show (links made by scripts), without text.
 *
 * Errors: `{ success: false, error, details? }` with 401/402/403/other 4xx
 * (`rejected`), 408 (`timeout`), 429 (`rate_limited`), 5xx (`unavailable`);
 * a 200 with `success: false` is `rejected` with Firecrawl's message. No
 * answer within `timeoutMs` is `timeout`, an answer over `maxResponseBytes`
 * `too_large`, an unreadable one `malformed`, a refused connection
 * `network` (the exchange itself is the kit's, ../kit/exchange.ts).
 *
 * URL safety, as for Jina: Firecrawl fetches the page from its own network;
 * the core checks the address with `OutboundHttp.check` before money is held.
 */
import { Effect, Option, Redacted, Result, Schema } from "effect"
import { HttpClientRequest } from "effect/http"
import { type Provider, ProviderFailure } from "../../../src/capabilities/Provider.ts"
import type { ScrapeInput, ScrapeOutput } from "../../../src/capabilities/schemas.ts"
import {
  decodeOrUndefined,
  defectsUnavailable,
  type ErrorDetail,
  exchangeJson,
  jsonPost,
  NonEmptyText,
  type UpstreamOptions,
  upstreamSettings
} from "../kit/index.ts"
import { clip } from "../kit/page.ts"
import { quoteScrape, scrapeHtml } from "../kit/scrapePage.ts"
import { env, nothing, one, type ProviderConfig, unitPriceOf } from "../kit/config.ts"
import { UpstreamClient } from "../kit/index.ts"

export const DEFAULT_NAME = "firecrawl"
export const DEFAULT_BASE_URL = "https://api.firecrawl.dev"
export const SCRAPE_PATH = "/v2/scrape"
export const DEFAULT_TIMEOUT_MS = 60_000
/** Firecrawl's own page timeout is this much under ours; it accepts 1 s to 300 s. */
const UPSTREAM_TIMEOUT_MARGIN_MS = 5_000
export const DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024
/** More links than the output keeps are not looked at. */
const MAX_UPSTREAM_LINKS = 5_000

/** Default name "firecrawl", base URL https://api.firecrawl.dev, timeout 60 s, answers up to 16 MiB; a flat price per page. */
export interface Options extends UpstreamOptions {
  /** Without one, only a self-hosted server that needs none. */
  readonly apiKey?: Redacted.Redacted<string> | undefined
}

const errorBodyOf = decodeOrUndefined(Schema.Struct({ error: NonEmptyText, code: Schema.optional(Schema.Unknown) }))

/** Firecrawl's error body: `{ success: false, error, details? }`. */
const firecrawlErrorDetail = (body: unknown): ErrorDetail | undefined => {
  const decoded = errorBodyOf(body)
  if (decoded === undefined) return undefined
  return { message: decoded.error, type: typeof decoded.code === "string" && decoded.code !== "" ? decoded.code : undefined }
}

/** A metadata field Firecrawl may send as a string or as a list of strings. */
const firstString = (value: unknown): string | undefined => {
  const first: unknown = Array.isArray(value) ? value[0] : value
  return typeof first === "string" && first.trim() !== "" ? first.trim() : undefined
}

export interface Page {
  readonly html: string
  readonly url: string
  readonly status: number
  readonly contentType: string
  readonly links: ReadonlyArray<string>
}

type Parsed = Result.Result<Page, { readonly reason: "malformed" | "rejected"; readonly message: string }>

/** Reads Firecrawl's answer; `requested` stands in for a missing URL. */
const Answer = Schema.Struct({
  success: Schema.Unknown,
  data: Schema.optional(Schema.Unknown)
})
const Data = Schema.Struct({
  rawHtml: Schema.optional(Schema.Unknown),
  html: Schema.optional(Schema.Unknown),
  metadata: Schema.optional(Schema.Unknown),
  links: Schema.optional(Schema.Unknown)
})
const answerOf = decodeOrUndefined(Answer)
const dataOf = decodeOrUndefined(Data)
const metadataOf = decodeOrUndefined(Schema.Record(Schema.String, Schema.Unknown))

export const parseAnswer = (body: unknown, requested: string): Parsed => {
  const malformed = (message: string) => Result.fail({ reason: "malformed" as const, message })
  const answer = answerOf(body)
  if (answer === undefined) return malformed("the answer is not a JSON object")
  if (answer.success !== true) {
    const detail = firecrawlErrorDetail(body)
    return detail === undefined
      ? malformed("the answer is not marked successful")
      : Result.fail({ reason: "rejected", message: detail.message })
  }
  const data = dataOf(answer.data)
  if (data === undefined) return malformed("the answer has no data object")
  const html = typeof data.rawHtml === "string" ? data.rawHtml : typeof data.html === "string" ? data.html : undefined
  if (html === undefined) return malformed("the answer has no rawHtml")
  const metadata = metadataOf(data.metadata) ?? {}
  const status = metadata.statusCode
  if (status !== undefined && !(typeof status === "number" && Number.isInteger(status) && status >= 100 && status <= 999)) {
    return malformed("metadata.statusCode is not an HTTP status")
  }
  const links = Array.isArray(data.links)
    ? data.links.slice(0, MAX_UPSTREAM_LINKS).filter((link): link is string => typeof link === "string")
    : []
  return Result.succeed({
    html,
    url: firstString(metadata.url) ?? firstString(metadata.sourceURL) ?? requested,
    status: typeof status === "number" ? status : 200,
    contentType: firstString(metadata.contentType) ?? "text/html",
    links
  })
}

export const make = (options: Options): Effect.Effect<Provider<"scrape">, never, UpstreamClient> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() =>
      upstreamSettings(options, {
        label: "scrape/firecrawl",
        name: DEFAULT_NAME,
        baseUrl: DEFAULT_BASE_URL,
        allowCredentials: true,
        per: "page",
        timeoutMs: DEFAULT_TIMEOUT_MS,
        maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES,
        optionalKey: options.apiKey,
        errors: { unreachable: "network", errorDetail: firecrawlErrorDetail, requestIdHeader: "x-request-id" }
      })
    )
    const client = yield* UpstreamClient
    const { name, unitPrice, upstream } = settings
    const { apiKey } = options
    const upstreamTimeoutMs = Math.min(300_000, Math.max(1_000, settings.timeoutMs - UPSTREAM_TIMEOUT_MARGIN_MS))
    const fail = (reason: ProviderFailure["reason"], message: string) => new ProviderFailure({ provider: name, reason, message })

    const run = Effect.fn("Firecrawl.run")(function*(input: ScrapeInput) {
      const body = { url: input.url, formats: ["rawHtml", "links"], onlyMainContent: false, timeout: upstreamTimeoutMs }
      let request = jsonPost(`${settings.baseUrl}${SCRAPE_PATH}`, body)
      if (apiKey !== undefined) request = HttpClientRequest.bearerToken(request, apiKey)
      const answer = yield* exchangeJson(client, upstream, request)
      const parsed = parseAnswer(answer, input.url)
      if (Result.isFailure(parsed)) return yield* fail(parsed.failure.reason, clip(`${name}: ${parsed.failure.message}`, 300))
      const page = parsed.success
      const scraped = yield* Effect.try({
        try: () => scrapeHtml(page.html, page.url, input, page.links),
        catch: (error) => fail("malformed", clip(`${name}: the page could not be parsed: ${error instanceof Error ? error.message : String(error)}`))
      })
      const output: ScrapeOutput = { url: page.url, status: page.status, contentType: page.contentType, ...scraped }
      return { output, actualMicroUsd: unitPrice.priceMicroUsd }
    }, defectsUnavailable(name, upstream.secrets))

    return { name, capability: "scrape", unitPrice, quote: quoteScrape(unitPrice), run } satisfies Provider<"scrape">
  })

// ---------------------------------------------------------------------------
// Configuration

/** FIRECRAWL_API_KEY: the `firecrawl` price card (per page). */
export const fromConfig: ProviderConfig = (cards) =>
  Effect.gen(function*() {
    const key = yield* env("FIRECRAWL_API_KEY")
    if (Option.isNone(key)) return nothing
    const unitPrice = yield* unitPriceOf(cards, DEFAULT_NAME, "scrape", "page")
    return one(DEFAULT_NAME, "scrape", make({ apiKey: Redacted.make(key.value), unitPrice }))
  })
