/**
 * `read` through the Jina Reader API.
 *
 * Request: `GET {baseUrl}/{url}` (default base https://r.jina.ai) with
 * `Accept: application/json`, and `Authorization: Bearer <key>` when a key is
 * configured (without one Jina serves a small anonymous rate).
 *
 * Answer: `{ code: 200, status: 20000, data: { title, description, url,
 * content, publishedTime?, metadata?, warning?, usage: { tokens } } }`, where
 * `content` is the page's main content as Markdown. It maps to `ReadOutput`
 * as: `markdown` = content, `text` = the content with the Markdown markup
 * removed, `excerpt` = description, `byline` and `siteName` from the page
 * metadata when Jina passes them on (else null). Jina bills by tokens; this
 * provider is priced per page like the built-in reader, so `usage` is not read.
 *
 * Jina reads the target page even when it answers with an error status and
 * says so in `warning` ("Target URL returned error 404: Not Found"); that is
 * `rejected` here, as it is for the built-in reader.
 *
 * Errors: `{ data: null, code, name, status, message, readableMessage }`.
 * 401/403 and other 4xx are `rejected`, 408 `timeout`, 429 `rate_limited`,
 * 5xx `unavailable`; no answer within `timeoutMs` is `timeout`, an answer
 * over `maxResponseBytes` `too_large`, an unreadable one `malformed`, a
 * refused connection `network` (the exchange itself is the shared one,
 * ../kit/exchange.ts).
 *
 * URL safety: Jina fetches the page from its own network, so nothing is sent
 * from here to the caller's address. The address is still checked by the
 * core (`Capabilities.execute` calls `OutboundHttp.check` for every `read`
 * and `scrape` before money is held, whenever the port is provided, as the
 * server always does), so this adapter does not need the port.
 */
import { Effect, Option, Redacted, Result, Schema } from "effect"
import { HttpClientRequest } from "effect/http"
import { type Provider, ProviderFailure } from "../../../src/capabilities/Provider.ts"
import type { ReadInput, ReadOutput } from "../../../src/capabilities/schemas.ts"
import {
  decodeOrUndefined,
  type ErrorDetail,
  exchangeJson,
  NonEmptyText,
  perCallProvider,
  type UpstreamOptions,
  upstreamSettings
} from "../kit/index.ts"
import { clip, cut, normalizeLines, oneLineOrNull } from "../kit/page.ts"
import { MAX_OUTPUT_CHARS } from "../kit/readPage.ts"
import { env, nothing, one, type ProviderConfig, unitPriceOf } from "../kit/config.ts"
import { UpstreamClient } from "../kit/index.ts"

export const DEFAULT_NAME = "jina"
export const DEFAULT_BASE_URL = "https://r.jina.ai"
/** Jina renders pages in a browser: slower than a plain fetch. */
export const DEFAULT_TIMEOUT_MS = 30_000
export const DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024

/** Default name "jina", base URL https://r.jina.ai, timeout 30 s, answers up to 8 MiB; a flat price per page. */
export interface Options extends UpstreamOptions {
  /** Without one, Jina's free tier (rate limited). */
  readonly apiKey?: Redacted.Redacted<string> | undefined
}

const errorBodyOf = decodeOrUndefined(Schema.Struct({
  readableMessage: Schema.optional(Schema.Unknown),
  message: Schema.optional(Schema.Unknown),
  name: Schema.optional(Schema.Unknown)
}))
const nonEmptyText = decodeOrUndefined(NonEmptyText)

/** Jina's error body: `readableMessage` is meant for people, `name` is the error class. */
const jinaErrorDetail = (body: unknown): ErrorDetail | undefined => {
  const decoded = errorBodyOf(body)
  const message = nonEmptyText(decoded?.readableMessage) ?? nonEmptyText(decoded?.message)
  if (message === undefined) return undefined
  return { message, type: typeof decoded?.name === "string" && decoded.name !== "" ? decoded.name : undefined }
}

