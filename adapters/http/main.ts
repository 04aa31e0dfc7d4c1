import { NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, References } from "effect"
import * as Gateway from "../../src/Gateway.ts"
import { Funding } from "../../src/funding/Funding.ts"
import { Spend } from "../../src/wallet/Spend.ts"
import { InvalidConfig, loadServerConfig } from "../config.ts"
import { devPayers, followersLayer, loadPaymentConfig, railRoutes, railsLayer, rateLayer } from "../payments.ts"
import { loadProvidersConfig, providersLayer } from "../providersConfig.ts"
import { describeStorage, storeLayer } from "../sql/Database.ts"
import { describeRateLimits, loadRateLimitConfig, rateLimitOptions } from "./rateLimit.ts"
import { serverLayer } from "./server.ts"

/**
 * `npm start`: validate configuration, open and migrate storage, then listen.
 * Storage is provided outermost so the port opens only when it is ready.
 */
const main = Effect.gen(function*() {
  const config = yield* loadServerConfig
  const database = { databaseUrl: config.databaseUrl, dataDir: config.dataDir }
  yield* Effect.logInfo(`Spendgate starting: storage = ${describeStorage(database)}`)
  const payments = yield* loadPaymentConfig({ host: config.host, port: config.port, fixedRate: config.btcUsdRate })
  yield* Effect.logInfo(
    `Rails: lightning = ${payments.lightning.kind}, card = ${payments.card.kind}, BTC/USD rate = ${payments.rate.kind}`
  )
  const rateLimits = yield* loadRateLimitConfig
  yield* Effect.logInfo(`Rate limits: ${describeRateLimits(rateLimits)}`)
  const capabilities = yield* loadProvidersConfig
  yield* Effect.logInfo(
    `Providers: ${capabilities.builders.map((b) => `${b.capability}/${b.name}`).join(", ") || "none"}`
  )
  const app = serverLayer({
    port: config.port,
    host: config.host,
    devRails: devPayers(payments),
    extraRoutes: railRoutes(payments),
    adminToken: config.adminToken,
    rateLimits: rateLimitOptions(rateLimits),
    logRequests: config.logLevel === "Debug" || config.logLevel === "Trace" || config.logLevel === "All"
  }).pipe(
    Layer.provide(Layer.mergeAll(Spend.sweeper(), Funding.expirer(), followersLayer(payments))),
    Layer.provideMerge(Gateway.layer),
    Layer.provideMerge(rateLayer(payments)),
    Layer.provideMerge(providersLayer(capabilities)),
    Layer.provide(railsLayer(payments, config.dataDir)),
    Layer.provide(storeLayer(database))
  )
  return yield* Layer.launch(app).pipe(Effect.provideService(References.MinimumLogLevel, config.logLevel))
}).pipe(
  Effect.catchIf(
    (error): error is InvalidConfig => error instanceof InvalidConfig,
    (error) =>
      Effect.sync(() => {
        console.error(error.message)
        process.exitCode = 1
      })
  )
)

NodeRuntime.runMain(main)
