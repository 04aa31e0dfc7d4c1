/**
 * `scrape` without an upstream service: the page is fetched through the
 * URL-safe `OutboundHttp` port and parsed with linkedom.
 *
 * Output:
 * - `status` and `contentType` are the site's own; a 404 page is scraped and
 *   returned like any other (the caller sees the status), not failed.
 * - `html`: the decoded page, cut at `MAX_HTML_CHARS`; left out when
 *   `includeHtml` is false.
 * - `extracted` (when selectors are given): for each named CSS selector, the
 *   trimmed text of every match in document order, at most
 *   `MAX_MATCHES_PER_SELECTOR` matches of at most `MAX_MATCH_CHARS` each, and
 *   `MAX_EXTRACTED_CHARS` in all.
 * - `links`: every `<a href>` resolved against the page's base URL, http(s)
 *   only, de-duplicated by URL (first text that is not empty wins), at most
 *   `MAX_LINKS`.
 * - `truncated`: the page was cut at the fetch cap (default 5 MiB: scraping
 *   keeps what was read), or any of the bounds above was reached.
 *
 * Selectors are checked in `quote`, so an invalid one is a validation error
 * before anything is held or fetched. Textual content that is not HTML
 * (`text/*`, JSON, XML) is returned in `html` as text with no links and
 * empty extractions; anything else (images, PDF, octet-stream) is `rejected`.
 *
 * A page costs the unit price, charged only when the call succeeds.
 */
import { Effect } from "effect"
import { type Provider, ProviderFailure } from "../../../src/capabilities/Provider.ts"
import type { ScrapeInput, ScrapeOutput } from "../../../src/capabilities/schemas.ts"
import { OutboundHttp } from "../../../src/ports/Net.ts"
import { clip, decodeBody, type PageOptions, pageSettings, fetchFailure, isHtmlMime, mimeOf, parseInPool, sniff } from "../kit/page.ts"
import { sharedPool } from "../kit/parse-pool.ts"
import { isTextualMime, quoteScrape, type Scraped, scrapeText } from "../kit/scrapePage.ts"

export {
  checkSelectors,
  MAX_EXTRACTED_CHARS,
  MAX_HTML_CHARS,
  MAX_LINK_TEXT_CHARS,
  MAX_LINKS,
  MAX_MATCH_CHARS,
  MAX_MATCHES_PER_SELECTOR,
  scrapeHtml
} from "../kit/scrapePage.ts"
import { nothing, one, type ProviderConfig, switchedOn, unitPriceOf } from "../kit/config.ts"

export const DEFAULT_NAME = "scraper"
export { DEFAULT_PAGE_MAX_BYTES as DEFAULT_MAX_BYTES, DEFAULT_PAGE_TIMEOUT_MS as DEFAULT_TIMEOUT_MS } from "../kit/page.ts"
export const ACCEPT_PAGE = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1"

/** Default name "scraper"; 5 MiB read at most (a longer page is cut there and marked `truncated`), 15 s for the fetch, 10 s to parse. */
export type Options = PageOptions


export const make = (options: Options): Effect.Effect<Provider<"scrape">, never, OutboundHttp> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() => pageSettings("scrape/builtin", DEFAULT_NAME, options))
    const name = settings.name
    const http = yield* OutboundHttp
    const { unitPrice } = options
    // Workers start on the first page, not at start-up: loading the parser costs a second or two of CPU.
    const pool = options.pool ?? sharedPool()
    const fail = (reason: ProviderFailure["reason"], message: string) => new ProviderFailure({ provider: name, reason, message })

    const run = Effect.fn("ScrapeBuiltin.run")(function*(input: ScrapeInput) {
      const page = yield* http.get(input.url, {
        maxBytes: settings.maxBytes,
        timeoutMs: settings.timeoutMs,
        headers: { accept: ACCEPT_PAGE }
      }).pipe(Effect.mapError((error) => fetchFailure(name, error, settings)))

      const mime = mimeOf(page.contentType)
      const kind = mime === "" ? sniff(page.body) : isHtmlMime(mime) ? "html" : isTextualMime(mime) ? "text" : "binary"
      if (kind === "binary") {
        return yield* fail("rejected", `unsupported content type ${clip(mime === "" ? "(binary, undeclared)" : mime, 100)}`)
      }
      const text = decodeBody(page.body, page.contentType, kind === "html")
      const scraped = kind === "html"
        // Parsed in a worker thread, off the event loop, within the parse deadline.
        ? (yield* parseInPool(name, pool, {
          kind: "scrape",
          html: text,
          pageUrl: page.url,
          input: { selectors: input.selectors, includeHtml: input.includeHtml }
        }, settings.parseDeadlineMs)) as Scraped
        : scrapeText(text, input)
      const output: ScrapeOutput = {
        url: page.url,
        status: page.status,
        contentType: page.contentType,
        ...scraped,
        truncated: page.truncated || scraped.truncated
      }
      return { output, actualMicroUsd: unitPrice.priceMicroUsd }
    })

    return { name, capability: "scrape", unitPrice, quote: quoteScrape(unitPrice), run } satisfies Provider<"scrape">
  })

// ---------------------------------------------------------------------------
// Configuration

/** On unless BUILTIN_SCRAPE=off: the `scraper` price card (per page). */
export const fromConfig: ProviderConfig = (cards) =>
  Effect.gen(function*() {
    if (!(yield* switchedOn("BUILTIN_SCRAPE"))) return nothing
    const unitPrice = yield* unitPriceOf(cards, DEFAULT_NAME, "scrape", "page")
    return one(DEFAULT_NAME, "scrape", make({ unitPrice }))
  })
