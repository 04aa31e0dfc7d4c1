import { Duration, Effect, Layer } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import { type LightningInvoiceRequest, LightningRail } from "../../../src/ports/Rails.ts"
import {
  DEFAULT_REQUEST_TIMEOUT_MS,
  endpointOf,
  httpClientLayer,
  type LndConfig,
  MAX_RESPONSE_BYTES,
  readBounded,
  redactMacaroon,
  transportMessage
} from "./client.ts"
import { RAIL_NAME, railError } from "./messages.ts"
import { makePayer } from "./payments.ts"
import { parseAddInvoice, statusMessage } from "./wire.ts"

/**
 * Funding: `createInvoice` is `POST /v1/invoices` (AddInvoice). Paying
 * (L402): the router's SendPaymentV2 and TrackPaymentV2 (payments.ts).
 */

export const make = (config: LndConfig): Effect.Effect<LightningRail["Service"], never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const endpoint = yield* endpointOf(config)
    const client = HttpClient.withScope(yield* HttpClient.HttpClient)
    const timeoutMs = config.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS

    const createInvoice = Effect.fn("Lnd.createInvoice")(
      function*(request: LightningInvoiceRequest) {
        if (request.amountMsat <= 0n) {
          return yield* railError("an LND funding invoice needs a positive amount")
        }
        if (!Number.isSafeInteger(request.expirySeconds) || request.expirySeconds <= 0) {
          return yield* railError("an LND funding invoice needs a positive whole expiry in seconds")
        }
        const body = JSON.stringify({
          value_msat: request.amountMsat.toString(),
          memo: request.memo,
          expiry: String(request.expirySeconds)
        })
        const { status, bytes } = yield* Effect.scoped(
          Effect.gen(function*() {
            const response = yield* client.execute(
              HttpClientRequest.post(`${endpoint.base}/v1/invoices`, { headers: endpoint.headers, acceptJson: true }).pipe(
                HttpClientRequest.bodyText(body, "application/json")
              )
            )
            const bytes = yield* readBounded(response, MAX_RESPONSE_BYTES)
            return { status: response.status, bytes }
          })
        ).pipe(
          Effect.catchTag("HttpClientError", (error) => Effect.fail(railError(transportMessage(endpoint, error)))),
          Effect.timeoutOrElse({
            duration: Duration.millis(timeoutMs),
            orElse: () => Effect.fail(railError(`LND did not answer AddInvoice within ${timeoutMs} ms`))
          })
        )
        if (status < 200 || status >= 300) return yield* railError(statusMessage(status, bytes))
        const created = parseAddInvoice(bytes)
        if (typeof created === "string") return yield* railError(created)
        return created
      },
      redactMacaroon
    )

    return LightningRail.of({ name: RAIL_NAME, createInvoice, payer: makePayer(endpoint, client) })
  })

/** The LND rail; its HTTP connection pool lives as long as the layer. */
export const layer = (config: LndConfig): Layer.Layer<LightningRail> =>
  Layer.effect(LightningRail, make(config)).pipe(Layer.provide(httpClientLayer(config)))
