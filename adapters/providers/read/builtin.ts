/**
 * `read` without an upstream service: the page is fetched through the
 * URL-safe `OutboundHttp` port, decoded, parsed with linkedom and reduced to
 * its article by Mozilla's Readability; the article HTML becomes Markdown
 * with turndown.
 *
 * Decisions:
 * - A page over the fetch cap (default 5 MiB) fails with `too_large` rather
 *   than being read in part: half an article presented as the article is
 *   misleading, and the next provider may manage the whole page. So does a
 *   page with more than `MAX_ELEMENTS` elements, which Readability would take
 *   seconds of event-loop time to score.
 * - A page in which Readability finds no article (it answers null, or an
 *   article without text) still succeeds: the document's title and the
 *   visible text of its body, as `text` and `markdown` alike, so the caller
 *   gets what there is to read.
 * - `text/*` is returned as it is; JSON pretty-printed (a fenced block in
 *   `markdown`); anything else (images, PDF, octet-stream) is `rejected`.
 * - A status of 400 or more from the site is `rejected` ("the page answered
 *   404"); a URL the fetcher refuses is `blocked`, which the core answers as
 *   a validation error without trying another provider.
 * - `text` and `markdown` are cut at `MAX_OUTPUT_CHARS`, with a note.
 *
 * - Parsing (linkedom, Readability, turndown) runs in a worker thread of the
 *   shared parse pool (parse-pool.ts), never on the event loop, within
 *   `parseDeadlineMs` (default 10 s); a page that takes longer fails with
 *   `timeout` and its worker is terminated.
 *
 * A page costs the unit price, charged only when the call succeeds.
 *
 * The DOM, decoding and fetch-failure helpers here are shared with the
 * built-in scraper.
 */
import { Readability } from "@mozilla/readability"
import { Effect, Result } from "effect"
import { parseHTML } from "linkedom"
import TurndownService from "turndown"
import { type Provider, ProviderFailure, type UnitPrice } from "../../../src/capabilities/Provider.ts"
import type { ReadInput, ReadOutput } from "../../../src/capabilities/schemas.ts"
import { type FetchFailed, OutboundHttp, type UnsafeUrl } from "../../../src/ports/Net.ts"
import { positiveInteger } from "../http.ts"
import { DEFAULT_PARSE_DEADLINE_MS, type ParseFailure, type ParsePool, type ParseTask, sharedPool } from "./parse-pool.ts"

export const DEFAULT_NAME = "readability"
export const DEFAULT_MAX_BYTES = 5 * 1024 * 1024
export const DEFAULT_TIMEOUT_MS = 15_000
/** `text` and `markdown` are each cut here. */
export const MAX_OUTPUT_CHARS = 1_000_000
/**
 * Pages with more elements are refused. Readability over linkedom runs on the
 * event loop and grows faster than linearly with wide pages: measured on the
 * 2-core development machine, 20,000 elements laid out flat (a long listing)
 * take about 2.3 s, article-shaped pages of that size about 1 s, and 48,000
 * flat elements 13 s. (linkedom's `getElementsByTagName("*")` finds nothing,
 * so Readability's own `maxElemsToParse` never triggers; hence this count.)
 */
export const MAX_ELEMENTS = 20_000
export const ACCEPT_HTML = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1"

export interface Options {
  readonly name?: string | undefined
  /** From the operator's price card (`per: "page"`). */
  readonly unitPrice: UnitPrice
  /** Bytes read at most; a longer page is `too_large`. Default 5 MiB. */
  readonly maxBytes?: number | undefined
  /** For the whole fetch, redirects included. Default 15 s. */
  readonly timeoutMs?: number | undefined
  /** Longest a page may take to parse, in the worker pool, queue wait included. Default 10 s. */
  readonly parseDeadlineMs?: number | undefined
  /** The worker pool; default the process's shared one. */
  readonly pool?: ParsePool | undefined
}

// ---------------------------------------------------------------------------
// Settings
// ---------------------------------------------------------------------------

