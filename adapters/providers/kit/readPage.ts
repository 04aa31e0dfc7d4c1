/**
 * A page read: its article (Readability) as text and Markdown (turndown), or
 * its visible text when it has none; plain text and JSON as they are. Pure
 * CPU work, run in the parse pool's workers.
 */
import type { Readability } from "@mozilla/readability"
import { Result } from "effect"
import { createRequire } from "node:module"
import type TurndownService from "turndown"
import type { ReadOutput } from "../../../src/capabilities/schemas.ts"
import { baseUrlOf, cut, type DomDocument, oneLineOrNull, parseDocument, resolveUrl, titleOf, visibleText } from "./page.ts"

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

// ---------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------

/**
 * Readability and turndown, loaded when a worker first reads a page: the
 * server's own thread imports this module for its light parts only.
 */
const requireHere = createRequire(import.meta.url)
let readability: typeof Readability | undefined
const readabilityClass = (): typeof Readability =>
  readability ??= (requireHere("@mozilla/readability") as { readonly Readability: typeof Readability }).Readability

export const makeTurndown = (): TurndownService => {
  const Turndown = requireHere("turndown") as typeof TurndownService
  const service = new Turndown({ headingStyle: "atx", codeBlockStyle: "fenced", bulletListMarker: "-" })
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
export type WorkerRead =
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
  const article = new (readabilityClass())(document).parse()
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

export const readText = (text: string, pageUrl: string): ReadOutput =>
  output({ url: pageUrl, title: null, byline: null, siteName: null, excerpt: null, text, markdown: text })

export const readJson = (raw: string, pageUrl: string): ReadOutput => {
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
