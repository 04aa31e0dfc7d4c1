import { Effect, Layer, Option, Result, Schema } from "effect"
import { HttpEffect, HttpServerRequest, HttpServerResponse } from "effect/http"
import { type BuiltCapability, inputSchemas } from "../../src/capabilities/schemas.ts"
import { microUsdToCents } from "../../src/domain/Money.ts"
import { L402Seller } from "../../src/l402/Seller.ts"
import { countRateLimited } from "../../src/observability/Metrics.ts"
import { RateLimiter } from "../../src/ports/RateLimiter.ts"
import { type ErrorCode, envelopeResponse } from "./errors.ts"
import { API_KEY_HEADER } from "./handlers.ts"
import { IDEMPOTENCY_KEY_HEADER } from "./idempotency.ts"
import { Authentication, CurrentPrincipal } from "./middleware.ts"
import { QUOTE_HEADER } from "./QuotesApi.ts"
import { SESSION_COOKIE } from "./sessions.ts"
import { clientAddress, clientKey, rateLimitedResponse, rateLimitHeaders } from "./rateLimit.ts"

/**
 * Selling capabilities over L402 (L402_SELL=on; the rules are in
 * src/l402/Seller.ts, the walk-through in docs/l402.md). Wraps the
 * `Authentication` middleware, on the capability routes only
 * (`POST /v1/capabilities/{capability}`, not their estimates):
 *
 * - no `Authorization` (and no `x-api-key`): `402 PAYMENT_REQUIRED` with
 *   `WWW-Authenticate: L402 macaroon="…", invoice="…"`, priced at the
 *   request's quote plus the margin;
 * - `Authorization: L402 <macaroon>:<preimage>` (or `LSAT`): the token is
 *   checked and its use counted, and the call runs as the sales agent;
 * - anything else: the usual authentication.
 *
 * Anonymous requests count against a per-client-address limit (scope
 * `client`, the per-agent limit by default), and the capability's own
 * URL-safety rules apply when it is quoted. Idempotency-Key and X-Quote-Id
 * belong to an agent: with an L402 token they are refused (400), since every
 * buyer runs as the one sales agent.
 */

export interface L402HttpOptions {
  /** Requests per minute per client address without an API key (default 100). */
  readonly anonymousPerMinute?: number
  /** TRUST_PROXY: how many reverse proxies forward X-Forwarded-For. */
  readonly trustProxyHops?: number
}

const MINUTE_MS = 60_000
const TOKEN = /^(?:L402|LSAT)\s+([A-Za-z0-9+/_=-]{1,16384}):([0-9a-fA-F]{64})\s*$/i

/** `L402 <macaroon>:<preimage>` (or `LSAT …`), or undefined for any other header. */
export const parseL402Authorization = (header: string | undefined) => {
  if (header === undefined) return undefined
  const match = TOKEN.exec(header.trim())
  return match === null ? undefined : { macaroon: match[1]!, preimage: match[2]!.toLowerCase() }
}

const isL402Scheme = (header: string | undefined) => header !== undefined && /^\s*(L402|LSAT)\b/i.test(header)

const sellable = (group: { readonly identifier: string }, endpoint: { readonly identifier: string }): BuiltCapability | undefined =>
  group.identifier === "capabilities" && Object.hasOwn(inputSchemas, endpoint.identifier)
    ? endpoint.identifier as BuiltCapability
    : undefined

interface Coded {
  readonly code: string
  readonly message: string
  readonly details?: Record<string, unknown> | undefined
}

const refusal = (error: Coded) => envelopeResponse(error.code as ErrorCode, error.message, error.details)

const decodeBody = (capability: BuiltCapability, request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    const text = yield* Effect.orDie(request.text)
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch {
      return yield* Effect.fail(envelopeResponse("VALIDATION_ERROR", "The request body is not JSON", { issues: [] }))
    }
    const schema = inputSchemas[capability] as unknown as Schema.Decoder<unknown>
    return yield* Schema.decodeUnknownEffect(schema)(json).pipe(
      Effect.mapError((error) =>
        envelopeResponse("VALIDATION_ERROR", `Invalid request body: ${error.message.split("\n")[0]}`, { issues: [] })
      )
    )
  })

