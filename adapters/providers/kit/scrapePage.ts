/**
 * A page scraped: selectors checked (in `quote`, before anything is held),
 * matches extracted, links made absolute; text that is not HTML returned as
 * it is. Shared by the built-in scraper (in the parse pool's workers) and
 * Firecrawl (on the HTML it answers).
 */
import { Result } from "effect"
import type { Quote, UnitPrice } from "../../../src/capabilities/Provider.ts"
import type { ScrapeInput } from "../../../src/capabilities/schemas.ts"
import { ValidationError } from "../../../src/domain/errors.ts"
import { baseUrlOf, clip, cut, type DomDocument, isJsonMime, oneLineOrNull, parseDocument, resolveUrl, visibleText } from "./page.ts"

export const MAX_HTML_CHARS = 2_000_000
export const MAX_MATCHES_PER_SELECTOR = 100
export const MAX_MATCH_CHARS = 10_000
export const MAX_EXTRACTED_CHARS = 1_000_000
export const MAX_LINKS = 500
export const MAX_LINK_TEXT_CHARS = 500

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

