import { ConfigProvider, Effect, Exit, Option, Redacted } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { loadServerConfig, oneLine } from "../../adapters/config.ts"
import { loadRateLimitConfig, loadSignupConfig } from "../../adapters/http/rateLimit.ts"
import { loadPaymentConfig } from "../../adapters/payments.ts"

/**
 * Configuration is read one way (effect's Config, through adapters/config.ts):
 * every bad value is refused with one line, `Invalid configuration: …`,
 * naming its variable, whichever module reads it, and nothing throws.
 */

const dir = mkdtempSync(join(tmpdir(), "spendgate-config-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const withEnv = <A, E>(effect: Effect.Effect<A, E>, env: Record<string, string>) =>
  Effect.runPromiseExit(Effect.provideService(effect, ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env })))

const payments = Effect.suspend(() => loadPaymentConfig({ host: "127.0.0.1", port: 8080, fixedRate: Option.none() }))

/** Everything the server reads at start-up, in its order. */
const everything = Effect.gen(function*() {
  yield* loadServerConfig
  yield* loadSignupConfig
  yield* payments
  yield* loadRateLimitConfig
})

/** The refusal's message, or the exit when it was not one refusal. */
const refusal = async (env: Record<string, string>) => {
  const exit = await withEnv(everything, env)
  if (Exit.isFailure(exit)) {
    const error = exit.cause.reasons[0]
    if (error?._tag === "Fail") return (error.error as { message: string }).message
  }
  return `not refused: ${String(exit)}`
}

const lnd = { LIGHTNING_RAIL: "lnd", LND_REST_URL: "https://lnd.example:8080" }

