import { Config, Effect, Layer, Option, Redacted } from "effect"
import { readFileSync } from "node:fs"
import { isIPv4, isIPv6 } from "node:net"
import type { BtcUsdRate } from "../src/domain/Money.ts"
import { RateSource, RateStatus } from "../src/ports/RateSource.ts"
import type { CardRail, LightningRail, PaymentSink, RailRoute } from "../src/ports/Rails.ts"
import { InvalidConfig } from "./config.ts"
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

const fail = (message: string) => Effect.fail(new InvalidConfig({ message: `Invalid configuration: ${message}` }))

const optionalString = (name: string) =>
  Effect.mapError(Config.option(Config.String(name)), () => new InvalidConfig({ message: `Invalid configuration: ${name}` }))

const required = (name: string, why: string) =>
  Effect.flatMap(optionalString(name), (value) =>
    Option.isSome(value) && value.value.trim() !== "" ? Effect.succeed(value.value.trim()) : fail(`${name} is required ${why}`))

const cannotRead = (name: string, path: string) => new InvalidConfig({ message: `Invalid configuration: ${name}: cannot read ${path}` })

const readFile = (name: string, path: string) =>
  Effect.try({ try: () => readFileSync(path, "utf8"), catch: () => cannotRead(name, path) })

const readBytes = (name: string, path: string) =>
  Effect.try({ try: () => readFileSync(path), catch: () => cannotRead(name, path) })

export const loadPaymentConfig = (options: {
  readonly host: string
  readonly port: number
  readonly fixedRate: Option.Option<BtcUsdRate>
  /** TRUST_PROXY: reverse proxies in front of the server, which make even a loopback HOST public. */
  readonly trustProxyHops?: number
}): Effect.Effect<PaymentConfig, InvalidConfig> =>
  Effect.gen(function*() {
    const lightningKind = Option.getOrElse(yield* optionalString("LIGHTNING_RAIL"), () => "dev")
    let lightning: LightningConfig
    if (lightningKind === "dev") {
      lightning = { kind: "dev" }
    } else if (lightningKind === "lnd") {
      const restUrl = yield* required("LND_REST_URL", "when LIGHTNING_RAIL=lnd")
      if (!/^https?:\/\//.test(restUrl)) return yield* fail("LND_REST_URL must be an http(s) URL")
      const macaroonPath = yield* optionalString("LND_MACAROON_PATH")
      if (Option.isSome(macaroonPath) && macaroonPath.value.trim() === "") return yield* fail("LND_MACAROON_PATH must not be empty")
      const macaroonHex = Option.isSome(macaroonPath)
        ? Buffer.from(yield* readBytes("LND_MACAROON_PATH", macaroonPath.value.trim())).toString("hex")
        : yield* required("LND_MACAROON_HEX", "(or LND_MACAROON_PATH) when LIGHTNING_RAIL=lnd")
      if (!/^[0-9a-fA-F]+$/.test(macaroonHex)) return yield* fail("LND_MACAROON_HEX must be hex")
      const certPath = yield* optionalString("LND_TLS_CERT_PATH")
      const tlsCertPem = Option.isSome(certPath) ? yield* readFile("LND_TLS_CERT_PATH", certPath.value) : undefined
      lightning = { kind: "lnd", lnd: { restUrl, macaroonHex: Redacted.make(macaroonHex), tlsCertPem } }
    } else {
      return yield* fail("LIGHTNING_RAIL must be dev or lnd")
    }

    const publicHost = options.host === "0.0.0.0" || options.host === "::" ? "127.0.0.1" : options.host
    const publicUrl = Option.getOrElse(yield* optionalString("PUBLIC_URL"), () => `http://${publicHost}:${options.port}`)
    if (!/^https?:\/\/[^/]+/.test(publicUrl)) return yield* fail("PUBLIC_URL must be an http(s) URL")

    const cardKind = Option.getOrElse(yield* optionalString("CARD_RAIL"), () => "dev")
    let card: CardConfig
    if (cardKind === "dev") {
      card = { kind: "dev", publicUrl }
    } else if (cardKind === "stripe") {
      const secretKey = yield* required("STRIPE_SECRET_KEY", "when CARD_RAIL=stripe")
      const webhookSecret = yield* required("STRIPE_WEBHOOK_SECRET", "when CARD_RAIL=stripe")
      if (!/^(sk|rk)_/.test(secretKey)) return yield* fail("STRIPE_SECRET_KEY must be a secret (sk_…) or restricted (rk_…) key")
      if (!webhookSecret.startsWith("whsec_")) return yield* fail("STRIPE_WEBHOOK_SECRET must start with whsec_")
      card = {
        kind: "stripe",
        stripe: {
          secretKey: Redacted.make(secretKey),
          webhookSecret: Redacted.make(webhookSecret),
          successUrl: Option.getOrElse(yield* optionalString("STRIPE_SUCCESS_URL"), () => `${publicUrl}/funded`),
          cancelUrl: Option.getOrElse(yield* optionalString("STRIPE_CANCEL_URL"), () => `${publicUrl}/funding-cancelled`)
        }
      }
    } else {
      return yield* fail("CARD_RAIL must be dev or stripe")
    }

    const sources = yield* optionalString("RATE_SOURCES")
    let rate: RateConfig = { kind: "none" }
    if (Option.isSome(options.fixedRate) && Option.isSome(sources)) {
      return yield* fail("set either BTC_USD_RATE or RATE_SOURCES, not both")
    }
    if (Option.isSome(options.fixedRate)) rate = { kind: "fixed", rate: options.fixedRate.value }
    if (Option.isSome(sources)) {
      const names = sources.value.split(",").map((s) => s.trim()).filter((s) => s !== "")
      const unknown = names.filter((n) => !(Exchanges.EXCHANGES as ReadonlyArray<string>).includes(n))
      if (names.length === 0 || unknown.length > 0) {
        return yield* fail(`RATE_SOURCES must list some of ${Exchanges.EXCHANGES.join(", ")}`)
      }
      rate = { kind: "exchanges", sources: names as ReadonlyArray<Exchanges.ExchangeName> }
    }

    // The dev rails' payer routes credit any wallet for free: on an address
    // other machines can reach, only if the operator says so explicitly.
    const publicOptIn = yield* optionalString("DEV_RAILS_PUBLIC")
    const publicValue = Option.getOrElse(publicOptIn, () => "off").trim()
    if (publicValue !== "on" && publicValue !== "off") return yield* fail("DEV_RAILS_PUBLIC must be on or off")
    const devRails = describeDevRails({ lightning, card })
    const proxied = (options.trustProxyHops ?? 0) > 0
    const devRailsPublic = devRails !== "" && (!isLoopbackHost(options.host) || proxied)
    if (devRailsPublic && publicValue !== "on") {
      const exposure = proxied && isLoopbackHost(options.host)
        ? `HOST=${options.host} is served through reverse proxies (TRUST_PROXY=${options.trustProxyHops})`
        : `HOST=${options.host} is not a loopback address`
      return yield* fail(
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
