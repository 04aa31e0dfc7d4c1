import { Duration, Effect, type Scope, Stream } from "effect"
import { type HttpClient, type HttpClientError, HttpClientRequest } from "effect/http"
import type { LightningPayer, LightningPaymentRequest, LightningPaymentStatus, RailError } from "../../../src/ports/Rails.ts"
import { decodeInvoice, InvalidInvoice } from "../bolt11.ts"
import {
  DEFAULT_REQUEST_TIMEOUT_MS,
  type Endpoint,
  MAX_RESPONSE_BYTES,
  MAX_STREAM_LINE_BYTES,
  readBounded,
  redactMacaroon,
  transportMessage
} from "./client.ts"
import { LineSplitter } from "./lines.ts"
import { clip, railError } from "./messages.ts"
import { isRecord, lndErrorText, uintField } from "./wire.ts"

/**
 * Outbound payments through LND's router (routerrpc over REST):
 *
 * - `POST /v2/router/send` (SendPaymentV2) with `payment_request`,
 *   `fee_limit_msat` (int64, a JSON string), `timeout_seconds` (int32) and
 *   `no_inflight_updates: false`; the answer is a stream of
 *   `{"result": Payment}` lines (Payment: `payment_hash` and
 *   `payment_preimage` as hex strings, `value_msat` and `fee_msat` as int64
 *   strings, `status` IN_FLIGHT / SUCCEEDED / FAILED, `failure_reason`),
 *   or `{"error": {...}}`. Read until SUCCEEDED or FAILED.
 * - `GET /v2/router/track/{payment_hash}` (TrackPaymentV2), the hash being a
 *   `bytes` path parameter, so base64url; the first message is the
 *   payment's current state. A hash the node never paid is gRPC NotFound
 *   ("payment isn't initiated").
 *
 * A payment already made or under way (SendPaymentV2 refused with
 * AlreadyExists) is tracked instead: LND never pays one hash twice.
 */

/** A margin over the payment's own timeout for LND to report its end. */
export const REPORT_MARGIN_MS = 5_000
const GRPC_NOT_FOUND = 5
const GRPC_ALREADY_EXISTS = 6

type PaymentLine =
  | { readonly _tag: "Status"; readonly status: LightningPaymentStatus }
  | { readonly _tag: "Error"; readonly code: number | undefined; readonly message: string }
  | { readonly _tag: "Skip" }

const HEX64 = /^[0-9a-f]{64}$/

/** One Payment message, checked. Pure. */
export const parsePayment = (payment: Record<string, unknown>): LightningPaymentStatus | string => {
  switch (payment.status) {
    case "SUCCEEDED":
    case 2: {
      const preimage = typeof payment.payment_preimage === "string" ? payment.payment_preimage.toLowerCase() : ""
      if (!HEX64.test(preimage)) return "a SUCCEEDED payment without a 32-byte hex payment_preimage"
      const amountMsat = uintField(payment.value_msat)
      const feeMsat = payment.fee_msat === undefined ? 0n : uintField(payment.fee_msat)
      if (amountMsat === undefined || feeMsat === undefined) return "a SUCCEEDED payment with a malformed value_msat or fee_msat"
      return { _tag: "Succeeded", preimage, amountMsat, feeMsat }
    }
    case "FAILED":
    case 3:
      return {
        _tag: "Failed",
        reason: typeof payment.failure_reason === "string" ? payment.failure_reason : "FAILURE_REASON_ERROR"
      }
    default:
      // IN_FLIGHT, INITIATED (and UNKNOWN from old nodes): not over yet.
      return { _tag: "InFlight" }
  }
}

const errorOf = (value: unknown): { readonly code: number | undefined; readonly message: string } => ({
  code: isRecord(value) && typeof value.code === "number" ? value.code : undefined,
  message: lndErrorText(value) ?? clip(JSON.stringify(value) ?? "")
})

export const parsePaymentLine = (text: string): PaymentLine | string => {
  const trimmed = text.trim()
  if (trimmed === "") return { _tag: "Skip" }
  let message: unknown
  try {
    message = JSON.parse(trimmed)
  } catch {
    return "a line that is not JSON"
  }
  if (!isRecord(message)) return "a line that is not a JSON object"
  if (message.error !== undefined && message.error !== null) return { _tag: "Error", ...errorOf(message.error) }
  if (!isRecord(message.result)) return { _tag: "Skip" }
  const status = parsePayment(message.result)
  return typeof status === "string" ? status : { _tag: "Status", status }
}

const isNotInitiated = (code: number | undefined, message: string) =>
  code === GRPC_NOT_FOUND || /isn't initiated|not initiated|not found/i.test(message)

