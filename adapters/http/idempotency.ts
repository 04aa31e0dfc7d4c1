import { Effect, Layer, Option } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import type { HttpApiEndpoint } from "effect/http-api"
import { ValidationError } from "../../src/domain/errors.ts"
import {
  adminScope,
  agentScope,
  Idempotency,
  IdempotencyConflict,
  IdempotencyKeyInProgress,
  publicScope,
  type StoredResponse,
  sweepExpiredKeys,
  validateKey
} from "../../src/idempotency/Idempotency.ts"
import { QUOTE_HEADER } from "./QuotesApi.ts"
import { AccessControl, AdminAuthentication, Authentication, CurrentPrincipal, IdempotencyKeys } from "./middleware.ts"
import {
  BadGateway,
  BadRequest,
  Conflict,
  envelopeResponse,
  type ErrorCode,
  Forbidden,
  NotFound,
  PaymentRequired,
  ServiceUnavailable,
  statusByCode,
  toHttpError,
  TooManyRequests,
  Unauthorized
} from "./errors.ts"

/**
 * The HTTP side of idempotency keys (rules in src/idempotency/Idempotency.ts).
 *
 * An endpoint with the `IdempotencyKeys` middleware accepts an
 * `Idempotency-Key` header. The middleware sits inside Authentication (see
 * Api.ts) and inside AccessControl (access.ts): a replay is only ever handed
 * to a caller the access matrix and its policy let make the request now.
 * Keys are scoped per agent, or per client address on signup.
 * It reads the raw body first (the request caches it, so the endpoint's own
 * payload decoding reads the same bytes again), fingerprints method, target
 * and body, and runs the endpoint at most once per key:
 *
 * - the endpoint's answer, success or typed error, is rendered here, so the
 *   stored bytes are exactly the bytes sent; a replay carries
 *   `Idempotent-Replayed: true`;
 * - decoding failures (400), 413, 415 and defects are not answers: the key is
 *   released and the failure continues unchanged to the envelope middleware.
 */

export { IdempotencyKeys }

export const IDEMPOTENCY_KEY_HEADER = "idempotency-key"
export const REPLAYED_HEADER = "idempotent-replayed"

const envelopeErrors = [
  BadRequest,
  Unauthorized,
  PaymentRequired,
  Forbidden,
  NotFound,
  Conflict,
  TooManyRequests,
  BadGateway,
  ServiceUnavailable
] as const

/** A typed endpoint error as the response the API sends for it; None for anything else. */
const renderEndpointError = (error: unknown): Option.Option<HttpServerResponse.HttpServerResponse> => {
  if (!envelopeErrors.some((Class) => error instanceof Class)) return Option.none()
  const { code, message, details } = (error as InstanceType<(typeof envelopeErrors)[number]>).error
  if (!Object.hasOwn(statusByCode, code)) return Option.none()
  return Option.some(envelopeResponse(code as ErrorCode, message, details))
}

const textDecoder = new TextDecoder()

/** Status and body of a JSON response held in memory; None for anything else (streams, other types). */
const capture = (response: HttpServerResponse.HttpServerResponse): Option.Option<StoredResponse> => {
  const body = response.body
  if (body._tag !== "Uint8Array" || !body.contentType.startsWith("application/json")) return Option.none()
  return Option.some({ status: response.status, body: body.text ?? textDecoder.decode(body.body) })
}

const replay = (stored: StoredResponse) =>
  HttpServerResponse.text(stored.body, {
    status: stored.status,
    contentType: "application/json",
    headers: { [REPLAYED_HEADER]: "true" }
  })

type CoreError = ValidationError | IdempotencyConflict | IdempotencyKeyInProgress

const isCoreError = (error: unknown): error is CoreError =>
  error instanceof ValidationError || error instanceof IdempotencyConflict ||
  error instanceof IdempotencyKeyInProgress

/** VALIDATION_ERROR is a 400, IDEMPOTENCY_CONFLICT and CONFLICT are 409s: the middleware's declared errors. */
const toMiddlewareError = (error: CoreError) => toHttpError(error) as BadRequest | Conflict

