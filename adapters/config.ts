import { Config, Data, Effect, type LogLevel, Option, Redacted, Result } from "effect"
import { type BtcUsdRate, parseBtcUsdRate } from "../src/domain/Money.ts"

/**
 * Server configuration, read from the environment and validated once at
 * start-up. A bad value stops the server with one message naming it.
 */
export interface ServerConfig {
  readonly port: number
  readonly host: string
  readonly databaseUrl: Option.Option<Redacted.Redacted<string>>
  readonly dataDir: string
  readonly adminToken: Option.Option<Redacted.Redacted<string>>
  readonly logLevel: LogLevel.LogLevel
  /** A fixed BTC/USD rate; without one the sats pocket cannot pay for calls. */
  readonly btcUsdRate: Option.Option<BtcUsdRate>
}

export class InvalidConfig extends Data.TaggedError("InvalidConfig")<{ readonly message: string }> {}

const raw = Config.all({
  // 0 asks the system for a free port (handy for tests); the log says which.
  port: Config.Int("PORT").pipe(Config.withDefault(8080)),
  host: Config.NonEmptyString("HOST").pipe(Config.withDefault("127.0.0.1")),
  databaseUrl: Config.option(Config.Redacted("DATABASE_URL")),
  dataDir: Config.NonEmptyString("DATA_DIR").pipe(Config.withDefault("./data")),
  adminToken: Config.option(Config.Redacted("ADMIN_TOKEN")),
  logLevel: Config.LogLevel("LOG_LEVEL").pipe(Config.withDefault<LogLevel.LogLevel>("Info")),
  btcUsdRate: Config.option(Config.String("BTC_USD_RATE"))
})

/** `SchemaError(Expected ... at ["PORT"])` -> `PORT: Expected ...` */
const oneLine = (message: string): string => {
  const match = /^\w*Error\(([\s\S]*?)\s+at \["?([^"\]]+)"?\]\)?\s*$/.exec(message.trim())
  return match ? `${match[2]}: ${match[1]}` : message.replace(/\s+/g, " ").trim()
}

const MIN_ADMIN_TOKEN_LENGTH = 24

/** Reads and checks the configuration; fails with one message naming the bad variable. */
export const loadServerConfig: Effect.Effect<ServerConfig, InvalidConfig> = Effect.gen(function*() {
  const config = yield* Effect.mapError(
    raw,
    (error) => new InvalidConfig({ message: `Invalid configuration: ${oneLine(error.message)}` })
  )
  if (config.port < 0 || config.port > 65535) {
    return yield* new InvalidConfig({ message: "Invalid configuration: PORT must be between 0 and 65535" })
  }
  if (Option.isSome(config.databaseUrl)) {
    const url = Redacted.value(config.databaseUrl.value)
    if (!/^postgres(ql)?:\/\/./.test(url)) {
      return yield* new InvalidConfig({
        message: "Invalid configuration: DATABASE_URL must be a postgres:// or postgresql:// URL (unset it to use the embedded database)"
      })
    }
  }
  if (Option.isSome(config.adminToken) && Redacted.value(config.adminToken.value).length < MIN_ADMIN_TOKEN_LENGTH) {
    return yield* new InvalidConfig({
      message: `Invalid configuration: ADMIN_TOKEN must be at least ${MIN_ADMIN_TOKEN_LENGTH} characters`
    })
  }
  let btcUsdRate: Option.Option<BtcUsdRate> = Option.none()
  if (Option.isSome(config.btcUsdRate)) {
    const parsed = parseBtcUsdRate(config.btcUsdRate.value)
    if (Result.isFailure(parsed)) {
      return yield* new InvalidConfig({
        message: `Invalid configuration: BTC_USD_RATE must be a positive decimal number of USD per BTC (${parsed.failure.message})`
      })
    }
    btcUsdRate = Option.some(parsed.success)
  }
  return { ...config, btcUsdRate }
})