export const checkFlatPrice = (adapter: string, name: string, unitPrice: UnitPrice): void => {
  if (name.trim() === "") throw new RangeError(`${adapter}: name must not be empty`)
  if (unitPrice.priceMicroUsd < 0n) throw new RangeError(`${adapter} ${name}: the unit price must not be negative`)
}

// ---------------------------------------------------------------------------
// Text
// ---------------------------------------------------------------------------

/** One line, at most `max` characters. */
export const clip = (text: string, max = 200): string => {
  const oneLine = text.replace(/\s+/g, " ").trim()
  return oneLine.length > max ? `${oneLine.slice(0, max)}…` : oneLine
}

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

const parseWithLinkedom = (html: string): DomDocument => parseHTML(html).document as unknown as DomDocument

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
// Reading
// ---------------------------------------------------------------------------

export const makeTurndown = (): TurndownService => {
  const service = new TurndownService({ headingStyle: "atx", codeBlockStyle: "fenced", bulletListMarker: "-" })
  service.remove(["script", "style", "noscript", "iframe"])
  return service
}

const output = (fields: Omit<ReadOutput, "text" | "markdown" | "length"> & { readonly text: string; readonly markdown: string }): ReadOutput => {
  const text = cut(fields.text, MAX_OUTPUT_CHARS).text
  return { ...fields, text, markdown: cut(fields.markdown, MAX_OUTPUT_CHARS).text, length: text.length }
}

/** Relative links and images made absolute, so the Markdown's links work away from the page. */
const absolutize = (document: DomDocument, base: string): void => {
  for (const [selector, attribute] of [["a[href]", "href"], ["img[src]", "src"]] as const) {
    const elements = document.querySelectorAll(selector)
    for (let i = 0; i < elements.length; i++) {
      const element = elements[i]!
      const absolute = resolveUrl(element.getAttribute(attribute) ?? "", base)
      if (absolute !== undefined) element.setAttribute(attribute, absolute)
    }
  }
}

type HtmlRead = Result.Result<ReadOutput, { readonly reason: "too_large"; readonly message: string }>

/** `readHtml`'s answer as the worker sends it (plain data). */
type WorkerRead =
  | { readonly ok: true; readonly output: ReadOutput }
  | { readonly ok: false; readonly failure: { readonly reason: "too_large"; readonly message: string } }

/** Reads an HTML page; synchronous CPU work, bounded by the byte and element caps. */
export const readHtml = (html: string, pageUrl: string, turndown: TurndownService): HtmlRead => {
  const document = parseDocument(html)
  const elements = document.querySelectorAll("*").length
  if (elements > MAX_ELEMENTS) {
    return Result.fail({ reason: "too_large", message: `the page has ${elements} elements, more than ${MAX_ELEMENTS} can be read` })
  }
  const base = baseUrlOf(document, pageUrl)
  absolutize(document, base)
  const pageTitle = titleOf(document)

  // Taken before Readability runs: it rewrites the document it reads.
  const bodyText = document.body === null ? "" : visibleText(document.body)
  // Readability's typings name lib.dom's Document, which this project does not load: linkedom's document passes as is.
  const article = new Readability(document).parse()
  const content = typeof article?.content === "string" ? article.content : ""
  const articleBody = content === "" ? null : parseDocument(content).body
  const articleText = articleBody === null ? "" : visibleText(articleBody)

  if (article === null || articleText === "") {
    // No article: the title and everything visible in the body, so the caller still gets the page's words.
    return Result.succeed(output({
      url: pageUrl,
      title: pageTitle,
      byline: null,
      siteName: null,
      excerpt: null,
      text: bodyText,
      markdown: bodyText
    }))
  }
  let markdown: string
  try {
    markdown = turndown.turndown(content).trim()
  } catch {
    // Markup too deep for turndown's recursion: the text is the best Markdown left.
    markdown = articleText
  }
  return Result.succeed(output({
    url: pageUrl,
    title: oneLineOrNull(article.title) ?? pageTitle,
    byline: oneLineOrNull(article.byline),
    siteName: oneLineOrNull(article.siteName),
    excerpt: oneLineOrNull(article.excerpt),
    text: articleText,
    markdown
  }))
}

