import { Effect, type Redacted, Result } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import type { Provider, ProviderFailure, UnitPrice } from "../../../src/capabilities/Provider.ts"
import type { EmailInput, EmailOutput } from "../../../src/capabilities/schemas.ts"
import {
  baseUrlOf,
  checkUnitPrice,
  credential,
  defectsUnavailable,
  type ErrorDetail,
  exchangeJson,
  failure,
  isRecord,
  jsonPost,
  positiveInteger,
  positiveNumber,
  providerName,
  type Upstream
} from "../kit/index.ts"
import { oneLineSubject, parseSender } from "./smtp.ts"

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
  readonly upstream: Upstream
}

/** Resend's error text, `name: message`. */
const resendErrorDetail = (body: unknown): ErrorDetail | undefined => {
  if (!isRecord(body)) return undefined
  const message = typeof body.message === "string" ? body.message : typeof body.error === "string" ? body.error : undefined
  if (message === undefined) return undefined
  return { message: typeof body.name === "string" && body.name !== "" ? `${body.name}: ${message}` : message }
}

/** Checks the options once; a bad value is a deployment error (a defect naming it). */
const settingsOf = (options: ResendOptions): Settings => {
  const name = providerName("Resend", options.name ?? PROVIDER_NAME)
  const url = baseUrlOf(name, options.baseUrl ?? DEFAULT_BASE_URL) + EMAILS_PATH
  const apiKey = credential(name, "API key", options.apiKey, { printable: true })
  const sender = parseSender(options.from)
  if (sender === undefined) throw new RangeError(`${name}: from must be an address or "Name <address>", got ${JSON.stringify(options.from)}`)
  const unitPrice = checkUnitPrice(name, options.unitPrice, "message")
  const upstream: Upstream = {
    provider: name,
    timeoutMs: positiveNumber(name, "timeoutMs", options.timeoutMs, DEFAULT_TIMEOUT_MS),
    maxResponseBytes: positiveInteger(name, "maxResponseBytes", options.maxResponseBytes, DEFAULT_MAX_RESPONSE_BYTES),
    secrets: [apiKey],
    errorDetail: resendErrorDetail,
    errorText: "page"
  }
  const from = sender.name === "" ? sender.address : `${sender.name} <${sender.address}>`
  return { name, url, apiKey, from, unitPrice, upstream }
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
    const client = yield* HttpClient.HttpClient
    const price = settings.unitPrice.priceMicroUsd

    const run = Effect.fn("Resend.run")(
      function*(input: EmailInput) {
        const request = HttpClientRequest.bearerToken(jsonPost(settings.url, requestBody(settings.from, input)), settings.apiKey)
        const json = yield* exchangeJson(client, settings.upstream, request)
        const id = idOf(settings, json)
        if (Result.isFailure(id)) return yield* id.failure
        const output: EmailOutput = { messageId: id.success, accepted: [...input.to], rejected: [] }
        return { output, actualMicroUsd: price }
      },
      // No trace headers go to Resend (http.ts).
      defectsUnavailable(settings.name, [settings.apiKey])
    )

    return {
      name: settings.name,
      capability: "email",
      unitPrice: settings.unitPrice,
      quote: () => Result.succeed({ microUsd: price }),
      run: (input) => run(input)
    } satisfies Provider<"email">
  })
