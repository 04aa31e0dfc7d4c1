import { Data, Deferred, Effect, Layer, Logger, Option, References } from "effect"
import { type HttpServer, HttpServerError } from "effect/http"
import { createServer } from "node:net"
import * as Gateway from "../../src/Gateway.ts"
import { L402Payments } from "../../src/l402/Pay.ts"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import { withoutTracing } from "../../src/observability/Tracing.ts"
import type { AnyProvider } from "../../src/capabilities/Provider.ts"
import { Funding } from "../../src/funding/Funding.ts"
import type { AdminStore } from "../../src/ports/AdminStore.ts"
import { RateStatus } from "../../src/ports/RateSource.ts"
import type { Store } from "../../src/ports/Store.ts"
import { Spend } from "../../src/wallet/Spend.ts"
import { Webhooks } from "../../src/webhooks/Webhooks.ts"
import * as WebhookHttp from "../net/webhookTransport.ts"
import { InvalidConfig, loadServerConfig, type ServerConfig } from "../config.ts"
import {
  devRailsPublicWarning,
  followersLayer,
  loadPaymentConfig,
  railRoutes,
  railsLayer,
  rateLayer
} from "../payments.ts"
import { describeL402Sell, keepSalesKey, loadL402SellConfig } from "../l402.ts"
import { loadProvidersConfig, providersLayer } from "../providersConfig.ts"
import { DataDirInUse, DataDirLockFailed } from "../sql/dataDirLock.ts"
import { describeStorage, storeLayer } from "../sql/Database.ts"
import {
  describeRateLimits,
  describeSignup,
  loadRateLimitConfig,
  loadSignupConfig,
  rateLimitOptions,
  signupOptions
} from "./rateLimit.ts"
import { describeOtlp, loadOtlpConfig, type OtlpConfig } from "./otlpConfig.ts"
import { type HttpOptions, serverLayer } from "./server.ts"
import { describeSessions, loadSessionConfig } from "./sessions.ts"

export { type HttpOptions, routes, serverLayer } from "./server.ts"

/** What {@link serveGateway} serves the API over: a ready layer such as `Spendgate.memory()`. */
export type ServedGateway = Gateway.Services | Store | AdminStore

/**
 * The API on `options.port` over a gateway the embedder built, e.g.
 * `Layer.launch(serveGateway(Spendgate.memory({ providers }), { port: 8080, host: "127.0.0.1", providers }))`.
 * Give it the same `providers` as the gateway, so the catalogue routes list
 * what `execute` runs; `rateStatus` is what `GET /v1/admin/rate` reports
 * (default: no rate).
 */
export const serveGateway = <E>(
  gateway: Layer.Layer<ServedGateway, E>,
  options: HttpOptions & {
    readonly providers?: ReadonlyArray<AnyProvider> | undefined
    readonly rateStatus?: Layer.Layer<RateStatus> | undefined
  }
): Layer.Layer<HttpServer.HttpServer, unknown> =>
  serverLayer(options).pipe(
    Layer.provide(Layer.merge(Providers.make(options.providers ?? []), options.rateStatus ?? RateStatus.none)),
    Layer.provide(gateway)
  )

/**
 * `spendgate/server`: the HTTP API served from the embedder's own process.
 *
 * - {@link serveFromEnvironment}: what `spendgate serve` (and `npm start`)
 *   runs, configured from the environment variables the README lists;
 * - {@link serveGateway}: the API on a port over a ready gateway layer
 *   (`Spendgate.memory()`, `.pglite(dir)`, `.postgres(url)`);
 * - {@link serverLayer}: the API as a layer, for an embedder that composes
 *   the core services and every port itself.
 *
 * {@link serveFromEnvironment} starts in an order that never harms a data directory:
 *
 * 1. read and check every setting (one line per bad variable, exit 1);
 * 2. check that HOST:PORT can be bound, so a busy port stops the start
 *    before anything under DATA_DIR is opened;
 * 3. open storage: with embedded PGlite this first takes DATA_DIR's lock
 *    (adapters/sql/dataDirLock.ts), so a second server on the same directory
 *    stops here, having read and written nothing;
 * 4. build the rest and listen; the port opens only once storage is ready;
 * 5. then the providers' start-up probes run (the sandbox's, espeak's), in the
 *    background: what states or acts on a provider's availability waits for
 *    its verdict (adapters/providersConfig.ts, probedStatuses).
 *
 * Any failure after step 3 closes storage (PGlite cleanly) and then releases
 * the lock, in that order. Every refusal is one line on stderr and exit code 1.
 *
 * It stops gracefully when interrupted (SIGTERM or SIGINT under `spendgate
 * serve`): the port closes at once, so new connections are refused, and
 * connections are closed as they become idle; requests in flight (those whose
 * callers went away too, carry.ts) get SHUTDOWN_GRACE_SECONDS (default 10) to
 * finish, their holds settled as usual; any still running then is interrupted,
 * which releases its hold (the spend pipeline's rule). Then the background workers stop, storage
 * closes (PGlite cleanly, then its lock) and the process exits 0.
 */

