/**
 * Fetched pages the built-in reader and scraper (and Firecrawl's HTML) share:
 * text measures, content types and decoding, the DOM (linkedom), visible
 * text, the fetcher's failures in a provider's terms, and parsing in the
 * worker pool (parse-pool.ts) off the event loop.
 */
import { Effect } from "effect"
import { createRequire } from "node:module"
import { ProviderFailure } from "../../../src/capabilities/Provider.ts"
import type { FetchFailed, UnsafeUrl } from "../../../src/ports/Net.ts"
import type { UnitPrice } from "../../../src/capabilities/Provider.ts"
import { DEFAULT_PARSE_DEADLINE_MS, type ParseFailure, type ParsePool, type ParseTask } from "./parse-pool.ts"
import { checkUnitPrice, positiveInteger, providerName } from "./settings.ts"
import { clip as clipTo } from "./text.ts"

/** One line, at most `max` characters. */
export const clip = (text: string, max = 200): string => clipTo(text, max + 1)

// ---------------------------------------------------------------------------
// Text
// ---------------------------------------------------------------------------

/** Whitespace runs as one space, trimmed; empty or missing as null. */
export const oneLineOrNull = (text: string | null | undefined): string | null => {
  if (typeof text !== "string") return null
  const line = text.replace(/\s+/g, " ").trim()
  return line === "" ? null : line
}

/** Cuts `text` at `max` characters (never inside a surrogate pair) and says so at the end. */
export const cut = (text: string, max: number): { readonly text: string; readonly cut: boolean } => {
  if (text.length <= max) return { text, cut: false }
  const end = /[\uD800-\uDBFF]/.test(text.charAt(max - 1)) ? max - 1 : max
  return { text: `${text.slice(0, end)}\n\n[… cut at ${max} characters]`, cut: true }
}

/** Spaces and tabs collapsed, lines trimmed, at most one blank line in a row. */
export const normalizeLines = (text: string): string =>
  text
    .replace(/\r\n?/g, "\n")
    .split("\n")
    .map((line) => line.replace(/[ \t\f\v\u00a0]+/g, " ").trim())
    .join("\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim()

// ---------------------------------------------------------------------------
// Content types and decoding
// ---------------------------------------------------------------------------

/** The media type of a Content-Type value, lower-cased, without parameters. */
export const mimeOf = (contentType: string): string => (contentType.split(";")[0] ?? "").trim().toLowerCase()

export const isHtmlMime = (mime: string): boolean => mime === "text/html" || mime === "application/xhtml+xml"

export const isJsonMime = (mime: string): boolean => mime === "application/json" || mime.endsWith("+json")

const charsetParameter = (contentType: string): string | undefined => {
  const match = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType)
  return match?.[1]
}

