import { Duration, Effect, Redacted, Result, type Scope, Stream } from "effect"
import { HttpClient, type HttpClientError, HttpClientRequest, type HttpClientResponse } from "effect/http"
import { type Provider, ProviderFailure, type UnitPrice } from "../../../src/capabilities/Provider.ts"
import type { SearchInput, SearchOutput } from "../../../src/capabilities/schemas.ts"

/**
 * `search` through Tavily's Search API.
 *
 * Request: `POST {baseUrl}/search` with `Authorization: Bearer tvly-...` and the
 * JSON body `{ query, max_results, search_depth: "basic" }` (a basic search is
 * one API credit). Earlier versions of the API took the key as `api_key` in
 * the body; the current reference (and Tavily's own clients) send it as a
 * bearer token, which is what is done here: the key never goes in a body.
 *
 * Answer: `{ query, answer, images, results: [{ title, url, content, score,
 * raw_content, ... }], response_time, request_id, ... }`; the snippet is
 * `content`. Tavily reports no total, so `totalResults` is the number of
 * results returned.
 *
 * Errors: `{ detail: { error } }` (401 bad key, 429 rate or usage limit,
 * 432/433 plan limits), and FastAPI's `{ detail: [{ loc, msg, type }] }` for
 * a request it cannot validate.
 *
 * `max_results` is at most 20: larger `numResults` ask for 20 and return at
 * most 20.
 */

export const PROVIDER_NAME = "tavily"
export const DEFAULT_BASE_URL = "https://api.tavily.com"
export const SEARCH_PATH = "/search"
/** The most results Tavily returns for one request (`max_results`). */
export const MAX_RESULTS = 20

export const DEFAULT_NUM_RESULTS = 10
export const DEFAULT_TIMEOUT_MS = 15_000
export const DEFAULT_MAX_RESPONSE_BYTES = 2 * 1024 * 1024
export const MAX_TITLE_CHARS = 500
export const MAX_SNIPPET_CHARS = 2000
export const MAX_URL_CHARS = 2048
/** Longest upstream error text kept in a failure message. */
export const MAX_UPSTREAM_MESSAGE_CHARS = 300
/** An error answer is read this far for its message, and no further. */
const ERROR_BODY_BYTES = 16 * 1024

export interface TavilyOptions {
  /** Provider name in the catalogue and in failures; default "tavily". */
  readonly name?: string | undefined
  /** Scheme, host and optional path prefix; default https://api.tavily.com. */
  readonly baseUrl?: string | undefined
  /** `tvly-...` */
  readonly apiKey: Redacted.Redacted<string>
  /** Flat price per query, from the operator's price card. */
  readonly unitPrice: UnitPrice
  /** Limit for the whole call, from connecting to the end of the answer; default 15 s. */
  readonly timeoutMs?: number | undefined
  /** Largest answer accepted; default 2 MiB. */
  readonly maxResponseBytes?: number | undefined
}

// ---------------------------------------------------------------------------
// Settings

interface Settings {
  readonly name: string
  readonly url: string
  readonly apiKey: string
  readonly unitPrice: UnitPrice
  readonly timeoutMs: number
  readonly maxResponseBytes: number
}

/** Checks the options once; a bad value is a deployment error (a defect naming it). */
const settingsOf = (options: TavilyOptions): Settings => {
  const name = options.name ?? PROVIDER_NAME
  if (name.trim() === "" || name.length > 64) throw new Error(`Tavily: provider name must be 1 to 64 characters`)
  const base = options.baseUrl ?? DEFAULT_BASE_URL
  let parsed: URL
  try {
    parsed = new URL(base)
  } catch {
    throw new Error(`${name}: baseUrl is not a URL: ${JSON.stringify(base)}`)
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") {
    throw new Error(`${name}: baseUrl must be an http(s) URL, got ${parsed.protocol}`)
  }
  if (parsed.search !== "" || parsed.hash !== "" || parsed.username !== "" || parsed.password !== "") {
    throw new Error(`${name}: baseUrl must not carry credentials, a query or a fragment`)
  }
  const apiKey = Redacted.value(options.apiKey).trim()
  if (apiKey === "") throw new Error(`${name}: the API key is empty`)
  if (options.unitPrice.per !== "query" || options.unitPrice.priceMicroUsd < 0n) {
    throw new Error(`${name}: the price must be a non-negative amount per query`)
  }
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new Error(`${name}: timeoutMs must be a positive number`)
  const maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES
  if (!Number.isSafeInteger(maxResponseBytes) || maxResponseBytes <= 0) {
    throw new Error(`${name}: maxResponseBytes must be a positive integer`)
  }
  return {
    name,
    url: parsed.href.replace(/\/+$/, "") + SEARCH_PATH,
    apiKey,
    unitPrice: options.unitPrice,
    timeoutMs,
    maxResponseBytes
  }
}

