import { NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Option, References } from "effect"
import * as Gateway from "../../src/Gateway.ts"
import { RateSource } from "../../src/ports/RateSource.ts"
import { Funding } from "../../src/funding/Funding.ts"
import { Spend } from "../../src/wallet/Spend.ts"
import { InvalidConfig, loadServerConfig } from "../config.ts"
import { devRails } from "../rails/dev.ts"
import { describeStorage, storeLayer } from "../sql/Database.ts"
import { serverLayer } from "./server.ts"

/**
 * `npm start`: validate configuration, open and migrate storage, then listen.
 * Storage is provided outermost so the port opens only when it is ready.
 */
const main = Effect.gen(function*() {
  const config = yield* loadServerConfig
  const database = { databaseUrl: config.databaseUrl, dataDir: config.dataDir }
  yield* Effect.logInfo(`Spendgate starting: storage = ${describeStorage(database)}`)
  const app = serverLayer({
    port: config.port,
    host: config.host,
    devRails: { lightning: true, card: true },
    logRequests: config.logLevel === "Debug" || config.logLevel === "Trace" || config.logLevel === "All"
  }).pipe(
    Layer.provide(Layer.mergeAll(Spend.sweeper(), Funding.expirer())),
    Layer.provideMerge(Gateway.layer),
    Layer.provide(Option.match(config.btcUsdRate, { onNone: () => RateSource.none, onSome: RateSource.fixed })),
    Layer.provide(devRails({ dataDir: config.dataDir, publicUrl: `http://${config.host}:${config.port}` })),
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
