import { Duration, Effect, Redacted, Result, type Scope, Stream } from "effect"
import { HttpClient, type HttpClientError, HttpClientRequest, type HttpClientResponse } from "effect/http"
import { type Provider, ProviderFailure, type UnitPrice } from "../../../src/capabilities/Provider.ts"
import type { EmailInput, EmailOutput } from "../../../src/capabilities/schemas.ts"
import { oneLineSubject, parseSender } from "./smtp.ts"

/**
 * `email` through Resend's HTTP API.
 *
 * Request: `POST {baseUrl}/emails` with `Authorization: Bearer re_...` and the
 * JSON body `{ from, to, subject, text?, html?, reply_to? }`. The sender is the
 * operator's configured address; a caller never chooses it.
 *
 * Answer: `{ id }` (200). Resend takes the message for every recipient or for
 * none, so the output lists every recipient as accepted and none as rejected;
 * `messageId` is Resend's email id.
 *
 * Errors: `{ statusCode, name, message }` — 400 `validation_error` and friends,
 * 401 `missing_api_key`, 403 `invalid_api_key`, 422 `validation_error` /
 * `invalid_from_address` / ..., 429 `rate_limit_exceeded` or
 * `daily_quota_exceeded`, 5xx `application_error`. Any 4xx is `rejected` with
 * Resend's message, 429 `rate_limited`, 5xx `unavailable`.
 *
 * Price: one unit per message (the price card's `message`), whatever the
 * number of recipients (at most 10, by the input schema).
 *
 * A timeout is reported as such even when the request was already sent:
 * Resend may have taken the message, but without its answer nothing is charged.
 */

export const PROVIDER_NAME = "resend"
export const DEFAULT_BASE_URL = "https://api.resend.com"
export const EMAILS_PATH = "/emails"
export const DEFAULT_TIMEOUT_MS = 15_000
/** The answer is a small JSON object; anything near this is not Resend's. */
export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024
/** Longest upstream error text kept in a failure message. */
export const MAX_UPSTREAM_MESSAGE_CHARS = 300
/** An error answer is read this far for its message, and no further. */
const ERROR_BODY_BYTES = 16 * 1024
/** Longest email id accepted from the answer. */
const MAX_ID_CHARS = 256

export interface ResendOptions {
  /** Provider name in the catalogue and in failures; default "resend". */
  readonly name?: string | undefined
  /** `re_...` */
  readonly apiKey: Redacted.Redacted<string>
  /** The operator's sender: `noreply@example.com` or `Example <noreply@example.com>`, on a domain verified with Resend. */
  readonly from: string
  /** Scheme, host and optional path prefix; default https://api.resend.com. */
  readonly baseUrl?: string | undefined
  /** Flat price per message, from the operator's price card. */
  readonly unitPrice: UnitPrice
  /** Limit for the whole call, from connecting to the end of the answer; default 15 s. */
  readonly timeoutMs?: number | undefined
  /** Largest answer accepted; default 64 KiB. */
  readonly maxResponseBytes?: number | undefined
}

// ---------------------------------------------------------------------------
// Settings

interface Settings {
  readonly name: string
  readonly url: string
  readonly apiKey: string
  readonly from: string
  readonly unitPrice: UnitPrice
  readonly timeoutMs: number
  readonly maxResponseBytes: number
}

