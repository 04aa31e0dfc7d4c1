import { Config, Effect, Layer, Option, Redacted, Result } from "effect"
import { isIPv4, isIPv6 } from "node:net"
import type { BtcUsdRate } from "../src/domain/Money.ts"
import { RateSource, RateStatus } from "../src/ports/RateSource.ts"
import type { CardRail, LightningRail, PaymentSink, RailRoute } from "../src/ports/Rails.ts"
import { fileBytes, fileText, type InvalidConfig, invalid, load, oneOf, refine, required, text } from "./config.ts"
import * as DevCard from "./rails/DevCard.ts"
import * as DevLightning from "./rails/DevLightning.ts"
import * as Lnd from "./rails/Lnd.ts"
import * as Stripe from "./rails/Stripe.ts"
import * as Exchanges from "./rates/Exchanges.ts"

/**
 * Which payment rails and which BTC/USD rate source the server uses, from
 * the environment. The dev rails are the default, so `npm start` can be
 * funded end to end with no credentials; their payer routes are mounted only
 * while they are the configured rails.
 */

export type LightningConfig =
  | { readonly kind: "dev" }
  | { readonly kind: "lnd"; readonly lnd: Lnd.LndConfig }

export type CardConfig =
  | { readonly kind: "dev"; readonly publicUrl: string }
  | { readonly kind: "stripe"; readonly stripe: Stripe.StripeConfig }

export type RateConfig =
  | { readonly kind: "none" }
  | { readonly kind: "fixed"; readonly rate: BtcUsdRate }
  | { readonly kind: "exchanges"; readonly sources: ReadonlyArray<Exchanges.ExchangeName> }

export interface PaymentConfig {
  readonly lightning: LightningConfig
  readonly card: CardConfig
  readonly rate: RateConfig
  /**
   * The dev rails are on and reachable from the network (HOST is not a
   * loopback address, or TRUST_PROXY says proxies forward to it), which the
   * operator accepted with DEV_RAILS_PUBLIC=on: start-up warns loudly.
   */
  readonly devRailsPublic: boolean
}

/**
 * Whether HOST only accepts connections from this machine: `localhost`,
 * 127.0.0.0/8, `::1` (also written in full, in brackets, or IPv4-mapped).
 * Anything else (`0.0.0.0`, `::`, a LAN address, a host name) may be reached
 * from the network.
 */
export const isLoopbackHost = (host: string): boolean => {
  const bare = host.trim().toLowerCase().replace(/^\[(.*)\]$/, "$1")
  if (bare === "localhost") return true
  if (isIPv4(bare)) return bare.startsWith("127.")
  if (!isIPv6(bare)) return false
  const mapped = /^(?:0{0,4}:){0,5}:?ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(bare)
  if (mapped !== null) return mapped[1]!.startsWith("127.")
  const groups = bare.split("::")
  const head = groups[0] === "" ? [] : groups[0]!.split(":")
  const tail = groups.length === 2 && groups[1] !== "" ? groups[1]!.split(":") : []
  const all = groups.length === 2 ? [...head, ...Array(8 - head.length - tail.length).fill("0"), ...tail] : head
  return all.length === 8 && all.slice(0, 7).every((g) => parseInt(g, 16) === 0) && parseInt(all[7]!, 16) === 1
}

/** Names of the dev rails that are on, e.g. `LIGHTNING_RAIL=dev, CARD_RAIL=dev`. */
export const describeDevRails = (config: Pick<PaymentConfig, "lightning" | "card">): string =>
  [
    ...(config.lightning.kind === "dev" ? ["LIGHTNING_RAIL=dev"] : []),
    ...(config.card.kind === "dev" ? ["CARD_RAIL=dev"] : [])
  ].join(", ")

/** The start-up warning when the dev rails are served on a non-loopback HOST (DEV_RAILS_PUBLIC=on). */
export const devRailsPublicWarning = (config: PaymentConfig, host: string): string =>
  `Dev payment rails (${describeDevRails(config)}) are reachable from the network (HOST=${host}) because DEV_RAILS_PUBLIC=on: ` +
  "anyone who can reach this port can credit any wallet without paying. Never use this with real users or real money"

