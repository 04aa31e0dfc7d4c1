import { Duration, Effect, Redacted, Result, type Scope, Stream } from "effect"
import { Headers, HttpClient, type HttpClientError, HttpClientRequest, type HttpClientResponse } from "effect/http"
import { type Provider, ProviderFailure, type UnitPrice } from "../../../src/capabilities/Provider.ts"
import type { SearchInput, SearchOutput } from "../../../src/capabilities/schemas.ts"

/**
 * `search` through the Brave Search API (web search).
 *
 * Request: `GET {baseUrl}/res/v1/web/search?q=<query>&count=<n>` with the key
 * in `X-Subscription-Token` and `Accept: application/json`.
 *
 * Answer (WebSearchApiResponse): `{ type: "search", query: { original, ... },
 * web: { type: "search", results: [{ title, url, description, ... }] }, ... }`.
 * Brave leaves `web` out when a query has no web results, so a missing `web`
 * is an empty answer, not a malformed one. Titles and descriptions carry
 * Brave's `<strong>` highlighting and may carry HTML entities; both are removed. Brave
 * reports no total, so `totalResults` is the number of results returned.
 *
 * Errors: `{ type: "ErrorResponse", error: { id, status, code, detail, meta },
 * time }`; a missing or unknown key is 422 `SUBSCRIPTION_TOKEN_INVALID` (401
 * on some plans), too many requests 429 `RATE_LIMITED`.
 *
 * Brave's `count` is at most 20 and its `offset` skips whole pages of `count`
 * results. More than 20 results would take one billed upstream request per
 * page for a query the caller pays once, so a call asks for at most 20 and
 * returns at most 20, whatever `numResults` says.
 */

export const PROVIDER_NAME = "brave"
export const DEFAULT_BASE_URL = "https://api.search.brave.com"
export const SEARCH_PATH = "/res/v1/web/search"
/** The most results Brave returns for one request (`count`). */
export const MAX_COUNT = 20

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

const KEY_HEADER = "X-Subscription-Token"

export interface BraveOptions {
  /** Provider name in the catalogue and in failures; default "brave". */
  readonly name?: string | undefined
  /** Scheme, host and optional path prefix; default https://api.search.brave.com. */
  readonly baseUrl?: string | undefined
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
const settingsOf = (options: BraveOptions): Settings => {
  const name = options.name ?? PROVIDER_NAME
  if (name.trim() === "" || name.length > 64) throw new Error(`Brave: provider name must be 1 to 64 characters`)
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

/** Brave's error text: `error.detail` (with `error.code`), else the body as text. */
const upstreamMessage = (bytes: Uint8Array, secret: string): string => {
  const json = parseJson(bytes)
  if (isRecord(json) && isRecord(json.error)) {
    const { code, detail } = json.error
    const text = [typeof code === "string" ? code : "", typeof detail === "string" ? detail : ""]
      .filter((part) => part !== "")
      .join(": ")
    if (text !== "") return clip(text, secret)
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
// Brave's answer

const NAMED_ENTITIES: Readonly<Record<string, string>> = {
  amp: "&",
  lt: "<",
  gt: ">",
  quot: "\"",
  apos: "'",
  nbsp: " "
}

const decodeEntities = (text: string): string =>
  text.replace(/&(#[xX][0-9a-fA-F]{1,6}|#[0-9]{1,7}|[a-zA-Z]{2,8});/g, (whole, body: string) => {
    if (body.startsWith("#")) {
      const code = body[1] === "x" || body[1] === "X" ? parseInt(body.slice(2), 16) : parseInt(body.slice(1), 10)
      const valid = code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff)
      return valid ? String.fromCodePoint(code) : whole
    }
    return NAMED_ENTITIES[body.toLowerCase()] ?? whole
  })

/** Brave's highlighting out, then its entities decoded (so an escaped `&lt;strong&gt;` stays text). */
export const cleanBraveText = (text: string): string => decodeEntities(text.replace(/<\/?strong>/gi, ""))

const describe = (value: unknown): string =>
  value === undefined ? "missing" : value === null ? "null" : Array.isArray(value) ? "an array" : typeof value

const parseAnswer = (settings: Settings, json: unknown, limit: number): Result.Result<Array<SearchResult>, ProviderFailure> => {
  const malformed = (what: string) => Result.fail(failure(settings.name, "malformed", `${settings.name}'s answer ${what}`))
  if (!isRecord(json)) return malformed("is not a JSON object")
  if (json.type !== "search") return malformed(`has type ${JSON.stringify(clip(String(json.type), settings.apiKey, 40))}, not "search"`)
  if (json.web === undefined || json.web === null) return Result.succeed([])
  if (!isRecord(json.web)) return malformed(`has a "web" that is ${describe(json.web)}`)
  const results = json.web.results
  if (!Array.isArray(results)) return malformed(`has "web.results" ${describe(results)}, not an array`)
  const candidates = results.filter(isRecord).map((item): Candidate => ({
    title: item.title,
    url: item.url,
    snippet: item.description
  }))
  return Result.succeed(normalize(candidates, limit, cleanBraveText))
}

// ---------------------------------------------------------------------------
// The provider

export const make = (options: BraveOptions): Effect.Effect<Provider<"search">, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() => settingsOf(options))
    const client = HttpClient.withScope(yield* HttpClient.HttpClient)
    const price = settings.unitPrice.priceMicroUsd

    const run = Effect.fn("Brave.run")(
      function*(input: SearchInput) {
        const limit = input.numResults ?? DEFAULT_NUM_RESULTS
        const request = HttpClientRequest.get(settings.url, {
          urlParams: { q: input.query, count: String(Math.min(limit, MAX_COUNT)) },
          headers: { [KEY_HEADER]: settings.apiKey },
          acceptJson: true
        })
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
          // Keeps the key out of spans even when headers are recorded; no trace headers go to Brave.
          (self) =>
            Effect.updateService(self, Headers.CurrentRedactedNames, (names) => [...names, KEY_HEADER.toLowerCase()]),
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