/** The port cannot be bound. */
class CannotListen extends Data.TaggedError("CannotListen")<{
  readonly host: string
  readonly port: number
  readonly code: string | undefined
  readonly reason: string
}> {
  override get message(): string {
    const where = `${this.host.includes(":") ? `[${this.host}]` : this.host}:${this.port}`
    switch (this.code) {
      case "EADDRINUSE":
        return `Cannot start: ${where} is already in use (EADDRINUSE); stop what listens there, or set another PORT`
      case "EACCES":
        return `Cannot start: not allowed to listen on ${where} (EACCES); ports below 1024 need privileges`
      case "EADDRNOTAVAIL":
        return `Cannot start: HOST=${this.host} is not an address of this machine (EADDRNOTAVAIL)`
      case "ENOTFOUND":
      case "EAI_AGAIN":
        return `Cannot start: HOST=${this.host} does not resolve (${this.code})`
      default:
        return `Cannot start: cannot listen on ${where}: ${this.reason.replace(/\s+/g, " ")}`
    }
  }
}

const errorCode = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && typeof (error as { code?: unknown }).code === "string"
    ? (error as { code: string }).code
    : undefined

/**
 * Binds HOST:PORT and lets go of it at once. PORT=0 (any free port) cannot
 * be busy. Another process may still take the port before the server binds
 * it; that start then fails at step 4, with storage closed cleanly under
 * this process's lock, so the data directory is never at risk.
 */
const checkPortFree = (host: string, port: number): Effect.Effect<void, CannotListen> =>
  port === 0 ? Effect.void : Effect.callback<void, CannotListen>((resume) => {
    const probe = createServer()
    probe.once("error", (error) =>
      resume(Effect.fail(new CannotListen({ host, port, code: errorCode(error), reason: error.message }))))
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resume(Effect.void)))
  })

/**
 * The loggers of LOG_FORMAT, both one line per entry on stdout: `json` one
 * JSON object (`message`, `level`, `timestamp`, `annotations`…), `text` logfmt
 * (`timestamp=… level=INFO fiber=#2 message="…" requestId=…`).
 */
export const loggerLayer = (format: "text" | "json") =>
  Logger.layer([format === "json" ? Logger.consoleJson : Logger.consoleLogFmt])

/**
 * The OTLP exporters when an endpoint is configured, loaded only then
 * (adapters/http/otlp.ts); otherwise tracing is off (`withoutTracing`): no
 * span is recorded, since none would be sent.
 */
const withTelemetry = (otlp: Option.Option<OtlpConfig>) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Option.isNone(otlp)
    ? withoutTracing(effect)
    : Effect.provide(
    effect,
    Layer.unwrap(Effect.map(Effect.promise(() => import("./otlp.ts")), (module) => module.otlpLayer(otlp.value)))
  )

export const serveFromEnvironment: Effect.Effect<void, unknown> = Effect.gen(function*() {
  const config = yield* loadServerConfig
  const otlp = yield* loadOtlpConfig
  return yield* serveWith(config, otlp).pipe(
    // Inside the console logger's layer, so the OTLP logger is added beside it.
    withTelemetry(otlp),
    // Stopped on a signal, having finished (or released) what was in flight: a clean exit.
    Effect.onInterrupt(() =>
      Effect.sync(() => {
        process.exitCode = 0
      })
    ),
    Effect.provide(loggerLayer(config.logFormat))
  )
}).pipe(
  Effect.catchIf(
    (error): error is InvalidConfig | CannotListen | DataDirInUse | DataDirLockFailed =>
      error instanceof InvalidConfig || error instanceof CannotListen || error instanceof DataDirInUse ||
      error instanceof DataDirLockFailed,
    (error) =>
      Effect.sync(() => {
        console.error(error.message)
        process.exitCode = 1
      })
  )
)