/** The caller's API key or admin token (authenticated routes), which seals the stored answer with the Idempotency-Key. */
const secretOf = (request: HttpServerRequest.HttpServerRequest, authenticated: boolean) => {
  if (!authenticated) return {}
  const authorization = request.headers["authorization"]
  // The key as the caller sent it: a Bearer token, or (Anthropic's clients) x-api-key when there is no Authorization.
  if (authorization === undefined) {
    const apiKey = request.headers["x-api-key"]?.trim()
    return apiKey === undefined || apiKey === "" ? {} : { secret: apiKey }
  }
  const match = /^Bearer +(\S+) *$/i.exec(authorization)
  return match === null ? {} : { secret: match[1]! }
}

/**
 * What the request fingerprint covers besides the body: the path and query,
 * and the quote a capability call names (its header), so that a key reused
 * with another quote is IDEMPOTENCY_CONFLICT, not a replay. A request target
 * holds no space, so the two parts cannot run together.
 */
const targetOf = (request: HttpServerRequest.HttpServerRequest) => {
  const quote = request.headers[QUOTE_HEADER]
  return quote === undefined ? request.originalUrl : `${request.originalUrl} ${QUOTE_HEADER}:${quote}`
}

export const IdempotencyKeysLive: Layer.Layer<IdempotencyKeys, never, Idempotency> = Layer.effect(
  IdempotencyKeys,
  Effect.gen(function*() {
    const idempotency = yield* Idempotency
    // Expired keys are purged in the background for as long as the routes live.
    yield* Effect.forkScoped(sweepExpiredKeys().pipe(Effect.provideService(Idempotency, idempotency)))

    // A keyed request's generator is made once, not per request (docs/performance.md, "Generators made once").
    const withKey = Effect.fnUntraced(function*<E, R>(
      httpEffect: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>,
      endpoint: HttpApiEndpoint.Top,
      request: HttpServerRequest.HttpServerRequest,
      key: string
    ) {
      yield* Effect.mapError(validateKey(key), toMiddlewareError)
      const principal = yield* Effect.serviceOption(CurrentPrincipal)
      if (Option.isNone(principal) && endpoint.middlewares.has(Authentication)) {
        // Declared outside Authentication: refuse rather than share keys across agents.
        return yield* Effect.die(new Error(`IdempotencyKeys must run inside Authentication (${endpoint.identifier})`))
      }
      if (!endpoint.middlewares.has(AccessControl)) {
        // A replay must never skip the access matrix (access.ts checks the order at start).
        return yield* Effect.die(new Error(`IdempotencyKeys must run inside AccessControl (${endpoint.identifier})`))
      }
      // Admin routes (AdminAuthentication let the request through: it carries the admin token).
      const admin = endpoint.middlewares.has(AdminAuthentication)
      const scope = admin ? adminScope : Option.match(principal, {
        onNone: () => publicScope(Option.getOrUndefined(request.remoteAddress)),
        onSome: ({ agent }) => agentScope(agent.id)
      })
      // Read failures (body over the limit, aborted upload) are defects, as
      // in the endpoint's own decoder; nothing has been claimed yet.
      const body = new Uint8Array(yield* Effect.orDie(request.arrayBuffer))

      const execute = Effect.catch(httpEffect, (error) =>
        Option.match(renderEndpointError(error), {
          onNone: () => Effect.fail(error),
          onSome: Effect.succeed
        }))
      const result = yield* idempotency.run(
        { scope, key, method: request.method, target: targetOf(request), body, ...secretOf(request, admin || Option.isSome(principal)) },
        execute,
        capture
      ).pipe(Effect.catchIf(isCoreError, (error) => Effect.fail(toMiddlewareError(error))))
      return result._tag === "Executed" ? result.value : replay(result.response)
    })

    return IdempotencyKeys.of((httpEffect, { endpoint }) =>
      // Without the header the endpoint runs as it is, in as few fiber steps as it can (every request).
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
        const key = request.headers[IDEMPOTENCY_KEY_HEADER]
        return key === undefined ? httpEffect : withKey(httpEffect, endpoint, request, key)
      })
    )
  })
)
