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
 * A page costs the unit price, charged only when the call succeeds. The
 * selector check and the HTML scraping are shared with the Firecrawl adapter.
 */
import { Effect, Result } from "effect"
import { type Provider, ProviderFailure, type Quote, type UnitPrice } from "../../../src/capabilities/Provider.ts"
import type { ScrapeInput, ScrapeOutput } from "../../../src/capabilities/schemas.ts"
import { ValidationError } from "../../../src/domain/errors.ts"
import { OutboundHttp } from "../../../src/ports/Net.ts"
import { positiveInteger } from "../http.ts"
import {
  baseUrlOf,
  checkFlatPrice,
  clip,
  cut,
  decodeBody,
  type DomDocument,
  fetchFailure,
  isHtmlMime,
  isJsonMime,
  mimeOf,
  oneLineOrNull,
  parseDocument,
  parseInPool,
  resolveUrl,
  sniff,
  visibleText
} from "../read/builtin.ts"
import { DEFAULT_PARSE_DEADLINE_MS, type ParsePool, sharedPool } from "../read/parse-pool.ts"

export const DEFAULT_NAME = "scraper"
export const DEFAULT_MAX_BYTES = 5 * 1024 * 1024
export const DEFAULT_TIMEOUT_MS = 15_000
export const MAX_HTML_CHARS = 2_000_000
export const MAX_MATCHES_PER_SELECTOR = 100
export const MAX_MATCH_CHARS = 10_000
export const MAX_EXTRACTED_CHARS = 1_000_000
export const MAX_LINKS = 500
export const MAX_LINK_TEXT_CHARS = 500
export const ACCEPT_PAGE = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1"

export interface Options {
  readonly name?: string | undefined
  /** From the operator's price card (`per: "page"`). */
  readonly unitPrice: UnitPrice
  /** Bytes read at most; a longer page is cut there and marked `truncated`. Default 5 MiB. */
  readonly maxBytes?: number | undefined
  /** For the whole fetch, redirects included. Default 15 s. */
  readonly timeoutMs?: number | undefined
  /** Longest a page may take to parse, in the worker pool, queue wait included. Default 10 s. */
  readonly parseDeadlineMs?: number | undefined
  /** The worker pool; default the process's shared one. */
  readonly pool?: ParsePool | undefined
}

// ---------------------------------------------------------------------------
// Selectors
// ---------------------------------------------------------------------------

/** An empty document to compile selectors against: linkedom compiles a selector on every query. */
let probe: DomDocument | undefined
const probeDocument = (): DomDocument => (probe ??= parseDocument("<!DOCTYPE html><html><head></head><body></body></html>"))

/** Every selector must compile; the first that does not is a validation error naming it. */
export const checkSelectors = (selectors: ScrapeInput["selectors"]): Result.Result<void, ValidationError> => {
  for (const [name, selector] of Object.entries(selectors ?? {})) {
    let problem: string | undefined
    if (selector.trim() === "") {
      problem = "is empty"
    } else {
      try {
        probeDocument().querySelectorAll(selector)
      } catch (error) {
        problem = clip(error instanceof Error ? error.message : String(error), 120)
      }
    }
    if (problem !== undefined) {
      return Result.fail(
        new ValidationError({
          message: `invalid CSS selector for "${clip(name, 64)}": ${problem}`,
          issues: [{ path: `selectors.${name}`, message: `invalid CSS selector: ${problem}` }]
        })
      )
    }
  }
  return Result.void
}

/** A flat-priced page, once its selectors are known to compile. */
export const quoteScrape = (unitPrice: UnitPrice) => (input: ScrapeInput): Result.Result<Quote, ValidationError> =>
  Result.map(checkSelectors(input.selectors), () => ({ microUsd: unitPrice.priceMicroUsd }))

// ---------------------------------------------------------------------------
// Scraping a page
// ---------------------------------------------------------------------------

export interface Scraped {
  readonly html?: string
  readonly extracted?: Record<string, Array<string>>
  readonly links: Array<{ readonly href: string; readonly text: string }>
  readonly truncated: boolean
}

const linkText = (text: string | null, fallback: string | null): string =>
  cut(oneLineOrNull(text) ?? oneLineOrNull(fallback) ?? "", MAX_LINK_TEXT_CHARS).text