const serveWith = (config: ServerConfig, otlp: Option.Option<OtlpConfig>) => Effect.gen(function*() {
  const database = { databaseUrl: config.databaseUrl, dataDir: config.dataDir }
  yield* Effect.logInfo(`Spendgate starting: storage = ${describeStorage(database)}`)
  yield* Effect.logInfo(`OpenTelemetry export: ${describeOtlp(otlp)}`)
  const signup = yield* loadSignupConfig
  const payments = yield* loadPaymentConfig({
    host: config.host,
    port: config.port,
    fixedRate: config.btcUsdRate,
    trustProxyHops: signup.trustProxyHops
  })
  yield* Effect.logInfo(
    `Rails: lightning = ${payments.lightning.kind}, card = ${payments.card.kind}, BTC/USD rate = ${payments.rate.kind}`
  )
  const rateLimits = yield* loadRateLimitConfig
  yield* Effect.logInfo(`Rate limits: ${describeRateLimits(rateLimits)}`)
  yield* Effect.logInfo(`Signup: ${describeSignup(signup)}`)
  const sessions = yield* loadSessionConfig
  yield* Effect.logInfo(`Dashboard: ${describeSessions(sessions)}`)
  const capabilities = yield* loadProvidersConfig
  yield* Effect.logInfo(
    `Providers: ${capabilities.builders.map((b) => `${b.capability}/${b.name}`).join(", ") || "none"}`
  )
  const l402 = yield* loadL402SellConfig({ hasRate: payments.rate.kind !== "none" })
  yield* Effect.logInfo(`L402 selling: ${describeL402Sell(l402)}`)
  if (payments.devRailsPublic) yield* Effect.logWarning(devRailsPublicWarning(payments, config.host))

  yield* checkPortFree(config.host, config.port)
  const storage = yield* Layer.build(
    storeLayer(database, {
      settleDelayMs: config.settleDelayMs,
      settleWhenIdle: Option.getOrUndefined(config.settleWhenIdle),
      reserveFlights: config.reserveFlights
    })
  )

  /** Done once the server listens (the HTTP layer is built): the providers' probes start then. */
  const listening = Deferred.makeUnsafe<void>()
  const app = serverLayer({
    port: config.port,
    host: config.host,
    railRoutes: railRoutes(payments),
    adminToken: config.adminToken,
    metricsToken: config.metricsToken,
    rateLimits: rateLimitOptions(rateLimits),
    signup: signupOptions(signup),
    sessions: { ...sessions, trustProxyHops: signup.trustProxyHops },
    ...(l402 === undefined
      ? {}
      : {
        l402: {
          settings: { ...l402.settings, onSalesAccountCreated: keepSalesKey(config.dataDir) },
          anonymousPerMinute: l402.anonymousPerMinute,
          trustProxyHops: signup.trustProxyHops
        }
      }),
    // One line per request at Info; LOG_LEVEL=Warn (or above) silences it.
    logRequests: true,
    shutdownGraceMs: config.shutdownGraceSeconds * 1000,
    maxConnections: config.maxConnections
  }).pipe(
    Layer.provide(
      Layer.mergeAll(Spend.sweeper(), Funding.expirer(), Webhooks.worker(), L402Payments.resolver(), followersLayer(payments))
    ),
    Layer.provideMerge(Gateway.layerWith({ quoteTtlMs: config.quoteTtlSeconds * 1000 })),
    // Webhook targets follow the rules of `read`, with the same allow-list (URL_ALLOW_HOSTS).
    Layer.provideMerge(WebhookHttp.layer({ allowHosts: capabilities.allowHosts })),
    Layer.provideMerge(rateLayer(payments)),
    // The providers' start-up probes (the sandbox starts one per language) run once the port is
    // open, so that they do not slow the start; what needs a verdict waits for it.
    Layer.provideMerge(providersLayer(capabilities, Deferred.await(listening))),
    Layer.provide(railsLayer(payments, config.dataDir)),
    Layer.provide(Layer.succeedContext(storage))
  )
  return yield* Layer.launch(Layer.tap(app, () => Deferred.succeed(listening, undefined))).pipe(
    Effect.onInterrupt(() => Effect.logInfo("Spendgate stopped: requests in flight finished or released, storage closing")),
    Effect.provideService(References.MinimumLogLevel, config.logLevel),
    // The port was taken between the check and the bind: one line, like the check's.
    Effect.catchIf(
      (error): error is HttpServerError.ServeError => error instanceof HttpServerError.ServeError,
      (error) => {
        const cause = error.cause
        return Effect.fail(
          new CannotListen({
            host: config.host,
            port: config.port,
            code: errorCode(cause),
            reason: cause instanceof Error ? cause.message : String(cause)
          })
        )
      }
    )
  )
}).pipe(Effect.scoped)

