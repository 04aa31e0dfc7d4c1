import { Effect, Option, Redacted, Result, Schema } from "effect"
import { HttpClientRequest } from "effect/http"
import type { Provider, ProviderFailure, Quote, UnitPrice } from "../../../src/capabilities/Provider.ts"
import type { SmsInput, SmsOutput } from "../../../src/capabilities/schemas.ts"
import {
  answerDecoder,
  clip,
  decodeOrUndefined,
  defectsUnavailable,
  type ErrorDetail,
  exchangeJson,
  failure,
  redact,
  type UpstreamOptions,
  type UpstreamSettings,
  upstreamSettings
} from "../kit/index.ts"
import { countSegments } from "./segments.ts"
import { env, invalid, nothing, one, type ProviderConfig, unitPriceOf } from "../kit/config.ts"
import { UpstreamClient } from "../kit/index.ts"

export { MAX_UPSTREAM_MESSAGE_CHARS } from "../kit/index.ts"

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
/** Longest sid or status accepted from the answer. */
const MAX_FIELD_CHARS = 64
/** Statuses of a message that will not be sent. */
const NOT_SENT = new Set(["failed", "canceled"])

/** Default name "twilio", base URL https://api.twilio.com, timeout 15 s, answers up to 256 KiB; a price per segment. */
export interface TwilioOptions extends UpstreamOptions {
  /** `AC` + 32 hex digits. */
  readonly accountSid: string
  readonly authToken: Redacted.Redacted<string>
  /** The sender: a Twilio number (E.164), a short code or an alphanumeric sender ID. Give this or `messagingServiceSid`. */
  readonly from?: string | undefined
  /** `MG` + 32 hex digits: the Messaging Service picks the sender. */
  readonly messagingServiceSid?: string | undefined
}

// ---------------------------------------------------------------------------
// Settings

interface Settings extends UpstreamSettings {
  readonly url: string
  readonly accountSid: string
  readonly authToken: string
  readonly sender: { readonly From: string } | { readonly MessagingServiceSid: string }
}

const ACCOUNT_SID = /^AC[0-9a-fA-F]{32}$/
const MESSAGING_SERVICE_SID = /^MG[0-9a-fA-F]{32}$/
/** E.164, a short code, or an alphanumeric sender ID (at most 11 characters, not only digits). */
const SENDER = /^(\+[1-9]\d{1,14}|\d{3,8}|(?=[A-Za-z0-9 ]*[A-Za-z])[A-Za-z0-9 ]{1,11})$/
/** Twilio's error code for "too many requests", whatever the status says. */
const RATE_LIMIT_CODE = 20429

const errorBodyOf = decodeOrUndefined(Schema.Struct({ message: Schema.String, code: Schema.optional(Schema.Unknown) }))

/** Twilio's `{ code, message, more_info, status }`. */
const twilioErrorDetail = (body: unknown): ErrorDetail | undefined => {
  const decoded = errorBodyOf(body)
  if (decoded === undefined) return undefined
  return { message: decoded.message, code: typeof decoded.code === "number" && Number.isSafeInteger(decoded.code) ? decoded.code : undefined }
}

/** Checks the options once; a bad value is a deployment error (a defect naming it). */
const settingsOf = (options: TwilioOptions): Settings => {
  const common = upstreamSettings(options, {
    label: "Twilio",
    name: PROVIDER_NAME,
    baseUrl: DEFAULT_BASE_URL,
    per: "segment",
    timeoutMs: DEFAULT_TIMEOUT_MS,
    maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES,
    secret: { label: "auth token", value: options.authToken, printable: true },
    errors: {
      errorDetail: twilioErrorDetail,
      errorText: "page",
      onErrorStatus: (_, detail) => (detail?.code === RATE_LIMIT_CODE ? { reason: "rate_limited" } : undefined)
    }
  })
  const name = common.name
  if (!ACCOUNT_SID.test(options.accountSid)) throw new RangeError(`${name}: accountSid must be AC followed by 32 hex digits`)
  const from = options.from?.trim()
  const service = options.messagingServiceSid?.trim()
  if ((from === undefined || from === "") === (service === undefined || service === "")) {
    throw new RangeError(`${name}: give exactly one of from and messagingServiceSid`)
  }
  let sender: Settings["sender"]
  if (service !== undefined && service !== "") {
    if (!MESSAGING_SERVICE_SID.test(service)) throw new RangeError(`${name}: messagingServiceSid must be MG followed by 32 hex digits`)
    sender = { MessagingServiceSid: service }
  } else {
    if (!SENDER.test(from!)) {
      throw new RangeError(`${name}: from must be an E.164 number, a short code or an alphanumeric sender ID, got ${JSON.stringify(from)}`)
    }
    sender = { From: from! }
  }
  return {
    ...common,
    url: `${common.baseUrl}/2010-04-01/Accounts/${options.accountSid}/Messages.json`,
    accountSid: options.accountSid,
    authToken: common.secret,
    sender
  }
}

// ---------------------------------------------------------------------------
// The Message resource