/** The words of a Markdown text: links and images as their text, markers and fences removed. */
export const markdownToText = (markdown: string): string =>
  normalizeLines(
    markdown
      .replace(/^ {0,3}(?:```|~~~).*$/gm, "")
      .replace(/!\[([^\]]*)\]\([^)]*\)/g, "$1")
      .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
      .replace(/^ {0,3}#{1,6}[ \t]+/gm, "")
      .replace(/^ {0,3}>[ \t]?/gm, "")
      .replace(/^ {0,3}(?:[-*_][ \t]*){3,}$/gm, "")
      .replace(/^ {0,3}=+[ \t]*$/gm, "")
      .replace(/(\*\*|__)(?=\S)(.+?)\1/g, "$2")
      .replace(/`([^`\n]+)`/g, "$1")
      .replace(/<\/?[a-z][^>\n]*>/gi, "")
  )

const metadataOf = decodeOrUndefined(Schema.Record(Schema.String, Schema.Unknown))

const metadataString = (metadata: unknown, ...keys: ReadonlyArray<string>): string | null => {
  const fields = metadataOf(metadata)
  if (fields === undefined) return null
  for (const key of keys) {
    const field = fields[key]
    const value = oneLineOrNull(typeof field === "string" ? field : null)
    if (value !== null) return value
  }
  return null
}

type Parsed = Result.Result<ReadOutput, { readonly reason: "malformed" | "rejected"; readonly message: string }>

/** Reads Jina's answer; `requested` stands in for a missing `url`. */
const Answer = Schema.Struct({
  data: Schema.Struct({
    content: Schema.String,
    warning: Schema.optional(Schema.Unknown),
    url: Schema.optional(Schema.Unknown),
    title: Schema.optional(Schema.Unknown),
    description: Schema.optional(Schema.Unknown),
    metadata: Schema.optional(Schema.Unknown)
  })
})
const decodeAnswer = Schema.decodeUnknownResult(Answer)

export const parseAnswer = (body: unknown, requested: string): Parsed => {
  const decoded = decodeAnswer(body, { errors: "first" })
  if (Result.isFailure(decoded)) {
    return Result.fail({ reason: "malformed", message: `the answer is not as documented: ${clip(decoded.failure.message)}` })
  }
  const data = decoded.success.data
  if (typeof data.warning === "string") {
    const status = /returned error (\d{3})/i.exec(data.warning)
    if (status !== null) return Result.fail({ reason: "rejected", message: `the page answered ${status[1]}` })
  }
  const markdown = cut(data.content.trim(), MAX_OUTPUT_CHARS).text
  const text = cut(markdownToText(data.content), MAX_OUTPUT_CHARS).text
  return Result.succeed({
    url: typeof data.url === "string" && data.url.trim() !== "" ? data.url.trim() : requested,
    title: oneLineOrNull(typeof data.title === "string" ? data.title : null),
    byline: metadataString(data.metadata, "author", "article:author", "byline"),
    siteName: metadataString(data.metadata, "og:site_name", "siteName"),
    excerpt: oneLineOrNull(typeof data.description === "string" ? data.description : null),
    text,
    markdown,
    length: text.length
  })
}

export const make = (options: Options): Effect.Effect<Provider<"read">, never, UpstreamClient> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() =>
      upstreamSettings(options, {
        label: "read/jina",
        name: DEFAULT_NAME,
        baseUrl: DEFAULT_BASE_URL,
        allowCredentials: true,
        per: "page",
        timeoutMs: DEFAULT_TIMEOUT_MS,
        maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES,
        optionalKey: options.apiKey,
        errors: { unreachable: "network", errorDetail: jinaErrorDetail, requestIdHeader: "x-request-id" }
      })
    )
    const client = yield* UpstreamClient
    const name = settings.name
    return perCallProvider("read", settings, "Jina.run", (input: ReadInput) =>
      Effect.gen(function*() {
        let request = HttpClientRequest.get(`${settings.baseUrl}/${input.url}`, { acceptJson: true })
        if (options.apiKey !== undefined) request = HttpClientRequest.bearerToken(request, options.apiKey)
        const parsed = parseAnswer(yield* exchangeJson(client, settings.upstream, request), input.url)
        if (Result.isFailure(parsed)) {
          return yield* new ProviderFailure({ provider: name, reason: parsed.failure.reason, message: clip(`${name}: ${parsed.failure.message}`) })
        }
        return parsed.success
      }))
  })

// ---------------------------------------------------------------------------
// Configuration

/** JINA_API_KEY: the `jina` price card (per page). */
export const fromConfig: ProviderConfig = (cards) =>
  Effect.gen(function*() {
    const key = yield* env("JINA_API_KEY")
    if (Option.isNone(key)) return nothing
    const unitPrice = yield* unitPriceOf(cards, DEFAULT_NAME, "read", "page")
    return one(DEFAULT_NAME, "read", make({ apiKey: Redacted.make(key.value), unitPrice }))
  })