// ---------------------------------------------------------------------------
// Failures

const failure = (provider: string, reason: ProviderFailure["reason"], message: string) =>
  new ProviderFailure({ provider, reason, message })

/** One line, without the key, at most `max` characters. */
const clip = (text: string, secret: string, max = MAX_UPSTREAM_MESSAGE_CHARS): string => {
  const scrubbed = secret === "" ? text : text.split(secret).join("[redacted]")
  const line = scrubbed.replace(/[\s\u0000-\u001f\u007f]+/g, " ").trim()
  return line.length > max ? `${line.slice(0, max - 1)}…` : line
}

const describeCause = (cause: unknown): string | undefined => {
  if (!(cause instanceof Error)) return undefined
  // Node and undici errors carry a code (ECONNREFUSED, UND_ERR_SOCKET, ...), sometimes on an inner cause.
  const code = (cause as { code?: unknown }).code
  if (typeof code === "string") return code
  return describeCause((cause as { cause?: unknown }).cause) ?? cause.message
}

const transportFailure = (settings: Settings, error: HttpClientError.HttpClientError): ProviderFailure => {
  const reason = error.reason
  const cause = describeCause("cause" in reason ? reason.cause : undefined)
  const detail = cause === undefined ? "" : `: ${clip(cause, settings.apiKey, 120)}`
  switch (reason._tag) {
    case "TransportError":
      return failure(settings.name, "unavailable", `${settings.name} is unreachable${detail}`)
    case "DecodeError":
      return failure(settings.name, "network", `the connection to ${settings.name} broke during its answer${detail}`)
    default:
      return failure(settings.name, "unavailable", `the request to ${settings.name} failed (${reason._tag})${detail}`)
  }
}

const statusFailure = (settings: Settings, status: number, upstream: string): ProviderFailure => {
  const detail = upstream === "" ? "" : `: ${upstream}`
  const name = settings.name
  if (status === 429) return failure(name, "rate_limited", `${name} is rate limiting requests (HTTP 429)${detail}`)
  if (status >= 400 && status < 500) return failure(name, "rejected", `${name} refused the request (HTTP ${status})${detail}`)
  return failure(name, "unavailable", `${name} answered HTTP ${status}${detail}`)
}

// ---------------------------------------------------------------------------
// Transport

interface Reply {
  readonly status: number
  readonly bytes: Uint8Array
  /** The body went past the limit (only what fits was kept). */
  readonly overflow: boolean
}

/** Reads at most `limit` bytes; stops reading (and so drops the connection) past that. */
const readBody = (response: HttpClientResponse.HttpClientResponse, limit: number) =>
  Effect.suspend(() => {
    const chunks: Array<Uint8Array> = []
    let size = 0
    let overflow = false
    return Stream.runForEachWhile(response.stream, (chunk) => {
      const room = limit - size
      if (chunk.byteLength > room) {
        overflow = true
        if (room > 0) chunks.push(chunk.slice(0, room))
        size += Math.max(room, 0)
        return Effect.succeed(false)
      }
      chunks.push(chunk)
      size += chunk.byteLength
      return Effect.succeed(true)
    }).pipe(Effect.map(() => ({ bytes: Buffer.concat(chunks, size), overflow })))
  })

/**
 * Sends one request and reads its answer. The request lives in this scope:
 * once the answer is read, fails or the call times out, the connection is
 * closed, so a slow or endless body is never left running.
 */
