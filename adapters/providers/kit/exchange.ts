/**
 * The HTTP exchange the upstream adapters share: one request over effect's
 * HttpClient, bounded in time and size, every way it can go wrong mapped to a
 * `ProviderFailure`, and the option checks the adapters have in common. What
 * is the provider's own (URL, headers, body, how its error bodies read, what
 * its answer means) stays in the adapter.
 *
 * Failures of `exchange` (never a defect):
 * - no complete answer within `timeoutMs`: `timeout`;
 * - no connection (refused, unknown host, ...): `unavailable`, or `network`
 *   for an upstream whose `unreachable` says so; a connection that breaks
 *   during the answer: `network`;
 * - a status outside 2xx: 429 `rate_limited`, 408 `timeout`, 5xx (Anthropic's
 *   529 too) `unavailable`, other 4xx `rejected`, anything else `unavailable`;
 *   the message carries the upstream's own explanation cut to 300 characters,
 *   Retry-After and the upstream's request id when given. An error body is
 *   read up to 16 KiB, no further;
 * - a successful answer declaring or streaming more than `maxResponseBytes`:
 *   `too_large`, and reading stops at the cap, which drops the connection;
 * - a defect in the HTTP stack: `unavailable`, logged.
 * `exchangeJson` adds `malformed` for an answer that is not UTF-8 JSON.
 *
 * The upstream's secrets are replaced by "[redacted]" in every message; the
 * request's headers, bar a few harmless ones, are redacted in traces, and no
 * trace context is sent upstream.
 */
import { Duration, Effect, Result, Schema, Stream } from "effect"
import { Headers, HttpClient, type HttpClientError, HttpClientRequest, type HttpClientResponse } from "effect/http"
import type { ProviderFailure } from "../../../src/capabilities/Provider.ts"
import { decodeOrUndefined, NonEmptyText } from "./decode.ts"
import { clip, defectsUnavailable, describeCause, failure, type FailureReason, redact } from "./text.ts"
import { declaredLength } from "../../net/declaredLength.ts"

/** An error answer is read this far for its message, and no further. */
export const MAX_ERROR_BODY_BYTES = 16 * 1024

// ---------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------

/** A POST with a JSON body, asking for JSON back. */
export const jsonPost = (
  url: string,
  body: unknown,
  headers?: Readonly<Record<string, string>>
): HttpClientRequest.HttpClientRequest =>
  HttpClientRequest.post(url, { acceptJson: true, ...(headers === undefined ? {} : { headers }) }).pipe(
    HttpClientRequest.bodyText(JSON.stringify(body), "application/json")
  )

/** Every header except the ones known to be harmless is treated as possibly secret in traces. */
const HARMLESS_HEADERS = new Set(["accept", "content-type", "content-length", "anthropic-version", "user-agent"])

const redactedHeaders = (request: HttpClientRequest.HttpClientRequest): ReadonlyArray<string> =>
  Object.keys(request.headers).filter((name) => !HARMLESS_HEADERS.has(name))

// ---------------------------------------------------------------------------
// The exchange
// ---------------------------------------------------------------------------

/** The upstream's explanation in an error body. */
export interface ErrorDetail {
  readonly message: string
  /** Its error type or code, put before the message. */
  readonly type?: string | undefined
  /** A numeric error code of its own, put after the HTTP status. */
  readonly code?: number | undefined
}

