import { Effect, Option, Redacted, Schema } from "effect"
import { HttpClientRequest } from "effect/http"
import type { Provider } from "../../../src/capabilities/Provider.ts"
import type { EmailInput } from "../../../src/capabilities/schemas.ts"
import { oneLineSubject, parseSender } from "../kit/email.ts"
import {
  answerDecoder,
  decodeOrUndefined,
  type ErrorDetail,
  exchangeJson,
  jsonPost,
  perCallProvider,
  type UpstreamOptions,
  upstreamSettings
} from "../kit/index.ts"
import { env, invalid, nothing, type ProviderConfig, unitPriceOf } from "../kit/config.ts"
import { UpstreamClient } from "../kit/index.ts"

export { MAX_UPSTREAM_MESSAGE_CHARS } from "../kit/index.ts"

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
/** Longest email id accepted from the answer. */
const MAX_ID_CHARS = 256

/** Default name "resend", base URL https://api.resend.com, timeout 15 s, answers up to 64 KiB; a flat price per message. */
export interface ResendOptions extends UpstreamOptions {
  /** `re_...` */
  readonly apiKey: Redacted.Redacted<string>
  /** The operator's sender: `noreply@example.com` or `Example <noreply@example.com>`, on a domain verified with Resend. */
  readonly from: string
}

// ---------------------------------------------------------------------------
// Resend's answer

const errorBodyOf = decodeOrUndefined(Schema.Struct({
  name: Schema.optional(Schema.Unknown),
  message: Schema.optional(Schema.Unknown),
  error: Schema.optional(Schema.Unknown)
}))

/** Resend's error text, `name: message`. */
const resendErrorDetail = (body: unknown): ErrorDetail | undefined => {
  const decoded = errorBodyOf(body)
  const message = typeof decoded?.message === "string" ? decoded.message : typeof decoded?.error === "string" ? decoded.error : undefined
  if (message === undefined) return undefined
  return { message: typeof decoded?.name === "string" && decoded.name !== "" ? `${decoded.name}: ${message}` : message }
}

/** `{ id }`: a non-empty, printable id. */
const decodeAnswer = answerDecoder(Schema.Struct({
  id: Schema.String.check(
    Schema.isMinLength(1),
    Schema.isMaxLength(MAX_ID_CHARS),
    Schema.makeFilter((id: string) => !/[\s\u0000-\u001f\u007f]/.test(id) || "an id with whitespace or control characters")
  )
}))

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

export const make = (options: ResendOptions): Effect.Effect<Provider<"email">, never, UpstreamClient> =>
  Effect.gen(function*() {
    const { settings, from } = yield* Effect.sync(() => {
      const settings = upstreamSettings(options, {
        label: "Resend",
        name: PROVIDER_NAME,
        baseUrl: DEFAULT_BASE_URL,
        per: "message",
        timeoutMs: DEFAULT_TIMEOUT_MS,
        maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES,
        secret: { label: "API key", value: options.apiKey, printable: true },
        errors: { errorDetail: resendErrorDetail, errorText: "page" }
      })
      const sender = parseSender(options.from)
      if (sender === undefined) {
        throw new RangeError(`${settings.name}: from must be an address or "Name <address>", got ${JSON.stringify(options.from)}`)
      }
      return { settings, from: sender.name === "" ? sender.address : `${sender.name} <${sender.address}>` }
    })
    const client = yield* UpstreamClient
    const url = settings.baseUrl + EMAILS_PATH
    // No trace headers go to Resend (exchange.ts).
    return perCallProvider("email", settings, "Resend.run", (input: EmailInput) =>
      Effect.gen(function*() {
        const request = HttpClientRequest.bearerToken(jsonPost(url, requestBody(from, input)), settings.secret)
        const answer = yield* Effect.fromResult(decodeAnswer(settings.name, yield* exchangeJson(client, settings.upstream, request)))
        return { messageId: answer.id, accepted: [...input.to], rejected: [] }
      }))
  })

// ---------------------------------------------------------------------------
// Configuration

/** RESEND_API_KEY with RESEND_FROM: the `resend` price card (per message). */
export const fromConfig: ProviderConfig = (cards) =>
  Effect.gen(function*() {
    const key = yield* env("RESEND_API_KEY")
    if (Option.isNone(key)) return nothing
    const from = yield* env("RESEND_FROM")
    if (Option.isNone(from)) return yield* invalid("RESEND_FROM is required when RESEND_API_KEY is set")
    const unitPrice = yield* unitPriceOf(cards, PROVIDER_NAME, "email", "message")
    return {
      providers: [{ name: PROVIDER_NAME, capability: "email", build: make({ apiKey: Redacted.make(key.value), from: from.value, unitPrice }) }],
      services: []
    }
  })
