import { Schema } from "effect"
import { Effect } from "effect"
import { HttpEffect, type HttpServerRequest, HttpServerResponse } from "effect/http"

/**
 * The error envelope of the API: `{ error: { code, message, details? } }`,
 * one schema class per HTTP status so the OpenAPI document lists them. The
 * code → status table lives here and nowhere else (docs/errors.md).
 */

export const ErrorBody = Schema.Struct({
  code: Schema.String,
  message: Schema.String,
  details: Schema.optional(Schema.Record(Schema.String, Schema.Unknown)),
  /** The request's X-Request-Id, added to every error answer (adapters/http/observability.ts). */
  requestId: Schema.optional(Schema.String)
})
export type ErrorBody = typeof ErrorBody.Type

export class BadRequest extends Schema.Error<BadRequest>("BadRequest")({ error: ErrorBody }, { httpApiStatus: 400 }) {}
export class Unauthorized extends Schema.Error<Unauthorized>("Unauthorized")({ error: ErrorBody }, {
  httpApiStatus: 401
}) {}
export class PaymentRequired extends Schema.Error<PaymentRequired>("PaymentRequired")({ error: ErrorBody }, {
  httpApiStatus: 402
}) {}
export class Forbidden extends Schema.Error<Forbidden>("Forbidden")({ error: ErrorBody }, { httpApiStatus: 403 }) {}
export class NotFound extends Schema.Error<NotFound>("NotFound")({ error: ErrorBody }, { httpApiStatus: 404 }) {}
export class Conflict extends Schema.Error<Conflict>("Conflict")({ error: ErrorBody }, { httpApiStatus: 409 }) {}
export class TooManyRequests extends Schema.Error<TooManyRequests>("TooManyRequests")({ error: ErrorBody }, {
  httpApiStatus: 429
}) {}
export class BadGateway extends Schema.Error<BadGateway>("BadGateway")({ error: ErrorBody }, { httpApiStatus: 502 }) {}
export class ServiceUnavailable extends Schema.Error<ServiceUnavailable>("ServiceUnavailable")({ error: ErrorBody }, {
  httpApiStatus: 503
}) {}

const classByStatus = {
  400: BadRequest,
  401: Unauthorized,
  402: PaymentRequired,
  403: Forbidden,
  404: NotFound,
  409: Conflict,
  429: TooManyRequests,
  502: BadGateway,
  503: ServiceUnavailable
} as const
type MappedStatus = keyof typeof classByStatus
export type HttpError = InstanceType<(typeof classByStatus)[MappedStatus]>

/** Every error code of the API and its one HTTP status. */
export const statusByCode = {
  VALIDATION_ERROR: 400,
  INVALID_AMOUNT: 400,
  MODEL_NOT_PRICED: 400,
  UNAUTHORIZED: 401,
  L402_TOKEN_INVALID: 401,
  L402_TOKEN_EXPIRED: 401,
  PAYMENT_REQUIRED: 402,
  L402_TOKEN_USED: 402,
  L402_PRICE_EXCEEDED: 402,
  L402_WRONG_CAPABILITY: 403,
  BUDGET_EXCEEDED: 402,
  PER_CALL_LIMIT_EXCEEDED: 402,
  VELOCITY_EXCEEDED: 402,
  INSUFFICIENT_BALANCE: 402,
  AGENT_KILLED: 403,
  CAPABILITY_NOT_ALLOWED: 403,
  FORBIDDEN: 403,
  CSRF_FAILED: 403,
  NOT_FOUND: 404,
  IDEMPOTENCY_CONFLICT: 409,
  CONFLICT: 409,
  REFUND_EXCEEDS_CHARGE: 409,
  QUOTE_EXPIRED: 409,
  QUOTE_USED: 409,
  QUOTE_MISMATCH: 409,
  REQUEST_TIMEOUT: 408,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  HEADERS_TOO_LARGE: 431,
  RATE_LIMITED: 429,
  INTERNAL: 500,
  PROVIDER_ERROR: 502,
  PROVIDER_UNAVAILABLE: 503,
  RATE_UNAVAILABLE: 503,
  WEBHOOKS_UNAVAILABLE: 503,
  L402_HOST_NOT_ALLOWED: 403,
  L402_PRICE_ABOVE_MAX: 402,
  L402_BAD_CHALLENGE: 502,
  L402_PAYMENT_FAILED: 502,
  L402_PAYMENT_PENDING: 502,
  L402_UNAVAILABLE: 503
} as const satisfies Record<string, number>
export type ErrorCode = keyof typeof statusByCode

/** A core error: anything with a known `code` and a `message`. */
export interface CodedError {
  readonly code: ErrorCode
  readonly message: string
  readonly details?: Record<string, unknown> | undefined
}

export const toHttpError = (error: CodedError): HttpError => {
  const status = statusByCode[error.code] as MappedStatus
  const Class = classByStatus[status]
  const body: ErrorBody = error.details === undefined
    ? { code: error.code, message: error.message }
    : { code: error.code, message: error.message, details: error.details }
  return new Class({ error: body })
}

/**
 * `toHttpError` for a failure of a spending route: an error that says when
 * to retry (`retryAfterSeconds`, e.g. a policy's calls-per-minute limit)
 * also sets `Retry-After` on the response.
 */
export const failAsHttpError = (
  error: CodedError & { readonly retryAfterSeconds?: number }
): Effect.Effect<never, HttpError, HttpServerRequest.HttpServerRequest> =>
  error.retryAfterSeconds === undefined
    ? Effect.fail(toHttpError(error))
    : Effect.andThen(
      HttpEffect.appendPreResponseHandler((_request, response) =>
        Effect.succeed(HttpServerResponse.setHeader(response, "retry-after", String(error.retryAfterSeconds)))
      ),
      Effect.fail(toHttpError(error))
    )

/** A response in the envelope, for failures raised outside any endpoint (routing, body parsing). */
export const envelopeResponse = (
  code: ErrorCode,
  message: string,
  details?: Record<string, unknown>,
  headers?: Record<string, string>
) =>
  HttpServerResponse.jsonUnsafe(
    { error: details === undefined ? { code, message } : { code, message, details } },
    { status: statusByCode[code], ...(headers === undefined ? {} : { headers }) }
  )