interface Created {
  readonly sid: string
  readonly status: string
  /** Segments Twilio reports; undefined when it gives none (or "0", before a sender is assigned). */
  readonly segments: number | undefined
}

/** A non-empty printable field of at most MAX_FIELD_CHARS characters. */
const Printable = Schema.String.check(
  Schema.isMinLength(1),
  Schema.isMaxLength(MAX_FIELD_CHARS),
  Schema.makeFilter((value: string) => !/[\s\u0000-\u001f\u007f]/.test(value) || "whitespace or control characters")
)

const decodeMessage = answerDecoder(Schema.Struct({
  sid: Printable,
  status: Printable,
  num_segments: Schema.optional(Schema.Unknown),
  error_code: Schema.optional(Schema.Unknown),
  error_message: Schema.optional(Schema.Unknown)
}))

/** `num_segments`: a decimal string (a number is taken too); 0 or anything else is no count. */
const segmentsOf = (value: unknown): number | undefined => {
  const text = typeof value === "number" ? String(value) : value
  if (typeof text !== "string" || !/^\d{1,4}$/.test(text)) return undefined
  const segments = Number(text)
  return segments > 0 ? segments : undefined
}

const parseMessage = (settings: Settings, json: unknown): Result.Result<Created, ProviderFailure> =>
  Result.flatMap(decodeMessage(settings.name, json, [settings.authToken]), (message) => {
    const { sid, status } = message
    if (NOT_SENT.has(status)) {
      const code = typeof message.error_code === "number" || typeof message.error_code === "string" ? ` ${message.error_code}` : ""
      const why = typeof message.error_message === "string" ? `: ${clip(redact(message.error_message, [settings.authToken]))}` : ""
      return Result.fail(failure(settings.name, "rejected", `${settings.name} did not send the message (${status}${code})${why}`, [settings.authToken]))
    }
    return Result.succeed({ sid, status, segments: segmentsOf(message.num_segments) })
  })

// ---------------------------------------------------------------------------
// The provider

/** The quote of a body: the price × its segments. */
export const quoteSms = (unitPrice: UnitPrice, body: string): bigint =>
  unitPrice.priceMicroUsd * BigInt(countSegments(body).segments)

export const make = (options: TwilioOptions): Effect.Effect<Provider<"sms">, never, UpstreamClient> =>
  Effect.gen(function*() {
    const settings = yield* Effect.sync(() => settingsOf(options))
    const client = yield* UpstreamClient
    const price = settings.unitPrice.priceMicroUsd

    const run = Effect.fn("Twilio.run")(
      function*(input: SmsInput, quote: Quote) {
        const counted = countSegments(input.body)
        const form = new URLSearchParams({ To: input.to, ...settings.sender, Body: input.body })
        const request = HttpClientRequest.post(settings.url, { acceptJson: true }).pipe(
          HttpClientRequest.basicAuth(settings.accountSid, settings.authToken),
          HttpClientRequest.bodyText(form.toString(), "application/x-www-form-urlencoded")
        )
        const json = yield* exchangeJson(client, settings.upstream, request)
        const created = parseMessage(settings, json)
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
      // No trace headers go to Twilio (exchange.ts).
      defectsUnavailable(settings.name, [settings.authToken])
    )

    return {
      name: settings.name,
      capability: "sms",
      unitPrice: settings.unitPrice,
      quote: (input) => Result.succeed({ microUsd: quoteSms(settings.unitPrice, input.body) }),
      run: (input, quote) => run(input, quote)
    } satisfies Provider<"sms">
  })

// ---------------------------------------------------------------------------
// Configuration

/**
 * TWILIO_ACCOUNT_SID with TWILIO_AUTH_TOKEN and exactly one of TWILIO_FROM
 * and TWILIO_MESSAGING_SERVICE_SID: the `twilio` price card (per segment).
 */
export const fromConfig: ProviderConfig = (cards) =>
  Effect.gen(function*() {
    const sid = yield* env("TWILIO_ACCOUNT_SID")
    if (Option.isNone(sid)) return nothing
    const token = yield* env("TWILIO_AUTH_TOKEN")
    if (Option.isNone(token)) return yield* invalid("TWILIO_AUTH_TOKEN is required when TWILIO_ACCOUNT_SID is set")
    const from = yield* env("TWILIO_FROM")
    const service = yield* env("TWILIO_MESSAGING_SERVICE_SID")
    if (Option.isSome(from) === Option.isSome(service)) return yield* invalid("set exactly one of TWILIO_FROM and TWILIO_MESSAGING_SERVICE_SID")
    const unitPrice = yield* unitPriceOf(cards, PROVIDER_NAME, "sms", "segment")
    const build = make({
      accountSid: sid.value,
      authToken: Redacted.make(token.value),
      ...(Option.isSome(from) ? { from: from.value } : {}),
      ...(Option.isSome(service) ? { messagingServiceSid: service.value } : {}),
      unitPrice
    })
    return one(PROVIDER_NAME, "sms", build)
  })
