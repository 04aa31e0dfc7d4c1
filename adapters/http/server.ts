import { NodeHttpServer } from "@effect/platform-node"
import { Layer } from "effect"
import { HttpRouter, type HttpServer } from "effect/http"
import { HttpApiBuilder, HttpApiScalar } from "effect/http-api"
import { createServer } from "node:http"
import type { Agents } from "../../src/agents/Agents.ts"
import type { Policies } from "../../src/agents/Policies.ts"
import type { Health } from "../../src/Health.ts"
import { Api } from "./Api.ts"
import { envelopeMiddleware } from "./envelope.ts"
import { AgentsHandlers, AuthenticationLive, PublicHandlers } from "./handlers.ts"

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
      Layer.provide([PublicHandlers, AgentsHandlers])
    ),
    HttpApiScalar.layer(Api, { path: "/docs" }),
    envelopeMiddleware(options.bodyLimitBytes === undefined ? {} : { bodyLimitBytes: options.bodyLimitBytes })
  ).pipe(Layer.provideMerge(AuthenticationLive))

/**
 * The HTTP server over the core services. The core (and its storage) must be
 * provided from outside, so that the port opens only once storage is ready.
 */
export const serverLayer = (
  options: HttpOptions
): Layer.Layer<HttpServer.HttpServer, unknown, Agents | Policies | Health> =>
  HttpRouter.serve(routes(options.bodyLimitBytes === undefined ? {} : { bodyLimitBytes: options.bodyLimitBytes }), {
    disableLogger: options.logRequests !== true,
    disableListenLog: options.announce === false
  }).pipe(
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: options.port, host: options.host }))
  )
