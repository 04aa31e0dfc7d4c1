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
 * A page costs the unit price, charged only when the call succeeds.
 */
import { Effect, Result } from "effect"
import { type Provider, ProviderFailure } from "../../../src/capabilities/Provider.ts"
import type { ReadInput, ReadOutput } from "../../../src/capabilities/schemas.ts"
import { OutboundHttp } from "../../../src/ports/Net.ts"
import { clip, decodeBody, type PageOptions, pageSettings, fetchFailure, isHtmlMime, isJsonMime, mimeOf, parseInPool, sniff } from "../kit/page.ts"
import { sharedPool } from "../kit/parse-pool.ts"
import { readJson, readText, type WorkerRead } from "../kit/readPage.ts"
import { nothing, one, type ProviderConfig, switchedOn, unitPriceOf } from "../kit/config.ts"

export { MAX_ELEMENTS, MAX_OUTPUT_CHARS } from "../kit/readPage.ts"

export const DEFAULT_NAME = "readability"
export { DEFAULT_PAGE_MAX_BYTES as DEFAULT_MAX_BYTES, DEFAULT_PAGE_TIMEOUT_MS as DEFAULT_TIMEOUT_MS } from "../kit/page.ts"
export const ACCEPT_HTML = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1"

/** Default name "readability"; 5 MiB read at most (a longer page is `too_large`), 15 s for the fetch, 10 s to parse. */
export type Options = PageOptions


export const make = (options: Options): Effect.Effect<Provider<"read">, never, OutboundHttp> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() => pageSettings("read/builtin", DEFAULT_NAME, options))
    const name = settings.name
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

// ---------------------------------------------------------------------------
// Configuration

/** On unless BUILTIN_READ=off: the `readability` price card (per page). */
export const fromConfig: ProviderConfig = (cards) =>
  Effect.gen(function*() {
    if (!(yield* switchedOn("BUILTIN_READ"))) return nothing
    const unitPrice = yield* unitPriceOf(cards, DEFAULT_NAME, "read", "page")
    return one(DEFAULT_NAME, "read", make({ unitPrice }))
  })