/**
 * Extractions and links of an HTML page (`pageUrl` is the URL it came from,
 * after redirects); `extraLinks` are more URLs known to be on the page (an
 * upstream's own link list), added after the page's own, without text.
 */
export const scrapeHtml = (
  html: string,
  pageUrl: string,
  input: Pick<ScrapeInput, "selectors" | "includeHtml">,
  extraLinks: ReadonlyArray<string> = []
): Scraped => {
  let truncated = false
  const document = parseDocument(html)
  const base = baseUrlOf(document, pageUrl)

  let extracted: Record<string, Array<string>> | undefined
  if (input.selectors !== undefined && Object.keys(input.selectors).length > 0) {
    extracted = {}
    let budget = MAX_EXTRACTED_CHARS
    for (const [name, selector] of Object.entries(input.selectors)) {
      const matches = document.querySelectorAll(selector)
      const texts: Array<string> = []
      if (matches.length > MAX_MATCHES_PER_SELECTOR) truncated = true
      for (let i = 0; i < matches.length && i < MAX_MATCHES_PER_SELECTOR; i++) {
        if (budget <= 0) {
          truncated = true
          break
        }
        const limit = Math.min(MAX_MATCH_CHARS, budget)
        const bounded = cut(visibleText(matches[i]!, limit), limit)
        if (bounded.cut) truncated = true
        texts.push(bounded.text)
        budget -= bounded.text.length
      }
      extracted[name] = texts
    }
  }

  const links: Array<{ href: string; text: string }> = []
  const seen = new Map<string, number>()
  const addLink = (raw: string, text: string): void => {
    const href = resolveUrl(raw, base)
    if (href === undefined || !/^https?:/i.test(href)) return
    const at = seen.get(href)
    if (at !== undefined) {
      if (links[at]!.text === "" && text !== "") links[at] = { href, text }
      return
    }
    if (links.length >= MAX_LINKS) {
      truncated = true
      return
    }
    seen.set(href, links.length)
    links.push({ href, text })
  }
  const anchors = document.querySelectorAll("a[href]")
  for (let i = 0; i < anchors.length; i++) {
    const anchor = anchors[i]!
    addLink(anchor.getAttribute("href") ?? "", linkText(visibleText(anchor), anchor.getAttribute("aria-label") ?? anchor.getAttribute("title")))
  }
  for (const raw of extraLinks) addLink(raw, "")

  const out: Scraped = { links, truncated }
  if (input.includeHtml !== false) {
    const bounded = cut(html, MAX_HTML_CHARS)
    return { ...out, html: bounded.text, truncated: truncated || bounded.cut, ...(extracted === undefined ? {} : { extracted }) }
  }
  return extracted === undefined ? out : { ...out, extracted }
}

/** Text that is not HTML: returned as it is, with nothing to extract. */
export const scrapeText = (text: string, input: Pick<ScrapeInput, "selectors" | "includeHtml">): Scraped => {
  const bounded = cut(text, MAX_HTML_CHARS)
  const extracted = input.selectors === undefined || Object.keys(input.selectors).length === 0
    ? undefined
    : Object.fromEntries(Object.keys(input.selectors).map((name) => [name, [] as Array<string>]))
  return {
    links: [],
    truncated: bounded.cut,
    ...(input.includeHtml === false ? {} : { html: bounded.text }),
    ...(extracted === undefined ? {} : { extracted })
  }
}

export const isTextualMime = (mime: string): boolean =>
  mime.startsWith("text/") || isJsonMime(mime) || mime === "application/xml" || mime.endsWith("+xml")

export const make = (options: Options): Effect.Effect<Provider<"scrape">, never, OutboundHttp> =>
  Effect.gen(function*() {
    const name = options.name ?? DEFAULT_NAME
    const settings = yield* Effect.try({
      try: () => {
        checkFlatPrice("scrape/builtin", name, options.unitPrice)
        return {
          maxBytes: positiveInteger("scrape/builtin", "maxBytes", options.maxBytes, DEFAULT_MAX_BYTES),
          timeoutMs: positiveInteger("scrape/builtin", "timeoutMs", options.timeoutMs, DEFAULT_TIMEOUT_MS),
          parseDeadlineMs: positiveInteger("scrape/builtin", "parseDeadlineMs", options.parseDeadlineMs, DEFAULT_PARSE_DEADLINE_MS)
        }
      },
      catch: (error) => error
    }).pipe(Effect.orDie)
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
