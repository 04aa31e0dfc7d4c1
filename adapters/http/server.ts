import { NodeHttpServer } from "@effect/platform-node"
import { Layer } from "effect"
import { HttpRouter, type HttpServer } from "effect/http"
import { HttpApiBuilder, HttpApiScalar } from "effect/http-api"
import { createServer } from "node:http"
import type { Services } from "../../src/Gateway.ts"
import { Api } from "./Api.ts"
import { envelopeMiddleware } from "./envelope.ts"
import { AgentsHandlers, AuthenticationLive, PublicHandlers } from "./handlers.ts"
import { WalletHandlers } from "./walletHandlers.ts"
import { IdempotencyKeysLive } from "./idempotency.ts"

export interface HttpOptions {
  readonly port: number
  readonly host: string
  readonly bodyLimitBytes?: number
  /** Log one line per request (method, path, status, time); off by default for throughput. */
  readonly logRequests?: boolean
  /** Log the listening address once the port is open (default true). */
  readonly announce?: boolean
}

/** All routes of the API: /v1, /health, /v1/openapi.json and /docs. */
export const routes = (options: { readonly bodyLimitBytes?: number } = {}) =>
  Layer.mergeAll(
    HttpApiBuilder.layer(Api, { openapiPath: "/v1/openapi.json" }).pipe(
      Layer.provide([PublicHandlers, AgentsHandlers, WalletHandlers])
    ),
    HttpApiScalar.layer(Api, { path: "/docs" }),
    envelopeMiddleware(options.bodyLimitBytes === undefined ? {} : { bodyLimitBytes: options.bodyLimitBytes })
  ).pipe(Layer.provideMerge(AuthenticationLive), Layer.provideMerge(IdempotencyKeysLive))

/**
 * The HTTP server over the core services. The core (and its storage) must be
 * provided from outside, so that the port opens only once storage is ready.
 */
export const serverLayer = (
  options: HttpOptions
): Layer.Layer<HttpServer.HttpServer, unknown, Services> =>
  HttpRouter.serve(routes(options.bodyLimitBytes === undefined ? {} : { bodyLimitBytes: options.bodyLimitBytes }), {
    disableLogger: options.logRequests !== true,
    disableListenLog: options.announce === false
  }).pipe(
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: options.port, host: options.host }))
  )
