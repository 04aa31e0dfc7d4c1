import { Duration, Effect, Redacted, Result, type Scope, Stream } from "effect"
import { HttpClient, type HttpClientError, HttpClientRequest, type HttpClientResponse } from "effect/http"
import { type Provider, ProviderFailure, type Quote, type UnitPrice } from "../../../src/capabilities/Provider.ts"
import type { SmsInput, SmsOutput } from "../../../src/capabilities/schemas.ts"
import { countSegments } from "./segments.ts"

/**
 * `sms` through Twilio's Messages API.
 *
 * Request: `POST {baseUrl}/2010-04-01/Accounts/{AccountSid}/Messages.json`,
 * HTTP Basic auth `AccountSid:AuthToken`, a form-encoded body `To`, `Body` and
 * either `From` (a Twilio number, short code or alphanumeric sender ID) or
 * `MessagingServiceSid`, as configured; the sender is the operator's.
 *
 * Answer: 201 and the Message resource `{ sid, status, num_segments, body,
 * from, to, ... }`; `num_segments` is a string, and is "0" when a Messaging
 * Service has not picked a sender yet. The output's `segments` is Twilio's
 * count when it gives one, else ours; `encoding` is ours (Twilio does not
 * report it). A message created already `failed` or `canceled` was not sent:
 * a `rejected` failure, not charged.
 *
 * Price: per segment. The quote is the price × the segments counted here
 * (segments.ts); the charge is the price × the segments Twilio reports, never
 * more than the quote: when Twilio counts more (a carrier-specific encoding,
 * say), the quote is charged and a warning logged.
 *
 * Errors: `{ code, message, more_info, status }`. 400 (21211 invalid 'To',
 * 21610 unsubscribed recipient, 21408 region not enabled, ...), 401 (20003),
 * 403 and 404 are `rejected` with Twilio's message and code, 429 (20429)
 * `rate_limited`, 5xx `unavailable`. A timeout is reported as such even when
 * the request was already sent: Twilio may have queued the message, but
 * without its answer nothing is charged.
 */

export const PROVIDER_NAME = "twilio"
export const DEFAULT_BASE_URL = "https://api.twilio.com"
export const DEFAULT_TIMEOUT_MS = 15_000
/** A Message resource is a few KiB (the body is at most 1600 characters). */
export const DEFAULT_MAX_RESPONSE_BYTES = 256 * 1024
/** Longest upstream error text kept in a failure message. */
export const MAX_UPSTREAM_MESSAGE_CHARS = 300
/** An error answer is read this far for its message, and no further. */
const ERROR_BODY_BYTES = 16 * 1024
/** Longest sid or status accepted from the answer. */
const MAX_FIELD_CHARS = 64
/** Statuses of a message that will not be sent. */
const NOT_SENT = new Set(["failed", "canceled"])

export interface TwilioOptions {
  /** Provider name in the catalogue and in failures; default "twilio". */
  readonly name?: string | undefined
  /** `AC` + 32 hex digits. */
  readonly accountSid: string
  readonly authToken: Redacted.Redacted<string>
  /** The sender: a Twilio number (E.164), a short code or an alphanumeric sender ID. Give this or `messagingServiceSid`. */
  readonly from?: string | undefined
  /** `MG` + 32 hex digits: the Messaging Service picks the sender. */
  readonly messagingServiceSid?: string | undefined
  /** Scheme, host and optional path prefix; default https://api.twilio.com. */
  readonly baseUrl?: string | undefined
  /** Price per segment, from the operator's price card. */
  readonly unitPrice: UnitPrice
  /** Limit for the whole call, from connecting to the end of the answer; default 15 s. */
  readonly timeoutMs?: number | undefined
  /** Largest answer accepted; default 256 KiB. */
  readonly maxResponseBytes?: number | undefined
}

// ---------------------------------------------------------------------------
// Settings

interface Settings {
  readonly name: string
  readonly url: string
  readonly accountSid: string
  readonly authToken: string
  readonly sender: { readonly From: string } | { readonly MessagingServiceSid: string }
  readonly unitPrice: UnitPrice
  readonly timeoutMs: number
  readonly maxResponseBytes: number
}

const ACCOUNT_SID = /^AC[0-9a-fA-F]{32}$/
const MESSAGING_SERVICE_SID = /^MG[0-9a-fA-F]{32}$/
/** E.164, a short code, or an alphanumeric sender ID (at most 11 characters, not only digits). */
const SENDER = /^(\+[1-9]\d{1,14}|\d{3,8}|(?=[A-Za-z0-9 ]*[A-Za-z])[A-Za-z0-9 ]{1,11})$/