/** How one upstream is called; built once per provider, used for every request. */
export interface Upstream {
  /** The provider's name, for failures. */
  readonly provider: string
  /** For connecting, the answer and its whole body. */
  readonly timeoutMs: number
  /** Largest successful answer read. */
  readonly maxResponseBytes: number
  /** Text that never appears in a failure message (the API key). */
  readonly secrets?: ReadonlyArray<string> | undefined
  /** The reason for a request that gets no answer at all (refused connection, unknown host); default "unavailable". */
  readonly unreachable?: "unavailable" | "network" | undefined
  /** Reads the upstream's own explanation from a JSON error body. */
  readonly errorDetail?: ((body: unknown) => ErrorDetail | undefined) | undefined
  /**
   * An error body `errorDetail` finds nothing in: "plain" (the default) keeps
   * it only when it is plain text (neither JSON nor an HTML page), "page"
   * keeps any body's text with its tags removed.
   */
  readonly errorText?: "plain" | "page" | undefined
  /** The response header carrying the upstream's request id, quoted in failures. */
  readonly requestIdHeader?: string | undefined
  /**
   * Adjusts the failure an error status stands for: another reason (e.g. an
   * error code that means a rate limit whatever the status), or a message of
   * the adapter's own instead of the usual one.
   */
  readonly onErrorStatus?:
    | ((status: number, detail: ErrorDetail | undefined) => { readonly reason?: FailureReason; readonly message?: string } | undefined)
    | undefined
}

/** A successful (2xx) answer. */
export interface Reply {
  readonly status: number
  readonly headers: Headers.Headers
  /** The media type, lower-cased, without parameters ("" when none was given). */
  readonly contentType: string
  readonly bytes: Uint8Array
}

const fail = (upstream: Upstream, reason: FailureReason, message: string): ProviderFailure =>
  failure(upstream.provider, reason, message, upstream.secrets ?? [])

/** 429 rate_limited, 408 timeout, 5xx unavailable, other 4xx rejected; anything else unavailable. */
export const reasonForStatus = (status: number): FailureReason =>
  status === 429 ? "rate_limited"
  : status === 408 ? "timeout"
  : status >= 500 ? "unavailable"
  : status >= 400 ? "rejected"
  : "unavailable"

const transportFailure = (upstream: Upstream, error: HttpClientError.HttpClientError): ProviderFailure => {
  const reason = error.reason
  const cause = describeCause("cause" in reason ? reason.cause : undefined)
  const detail = cause === undefined ? "" : `: ${clip(cause, 120)}`
  const name = upstream.provider
  const unreachable = upstream.unreachable ?? "unavailable"
  switch (reason._tag) {
    case "TransportError":
      return fail(upstream, unreachable, `${name} could not be reached${detail}`)
    case "DecodeError":
    case "EmptyBodyError":
      return fail(upstream, "network", `the connection to ${name} broke during its answer${detail}`)
    default:
      return fail(upstream, unreachable, `the request to ${name} failed (${reason._tag})${detail}`)
  }
}

/** Body bytes up to `limit`; `overflow` when more was on its way (reading stops there). */
export const readBody = (
  response: HttpClientResponse.HttpClientResponse,
  limit: number
): Effect.Effect<{ readonly bytes: Uint8Array; readonly overflow: boolean }, HttpClientError.HttpClientError> =>
  Effect.suspend(() => {
    const chunks: Array<Uint8Array> = []
    let size = 0
    let overflow = false
    return Stream.runForEachWhile(response.stream, (chunk) =>
      Effect.sync(() => {
        if (size + chunk.byteLength > limit) {
          chunks.push(chunk.subarray(0, limit - size))
          size = limit
          overflow = true
          return false
        }
        chunks.push(chunk)
        size += chunk.byteLength
        return true
      })).pipe(Effect.map(() => ({ bytes: Buffer.concat(chunks, size), overflow })))
  })

const utf8 = new TextDecoder("utf-8", { fatal: true })

/** JSON from UTF-8 bytes; the failure says what is wrong with them. */
export const parseJson = (bytes: Uint8Array): Result.Result<unknown, string> => {
  let text: string
  try {
    text = utf8.decode(bytes)
  } catch {
    return Result.fail("the answer is not UTF-8")
  }
  if (text.trim() === "") return Result.fail("the answer is empty")
  try {
    return Result.succeed(JSON.parse(text) as unknown)
  } catch {
    return Result.fail("the answer is not JSON")
  }
}

