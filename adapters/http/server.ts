import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { type Context, Duration, Effect, Layer, Option, type Redacted } from "effect"
import { constTrue } from "effect/Function"
import { HttpMiddleware, HttpRouter, type HttpServer } from "effect/http"
import { L402Seller, type L402SellSettings } from "../../src/l402/Seller.ts"
import { L402Store } from "../../src/ports/L402Store.ts"
import type { RateLimiter } from "../../src/ports/RateLimiter.ts"
import { RateSource } from "../../src/ports/RateSource.ts"
import { L402AuthenticationLive, type L402HttpOptions } from "./l402.ts"
import { HttpApiBuilder } from "effect/http-api"
import { createServer, type Server } from "node:http"
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
import { L402Handlers } from "./l402Handlers.ts"
import { IdempotencyKeysLive } from "./idempotency.ts"
import { AccessControlLive } from "./access.ts"
import { CarriedRequests, carryMiddleware } from "./carry.ts"
import { MCP_PATH, mountMcp } from "./mcpRoute.ts"
import { METRICS_PATH, mountMetrics, observe, routeResolver } from "./observability.ts"
import { dashboardRoutes, mountDashboard } from "./dashboard/static.ts"
import { DOCS_PATH, mountDocs } from "./docsPage.ts"
import { mountSessionRoutes, type SessionOptions, sessionRoutes, SessionsLive } from "./sessions.ts"

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
  /** Dashboard sessions: lifetimes and the sign-in limit (sessions.ts). */
  readonly sessions?: SessionOptions
  /** L402_SELL=on: anonymous capability calls are sold over L402 (adapters/http/l402.ts). */
  readonly l402?: L402SellOptions
  /**
   * When the server stops (its scope closes: SIGTERM or SIGINT under
   * `spendgate serve`): the port closes at once, and requests in flight get
   * this long to finish before they are interrupted (default 10 s); requests
   * whose callers went away (carry.ts) get the same, from the same moment.
   */
  readonly shutdownGraceMs?: number
  /**
   * How many client connections the server holds open at once (MAX_CONNECTIONS,
   * default 4096): past it a new connection is closed at once, and the idle
   * keep-alive connections are closed to make room (see `capConnections`).
   */
  readonly maxConnections?: number
}

export interface L402SellOptions extends L402HttpOptions {
  readonly settings: L402SellSettings
}

/**
 * A service the storage or the gateway provides at run time although the
 * server's type does not ask for it (the L402 seller's store and rate): the
 * server stops at start with a clear message when it is missing.
 */
const fromContext = <I, S>(tag: Context.Key<I, S>, what: string) =>
  Layer.effect(
    tag,
    Effect.flatMap(Effect.serviceOption(tag), Option.match({
      onNone: () => Effect.die(new Error(`L402_SELL=on needs ${what}`)),
      onSome: Effect.succeed
    }))
  )

const authenticationLayer = (options: Omit<HttpOptions, "port" | "host">, limiter: Layer.Layer<RateLimiter>) => {
  const authentication = RateLimitedAuthenticationLive({ ...options.rateLimits, limiter })
  const l402 = options.l402
  if (l402 === undefined) return authentication
  return L402AuthenticationLive(l402).pipe(
    Layer.provide(authentication),
    Layer.provide(L402Seller.layer(l402.settings)),
    Layer.provide(limiter),
    Layer.provide(fromContext(L402Store, "a store with L402 state (memory, PGlite or PostgreSQL)")),
    Layer.provide(fromContext(RateSource, "a BTC/USD rate source"))
  )
}

/** All routes of the API: /v1, /health, /v1/openapi.json, /docs, /mcp and the dashboard (/, /admin, /ui/). */
export const routes = (options: Omit<HttpOptions, "port" | "host"> = {}) => {
  // One limiter (one Redis connection) for the request and the signup limits.
  const limiter = options.rateLimits?.limiter ?? MemoryRateLimiter.layer()
  return Layer.mergeAll(
    mountRailRoutes(options.railRoutes ?? [], options.bodyLimitBytes === undefined ? {} : { bodyLimitBytes: options.bodyLimitBytes }),
    mountDashboard(),
    mountSessionRoutes({
      adminToken: options.adminToken ?? Option.none(),
      trustProxyHops: options.sessions?.trustProxyHops ?? options.signup?.trustProxyHops ?? 0,
      ...(options.sessions?.signinPer15Minutes === undefined ? {} : { signinPer15Minutes: options.sessions.signinPer15Minutes })
    }).pipe(Layer.provide(limiter)),
    mountMcp(options.bodyLimitBytes === undefined ? {} : { bodyLimitBytes: options.bodyLimitBytes }),
    mountMetrics(Option.orElse(options.metricsToken ?? Option.none(), () => options.adminToken ?? Option.none())),
    HttpApiBuilder.layer(Api, { openapiPath: "/v1/openapi.json" }).pipe(
      Layer.provide([PublicHandlers, AgentsHandlers, WalletHandlers, FundingHandlers, AdminHandlers, CapabilitiesHandlers, QuotesHandlers, ServicesHandlers, OpenAiHandlers, AnthropicHandlers, WebhooksHandlers, L402Handlers])
    ),
    // The Scalar reference: nothing of it loaded until its first request, then kept as bytes (docsPage.ts).
    mountDocs(),
    envelopeMiddleware(options.bodyLimitBytes === undefined ? {} : { bodyLimitBytes: options.bodyLimitBytes }),
    openAiErrorsMiddleware(options.bodyLimitBytes === undefined ? {} : { bodyLimitBytes: options.bodyLimitBytes }),
    anthropicErrorsMiddleware(options.bodyLimitBytes === undefined ? {} : { bodyLimitBytes: options.bodyLimitBytes })
  ).pipe(
    Layer.provideMerge(authenticationLayer(options, limiter)),
    Layer.provideMerge(SignupAdmissionLive),
    Layer.provideMerge(SignupGateLive(options.signup).pipe(Layer.provide(limiter))),
    Layer.provideMerge(IdempotencyKeysLive),
    Layer.provideMerge(AccessControlLive),
    Layer.provideMerge(AdminAuthenticationLive(options.adminToken ?? Option.none())),
    // One session store for the /session routes and the cookie authentication of /v1 and /v1/admin.
    Layer.provideMerge(SessionsLive(options.sessions)),
    // Built first, so added first: the outermost of the router's middleware (carry.ts).
    Layer.provideMerge(carryMiddleware)
  )
}