const railChoice = <const W extends string>(name: string, words: ReadonlyArray<W>, fallback: W) =>
  load(oneOf(name, words).pipe(Config.withDefault(fallback)))

const httpUrl = (name: string) => text(name, (url) => /^https?:\/\/[^/]+/.test(url) || "must be an http(s) URL")

const lndConfig: Effect.Effect<Lnd.LndConfig, InvalidConfig> = Effect.gen(function*() {
  const restUrl = yield* required("LND_REST_URL", "when LIGHTNING_RAIL=lnd", httpUrl("LND_REST_URL"))
  // A macaroon file wins over the hex; either is read and checked here, once.
  const macaroonFile = yield* load(Config.option(fileBytes("LND_MACAROON_PATH")))
  const macaroonHex = Option.isSome(macaroonFile)
    ? Buffer.from(macaroonFile.value).toString("hex")
    : yield* required(
      "LND_MACAROON_HEX",
      "(or LND_MACAROON_PATH) when LIGHTNING_RAIL=lnd",
      text("LND_MACAROON_HEX", (hex) => /^[0-9a-fA-F]+$/.test(hex) || "must be hex")
    )
  const tlsCertPem = Option.getOrUndefined(yield* load(Config.option(fileText("LND_TLS_CERT_PATH"))))
  return { restUrl, macaroonHex: Redacted.make(macaroonHex), tlsCertPem }
})

const stripeConfig = (publicUrl: string): Effect.Effect<Stripe.StripeConfig, InvalidConfig> =>
  Effect.gen(function*() {
    const secretKey = yield* required(
      "STRIPE_SECRET_KEY",
      "when CARD_RAIL=stripe",
      text("STRIPE_SECRET_KEY", (key) => /^(sk|rk)_/.test(key) || "must be a secret (sk_…) or restricted (rk_…) key")
    )
    const webhookSecret = yield* required(
      "STRIPE_WEBHOOK_SECRET",
      "when CARD_RAIL=stripe",
      text("STRIPE_WEBHOOK_SECRET", (secret) => secret.startsWith("whsec_") || "must start with whsec_")
    )
    const urls = yield* load(Config.all({
      successUrl: text("STRIPE_SUCCESS_URL").pipe(Config.withDefault(`${publicUrl}/funded`)),
      cancelUrl: text("STRIPE_CANCEL_URL").pipe(Config.withDefault(`${publicUrl}/funding-cancelled`))
    }))
    return { secretKey: Redacted.make(secretKey), webhookSecret: Redacted.make(webhookSecret), ...urls }
  })

const rateSources: Config.Config<ReadonlyArray<Exchanges.ExchangeName>> = text("RATE_SOURCES").pipe(
  refine("RATE_SOURCES", (value) => {
    const names = value.split(",").map((s) => s.trim()).filter((s) => s !== "")
    const known = (name: string): name is Exchanges.ExchangeName => (Exchanges.EXCHANGES as ReadonlyArray<string>).includes(name)
    return names.length > 0 && names.every(known)
      ? Result.succeed(names)
      : Result.fail(`must list some of ${Exchanges.EXCHANGES.join(", ")}`)
  })
)