/** Checks the options once; a bad value is a deployment error (a defect naming it). */
const settingsOf = (options: TwilioOptions): Settings => {
  const name = options.name ?? PROVIDER_NAME
  if (name.trim() === "" || name.length > 64) throw new Error(`Twilio: provider name must be 1 to 64 characters`)
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
  if (!ACCOUNT_SID.test(options.accountSid)) throw new Error(`${name}: accountSid must be AC followed by 32 hex digits`)
  const authToken = Redacted.value(options.authToken).trim()
  if (authToken === "" || /[\s\u0000-\u001f\u007f]/.test(authToken)) {
    throw new Error(`${name}: the auth token is empty or has whitespace`)
  }
  const from = options.from?.trim()
  const service = options.messagingServiceSid?.trim()
  if ((from === undefined || from === "") === (service === undefined || service === "")) {
    throw new Error(`${name}: give exactly one of from and messagingServiceSid`)
  }
  let sender: Settings["sender"]
  if (service !== undefined && service !== "") {
    if (!MESSAGING_SERVICE_SID.test(service)) throw new Error(`${name}: messagingServiceSid must be MG followed by 32 hex digits`)
    sender = { MessagingServiceSid: service }
  } else {
    if (!SENDER.test(from!)) {
      throw new Error(`${name}: from must be an E.164 number, a short code or an alphanumeric sender ID, got ${JSON.stringify(from)}`)
    }
    sender = { From: from! }
  }
  if (options.unitPrice.per !== "segment" || options.unitPrice.priceMicroUsd < 0n) {
    throw new Error(`${name}: the price must be a non-negative amount per segment`)
  }
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new Error(`${name}: timeoutMs must be a positive number`)
  const maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES
  if (!Number.isSafeInteger(maxResponseBytes) || maxResponseBytes <= 0) {
    throw new Error(`${name}: maxResponseBytes must be a positive integer`)
  }
  return {
    name,
    url: `${parsed.href.replace(/\/+$/, "")}/2010-04-01/Accounts/${options.accountSid}/Messages.json`,
    accountSid: options.accountSid,
    authToken,
    sender,
    unitPrice: options.unitPrice,
    timeoutMs,
    maxResponseBytes
  }
}

// ---------------------------------------------------------------------------
// Failures

const failure = (provider: string, reason: ProviderFailure["reason"], message: string) =>
  new ProviderFailure({ provider, reason, message })

/** One line, without the token, at most `max` characters. */
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
  const detail = cause === undefined ? "" : `: ${clip(cause, settings.authToken, 120)}`
  switch (reason._tag) {
    case "TransportError":
      return failure(settings.name, "unavailable", `${settings.name} is unreachable${detail}`)
    case "DecodeError":
      return failure(settings.name, "network", `the connection to ${settings.name} broke during its answer${detail}`)
    default:
      return failure(settings.name, "unavailable", `the request to ${settings.name} failed (${reason._tag})${detail}`)
  }
}