/** `<meta charset>` or `<meta http-equiv="content-type" content="…; charset=…">` in the first 1024 bytes. */
const metaCharset = (body: Uint8Array): string | undefined => {
  const head = Buffer.from(body.subarray(0, 1024)).toString("latin1")
  const direct = /<meta[^>]+charset\s*=\s*["']?\s*([\w.:-]+)/i.exec(head)
  return direct?.[1]
}

const bomCharset = (body: Uint8Array): string | undefined =>
  body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf ? "utf-8"
  : body[0] === 0xff && body[1] === 0xfe ? "utf-16le"
  : body[0] === 0xfe && body[1] === 0xff ? "utf-16be"
  : undefined

const decoderFor = (label: string | undefined): InstanceType<typeof TextDecoder> | undefined => {
  if (label === undefined) return undefined
  try {
    return new TextDecoder(label.toLowerCase(), { fatal: false })
  } catch {
    return undefined
  }
}

/**
 * The body as text: a byte-order mark wins, then the Content-Type charset,
 * then (HTML only) a `<meta>` charset, else UTF-8. Unknown labels fall back to
 * UTF-8; bytes that do not decode become U+FFFD.
 */
export const decodeBody = (body: Uint8Array, contentType: string, html: boolean): string => {
  let decoder = decoderFor(bomCharset(body)) ?? decoderFor(charsetParameter(contentType))
  if (decoder === undefined && html) {
    const declared = decoderFor(metaCharset(body))
    // A page that reached the parser as ASCII-compatible bytes cannot be UTF-16 (WHATWG "prescan").
    decoder = declared !== undefined && declared.encoding.startsWith("utf-16") ? undefined : declared
  }
  return (decoder ?? new TextDecoder("utf-8", { fatal: false })).decode(body)
}

/** What a body without a Content-Type is: HTML when it starts like a page, binary when it holds NUL bytes. */
export const sniff = (body: Uint8Array): "html" | "text" | "binary" => {
  const head = body.subarray(0, 1024)
  if (head.includes(0)) return "binary"
  const start = Buffer.from(head).toString("latin1").trimStart().toLowerCase()
  return /^(?:\ufeff|ï»¿)?(?:<!doctype html|<html|<head|<body|<!--)/.test(start) ? "html" : "text"
}

// ---------------------------------------------------------------------------
// The DOM
// ---------------------------------------------------------------------------

/** The part of linkedom's DOM these adapters use (its own typings lean on the browser's `lib.dom`). */
export interface DomNode {
  readonly nodeType: number
  readonly nodeName: string
  readonly nodeValue: string | null
  readonly textContent: string | null
  readonly childNodes: ArrayLike<DomNode>
}

export interface DomElement extends DomNode {
  readonly tagName: string
  getAttribute(name: string): string | null
  setAttribute(name: string, value: string): void
  hasAttribute(name: string): boolean
  querySelectorAll(selectors: string): ArrayLike<DomElement>
}

export interface DomDocument {
  readonly documentElement: DomElement | null
  readonly body: DomElement | null
  querySelector(selectors: string): DomElement | null
  querySelectorAll(selectors: string): ArrayLike<DomElement>
}

/**
 * linkedom, loaded on the first parse: parses run in the parse pool's workers
 * (and in Firecrawl's answers), so a server that parses no page never loads
 * its module tree.
 */
let linkedom: typeof import("linkedom") | undefined
const parseWithLinkedom = (html: string): DomDocument => {
  linkedom ??= createRequire(import.meta.url)("linkedom") as typeof import("linkedom")
  return linkedom.parseHTML(html).document as unknown as DomDocument
}

/**
 * Parses a page. linkedom builds a document only from markup that opens with
 * `<html>`; a fragment, or a page that leaves `<html>` implicit (legal HTML),
 * is wrapped first so that `head`, `body` and the selectors behave.
 */
export const parseDocument = (html: string): DomDocument => {
  const parsed = parseWithLinkedom(html)
  if (parsed.documentElement?.tagName === "HTML") return parsed
  const inner = html.replace(/^\ufeff?\s*(?:<!doctype[^>]*>)?/i, "")
  return parseWithLinkedom(
    /<body[\s>]/i.test(inner)
      ? `<!DOCTYPE html><html>${inner}</html>`
      : `<!DOCTYPE html><html><head></head><body>${inner}</body></html>`
  )
}

/** The URL relative references resolve against: the page's `<base href>` when valid, else the page's own URL. */
export const baseUrlOf = (document: DomDocument, pageUrl: string): string => {
  const href = document.querySelector("base[href]")?.getAttribute("href")
  if (href !== null && href !== undefined) {
    try {
      return new URL(href.trim(), pageUrl).href
    } catch {
      // An unusable <base> is ignored, as browsers do.
    }
  }
  return pageUrl
}

export const resolveUrl = (href: string, base: string): string | undefined => {
  try {
    return new URL(href.trim(), base).href
  } catch {
    return undefined
  }
}

/** The document's `<title>`, wherever the parser put it. */
export const titleOf = (document: DomDocument): string | null =>
  oneLineOrNull(document.querySelector("title")?.textContent)

const ELEMENT_NODE = 1
const TEXT_NODE = 3

/** Elements whose content is never shown as text. */
const INVISIBLE = new Set([
  "SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "SVG", "CANVAS", "IFRAME", "OBJECT", "EMBED", "HEAD", "META", "LINK", "MATH"
])
/** Elements that stand on lines of their own. */
const BLOCKS = new Set([
  "ADDRESS", "ARTICLE", "ASIDE", "BLOCKQUOTE", "CAPTION", "DETAILS", "DIALOG", "DIV", "DL", "FIELDSET", "FIGCAPTION",
  "FIGURE", "FOOTER", "FORM", "H1", "H2", "H3", "H4", "H5", "H6", "HEADER", "HGROUP", "HR", "MAIN", "NAV", "OL", "P",
  "PRE", "SECTION", "SUMMARY", "TABLE", "UL"
])
const LINES = new Set(["BR", "LI", "TR", "DT", "DD", "OPTION"])
const HIDDEN_STYLE = /(?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*hidden)/i

const isHidden = (element: DomElement): boolean =>
  INVISIBLE.has(element.nodeName.toUpperCase()) ||
  element.hasAttribute("hidden") ||
  element.getAttribute("aria-hidden") === "true" ||
  HIDDEN_STYLE.test(element.getAttribute("style") ?? "")

/**
 * The text a reader sees in `root`: the text content without scripts, styles
 * and hidden elements, with line breaks between blocks (plain `textContent`
 * runs a heading into the paragraph after it), whitespace normalised.
 * Walks with its own stack: deeply nested markup cannot overflow the call stack.
 * With `maxChars`, the walk stops once it has that much text (and some).
 */
export const visibleText = (root: DomNode, maxChars = Infinity): string => {
  const parts: Array<string> = []
  // Enough raw text to fill `maxChars` after normalising; the walk stops there.
  const rawLimit = maxChars * 2 + 1024
  let size = 0
  // Line breaks owed before the next text: whitespace between blocks (the indentation of
  // the markup) is not text, so list items and paragraphs keep one break, not a blank line.
  let pendingBreaks = 0
  const stack: Array<DomNode | number> = [root]
  while (stack.length > 0 && size <= rawLimit) {
    const item = stack.pop()!
    if (typeof item === "number") {
      pendingBreaks = Math.max(pendingBreaks, item)
      continue
    }
    if (item.nodeType === TEXT_NODE) {
      const text = (item.nodeValue ?? "").replace(/\s+/g, " ")
      if (pendingBreaks > 0) {
        if (text.trim() === "") continue
        if (parts.length > 0) parts.push("\n".repeat(pendingBreaks))
        pendingBreaks = 0
      }
      parts.push(text)
      size += text.length
      continue
    }
    if (item.nodeType !== ELEMENT_NODE && item !== root) continue
    if (item !== root && isHidden(item as DomElement)) continue
    const name = item.nodeName.toUpperCase()
    if (name === "TD" || name === "TH") parts.push(" ")
    const breaks = BLOCKS.has(name) ? 2 : LINES.has(name) ? 1 : 0
    if (breaks > 0) {
      pendingBreaks = Math.max(pendingBreaks, breaks)
      stack.push(breaks)
    }
    const children = item.childNodes
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]!)
  }
  return normalizeLines(parts.join(""))
}

