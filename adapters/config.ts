import { Config, ConfigProvider, Data, Effect, type LogLevel, Option, Redacted, Result, Schema, SchemaIssue } from "effect"
import { readFileSync } from "node:fs"
import { type BtcUsdRate, parseBtcUsdRate } from "../src/domain/Money.ts"

/**
 * Configuration, read one way: every environment variable is an effect
 * `Config` (declared with the helpers below, its checks included), read by
 * {@link load}, which turns any failure into one line naming the variable:
 * `Invalid configuration: PORT: Expected …`, or the rule's own words,
 * `Invalid configuration: PORT must be between 0 and 65535`. Rules that
 * relate two variables (`LND_REST_URL` is required when
 * `LIGHTNING_RAIL=lnd`) fail with {@link invalid}, in the same form. The
 * server reads everything before it opens anything, and stops at the first
 * bad value (exit 1, that one line on stderr).
 */

export class InvalidConfig extends Data.TaggedError("InvalidConfig")<{ readonly message: string }> {}

/** A refusal in the one-line form: `Invalid configuration: <message>`. */
export const invalid = (message: string): InvalidConfig => new InvalidConfig({ message: `Invalid configuration: ${message}` })

/**
 * `SchemaError(Expected … at ["PORT"])` -> `PORT: Expected …`; a message
 * that already starts with its variable's name (a rule's own words) is kept
 * as it is; anything else loses its line breaks.
 */
export const oneLine = (message: string): string => {
  const text = message.trim()
  const match = /^\w*Error\(([\s\S]*?)\s+at \["?([^"\]]+)"?\]\)?$/.exec(text)
  if (match !== null) {
    const reason = match[1]!.replace(/\s+/g, " ").trim()
    const name = match[2]!
    return reason.startsWith(`${name} `) ? reason : `${name}: ${reason}`
  }
  return text.replace(/^SourceError: /, "").replace(/\s+/g, " ")
}

/** Reads settings; any failure becomes one {@link InvalidConfig} line naming the variable. */
export const load = <A>(config: Config.Config<A>): Effect.Effect<A, InvalidConfig> =>
  Effect.mapError(config, (error) => invalid(oneLine(error.message)))

/** A `ConfigError` at `name` whose message is the rule's own words, `<name> <why>`. */
const refusal = (name: string, why: string): Config.ConfigError =>
  new Config.ConfigError(
    new Schema.SchemaError(new SchemaIssue.Pointer([name], new SchemaIssue.InvalidValue({ message: `${name} ${why}` })))
  )

/**
 * Checks and converts a setting's value: `rule` returns the value to use,
 * or what is wrong with it, said after the variable's name ("must be hex").
 */
export const refine = <A, B>(name: string, rule: (value: A) => Result.Result<B, string>) =>
(self: Config.Config<A>): Config.Config<B> =>
  Config.mapEffect(self, (value) =>
    Result.match(rule(value), {
      onSuccess: (converted) => Effect.succeed(converted),
      onFailure: (why) => Effect.fail(refusal(name, why))
    }))

/** Checks a setting's value: `rule` returns true, or what is wrong with it ("must be hex"). */
export const check = <A>(name: string, rule: (value: A) => true | string) =>
  refine<A, A>(name, (value) => {
    const verdict = rule(value)
    return verdict === true ? Result.succeed(value) : Result.fail(verdict)
  })

/** A text setting, trimmed, optionally checked. Empty counts as unset. */
export const text = (name: string, rule?: (value: string) => true | string): Config.Config<string> => {
  const trimmed = Config.map(Config.String(name), (value) => value.trim())
  return rule === undefined ? trimmed : trimmed.pipe(check(name, rule))
}

/** `a`, `a or b`, `a, b or c`. */
const listed = (words: ReadonlyArray<string>): string =>
  words.length <= 1 ? words.join("") : `${words.slice(0, -1).join(", ")} or ${words[words.length - 1]}`

/** One of a few words: `LIGHTNING_RAIL must be dev or lnd`. */
export const oneOf = <const W extends string>(name: string, words: ReadonlyArray<W>): Config.Config<W> =>
  text(name).pipe(
    refine(name, (value) => words.includes(value as W) ? Result.succeed(value as W) : Result.fail(`must be ${listed(words)}`))
  )

/** The bytes of the file a setting names, read once, at start-up. */
export const fileBytes = (name: string): Config.Config<Uint8Array> =>
  Config.mapEffect(text(name), (path) =>
    Effect.try({
      try: () => new Uint8Array(readFileSync(path)),
      catch: () => new Config.ConfigError(new ConfigProvider.SourceError({ message: `${name}: cannot read ${path}` }))
    }))

/** The text of the file a setting names (UTF-8), read once, at start-up. */
export const fileText = (name: string): Config.Config<string> =>
  Config.map(fileBytes(name), (bytes) => new TextDecoder().decode(bytes))

/**
 * A setting required only in some case (`why`: "when LIGHTNING_RAIL=lnd"):
 * unset, it fails with `<name> is required <why>`.
 */
export const required = <A>(name: string, why: string, config: Config.Config<A>): Effect.Effect<A, InvalidConfig> =>
  Effect.flatMap(
    load(Config.option(config)),
    Option.match({ onNone: () => Effect.fail(invalid(`${name} is required ${why}`)), onSome: Effect.succeed })
  )

