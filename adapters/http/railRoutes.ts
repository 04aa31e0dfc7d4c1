import { ByteSize, Effect, Layer } from "effect"
import { HttpIncomingMessage, HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import type { PaymentSink, RailResponse, RailRoute } from "../../src/ports/Rails.ts"
import type { Store } from "../../src/ports/Store.ts"
import { DEFAULT_BODY_LIMIT_BYTES, fromCause } from "./envelope.ts"
import { envelopeResponse } from "./errors.ts"

/**
 * Mounts the routes the payment rails own (Stripe's webhook, the dev rails'
 * payer pages) beside the API: the rail describes each route
 * (`RailRoute`, src/ports/Rails.ts), this reads the body within the route's
 * limit, hands the rail a plain request, and answers what it returns. A
 * `RailRouteRefused` is answered in the error envelope; every other failure
 * (an unreadable or too large body, a payment that could not be recorded)
 * gets the same answer as anywhere else in the API (envelope.ts).
 */

const toResponse = (response: RailResponse): HttpServerResponse.HttpServerResponse =>
  response._tag === "Json"
    ? HttpServerResponse.jsonUnsafe(response.body, { status: response.status })
    : HttpServerResponse.text(response.html, { status: response.status, contentType: "text/html; charset=utf-8" })

const EMPTY = new Uint8Array(0)

const handler = (route: RailRoute, limitBytes: number) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const declared = request.headers["content-length"]
    if (declared !== undefined && Number(declared) > limitBytes) {
      return envelopeResponse("PAYLOAD_TOO_LARGE", "Request body is too large", { limitBytes }, { connection: "close" })
    }
    const body = route.method === "GET"
      ? EMPTY
      : new Uint8Array(
        yield* request.arrayBuffer.pipe(Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(limitBytes)))
      )
    const params = yield* HttpRouter.params
    const answer = yield* route.handle({ params, headers: request.headers, body }).pipe(
      Effect.map(toResponse),
      Effect.catchTag("RailRouteRefused", (refused) => Effect.succeed(envelopeResponse(refused.code, refused.message, refused.details)))
    )
    return answer
  }).pipe(
    // Interrupted (the server is stopping, the sender hung up): nothing to answer.
    Effect.catchCause((cause) => Effect.orDie(fromCause(cause, limitBytes)))
  )

/** The rails' routes on the `HttpRouter`; `bodyLimitBytes` is the server's limit, for routes that set none. */
export const mountRailRoutes = (
  routes: ReadonlyArray<RailRoute>,
  options: { readonly bodyLimitBytes?: number } = {}
): Layer.Layer<never, never, HttpRouter.HttpRouter | PaymentSink | Store> =>
  routes.length === 0
    ? Layer.empty
    : HttpRouter.use((router) =>
      Effect.gen(function*() {
        const context = yield* Effect.context<PaymentSink | Store>()
        for (const route of routes) {
          const limitBytes = route.bodyLimitBytes ?? options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES
          yield* router.add(route.method, route.path, Effect.provideContext(handler(route, limitBytes), context))
        }
      })
    )
