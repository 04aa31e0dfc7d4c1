/**
 * The HTTP exchange the upstream adapters share: one request of the
 * upstream client (adapters/net/upstreamClient.ts), bounded in time and
 * size, every way it can go wrong mapped to a `ProviderFailure`, and the
 * option checks the adapters have in common. What
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
 * exchange records no span (the spend pipeline's `Spend.upstream` stands for
 * it) and sends no trace context upstream. Adapters describe their requests
 * with Effect's `HttpClientRequest` (URL, parameters, headers, body).
 */
import { Effect, Option, Result, Schema } from "effect"
import { type HttpBody, HttpClientRequest } from "effect/http"
import type { ProviderFailure } from "../../../src/capabilities/Provider.ts"
import type { UpstreamAnswer, UpstreamClient, UpstreamFailure, UpstreamRequest } from "../../net/upstreamClient.ts"

/** The client every exchange goes through (one connection pool, provided by the server). */
export { UpstreamClient } from "../../net/upstreamClient.ts"
import { decodeOrUndefined, NonEmptyText } from "./decode.ts"
import { causeDetail, clip, defectsUnavailable, failure, type FailureReason, redact } from "./text.ts"

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
  /** Lower-case names. */
  readonly headers: Readonly<Record<string, string>>
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

const statusFailure = (
  upstream: Upstream,
  status: number,
  headers: Readonly<Record<string, string>>,
  bytes: Uint8Array
): ProviderFailure => {
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
  const retryAfter = headers["retry-after"]
  const requestId = upstream.requestIdHeader === undefined ? undefined : headers[upstream.requestIdHeader]
  const notes = [
    retryAfter !== undefined && /^\d{1,6}$/.test(retryAfter) ? `retry after ${retryAfter} s` : undefined,
    requestId !== undefined && /^[\w.:-]{1,128}$/.test(requestId) ? `request ${requestId}` : undefined
  ].filter((note) => note !== undefined)
  return fail(upstream, reason, (text === undefined ? lead : `${lead}: ${text}`) + (notes.length > 0 ? ` (${notes.join(", ")})` : ""))
}

/** The body of a request as the upstream client takes it; a streamed body is not one an adapter sends. */
const bodyOf = (body: HttpBody.HttpBody): UpstreamRequest["body"] => {
  switch (body._tag) {
    case "Empty":
      return undefined
    case "Uint8Array":
      return body.body
    case "FormData":
      return body.formData
    case "Raw":
      if (typeof body.body === "string" || body.body instanceof Uint8Array) return body.body
      throw new Error("exchange: a raw body must be text or bytes")
    case "Stream":
      throw new Error("exchange: a streamed request body is not supported")
  }
}

/** A 2xx status: the answer an adapter reads in full (an error answer is read up to MAX_ERROR_BODY_BYTES). */
export const isSuccessStatus = (status: number): boolean => status >= 200 && status < 300

/**
 * Sends one request and reads its successful answer, all within
 * `timeoutMs` (the upstream client: one exchange, no stream). Whatever ends
 * it (done, failed, timed out, interrupted, an answer over the bound) drops
 * the connection if it is still open, so a slow or endless body is never
 * left running. A status outside 2xx is a failure carrying the upstream's
 * explanation (its body read up to 16 KiB).
 */
export const exchange = (
  client: UpstreamClient["Service"],
  upstream: Upstream,
  request: HttpClientRequest.HttpClientRequest
): Effect.Effect<Reply, ProviderFailure> =>
  Effect.suspend((): Effect.Effect<UpstreamAnswer, UpstreamFailure | ProviderFailure> => {
    const url = HttpClientRequest.toUrl(request)
    if (Option.isNone(url)) return Effect.fail(fail(upstream, "unavailable", `the request to ${upstream.provider} has an invalid URL`))
    return client.send({
      url: url.value,
      method: request.method,
      headers: request.headers,
      body: bodyOf(request.body),
      timeoutMs: upstream.timeoutMs,
      maxBytes: (status) => (isSuccessStatus(status) ? upstream.maxResponseBytes : MAX_ERROR_BODY_BYTES)
    })
  }).pipe(
    Effect.catchTags({
      UpstreamTimeout: () => Effect.fail(fail(upstream, "timeout", `${upstream.provider} did not answer within ${upstream.timeoutMs} ms`)),
      UpstreamUnreachable: (error) =>
        Effect.fail(fail(upstream, upstream.unreachable ?? "unavailable", `${upstream.provider} could not be reached${causeDetail(error.cause)}`)),
      UpstreamBroken: (error) =>
        // An error answer whose body broke is still that error, with no explanation to quote.
        Effect.fail(
          isSuccessStatus(error.status)
            ? fail(upstream, "network", `the connection to ${upstream.provider} broke during its answer${causeDetail(error.cause)}`)
            : statusFailure(upstream, error.status, {}, new Uint8Array(0))
        )
    }),
    Effect.flatMap((answer): Effect.Effect<Reply, ProviderFailure> => {
      if (!isSuccessStatus(answer.status)) return Effect.fail(statusFailure(upstream, answer.status, answer.headers, answer.bytes))
      if (answer.overflow) {
        return Effect.fail(
          fail(upstream, "too_large", `${upstream.provider}'s answer is larger than ${upstream.maxResponseBytes} bytes`)
        )
      }
      const contentType = (answer.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase()
      return Effect.succeed({ status: answer.status, headers: answer.headers, contentType, bytes: answer.bytes })
    }),
    defectsUnavailable(upstream.provider, upstream.secrets)
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
  client: UpstreamClient["Service"],
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