export const makePayer = (endpoint: Endpoint, client: HttpClient.HttpClient.With<HttpClientError.HttpClientError, Scope.Scope>): LightningPayer => {
  /**
   * Reads a payment stream: the first terminal status, or (with
   * `firstOnly`) the first status of any kind; InFlight when the stream ends
   * or the deadline passes first.
   */
  const follow = (
    request: HttpClientRequest.HttpClientRequest,
    call: string,
    deadlineMs: number,
    firstOnly: boolean
  ): Effect.Effect<LightningPaymentStatus | { readonly _tag: "Refused"; readonly code: number | undefined; readonly message: string }, RailError> =>
    Effect.scoped(Effect.gen(function*() {
      const response = yield* client.execute(request)
      if (response.status !== 200) {
        const bytes = yield* readBounded(response, MAX_RESPONSE_BYTES)
        let body: unknown
        try {
          body = JSON.parse(new TextDecoder().decode(bytes))
        } catch {
          body = new TextDecoder().decode(bytes)
        }
        // A stream refused before its first message: `{"error": {code, message}}`; a unary error: `{code, message}`.
        const { code, message } = errorOf(isRecord(body) && isRecord(body.error) ? body.error : body)
        return { _tag: "Refused" as const, code, message: `HTTP ${response.status}: ${message}` }
      }
      let seenStatus = false
      let last: LightningPaymentStatus | { readonly _tag: "Refused"; readonly code: number | undefined; readonly message: string } = {
        _tag: "InFlight"
      }
      yield* response.stream.pipe(
        Stream.mapAccum(() => new LineSplitter(MAX_STREAM_LINE_BYTES), (splitter, chunk: Uint8Array) =>
          [splitter, splitter.push(chunk)] as const),
        Stream.runForEachWhile((piece) =>
          Effect.gen(function*() {
            if (piece._tag === "Invalid") {
              yield* Effect.logWarning(`skipped ${piece.reason} in the ${call} stream`)
              return true
            }
            const line = parsePaymentLine(piece.text)
            if (typeof line === "string") {
              yield* Effect.logWarning(`skipped ${line} in the ${call} stream`)
              return true
            }
            if (line._tag === "Skip") return true
            if (line._tag === "Error") {
              // After the node said the payment is under way, an error is no word on its outcome.
              if (!seenStatus) last = { _tag: "Refused", code: line.code, message: line.message }
              return false
            }
            seenStatus = true
            last = line.status
            return firstOnly ? false : line.status._tag === "InFlight"
          })
        )
      )
      return last
    })).pipe(
      Effect.catchTag("HttpClientError", (error) => Effect.fail(railError(transportMessage(endpoint, error)))),
      Effect.timeoutOrElse({
        duration: Duration.millis(deadlineMs),
        orElse: () => Effect.succeed({ _tag: "InFlight" } as const)
      }),
      redactMacaroon
    )

  const trackPayment = Effect.fn("Lnd.trackPayment")(function*(paymentHash: string) {
    if (!HEX64.test(paymentHash)) return yield* railError("a payment hash is 64 hex characters")
    const hash = Buffer.from(paymentHash, "hex").toString("base64url")
    const result = yield* follow(
      HttpClientRequest.get(`${endpoint.base}/v2/router/track/${hash}`, {
        headers: endpoint.headers,
        urlParams: { no_inflight_updates: "false" }
      }),
      "TrackPaymentV2",
      DEFAULT_REQUEST_TIMEOUT_MS,
      true
    )
    if (result._tag !== "Refused") return result
    if (isNotInitiated(result.code, result.message)) return { _tag: "NotFound" } as const
    return yield* railError(clip(`LND refused TrackPaymentV2: ${result.message}`))
  })

  const payInvoice = Effect.fn("Lnd.payInvoice")(function*(request: LightningPaymentRequest) {
    if (!Number.isSafeInteger(request.timeoutSeconds) || request.timeoutSeconds <= 0) {
      return yield* railError("a payment timeout is a positive whole number of seconds")
    }
    const body = JSON.stringify({
      payment_request: request.paymentRequest,
      fee_limit_msat: request.feeLimitMsat.toString(),
      timeout_seconds: request.timeoutSeconds,
      no_inflight_updates: false
    })
    const result = yield* follow(
      HttpClientRequest.post(`${endpoint.base}/v2/router/send`, { headers: endpoint.headers }).pipe(
        HttpClientRequest.bodyText(body, "application/json")
      ),
      "SendPaymentV2",
      request.timeoutSeconds * 1000 + REPORT_MARGIN_MS,
      false
    )
    if (result._tag !== "Refused") return result
    // Already paid or under way: the node's record says which, and nothing is sent again.
    if (result.code === GRPC_ALREADY_EXISTS || /already paid|in transition|in flight/i.test(result.message)) {
      return yield* trackPayment(request.paymentHash)
    }
    // Only LND's own refusal (a gRPC code) says nothing was sent; any other error answer (a proxy's
    // 502 or 504 after it forwarded the call) leaves the outcome unknown: the node is asked by hash.
    if (result.code === undefined) {
      return yield* railError(clip(`SendPaymentV2 answered without LND's error: ${result.message}`))
    }
    return { _tag: "Failed", reason: clip(`LND refused SendPaymentV2: ${result.message}`) } as const
  })

  const decode: LightningPayer["decode"] = (paymentRequest) => {
    const decoded = decodeInvoice(paymentRequest)
    return decoded instanceof InvalidInvoice ? { invalid: decoded.message } : decoded
  }

  return { decode, payInvoice, trackPayment }
}