const exchange = (
  client: HttpClient.HttpClient.With<HttpClientError.HttpClientError, Scope.Scope>,
  settings: Settings,
  request: HttpClientRequest.HttpClientRequest
): Effect.Effect<Reply, ProviderFailure> =>
  Effect.scoped(Effect.gen(function*() {
    const response = yield* client.execute(request)
    const ok = response.status >= 200 && response.status < 300
    const limit = ok ? settings.maxResponseBytes : ERROR_BODY_BYTES
    const declared = Number(response.headers["content-length"])
    if (ok && Number.isFinite(declared) && declared > limit) {
      return { status: response.status, bytes: new Uint8Array(0), overflow: true }
    }
    const { bytes, overflow } = yield* readBody(response, limit)
    return { status: response.status, bytes, overflow }
  })).pipe(Effect.catchTag("HttpClientError", (error) => Effect.fail(transportFailure(settings, error))))

const NOT_JSON = Symbol("not JSON")

const parseJson = (bytes: Uint8Array): unknown => {
  try {
    return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes))
  } catch {
    return NOT_JSON
  }
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * Tavily's error text: `detail.error`, a plain `detail`, the first message of
 * a validation error, or else the body as text.
 */
const upstreamMessage = (bytes: Uint8Array, secret: string): string => {
  const json = parseJson(bytes)
  if (isRecord(json)) {
    const detail = json.detail
    if (isRecord(detail) && typeof detail.error === "string") return clip(detail.error, secret)
    if (typeof detail === "string") return clip(detail, secret)
    if (Array.isArray(detail) && isRecord(detail[0]) && typeof detail[0].msg === "string") {
      const where = Array.isArray(detail[0].loc) ? `${detail[0].loc.map(String).join(".")}: ` : ""
      return clip(`${where}${detail[0].msg}`, secret)
    }
    for (const key of ["error", "message"] as const) {
      if (typeof json[key] === "string") return clip(json[key], secret)
    }
  }
  return clip(new TextDecoder().decode(bytes).replace(/<[^>]*>/g, " "), secret)
}

/** The decoded JSON of a successful answer, or the failure its status or body stands for. */
const answerOf = (settings: Settings, reply: Reply): Result.Result<unknown, ProviderFailure> => {
  if (reply.status < 200 || reply.status >= 300) {
    return Result.fail(statusFailure(settings, reply.status, upstreamMessage(reply.bytes, settings.apiKey)))
  }
  if (reply.overflow) {
    return Result.fail(
      failure(settings.name, "too_large", `${settings.name}'s answer is larger than ${settings.maxResponseBytes} bytes`)
    )
  }
  const json = parseJson(reply.bytes)
  if (json === NOT_JSON) return Result.fail(failure(settings.name, "malformed", `${settings.name}'s answer is not JSON`))
  return Result.succeed(json)
}

// ---------------------------------------------------------------------------
// Results

type SearchResult = SearchOutput["results"][number]

interface Candidate {
  readonly title: unknown
  readonly url: unknown
  readonly snippet: unknown
}

/** Cuts to at most `max` characters (an ellipsis included), never inside a surrogate pair. */
const bound = (text: string, max: number): string => {
  if (text.length <= max) return text
  let end = max - 1
  const last = text.charCodeAt(end - 1)
  if (last >= 0xd800 && last <= 0xdbff) end -= 1
  return `${text.slice(0, end)}…`
}

const oneLine = (text: string): string => text.replace(/[\s\u0000-\u001f\u007f]+/g, " ").trim()

/** An absolute http(s) URL without whitespace or control characters, within bounds. */
const httpUrl = (value: unknown): string | undefined => {
  if (typeof value !== "string") return undefined
  const text = value.trim()
  if (text === "" || text.length > MAX_URL_CHARS || /[\s\u0000-\u001f\u007f]/.test(text)) return undefined
  try {
    const url = new URL(text)
    return url.protocol === "http:" || url.protocol === "https:" ? text : undefined
  } catch {
    return undefined
  }
}