describe("configuration", () => {
  const cases: ReadonlyArray<readonly [Record<string, string>, string]> = [
    [{ PORT: "not-a-port" }, "Invalid configuration: PORT: Expected"],
    [{ PORT: "70000" }, "Invalid configuration: PORT must be between 0 and 65535"],
    [{ DATABASE_URL: "mysql://x" }, "Invalid configuration: DATABASE_URL must be a postgres:// or postgresql:// URL"],
    [{ ADMIN_TOKEN: "short" }, "Invalid configuration: ADMIN_TOKEN must be at least 24 characters"],
    [{ BTC_USD_RATE: "cheap" }, "Invalid configuration: BTC_USD_RATE must be a positive decimal number of USD per BTC"],
    [{ LOG_LEVEL: "loud" }, "Invalid configuration: LOG_LEVEL: "],
    [{ LOG_FORMAT: "yaml" }, "Invalid configuration: LOG_FORMAT must be text or json"],
    [{ METRICS_TOKEN: "short" }, "Invalid configuration: METRICS_TOKEN must be at least 24 characters"],
    [{ QUOTE_TTL_SECONDS: "0" }, "Invalid configuration: QUOTE_TTL_SECONDS must be a whole number of seconds from 1 to 3600"],
    [{ QUOTE_TTL_SECONDS: "3601" }, "Invalid configuration: QUOTE_TTL_SECONDS must be a whole number of seconds from 1 to 3600"],
    [{ QUOTE_TTL_SECONDS: "1.5" }, "Invalid configuration: QUOTE_TTL_SECONDS: "],
    [{ SIGNUP: "maybe" }, "Invalid configuration: SIGNUP must be open, closed or token"],
    [{ TRUST_PROXY: "-1" }, "Invalid configuration: TRUST_PROXY must be the number of reverse proxies"],
    [{ LIGHTNING_RAIL: "lnd" }, "Invalid configuration: LND_REST_URL is required when LIGHTNING_RAIL=lnd"],
    [{ LIGHTNING_RAIL: "ln" }, "Invalid configuration: LIGHTNING_RAIL must be dev or lnd"],
    [{ ...lnd, LND_REST_URL: "lnd:8080" }, "Invalid configuration: LND_REST_URL must be an http(s) URL"],
    [lnd, "Invalid configuration: LND_MACAROON_HEX is required (or LND_MACAROON_PATH) when LIGHTNING_RAIL=lnd"],
    [{ ...lnd, LND_MACAROON_HEX: "xyz" }, "Invalid configuration: LND_MACAROON_HEX must be hex"],
    [{ ...lnd, LND_MACAROON_PATH: join(dir, "missing.macaroon") }, `Invalid configuration: LND_MACAROON_PATH: cannot read ${join(dir, "missing.macaroon")}`],
    [{ ...lnd, LND_MACAROON_HEX: "ab", LND_TLS_CERT_PATH: dir + "/no.pem" }, `Invalid configuration: LND_TLS_CERT_PATH: cannot read ${dir}/no.pem`],
    [{ CARD_RAIL: "stripe", STRIPE_SECRET_KEY: "sk_test_x" }, "Invalid configuration: STRIPE_WEBHOOK_SECRET is required when CARD_RAIL=stripe"],
    [{ CARD_RAIL: "stripe", STRIPE_SECRET_KEY: "pk_x", STRIPE_WEBHOOK_SECRET: "whsec_x" }, "Invalid configuration: STRIPE_SECRET_KEY must be a secret (sk_…) or restricted (rk_…) key"],
    [{ RATE_SOURCES: "coinbase,mtgox" }, "Invalid configuration: RATE_SOURCES must list some of coinbase, kraken, bitstamp"],
    [{ PUBLIC_URL: "example.com" }, "Invalid configuration: PUBLIC_URL must be an http(s) URL"],
    [{ DEV_RAILS_PUBLIC: "1" }, "Invalid configuration: DEV_RAILS_PUBLIC must be on or off"],
    [{ RATE_LIMIT_AGENT_PER_MINUTE: "many" }, "Invalid configuration: RATE_LIMIT_AGENT_PER_MINUTE: Expected"],
    [{ RATE_LIMIT_ACCOUNT_PER_MINUTE: "0" }, "Invalid configuration: RATE_LIMIT_ACCOUNT_PER_MINUTE must be at least 1"],
    [{ REDIS_URL: "http://x" }, "Invalid configuration: REDIS_URL must be a redis:// or rediss:// URL"],
    [{ RESERVE_FLIGHTS: "0" }, "Invalid configuration: RESERVE_FLIGHTS must be a whole number from 1 to 64"],
    [{ RESERVE_FLIGHTS: "65" }, "Invalid configuration: RESERVE_FLIGHTS must be a whole number from 1 to 64"],
    [{ SETTLE_DELAY_MS: "-1" }, "Invalid configuration: SETTLE_DELAY_MS must be a whole number of milliseconds from 0 to 60000"],
    [{ SETTLE_WHEN_IDLE: "later" }, "Invalid configuration: SETTLE_WHEN_IDLE must be now or wait"],
    [{ SIGNUP: "token" }, "Invalid configuration: SIGNUP_TOKEN is required when SIGNUP=token"],
    [{ SIGNUP: "token", SIGNUP_TOKEN: "short" }, "Invalid configuration: SIGNUP_TOKEN must be at least 24 characters"],
    [{ SIGNUP_TOKEN: "signup-token-0123456789abcdef" }, "Invalid configuration: SIGNUP_TOKEN is set but SIGNUP=open"],
    [{ SIGNUP_RATE_PER_HOUR: "0" }, "Invalid configuration: SIGNUP_RATE_PER_HOUR must be a whole number from 1 to 1000000"],
    [{ SIGNUP_RATE_PER_HOUR: "ten" }, "Invalid configuration: SIGNUP_RATE_PER_HOUR must be a whole number"],
    [{ TRUST_PROXY: "11" }, "Invalid configuration: TRUST_PROXY must be the number of reverse proxies"],
    [{ TRUST_PROXY: "-1" }, "Invalid configuration: TRUST_PROXY must be the number of reverse proxies"],
    [{ MAX_CONNECTIONS: "0" }, "Invalid configuration: MAX_CONNECTIONS must be a whole number from 1 to 1000000"],
    [{ MAX_CONNECTIONS: "lots" }, "Invalid configuration: MAX_CONNECTIONS: "]
  ]

  for (const [env, expected] of cases) {
    it(`${JSON.stringify(env)} is refused in one line naming the variable`, async () => {
      const message = await refusal(env)
      expect(message.startsWith(expected), message).toBe(true)
      expect(message).not.toContain("\n")
      expect(message).not.toMatch(/SchemaError|SourceError|\bat \[/)
    })
  }

  it("a secret never appears in a refusal", async () => {
    const message = await refusal({ DATABASE_URL: "mysql://user:hunter2-secret@db" })
    expect(message).not.toContain("hunter2")
  })

  it("reads LND's macaroon and certificate files, once, at start-up", async () => {
    writeFileSync(join(dir, "admin.macaroon"), new Uint8Array([0x02, 0x01, 0xab]))
    writeFileSync(join(dir, "tls.cert"), "-----BEGIN CERTIFICATE-----\n")
    const exit = await withEnv(payments, {
      ...lnd,
      LND_MACAROON_PATH: join(dir, "admin.macaroon"),
      LND_TLS_CERT_PATH: join(dir, "tls.cert")
    })
    expect(Exit.isSuccess(exit)).toBe(true)
    if (Exit.isSuccess(exit) && exit.value.lightning.kind === "lnd") {
      expect(Redacted.value(exit.value.lightning.lnd.macaroonHex)).toBe("0201ab")
      expect(exit.value.lightning.lnd.tlsCertPem).toBe("-----BEGIN CERTIFICATE-----\n")
    } else {
      expect.unreachable("LND was configured")
    }
  })

  it("the defaults need no variable at all", async () => {
    const exit = await withEnv(everything, {})
    expect(Exit.isSuccess(exit)).toBe(true)
  })

  it("QUOTE_TTL_SECONDS sets how long a quote lives (60 s by default)", async () => {
    const set = await withEnv(loadServerConfig, { QUOTE_TTL_SECONDS: "5" })
    expect(Exit.isSuccess(set) && set.value.quoteTtlSeconds).toBe(5)
    const unset = await withEnv(loadServerConfig, {})
    expect(Exit.isSuccess(unset) && unset.value.quoteTtlSeconds).toBe(60)
  })

  it("MAX_CONNECTIONS caps the server's client connections (4096 by default)", async () => {
    const set = await withEnv(loadServerConfig, { MAX_CONNECTIONS: "100" })
    expect(Exit.isSuccess(set) && set.value.maxConnections).toBe(100)
    const unset = await withEnv(loadServerConfig, {})
    expect(Exit.isSuccess(unset) && unset.value.maxConnections).toBe(4096)
  })

  it("SETTLE_WHEN_IDLE is now or wait; unset, the store chooses by backend", async () => {
    const unset = await withEnv(loadServerConfig, {})
    expect(Exit.isSuccess(unset) && Option.isNone(unset.value.settleWhenIdle)).toBe(true)
    const set = await withEnv(loadServerConfig, { SETTLE_WHEN_IDLE: "wait" })
    expect(Exit.isSuccess(set) && Option.getOrUndefined(set.value.settleWhenIdle)).toBe("wait")
    const now = await withEnv(loadServerConfig, { SETTLE_WHEN_IDLE: "now" })
    expect(Exit.isSuccess(now) && Option.getOrUndefined(now.value.settleWhenIdle)).toBe("now")
  })

  it("LOG_FORMAT is text by default, or json; METRICS_TOKEN is kept redacted", async () => {
    const unset = await withEnv(loadServerConfig, {})
    expect(Exit.isSuccess(unset) && unset.value.logFormat).toBe("text")
    expect(Exit.isSuccess(unset) && Option.isNone(unset.value.metricsToken)).toBe(true)
    const set = await withEnv(loadServerConfig, { LOG_FORMAT: "json", METRICS_TOKEN: "m".repeat(30) })
    expect(Exit.isSuccess(set) && set.value.logFormat).toBe("json")
    expect(Exit.isSuccess(set) && Option.map(set.value.metricsToken, Redacted.value)).toEqual(Option.some("m".repeat(30)))
  })

  it("one line from effect's schema errors", () => {
    expect(oneLine("SchemaError(Expected a string representing a finite number\n  at [\"PORT\"])"))
      .toBe("PORT: Expected a string representing a finite number")
    expect(oneLine("SchemaError(PORT must be between 0 and 65535\n  at [\"PORT\"])")).toBe("PORT must be between 0 and 65535")
  })
})