/** What an error body says, redacted and cut to size; undefined when it says nothing usable. */
const errorText = (upstream: Upstream, detail: ErrorDetail | undefined, parsed: boolean, bytes: Uint8Array) => {
  const secrets = upstream.secrets ?? []
  const cut = (text: string, max?: number) => clip(redact(text, secrets), max)
  if (detail !== undefined) return detail.type === undefined ? cut(detail.message) : `${cut(detail.type, 60)}: ${cut(detail.message)}`
  const text = Buffer.from(bytes).toString("utf8")
  if (upstream.errorText === "page") {
    const line = cut(text.replace(/<[^>]*>/g, " "))
    return line === "" ? undefined : line
  }
  // A proxy's plain-text answer can say what went wrong; an HTML error page cannot, usefully.
  const plain = text.trim()
  return parsed || plain === "" || plain.startsWith("<") ? undefined : cut(plain)
}

const statusFailure = (upstream: Upstream, response: HttpClientResponse.HttpClientResponse, bytes: Uint8Array): ProviderFailure => {
  const status = response.status
  const json = parseJson(bytes)
  const detail = Result.isSuccess(json) && upstream.errorDetail !== undefined ? upstream.errorDetail(json.success) : undefined
  const adjusted = upstream.onErrorStatus?.(status, detail)
  const reason = adjusted?.reason ?? reasonForStatus(status)
  if (adjusted?.message !== undefined) return fail(upstream, reason, adjusted.message)
  const name = upstream.provider
  const http = detail?.code === undefined ? `HTTP ${status}` : `HTTP ${status} ${detail.code}`
  const lead = reason === "rejected"
    ? `${name} rejected the request (${http})`
    : reason === "rate_limited"
    ? `${name} is rate limiting requests (${http})`
    : reason === "timeout"
    ? `${name} timed out the request (${http})`
    : status >= 500
    ? `${name} is unavailable (${http})`
    : `${name} answered an unexpected ${http}`
  const text = errorText(upstream, detail, Result.isSuccess(json), bytes)
  const retryAfter = response.headers["retry-after"]
  const requestId = upstream.requestIdHeader === undefined ? undefined : response.headers[upstream.requestIdHeader]
  const notes = [
    retryAfter !== undefined && /^\d{1,6}$/.test(retryAfter) ? `retry after ${retryAfter} s` : undefined,
    requestId !== undefined && /^[\w.:-]{1,128}$/.test(requestId) ? `request ${requestId}` : undefined
  ].filter((note) => note !== undefined)
  return fail(upstream, reason, (text === undefined ? lead : `${lead}: ${text}`) + (notes.length > 0 ? ` (${notes.join(", ")})` : ""))
}

/**
 * Sends one request and reads its successful answer, all within
 * `timeoutMs`. The request lives in a scope of its own: whatever ends it
 * (done, failed, timed out, interrupted) aborts the connection, so a slow or
 * endless body is never left running. A status outside 2xx is a failure
 * carrying the upstream's explanation.
 */