/** Checks the options once; a bad value is a deployment error (a defect naming it). */
const settingsOf = (options: ResendOptions): Settings => {
  const name = options.name ?? PROVIDER_NAME
  if (name.trim() === "" || name.length > 64) throw new Error(`Resend: provider name must be 1 to 64 characters`)
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
  if (apiKey === "" || /[\s\u0000-\u001f\u007f]/.test(apiKey)) throw new Error(`${name}: the API key is empty or has whitespace`)
  const sender = parseSender(options.from)
  if (sender === undefined) throw new Error(`${name}: from must be an address or "Name <address>", got ${JSON.stringify(options.from)}`)
  if (options.unitPrice.per !== "message" || options.unitPrice.priceMicroUsd < 0n) {
    throw new Error(`${name}: the price must be a non-negative amount per message`)
  }
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new Error(`${name}: timeoutMs must be a positive number`)
  const maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES
  if (!Number.isSafeInteger(maxResponseBytes) || maxResponseBytes <= 0) {
    throw new Error(`${name}: maxResponseBytes must be a positive integer`)
  }
  return {
    name,
    url: parsed.href.replace(/\/+$/, "") + EMAILS_PATH,
    apiKey,
    from: sender.name === "" ? sender.address : `${sender.name} <${sender.address}>`,
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
  if (status === 408) return failure(name, "timeout", `${name} timed out the request (HTTP 408)${detail}`)
  if (status >= 400 && status < 500) return failure(name, "rejected", `${name} refused the message (HTTP ${status})${detail}`)
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

/** Resend's error text, `name: message`, or else the body as text. */
const upstreamMessage = (bytes: Uint8Array, secret: string): string => {
  const json = parseJson(bytes)
  if (isRecord(json)) {
    const message = typeof json.message === "string" ? json.message : typeof json.error === "string" ? json.error : undefined
    if (message !== undefined) {
      return clip(typeof json.name === "string" && json.name !== "" ? `${json.name}: ${message}` : message, secret)
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

/** `{ id }`: a non-empty, printable id. */
const idOf = (settings: Settings, json: unknown): Result.Result<string, ProviderFailure> => {
  const id = isRecord(json) ? json.id : undefined
  if (typeof id !== "string" || id === "" || id.length > MAX_ID_CHARS || /[\s\u0000-\u001f\u007f]/.test(id)) {
    return Result.fail(failure(settings.name, "malformed", `${settings.name}'s answer has no usable "id"`))
  }
  return Result.succeed(id)
}

// ---------------------------------------------------------------------------
// The provider

/** The JSON body of `POST /emails`. */
export const requestBody = (from: string, input: EmailInput): Record<string, unknown> => ({
  from,
  to: [...input.to],
  subject: oneLineSubject(input.subject),
  ...(input.text === undefined ? {} : { text: input.text }),
  ...(input.html === undefined ? {} : { html: input.html }),
  ...(input.replyTo === undefined ? {} : { reply_to: input.replyTo })
})

export const make = (options: ResendOptions): Effect.Effect<Provider<"email">, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() => settingsOf(options))
    const client = HttpClient.withScope(yield* HttpClient.HttpClient)
    const price = settings.unitPrice.priceMicroUsd

    const run = Effect.fn("Resend.run")(
      function*(input: EmailInput) {
        const request = HttpClientRequest.post(settings.url, { acceptJson: true }).pipe(
          HttpClientRequest.bearerToken(settings.apiKey),
          HttpClientRequest.bodyText(JSON.stringify(requestBody(settings.from, input)), "application/json")
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
        const id = idOf(settings, json.success)
        if (Result.isFailure(id)) return yield* id.failure
        const output: EmailOutput = { messageId: id.success, accepted: [...input.to], rejected: [] }
        return { output, actualMicroUsd: price }
      },
      (effect) =>
        effect.pipe(
          // A bug in the HTTP stack must not surface as a defect of the call: the hold is released
          // and the next provider tried, as for any upstream failure.
          Effect.catchDefect((defect) =>
            Effect.fail(failure(settings.name, "unavailable", `unexpected failure: ${clip(String(defect), settings.apiKey, 200)}`))
          ),
          // No trace headers go to Resend.
          Effect.provideService(HttpClient.TracerPropagationEnabled, false)
        )
    )

    return {
      name: settings.name,
      capability: "email",
      unitPrice: settings.unitPrice,
      quote: () => Result.succeed({ microUsd: price }),
      run: (input) => run(input)
    } satisfies Provider<"email">
  })