/** The path templates of the API and of the routes beside it, for the access log and the metrics. */
const routeResolverFor = (railRoutes: ReadonlyArray<RailRoute>) =>
  routeResolver(Api, [
    ...railRoutes.map((route) => ({ method: route.method, path: route.path })),
    { method: "*", path: MCP_PATH },
    { method: "GET", path: METRICS_PATH },
    { method: "GET", path: DOCS_PATH },
    ...dashboardRoutes(),
    ...sessionRoutes(),
    { method: "GET", path: "/v1/openapi.json" }
  ])

/**
 * How long an idle keep-alive connection stays open (ms). Node's default (5 s)
 * is about what clients keep a connection idle for (undici: 4 s), so a client
 * that reuses one as the server closes it gets a reset; a server that waits
 * longer than its clients leaves the closing to them (65 s: past the 60 s
 * idle timeout of the usual load balancers). The header timeout stays above it.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000

const keepAliveLonger = (server: Server): Server => {
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS
  server.headersTimeout = KEEP_ALIVE_TIMEOUT_MS + 1_000
  return server
}

/** The default of `HttpOptions.maxConnections` (MAX_CONNECTIONS). */
export const DEFAULT_MAX_CONNECTIONS = 4096

/**
 * At most `max` client connections at once, so that idle keep-alive
 * connections (held 65 s) cannot use up the process's file descriptors,
 * which its database pool and upstream calls need too. A connection past the
 * cap is closed at once by Node; the server then closes its idle keep-alive
 * connections (those between requests: a request being read or answered is
 * never cut), so that clients holding connections idle cannot keep new
 * clients out. A client whose idle connection is closed opens a new one.
 */
const capConnections = (max: number) => (server: Server): Server => {
  server.maxConnections = max
  server.on("drop", () => server.closeIdleConnections())
  return server
}

/** Node's server: parser errors in the envelope, long keep-alive, the connection cap. */
const nodeServer = (options: HttpOptions): Server =>
  capConnections(options.maxConnections ?? DEFAULT_MAX_CONNECTIONS)(keepAliveLonger(withClientErrors(createServer())))

/** While the server stops: every idle connection is closed, checked every 50 ms until it has closed. */
const closeIdleUntilClosed = (server: Server | undefined): void => {
  if (server === undefined || !server.listening) return
  const timer = setInterval(() => server.closeIdleConnections(), 50)
  timer.unref()
  server.once("close", () => clearInterval(timer))
}

/**
 * The HTTP server over the core services. The core (and its storage) must be
 * provided from outside, so that the port opens only once storage is ready.
 */
export const serverLayer = (
  options: HttpOptions
): Layer.Layer<HttpServer.HttpServer, unknown, Services | Store | AdminStore | Providers | RateStatus> => {
  const graceMs = options.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS
  let node: Server | undefined
  // Built after the server, so released before it: the first step of a shutdown. It starts the
  // grace of the requests whose callers went away (carry.ts) at the same moment as the others',
  // and closes keep-alive connections as soon as they are idle: Node's `close` closes those idle
  // when it is called, but one whose request finishes during the grace would otherwise hold the
  // server open (and the process with it) until the grace ends.
  const markShutdownStart = Layer.effectDiscard(
    Effect.flatMap(CarriedRequests, (carried) =>
      Effect.addFinalizer(() =>
        Effect.andThen(carried.shutdownStarted, Effect.sync(() => closeIdleUntilClosed(node)))
      ))
  )
  const serve = HttpRouter.serve(routes(options), {
    // The access log of observability.ts replaces the framework's request log.
    disableLogger: true,
    disableListenLog: options.announce === false,
    middleware: observe({ routes: routeResolverFor(options.railRoutes ?? []), accessLog: options.logRequests === true })
  })
  return markShutdownStart.pipe(
    Layer.provideMerge(serve),
    // The request's span is observe's (named by route, with no URL, query or headers): the framework's is off.
    Layer.provide(Layer.succeed(HttpMiddleware.TracerDisabledWhen)(constTrue)),
    Layer.provideMerge(
      NodeHttpServer.layer(() => (node = nodeServer(options)), {
        port: options.port,
        host: options.host,
        gracefulShutdownTimeout: Duration.millis(graceMs)
      })
    ),
    // Built before the server, released after it: what is still carried then gets the rest of the grace.
    Layer.provide(CarriedRequests.layer(graceMs))
  )
}