/**
 * The first `limit` usable results in the upstream's order: results without
 * a valid http(s) URL and repeated URLs are dropped, text is cleaned and
 * bounded, positions count from 1.
 */
const normalize = (
  candidates: ReadonlyArray<Candidate>,
  limit: number,
  clean: (text: string) => string
): Array<SearchResult> => {
  const results: Array<SearchResult> = []
  const seen = new Set<string>()
  for (const candidate of candidates) {
    if (results.length >= limit) break
    const url = httpUrl(candidate.url)
    if (url === undefined || seen.has(url)) continue
    seen.add(url)
    const text = (value: unknown, max: number) => bound(typeof value === "string" ? oneLine(clean(value)) : "", max)
    results.push({
      title: text(candidate.title, MAX_TITLE_CHARS),
      url,
      snippet: text(candidate.snippet, MAX_SNIPPET_CHARS),
      position: results.length + 1
    })
  }
  return results
}

// ---------------------------------------------------------------------------
// Tavily's answer

const describe = (value: unknown): string =>
  value === undefined ? "missing" : value === null ? "null" : Array.isArray(value) ? "an array" : typeof value

const parseAnswer = (settings: Settings, json: unknown, limit: number): Result.Result<Array<SearchResult>, ProviderFailure> => {
  const malformed = (what: string) => Result.fail(failure(settings.name, "malformed", `${settings.name}'s answer ${what}`))
  if (!isRecord(json)) return malformed("is not a JSON object")
  if (!Array.isArray(json.results)) return malformed(`has "results" ${describe(json.results)}, not an array`)
  const candidates = json.results.filter(isRecord).map((item): Candidate => ({
    title: item.title,
    url: item.url,
    snippet: item.content
  }))
  return Result.succeed(normalize(candidates, limit, (text) => text))
}

// ---------------------------------------------------------------------------
// The provider

export const make = (options: TavilyOptions): Effect.Effect<Provider<"search">, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() => settingsOf(options))
    const client = HttpClient.withScope(yield* HttpClient.HttpClient)
    const price = settings.unitPrice.priceMicroUsd

    const run = Effect.fn("Tavily.run")(
      function*(input: SearchInput) {
        const limit = input.numResults ?? DEFAULT_NUM_RESULTS
        const request = HttpClientRequest.post(settings.url, { acceptJson: true }).pipe(
          HttpClientRequest.bearerToken(settings.apiKey),
          HttpClientRequest.bodyText(
            JSON.stringify({ query: input.query, max_results: Math.min(limit, MAX_RESULTS), search_depth: "basic" }),
            "application/json"
          )
        )
        const reply = yield* exchange(client, settings, request).pipe(
          Effect.timeoutOrElse({
            duration: Duration.millis(settings.timeoutMs),
            orElse: () =>
              Effect.fail(failure(settings.name, "timeout", `${settings.name} did not answer within ${settings.timeoutMs} ms`))
          })
        )
        const json = answerOf(settings, reply)
        if (Result.isFailure(json)) return yield* json.failure
        const results = parseAnswer(settings, json.success, limit)
        if (Result.isFailure(results)) return yield* results.failure
        const output: SearchOutput = { results: results.success, query: input.query, totalResults: results.success.length }
        return { output, actualMicroUsd: price }
      },
      (effect) =>
        effect.pipe(
          // A bug in the HTTP stack must not surface as a defect of the call: the hold is released
          // and the next provider tried, as for any upstream failure.
          Effect.catchDefect((defect) => {
            const text = clip(String(defect), settings.apiKey, 200)
            return Effect.logError(`${settings.name}: unexpected failure`, text).pipe(
              Effect.andThen(Effect.fail(failure(settings.name, "unavailable", `unexpected failure: ${text}`)))
            )
          }),
          // The bearer token is redacted from spans by default; no trace headers go to Tavily.
          Effect.provideService(HttpClient.TracerPropagationEnabled, false)
        )
    )

    return {
      name: settings.name,
      capability: "search",
      unitPrice: settings.unitPrice,
      quote: () => Result.succeed({ microUsd: price }),
      run: (input) => run(input)
    } satisfies Provider<"search">
  })