/** Twilio's error code (20429 is its rate limit, whatever the status says). */
const statusFailure = (settings: Settings, status: number, upstream: TwilioError): ProviderFailure => {
  const code = upstream.code === undefined ? "" : ` ${upstream.code}`
  const detail = upstream.message === "" ? "" : `: ${upstream.message}`
  const name = settings.name
  if (status === 429 || upstream.code === 20429) {
    return failure(name, "rate_limited", `${name} is rate limiting requests (HTTP ${status}${code})${detail}`)
  }
  if (status === 408) return failure(name, "timeout", `${name} timed out the request (HTTP 408${code})${detail}`)
  if (status >= 400 && status < 500) return failure(name, "rejected", `${name} refused the message (HTTP ${status}${code})${detail}`)
  return failure(name, "unavailable", `${name} answered HTTP ${status}${code}${detail}`)
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

interface TwilioError {
  readonly code: number | undefined
  readonly message: string
}

/** Twilio's `{ code, message, more_info, status }`, or else the body as text. */
const upstreamError = (bytes: Uint8Array, secret: string): TwilioError => {
  const json = parseJson(bytes)
  if (isRecord(json) && typeof json.message === "string") {
    const code = typeof json.code === "number" && Number.isSafeInteger(json.code) ? json.code : undefined
    return { code, message: clip(json.message, secret) }
  }
  return { code: undefined, message: clip(new TextDecoder().decode(bytes).replace(/<[^>]*>/g, " "), secret) }
}

/** The decoded JSON of a successful answer, or the failure its status or body stands for. */
const answerOf = (settings: Settings, reply: Reply): Result.Result<unknown, ProviderFailure> => {
  if (reply.status < 200 || reply.status >= 300) {
    return Result.fail(statusFailure(settings, reply.status, upstreamError(reply.bytes, settings.authToken)))
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
// The Message resource

interface Created {
  readonly sid: string
  readonly status: string
  /** Segments Twilio reports; undefined when it gives none (or "0", before a sender is assigned). */
  readonly segments: number | undefined
}

const printable = (value: unknown): string | undefined =>
  typeof value === "string" && value !== "" && value.length <= MAX_FIELD_CHARS && !/[\s\u0000-\u001f\u007f]/.test(value)
    ? value
    : undefined

/** `num_segments`: a decimal string (a number is taken too); 0 or anything else is no count. */
const segmentsOf = (value: unknown): number | undefined => {
  const text = typeof value === "number" ? String(value) : value
  if (typeof text !== "string" || !/^\d{1,4}$/.test(text)) return undefined
  const segments = Number(text)
  return segments > 0 ? segments : undefined
}

const parseMessage = (settings: Settings, json: unknown): Result.Result<Created, ProviderFailure> => {
  const malformed = (what: string) => Result.fail(failure(settings.name, "malformed", `${settings.name}'s answer ${what}`))
  if (!isRecord(json)) return malformed("is not a JSON object")
  const sid = printable(json.sid)
  if (sid === undefined) return malformed(`has no usable "sid"`)
  const status = printable(json.status)
  if (status === undefined) return malformed(`has no usable "status"`)
  if (NOT_SENT.has(status)) {
    const code = typeof json.error_code === "number" || typeof json.error_code === "string" ? ` ${json.error_code}` : ""
    const why = typeof json.error_message === "string" ? `: ${clip(json.error_message, settings.authToken)}` : ""
    return Result.fail(failure(settings.name, "rejected", `${settings.name} did not send the message (${status}${code})${why}`))
  }
  return Result.succeed({ sid, status, segments: segmentsOf(json.num_segments) })
}

// ---------------------------------------------------------------------------
// The provider

/** The quote of a body: the price × its segments. */
export const quoteSms = (unitPrice: UnitPrice, body: string): bigint =>
  unitPrice.priceMicroUsd * BigInt(countSegments(body).segments)

export const make = (options: TwilioOptions): Effect.Effect<Provider<"sms">, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() => settingsOf(options))
    const client = HttpClient.withScope(yield* HttpClient.HttpClient)
    const price = settings.unitPrice.priceMicroUsd

    const run = Effect.fn("Twilio.run")(
      function*(input: SmsInput, quote: Quote) {
        const counted = countSegments(input.body)
        const form = new URLSearchParams({ To: input.to, ...settings.sender, Body: input.body })
        const request = HttpClientRequest.post(settings.url, { acceptJson: true }).pipe(
          HttpClientRequest.basicAuth(settings.accountSid, settings.authToken),
          HttpClientRequest.bodyText(form.toString(), "application/x-www-form-urlencoded")
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
        const created = parseMessage(settings, json.success)
        if (Result.isFailure(created)) return yield* created.failure
        const segments = created.success.segments ?? counted.segments
        const metered = price * BigInt(segments)
        if (metered > quote.microUsd) {
          yield* Effect.logWarning("Twilio counted more segments than quoted; the quote is charged").pipe(
            Effect.annotateLogs({
              provider: settings.name,
              sid: created.success.sid,
              reportedSegments: segments,
              countedSegments: counted.segments,
              encoding: counted.encoding
            })
          )
        }
        const output: SmsOutput = {
          sid: created.success.sid,
          segments,
          encoding: counted.encoding,
          status: created.success.status
        }
        return { output, actualMicroUsd: metered > quote.microUsd ? quote.microUsd : metered }
      },
      (effect) =>
        effect.pipe(
          // A bug in the HTTP stack must not surface as a defect of the call: the hold is released
          // and the next provider tried, as for any upstream failure.
          Effect.catchDefect((defect) =>
            Effect.fail(failure(settings.name, "unavailable", `unexpected failure: ${clip(String(defect), settings.authToken, 200)}`))
          ),
          // No trace headers go to Twilio.
          Effect.provideService(HttpClient.TracerPropagationEnabled, false)
        )
    )

    return {
      name: settings.name,
      capability: "sms",
      unitPrice: settings.unitPrice,
      quote: (input) => Result.succeed({ microUsd: quoteSms(settings.unitPrice, input.body) }),
      run: (input, quote) => run(input, quote)
    } satisfies Provider<"sms">
  })