const readText = (text: string, pageUrl: string): ReadOutput =>
  output({ url: pageUrl, title: null, byline: null, siteName: null, excerpt: null, text, markdown: text })

const readJson = (raw: string, pageUrl: string): ReadOutput => {
  let pretty: string
  try {
    pretty = JSON.stringify(JSON.parse(raw), null, 2)
  } catch {
    // Declared JSON that is not: still text worth returning as it is.
    return readText(raw, pageUrl)
  }
  return output({
    url: pageUrl,
    title: null,
    byline: null,
    siteName: null,
    excerpt: null,
    text: pretty,
    markdown: `\`\`\`json\n${pretty}\n\`\`\``
  })
}

export const make = (options: Options): Effect.Effect<Provider<"read">, never, OutboundHttp> =>
  Effect.gen(function*() {
    const name = options.name ?? DEFAULT_NAME
    const settings = yield* Effect.try({
      try: () => {
        checkFlatPrice("read/builtin", name, options.unitPrice)
        return {
          maxBytes: positiveInteger("read/builtin", "maxBytes", options.maxBytes, DEFAULT_MAX_BYTES),
          timeoutMs: positiveInteger("read/builtin", "timeoutMs", options.timeoutMs, DEFAULT_TIMEOUT_MS),
          parseDeadlineMs: positiveInteger("read/builtin", "parseDeadlineMs", options.parseDeadlineMs, DEFAULT_PARSE_DEADLINE_MS)
        }
      },
      catch: (error) => error
    }).pipe(Effect.orDie)
    const http = yield* OutboundHttp
    const { unitPrice } = options
    // Workers start on the first page, not at start-up: loading the parser costs a second or two of CPU.
    const pool = options.pool ?? sharedPool()
    const fail = (reason: ProviderFailure["reason"], message: string) => new ProviderFailure({ provider: name, reason, message })

    const run = Effect.fn("ReadBuiltin.run")(function*(input: ReadInput) {
      const page = yield* http.get(input.url, {
        maxBytes: settings.maxBytes,
        timeoutMs: settings.timeoutMs,
        failIfLarger: true,
        headers: { accept: ACCEPT_HTML }
      }).pipe(Effect.mapError((error) => fetchFailure(name, error, settings)))
      if (page.truncated) return yield* fail("too_large", `the page is larger than ${settings.maxBytes} bytes`)
      if (page.status >= 400) return yield* fail("rejected", `the page answered ${page.status}`)
      if (page.status < 200 || page.status >= 300) {
        return yield* fail("rejected", `the page answered ${page.status} without content to read`)
      }

      const mime = mimeOf(page.contentType)
      const kind = mime === "" ? sniff(page.body) : isHtmlMime(mime) ? "html" : isJsonMime(mime) ? "json" : mime.startsWith("text/") ? "text" : "binary"
      let result: ReadOutput
      switch (kind) {
        case "binary":
          return yield* fail("rejected", `unsupported content type ${clip(mime === "" ? "(binary, undeclared)" : mime, 100)}`)
        case "text":
          result = readText(decodeBody(page.body, page.contentType, false), page.url)
          break
        case "json":
          result = readJson(decodeBody(page.body, page.contentType, false), page.url)
          break
        case "html": {
          const html = decodeBody(page.body, page.contentType, true)
          const read = (yield* parseInPool(name, pool, { kind: "read", html, pageUrl: page.url }, settings.parseDeadlineMs)) as WorkerRead
          if (!read.ok) return yield* fail(read.failure.reason, read.failure.message)
          result = read.output
          break
        }
      }
      return { output: result, actualMicroUsd: unitPrice.priceMicroUsd }
    })

    return {
      name,
      capability: "read",
      unitPrice,
      quote: () => Result.succeed({ microUsd: unitPrice.priceMicroUsd }),
      run
    } satisfies Provider<"read">
  })