// ---------------------------------------------------------------------------
// Fetch failures
// ---------------------------------------------------------------------------

/** The fetcher's refusals and failures in the provider's terms. */
export const fetchFailure = (
  provider: string,
  error: UnsafeUrl | FetchFailed,
  limits: { readonly maxBytes: number; readonly timeoutMs: number }
): ProviderFailure => {
  if (error._tag === "UnsafeUrl") return new ProviderFailure({ provider, reason: "blocked", message: clip(error.reason) })
  switch (error.reason) {
    case "timeout":
      return new ProviderFailure({ provider, reason: "timeout", message: `the page did not load within ${limits.timeoutMs} ms` })
    case "too_large":
      return new ProviderFailure({ provider, reason: "too_large", message: `the page is larger than ${limits.maxBytes} bytes` })
    case "too_many_redirects":
      return new ProviderFailure({ provider, reason: "rejected", message: "the page redirected too many times" })
    case "network":
      return new ProviderFailure({ provider, reason: "network", message: clip(`the page could not be fetched: ${error.message}`) })
  }
}

// ---------------------------------------------------------------------------
// Parsing off the event loop
// ---------------------------------------------------------------------------

/** Runs a parse in the worker pool; its failures in the provider's terms. */
export const parseInPool = (
  provider: string,
  pool: ParsePool,
  task: ParseTask,
  deadlineMs: number
): Effect.Effect<unknown, ProviderFailure> =>
  pool.run(task, deadlineMs).pipe(
    Effect.mapError((failure: ParseFailure) =>
      new ProviderFailure({
        provider,
        reason: failure.reason,
        message: clip(failure.reason === "malformed" ? `the page could not be parsed: ${failure.message}` : failure.message)
      })
    )
  )

// ---------------------------------------------------------------------------
// Settings of a page provider
// ---------------------------------------------------------------------------

/** The options of the built-in reader and scraper. */
export interface PageOptions {
  readonly name?: string | undefined
  /** From the operator's price card (`per: "page"`). */
  readonly unitPrice: UnitPrice
  /** Bytes read at most. Default 5 MiB. */
  readonly maxBytes?: number | undefined
  /** For the whole fetch, redirects included. Default 15 s. */
  readonly timeoutMs?: number | undefined
  /** Longest a page may take to parse, in the worker pool, queue wait included. Default 10 s. */
  readonly parseDeadlineMs?: number | undefined
  /** The worker pool; default the process's shared one. */
  readonly pool?: ParsePool | undefined
}

export const DEFAULT_PAGE_MAX_BYTES = 5 * 1024 * 1024
export const DEFAULT_PAGE_TIMEOUT_MS = 15_000

/** Checks a page provider's options; a bad value is a deployment error (thrown, naming it). */
export const pageSettings = (adapter: string, defaultName: string, options: PageOptions) => {
  const name = providerName(adapter, options.name ?? defaultName)
  checkUnitPrice(`${adapter} ${name}`, options.unitPrice, "page")
  return {
    name,
    unitPrice: options.unitPrice,
    maxBytes: positiveInteger(adapter, "maxBytes", options.maxBytes, DEFAULT_PAGE_MAX_BYTES),
    timeoutMs: positiveInteger(adapter, "timeoutMs", options.timeoutMs, DEFAULT_PAGE_TIMEOUT_MS),
    parseDeadlineMs: positiveInteger(adapter, "parseDeadlineMs", options.parseDeadlineMs, DEFAULT_PARSE_DEADLINE_MS)
  }
}
