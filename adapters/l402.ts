import { Config, Effect } from "effect"
import { chmod, mkdir, writeFile } from "node:fs/promises"
import { join } from "node:path"
import type { SalesAccount } from "../src/ports/L402Store.ts"
import type { L402SellSettings } from "../src/l402/Seller.ts"
import { check, type InvalidConfig, invalid, load, oneOf } from "./config.ts"

/**
 * Selling capabilities over L402 (docs/l402.md), from the environment:
 *
 * - `L402_SELL`: `on` or `off` (default off);
 * - `L402_MARGIN_PERCENT`: added to each quote, whole percent 0 to 1000 (default 10);
 * - `L402_TOKEN_TTL_SECONDS`: how long a token is accepted, 60 to 86400 (default 3600);
 * - `L402_CALLS_PER_TOKEN`: calls one token pays for, 1 to 100 (default 1);
 * - `L402_ANONYMOUS_PER_MINUTE`: requests per minute per client address
 *   without an API key (default 100).
 *
 * Selling needs a BTC/USD rate (BTC_USD_RATE or RATE_SOURCES): a price in
 * USD becomes an invoice in sats.
 */

export interface L402SellConfig {
  readonly settings: L402SellSettings
  readonly anonymousPerMinute: number
}

const whole = (name: string, min: number, max: number, fallback: number) =>
  Config.Int(name).pipe(
    check(name, (n) => (n >= min && n <= max) || `must be a whole number from ${min} to ${max}`),
    Config.withDefault(fallback)
  )

const sellConfig = Config.all({
  sell: oneOf("L402_SELL", ["on", "off"] as const).pipe(Config.withDefault<"on" | "off">("off")),
  marginPercent: whole("L402_MARGIN_PERCENT", 0, 1000, 10),
  tokenTtlSeconds: whole("L402_TOKEN_TTL_SECONDS", 60, 86_400, 3600),
  callsPerToken: whole("L402_CALLS_PER_TOKEN", 1, 100, 1),
  anonymousPerMinute: whole("L402_ANONYMOUS_PER_MINUTE", 1, 1_000_000, 100)
})

/** Undefined when L402_SELL is off; `hasRate`: whether BTC_USD_RATE or RATE_SOURCES is set. */
export const loadL402SellConfig = (options: { readonly hasRate: boolean }): Effect.Effect<L402SellConfig | undefined, InvalidConfig> =>
  Effect.gen(function*() {
    const config = yield* load(sellConfig)
    if (config.sell === "off") return undefined
    if (!options.hasRate) {
      return yield* invalid("L402_SELL=on needs a BTC/USD rate to price invoices in sats: set BTC_USD_RATE or RATE_SOURCES")
    }
    return {
      settings: {
        marginPercent: config.marginPercent,
        tokenTtlSeconds: config.tokenTtlSeconds,
        callsPerToken: config.callsPerToken
      },
      anonymousPerMinute: config.anonymousPerMinute
    }
  })

export const describeL402Sell = (config: L402SellConfig | undefined): string =>
  config === undefined
    ? "off"
    : `on (margin ${config.settings.marginPercent}%, tokens valid ${config.settings.tokenTtlSeconds} s for ` +
      `${config.settings.callsPerToken} call(s), ${config.anonymousPerMinute} anonymous requests a minute per address)`

export const SALES_KEY_FILE_NAME = "l402-sales-agent.key"

/**
 * Keeps the sales agent's API key, shown nowhere else, in
 * `${dataDir}/l402-sales-agent.key` (mode 0600; never overwritten), with its
 * account and agent ids. With it the operator reads the sales wallet and sets
 * the sales agent's policy like any owner. A failure to write it is logged,
 * not fatal: selling works without it.
 */
export const keepSalesKey = (dataDir: string) => (created: SalesAccount & { readonly apiKey: string }): Effect.Effect<void> => {
  const path = join(dataDir, SALES_KEY_FILE_NAME)
  const write = async () => {
    await mkdir(dataDir, { recursive: true })
    await writeFile(
      path,
      `# The L402 sales agent (owner of the sales account): docs/l402.md\n` +
        `account=${created.accountId}\nagent=${created.agentId}\napiKey=${created.apiKey}\n`,
      { mode: 0o600, flag: "wx" }
    )
    await chmod(path, 0o600)
  }
  return Effect.tryPromise({ try: write, catch: (error) => (error instanceof Error ? error.message : String(error)) }).pipe(
    Effect.andThen(Effect.logInfo(`L402 sales account ${created.accountId} created; its owner key is in ${path}`)),
    Effect.catch((error) =>
      Effect.logWarning(`L402 sales account ${created.accountId} created, but its key could not be kept in ${path}: ${error}`)
    )
  )
}