/** `Authentication` that sells capability calls over L402; wraps the one already provided. */
export const L402AuthenticationLive = (options: L402HttpOptions = {}) =>
  Layer.effect(
    Authentication,
    Effect.gen(function*() {
      const inner = yield* Authentication
      const seller = yield* L402Seller
      const limiter = yield* RateLimiter
      const perMinute = options.anonymousPerMinute ?? 100
      const hops = options.trustProxyHops ?? 0

      /** The per-address limit of anonymous callers; a response when refused. */
      const admit = (request: HttpServerRequest.HttpServerRequest) =>
        Effect.gen(function*() {
          const address = clientAddress(request, hops)
          const key = clientKey(address) ?? `other:${address.slice(0, 100)}`
          const decision = yield* limiter.take([{ scope: "client", key, limit: perMinute, windowMs: MINUTE_MS }])
          if (!decision.allowed) {
            yield* countRateLimited("client")
            return Option.some(rateLimitedResponse(decision))
          }
          const headers = rateLimitHeaders(decision)
          yield* HttpEffect.appendPreResponseHandler((_request, response) =>
            Effect.succeed(HttpServerResponse.setHeaders(response, headers))
          )
          return Option.none()
        })

      const challenge = (capability: BuiltCapability, request: HttpServerRequest.HttpServerRequest) =>
        Effect.gen(function*() {
          const input = yield* decodeBody(capability, request)
          const offer = yield* seller.challenge(capability, input as never).pipe(Effect.mapError(refusal))
          return HttpServerResponse.jsonUnsafe({
            error: {
              code: "PAYMENT_REQUIRED",
              message: `Pay the Lightning invoice (${offer.amountSats} sat${offer.amountSats === 1 ? "" : "s"}), ` +
                "then retry with Authorization: L402 <macaroon>:<preimage>",
              details: {
                capability,
                quotedCost: microUsdToCents(offer.quotedMicroUsd),
                priceUsdCents: microUsdToCents(offer.priceMicroUsd),
                amountSats: offer.amountSats,
                calls: offer.calls,
                paymentHash: offer.paymentHash,
                invoice: offer.invoice,
                macaroon: offer.macaroon,
                expiresAt: offer.expiresAt.toISOString()
              }
            }
          }, {
            status: 402,
            headers: { "www-authenticate": `L402 macaroon="${offer.macaroon}", invoice="${offer.invoice}"` }
          })
        }).pipe(Effect.catch((response) => Effect.succeed(response)))

      const redeem = <E, R>(
        capability: BuiltCapability,
        request: HttpServerRequest.HttpServerRequest,
        token: { readonly macaroon: string; readonly preimage: string },
        endpoint: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
      ): Effect.Effect<HttpServerResponse.HttpServerResponse, E, Exclude<R, CurrentPrincipal>> =>
        Effect.gen(function*() {
          if (request.headers[IDEMPOTENCY_KEY_HEADER] !== undefined || request.headers[QUOTE_HEADER] !== undefined) {
            return envelopeResponse(
              "VALIDATION_ERROR",
              `${IDEMPOTENCY_KEY_HEADER} and ${QUOTE_HEADER} belong to an agent and cannot be used with an L402 token`,
              { issues: [] }
            )
          }
          const prepared = yield* Effect.result(Effect.gen(function*() {
            const input = yield* decodeBody(capability, request)
            return yield* seller.redeem(capability, input as never, token).pipe(Effect.mapError(refusal))
          }))
          if (Result.isFailure(prepared)) return prepared.failure
          const redemption = prepared.success
          return yield* Effect.provideService(endpoint, CurrentPrincipal, redemption.principal).pipe(
            // The call did not run (refused, or the provider failed and nothing was charged): the use is given back.
            Effect.tap((response) => response.status >= 400 ? redemption.giveBack : Effect.void),
            Effect.tapError(() => redemption.giveBack)
          )
        })

      return Authentication.of({
        bearer: (endpoint, context) =>
          Effect.gen(function*() {
            const request = yield* HttpServerRequest.HttpServerRequest
            const capability = sellable(context.group, context.endpoint)
            const authorization = request.headers["authorization"]
            // A dashboard session's cookie is a credential too: such a call is authenticated, never sold.
            const anonymous = authorization === undefined && request.headers[API_KEY_HEADER] === undefined &&
              !(SESSION_COOKIE in request.cookies)
            if (capability === undefined || (!anonymous && !isL402Scheme(authorization))) {
              return yield* inner.bearer(endpoint, context)
            }
            const refused = yield* admit(request)
            if (Option.isSome(refused)) return refused.value
            if (anonymous) return yield* challenge(capability, request)
            const token = parseL402Authorization(authorization)
            if (token === undefined) {
              return envelopeResponse("L402_TOKEN_INVALID", "Expected Authorization: L402 <base64 macaroon>:<hex preimage>")
            }
            return yield* redeem(capability, request, token, endpoint)
          })
      })
    })
  )