// ---- the server's own settings ------------------------------------------------

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
  /** How log lines are written (LOG_FORMAT): `text` (default) or `json`, one object a line. */
  readonly logFormat: "text" | "json"
  /** Who may read GET /metrics (METRICS_TOKEN); unset: ADMIN_TOKEN does, and with neither the route is 404. */
  readonly metricsToken: Option.Option<Redacted.Redacted<string>>
  /** A fixed BTC/USD rate; without one the sats pocket cannot pay for calls. */
  readonly btcUsdRate: Option.Option<BtcUsdRate>
  /** How long a binding quote (POST /v1/quotes) can be used, in seconds (QUOTE_TTL_SECONDS, default 60). */
  readonly quoteTtlSeconds: number
  /**
   * On SIGTERM or SIGINT, how long requests already in flight may take to
   * finish, in seconds (SHUTDOWN_GRACE_SECONDS, default 10); those still
   * running then are interrupted, which releases their holds.
   */
  readonly shutdownGraceSeconds: number
  /**
   * How many client connections the server holds open at once
   * (MAX_CONNECTIONS, default 4096; adapters/http/server.ts).
   */
  readonly maxConnections: number
  /**
   * How long an answered call's settle waits for the next reserve call to
   * share that commit before it is written on its own, in
   * milliseconds (SETTLE_DELAY_MS, default 2; SQL storage).
   */
  readonly settleDelayMs: number
  /**
   * What happens to a settle answered while no reserve call is in flight or
   * waiting (SETTLE_WHEN_IDLE; SQL storage): `now` writes it at once, `wait`
   * gives the next reserve SETTLE_DELAY_MS to carry it. Unset: `now` on
   * PostgreSQL, `wait` on PGlite.
   */
  readonly settleWhenIdle: Option.Option<"now" | "wait">
  /**
   * How many reserve calls may be in flight at once, across wallets; the
   * reserves that arrive meanwhile go together in the next call
   * (RESERVE_FLIGHTS, default 2; SQL storage).
   */
  readonly reserveFlights: number
}

const MIN_ADMIN_TOKEN_LENGTH = 24

/** A secret setting, kept redacted, checked on its value. */
const secret = (name: string, rule: (value: string) => true | string): Config.Config<Redacted.Redacted<string>> =>
  text(name, rule).pipe(Config.map(Redacted.make))

export const serverConfig: Config.Config<ServerConfig> = Config.all({
  // 0 asks the system for a free port (handy for tests); the log says which.
  port: Config.Int("PORT").pipe(
    check("PORT", (port) => (port >= 0 && port <= 65535) || "must be between 0 and 65535"),
    Config.withDefault(8080)
  ),
  host: Config.NonEmptyString("HOST").pipe(Config.withDefault("127.0.0.1")),
  databaseUrl: Config.option(secret("DATABASE_URL", (url) =>
    /^postgres(ql)?:\/\/./.test(url) ||
    "must be a postgres:// or postgresql:// URL (unset it to use the embedded database)")),
  dataDir: Config.NonEmptyString("DATA_DIR").pipe(Config.withDefault("./data")),
  adminToken: Config.option(secret("ADMIN_TOKEN", (token) =>
    token.length >= MIN_ADMIN_TOKEN_LENGTH || `must be at least ${MIN_ADMIN_TOKEN_LENGTH} characters`)),
  logLevel: Config.LogLevel("LOG_LEVEL").pipe(Config.withDefault<LogLevel.LogLevel>("Info")),
  logFormat: oneOf("LOG_FORMAT", ["text", "json"] as const).pipe(Config.withDefault<"text" | "json">("text")),
  metricsToken: Config.option(secret("METRICS_TOKEN", (token) =>
    token.length >= MIN_ADMIN_TOKEN_LENGTH || `must be at least ${MIN_ADMIN_TOKEN_LENGTH} characters`)),
  btcUsdRate: Config.option(text("BTC_USD_RATE").pipe(refine("BTC_USD_RATE", (value) =>
    Result.mapError(
      parseBtcUsdRate(value),
      (error) => `must be a positive decimal number of USD per BTC (${error.message})`
    )))),
  quoteTtlSeconds: Config.Int("QUOTE_TTL_SECONDS").pipe(
    check("QUOTE_TTL_SECONDS", (seconds) => (seconds >= 1 && seconds <= 3600) || "must be a whole number of seconds from 1 to 3600"),
    Config.withDefault(60)
  ),
  shutdownGraceSeconds: Config.Int("SHUTDOWN_GRACE_SECONDS").pipe(
    check("SHUTDOWN_GRACE_SECONDS", (seconds) => (seconds >= 0 && seconds <= 3600) || "must be a whole number of seconds from 0 to 3600"),
    Config.withDefault(10)
  ),
  maxConnections: Config.Int("MAX_CONNECTIONS").pipe(
    check("MAX_CONNECTIONS", (count) => (count >= 1 && count <= 1_000_000) || "must be a whole number from 1 to 1000000"),
    Config.withDefault(4096)
  ),
  settleDelayMs: Config.Int("SETTLE_DELAY_MS").pipe(
    check("SETTLE_DELAY_MS", (ms) => (ms >= 0 && ms <= 60_000) || "must be a whole number of milliseconds from 0 to 60000"),
    Config.withDefault(2)
  ),
  settleWhenIdle: Config.option(oneOf("SETTLE_WHEN_IDLE", ["now", "wait"] as const)),
  reserveFlights: Config.Int("RESERVE_FLIGHTS").pipe(
    check("RESERVE_FLIGHTS", (n) => (n >= 1 && n <= 64) || "must be a whole number from 1 to 64"),
    Config.withDefault(2)
  )
})

/** Reads and checks the configuration; fails with one message naming the bad variable. */
export const loadServerConfig: Effect.Effect<ServerConfig, InvalidConfig> = load(serverConfig)