export const exchange = (
  client: HttpClient.HttpClient,
  upstream: Upstream,
  request: HttpClientRequest.HttpClientRequest
): Effect.Effect<Reply, ProviderFailure> =>
  Effect.scoped(Effect.gen(function*() {
    const response = yield* HttpClient.withScope(client).execute(request).pipe(
      Effect.mapError((error) => transportFailure(upstream, error))
    )
    if (response.status < 200 || response.status >= 300) {
      const { bytes } = yield* readBody(response, MAX_ERROR_BODY_BYTES).pipe(
        Effect.orElseSucceed(() => ({ bytes: new Uint8Array(0), overflow: false }))
      )
      return yield* statusFailure(upstream, response, bytes)
    }
    const tooLarge = () =>
      fail(upstream, "too_large", `${upstream.provider}'s answer is larger than ${upstream.maxResponseBytes} bytes`)
    const declared = declaredLength(response.headers)
    if (declared !== undefined && declared > upstream.maxResponseBytes) return yield* tooLarge()
    // A declared length within the bound is read at once (the client reads exactly that many
    // bytes, or fails); any other answer chunk by chunk, cut at the bound.
    const { bytes, overflow } = yield* (declared !== undefined
      ? Effect.map(response.arrayBuffer, (buffer) => ({ bytes: new Uint8Array(buffer), overflow: false }))
      : readBody(response, upstream.maxResponseBytes)).pipe(
        Effect.mapError((error) => transportFailure(upstream, error))
      )
    if (overflow) return yield* tooLarge()
    const contentType = (response.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase()
    return { status: response.status, headers: response.headers, contentType, bytes }
  })).pipe(
    Effect.timeoutOrElse({
      duration: Duration.millis(upstream.timeoutMs),
      orElse: () => Effect.fail(fail(upstream, "timeout", `${upstream.provider} did not answer within ${upstream.timeoutMs} ms`))
    }),
    defectsUnavailable(upstream.provider, upstream.secrets),
    Effect.updateService(Headers.CurrentRedactedNames, (names) => [...names, ...redactedHeaders(request)]),
    Effect.provideService(HttpClient.TracerPropagationEnabled, false),
    // No client span: the URL may carry the caller's query; the spend pipeline's `Spend.upstream` stands for it.
    Effect.provideService(HttpClient.TracerDisabledWhen, () => true)
  )

/** The JSON of a successful answer, or `malformed`. */
export const jsonOf = (upstream: Upstream, reply: Reply): Result.Result<unknown, ProviderFailure> => {
  const parsed = parseJson(reply.bytes)
  return Result.isSuccess(parsed)
    ? Result.succeed(parsed.success)
    : Result.fail(fail(upstream, "malformed", `${upstream.provider}: ${parsed.failure}`))
}

/** `exchange`, then the answer's JSON. */
export const exchangeJson = (
  client: HttpClient.HttpClient,
  upstream: Upstream,
  request: HttpClientRequest.HttpClientRequest
): Effect.Effect<unknown, ProviderFailure> =>
  exchange(client, upstream, request).pipe(
    Effect.flatMap((reply) => {
      const json = jsonOf(upstream, reply)
      return Result.isSuccess(json) ? Effect.succeed(json.success) : Effect.fail(json.failure)
    })
  )

// ---------------------------------------------------------------------------
// Error bodies
// ---------------------------------------------------------------------------

/**
 * OpenAI's error body `{ error: { message, type, param, code } }`, and what
 * compatible servers answer instead: `{ error: "text" }`, FastAPI's
 * `{ detail: "text" }` (self-hosted Whisper servers) or `{ message }`.
 */
const OpenAiErrorBody = Schema.Struct({
  error: Schema.optional(Schema.Unknown),
  detail: Schema.optional(Schema.Unknown),
  message: Schema.optional(Schema.Unknown)
})
const OpenAiError = Schema.Struct({ message: NonEmptyText, code: Schema.optional(Schema.Unknown), type: Schema.optional(Schema.Unknown) })
const openAiErrorBodyOf = decodeOrUndefined(OpenAiErrorBody)
const openAiErrorOf = decodeOrUndefined(OpenAiError)
const nonEmptyTextOf = decodeOrUndefined(NonEmptyText)

export const openAiErrorDetail = (body: unknown): ErrorDetail | undefined => {
  const decoded = openAiErrorBodyOf(body)
  if (decoded === undefined) return undefined
  const error = openAiErrorOf(decoded.error)
  if (error !== undefined) {
    const named = (value: unknown) => (typeof value === "string" && value !== "" ? value : undefined)
    return { message: error.message, type: named(error.code) ?? named(error.type) }
  }
  const text = nonEmptyTextOf(decoded.error) ?? nonEmptyTextOf(decoded.detail) ?? nonEmptyTextOf(decoded.message)
  return text === undefined ? undefined : { message: text }
}
