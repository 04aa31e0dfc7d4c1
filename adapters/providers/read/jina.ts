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
 * ../http.ts).
 *
 * URL safety: Jina fetches the page from its own network, so nothing is sent
 * from here to the caller's address. The address is still checked by the
 * core (`Capabilities.execute` calls `OutboundHttp.check` for every `read`
 * and `scrape` before money is held, whenever the port is provided, as the
 * server always does), so this adapter does not need the port.
 */
import { Effect, type Redacted, Result } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import { type Provider, ProviderFailure, type UnitPrice } from "../../../src/capabilities/Provider.ts"
import type { ReadInput, ReadOutput } from "../../../src/capabilities/schemas.ts"
import {
  baseUrlOf,
  checkUnitPrice,
  type ErrorDetail,
  exchangeJson,
  isRecord,
  keySecrets,
  positiveInteger,
  providerName,
  type Upstream
} from "../kit/index.ts"
import { clip, cut, normalizeLines, oneLineOrNull } from "../kit/page.ts"
import { MAX_OUTPUT_CHARS } from "../kit/readPage.ts"

export const DEFAULT_NAME = "jina"
export const DEFAULT_BASE_URL = "https://r.jina.ai"
/** Jina renders pages in a browser: slower than a plain fetch. */
export const DEFAULT_TIMEOUT_MS = 30_000
export const DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024

export interface Options {
  readonly name?: string | undefined
  /** Scheme, host and optional path prefix; default https://r.jina.ai. */
  readonly baseUrl?: string | undefined
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /** From the operator's price card (`per: "page"`). */
  readonly unitPrice: UnitPrice
  /** For the whole call, from connecting to the end of the answer; default 30 s. */
  readonly timeoutMs?: number | undefined
  /** Largest answer accepted; default 8 MiB. */
  readonly maxResponseBytes?: number | undefined
}

/** Jina's error body: `readableMessage` is meant for people, `name` is the error class. */
const jinaErrorDetail = (body: unknown): ErrorDetail | undefined => {
  if (!isRecord(body)) return undefined
  const message = typeof body.readableMessage === "string" && body.readableMessage.trim() !== ""
    ? body.readableMessage
    : typeof body.message === "string" && body.message.trim() !== ""
    ? body.message
    : undefined
  if (message === undefined) return undefined
  return { message, type: typeof body.name === "string" && body.name !== "" ? body.name : undefined }
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

const metadataString = (metadata: unknown, ...keys: ReadonlyArray<string>): string | null => {
  if (!isRecord(metadata)) return null
  for (const key of keys) {
    const value = oneLineOrNull(typeof metadata[key] === "string" ? metadata[key] : null)
    if (value !== null) return value
  }
  return null
}

type Parsed = Result.Result<ReadOutput, { readonly reason: "malformed" | "rejected"; readonly message: string }>

/** Reads Jina's answer; `requested` stands in for a missing `url`. */
export const parseAnswer = (body: unknown, requested: string): Parsed => {
  const malformed = (message: string) => Result.fail({ reason: "malformed" as const, message })
  if (!isRecord(body)) return malformed("the answer is not a JSON object")
  const data = body.data
  if (!isRecord(data)) return malformed("the answer has no data object")
  if (typeof data.content !== "string") return malformed("data.content is not a string")
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

export const make = (options: Options): Effect.Effect<Provider<"read">, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const name = options.name ?? DEFAULT_NAME
    const settings = yield* Effect.try({
      try: () => {
        providerName("read/jina", name)
        checkUnitPrice(`read/jina ${name}`, options.unitPrice, "page")
        return {
          baseUrl: baseUrlOf(name, options.baseUrl ?? DEFAULT_BASE_URL, { allowCredentials: true }),
          timeoutMs: positiveInteger(name, "timeoutMs", options.timeoutMs, DEFAULT_TIMEOUT_MS),
          maxResponseBytes: positiveInteger(name, "maxResponseBytes", options.maxResponseBytes, DEFAULT_MAX_RESPONSE_BYTES)
        }
      },
      catch: (error) => error
    }).pipe(Effect.orDie)
    const client = yield* HttpClient.HttpClient
    const { unitPrice, apiKey } = options
    const upstream: Upstream = {
      provider: name,
      timeoutMs: settings.timeoutMs,
      maxResponseBytes: settings.maxResponseBytes,
      secrets: keySecrets(apiKey),
      unreachable: "network",
      errorDetail: jinaErrorDetail,
      requestIdHeader: "x-request-id"
    }

    const run = Effect.fn("Jina.run")(function*(input: ReadInput) {
      let request = HttpClientRequest.get(`${settings.baseUrl}/${input.url}`, { acceptJson: true })
      if (apiKey !== undefined) request = HttpClientRequest.bearerToken(request, apiKey)
      const answer = yield* exchangeJson(client, upstream, request)
      const parsed = parseAnswer(answer, input.url)
      if (Result.isFailure(parsed)) {
        return yield* new ProviderFailure({ provider: name, reason: parsed.failure.reason, message: clip(`${name}: ${parsed.failure.message}`) })
      }
      return { output: parsed.success, actualMicroUsd: unitPrice.priceMicroUsd }
    })

    return {
      name,
      capability: "read",
      unitPrice,
      quote: () => Result.succeed({ microUsd: unitPrice.priceMicroUsd }),
      run
    } satisfies Provider<"read">
  })