export const loadPaymentConfig = (options: {
  readonly host: string
  readonly port: number
  readonly fixedRate: Option.Option<BtcUsdRate>
  /** TRUST_PROXY: reverse proxies in front of the server, which make even a loopback HOST public. */
  readonly trustProxyHops?: number
}): Effect.Effect<PaymentConfig, InvalidConfig> =>
  Effect.gen(function*() {
    const lightning: LightningConfig = (yield* railChoice("LIGHTNING_RAIL", ["dev", "lnd"], "dev")) === "dev"
      ? { kind: "dev" }
      : { kind: "lnd", lnd: yield* lndConfig }

    const publicHost = options.host === "0.0.0.0" || options.host === "::" ? "127.0.0.1" : options.host
    const publicUrl = yield* load(httpUrl("PUBLIC_URL").pipe(Config.withDefault(`http://${publicHost}:${options.port}`)))

    const card: CardConfig = (yield* railChoice("CARD_RAIL", ["dev", "stripe"], "dev")) === "dev"
      ? { kind: "dev", publicUrl }
      : { kind: "stripe", stripe: yield* stripeConfig(publicUrl) }

    const sources = yield* load(Config.option(rateSources))
    if (Option.isSome(options.fixedRate) && Option.isSome(sources)) {
      return yield* invalid("set either BTC_USD_RATE or RATE_SOURCES, not both")
    }
    const rate: RateConfig = Option.isSome(sources)
      ? { kind: "exchanges", sources: sources.value }
      : Option.isSome(options.fixedRate)
      ? { kind: "fixed", rate: options.fixedRate.value }
      : { kind: "none" }

    // The dev rails' payer routes credit any wallet for free: on an address
    // other machines can reach, only if the operator says so explicitly.
    const publicOptIn = yield* railChoice("DEV_RAILS_PUBLIC", ["on", "off"], "off")
    const devRails = describeDevRails({ lightning, card })
    const proxied = (options.trustProxyHops ?? 0) > 0
    const devRailsPublic = devRails !== "" && (!isLoopbackHost(options.host) || proxied)
    if (devRailsPublic && publicOptIn !== "on") {
      const exposure = proxied && isLoopbackHost(options.host)
        ? `HOST=${options.host} is served through reverse proxies (TRUST_PROXY=${options.trustProxyHops})`
        : `HOST=${options.host} is not a loopback address`
      return yield* invalid(
        `${exposure} and the dev payment rails are on (${devRails}), ` +
          "so anyone who can reach the server could credit any wallet without paying; " +
          "configure real rails (LIGHTNING_RAIL=lnd, CARD_RAIL=stripe), keep the server on 127.0.0.1, " +
          "or set DEV_RAILS_PUBLIC=on to accept this"
      )
    }
    return { lightning, card, rate, devRailsPublic }
  })

/** The two rails. */
export const railsLayer = (config: PaymentConfig, dataDir: string | undefined): Layer.Layer<LightningRail | CardRail> =>
  Layer.mergeAll(
    config.lightning.kind === "dev" ? DevLightning.layer({ dataDir }) : Lnd.layer(config.lightning.lnd),
    config.card.kind === "dev" ? DevCard.layer({ publicUrl: config.card.publicUrl }) : Stripe.layer(config.card.stripe)
  )

/** What follows payments in the background (LND's invoice subscription). */
export const followersLayer = (config: PaymentConfig): Layer.Layer<never, never, PaymentSink> =>
  config.lightning.kind === "lnd" ? Lnd.subscriber(config.lightning.lnd) : Layer.empty

/**
 * The routes the configured rails serve outside the API contract: Stripe's
 * webhook, or the dev rails' payer routes (mounted only while the dev rails
 * are the configured ones; the public-bind guard above decides whether they
 * may be on at all).
 */
export const railRoutes = (config: Pick<PaymentConfig, "lightning" | "card">): ReadonlyArray<RailRoute> => [
  ...(config.lightning.kind === "dev" ? DevLightning.routes : []),
  ...(config.card.kind === "dev" ? DevCard.routes : Stripe.routes(config.card.stripe))
]

/** RateSource and the operator's RateStatus. */
export const rateLayer = (config: Omit<PaymentConfig, "devRailsPublic">): Layer.Layer<RateSource | RateStatus> => {
  switch (config.rate.kind) {
    case "fixed":
      return Layer.merge(RateSource.fixed(config.rate.rate), RateStatus.fixed(config.rate.rate))
    case "exchanges":
      return Exchanges.layerNode({ sources: config.rate.sources })
    case "none":
      return Layer.merge(RateSource.none, RateStatus.none)
  }
}
