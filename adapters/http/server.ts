import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Duration, Layer, Option, type Redacted } from "effect"
import { HttpRouter, type HttpServer } from "effect/http"
import { HttpApiBuilder, HttpApiScalar } from "effect/http-api"
import { createServer } from "node:http"
import { withClientErrors } from "./clientError.ts"
import type { Services } from "../../src/Gateway.ts"
import type { Providers } from "../../src/capabilities/Capabilities.ts"
import type { AdminStore } from "../../src/ports/AdminStore.ts"
import type { RailRoute } from "../../src/ports/Rails.ts"
import type { Store } from "../../src/ports/Store.ts"
import type { RateStatus } from "../../src/ports/RateSource.ts"
import { AdminAuthenticationLive, AdminHandlers } from "./adminHandlers.ts"
import { CapabilitiesHandlers } from "./capabilitiesHandlers.ts"
import { QuotesHandlers } from "./quotesHandlers.ts"
import { mountRailRoutes } from "./railRoutes.ts"
import { ServicesHandlers } from "./servicesHandlers.ts"
import { OpenAiHandlers } from "./openai/openaiHandlers.ts"
import { openAiErrorsMiddleware } from "./openai/wire.ts"
import { AnthropicHandlers } from "./anthropic/anthropicHandlers.ts"
import { anthropicErrorsMiddleware } from "./anthropic/wire.ts"
import { Api } from "./Api.ts"
import { envelopeMiddleware } from "./envelope.ts"
import { AgentsHandlers, PublicHandlers } from "./handlers.ts"
import * as MemoryRateLimiter from "../ratelimit/memory.ts"
import { RateLimitedAuthenticationLive, type RateLimitOptions, SignupAdmissionLive, SignupGateLive, type SignupOptions } from "./rateLimit.ts"
import { FundingHandlers } from "./fundingHandlers.ts"
import { WalletHandlers } from "./walletHandlers.ts"
import { WebhooksHandlers } from "./webhooksHandlers.ts"
import { IdempotencyKeysLive } from "./idempotency.ts"
import { AccessControlLive } from "./access.ts"
import { MCP_PATH, mountMcp } from "./mcpRoute.ts"
import { METRICS_PATH, mountMetrics, observe, routeResolver } from "./observability.ts"

/** How long requests in flight may take to finish when the server stops. */
export const DEFAULT_SHUTDOWN_GRACE_MS = 10_000

export interface HttpOptions {
  readonly port: number
  readonly host: string
  readonly bodyLimitBytes?: number
  /**
   * One access-log line per request at Info (method, route, status, duration,
   * request id, agent id); off by default for embedders, on in `spendgate serve`.
   */
  readonly logRequests?: boolean
  /** Who may read GET /metrics (METRICS_TOKEN, else ADMIN_TOKEN); none: 404. */
  readonly metricsToken?: Option.Option<Redacted.Redacted<string>>
  /** Log the listening address once the port is open (default true). */
  readonly announce?: boolean
  /** Per-agent and per-account limits and where they are counted (in process by default). */
  readonly rateLimits?: RateLimitOptions
  /** Who may sign up (SIGNUP); default open, 10 an hour per client address. */
  readonly signup?: SignupOptions
  /** ADMIN_TOKEN; the admin API answers 404 without one. */
  readonly adminToken?: Option.Option<Redacted.Redacted<string>>
  /** Routes the configured payment rails serve outside the contract (a webhook, the dev payer routes). */
  readonly railRoutes?: ReadonlyArray<RailRoute>
  /**
   * When the server stops (its scope closes: SIGTERM or SIGINT under
   * `spendgate serve`): the port closes at once, and requests in flight get
   * this long to finish before they are interrupted (default 10 s).
   */
  readonly shutdownGraceMs?: number
}

/** All routes of the API: /v1, /health, /v1/openapi.json, /docs and /mcp. */
export const routes = (options: Omit<HttpOptions, "port" | "host"> = {}) => {
  // One limiter (one Redis connection) for the request and the signup limits.
  const limiter = options.rateLimits?.limiter ?? MemoryRateLimiter.layer()
  return Layer.mergeAll(
    mountRailRoutes(options.railRoutes ?? [], options.bodyLimitBytes === undefined ? {} : { bodyLimitBytes: options.bodyLimitBytes }),
    mountMcp(options.bodyLimitBytes === undefined ? {} : { bodyLimitBytes: options.bodyLimitBytes }),
    mountMetrics(Option.orElse(options.metricsToken ?? Option.none(), () => options.adminToken ?? Option.none())),
    HttpApiBuilder.layer(Api, { openapiPath: "/v1/openapi.json" }).pipe(
      Layer.provide([PublicHandlers, AgentsHandlers, WalletHandlers, FundingHandlers, AdminHandlers, CapabilitiesHandlers, QuotesHandlers, ServicesHandlers, OpenAiHandlers, AnthropicHandlers, WebhooksHandlers])
    ),
    HttpApiScalar.layer(Api, { path: "/docs" }),
    envelopeMiddleware(options.bodyLimitBytes === undefined ? {} : { bodyLimitBytes: options.bodyLimitBytes }),
    openAiErrorsMiddleware(options.bodyLimitBytes === undefined ? {} : { bodyLimitBytes: options.bodyLimitBytes }),
    anthropicErrorsMiddleware(options.bodyLimitBytes === undefined ? {} : { bodyLimitBytes: options.bodyLimitBytes })
  ).pipe(
    Layer.provideMerge(RateLimitedAuthenticationLive({ ...options.rateLimits, limiter })),
    Layer.provideMerge(SignupAdmissionLive),
    Layer.provideMerge(SignupGateLive(options.signup).pipe(Layer.provide(limiter))),
    Layer.provideMerge(IdempotencyKeysLive),
    Layer.provideMerge(AccessControlLive),
    Layer.provideMerge(AdminAuthenticationLive(options.adminToken ?? Option.none()))
  )
}

/** The path templates of the API and of the routes beside it, for the access log and the metrics. */
const routeResolverFor = (railRoutes: ReadonlyArray<RailRoute>) =>
  routeResolver(Api, [
    ...railRoutes.map((route) => ({ method: route.method, path: route.path })),
    { method: "*", path: MCP_PATH },
    { method: "GET", path: METRICS_PATH },
    { method: "GET", path: "/docs" },
    { method: "GET", path: "/v1/openapi.json" }
  ])

/**
 * The HTTP server over the core services. The core (and its storage) must be
 * provided from outside, so that the port opens only once storage is ready.
 */
export const serverLayer = (
  options: HttpOptions
): Layer.Layer<HttpServer.HttpServer, unknown, Services | Store | AdminStore | Providers | RateStatus> =>
  HttpRouter.serve(routes(options), {
    // The access log of observability.ts replaces the framework's request log.
    disableLogger: true,
    disableListenLog: options.announce === false,
    middleware: observe({ routes: routeResolverFor(options.railRoutes ?? []), accessLog: options.logRequests === true })
  }).pipe(
    Layer.provideMerge(
      NodeHttpServer.layer(() => withClientErrors(createServer()), {
        port: options.port,
        host: options.host,
        gracefulShutdownTimeout: Duration.millis(options.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS)
      })
    )
  )
