import { Context, Effect, Layer, Option } from "effect"
import type { RateSnapshot } from "../domain/Ledger.ts"
import type { BtcUsdRate } from "../domain/Money.ts"

/**
 * Where the BTC/USD rate comes from. `current` is None when no rate fresh
 * enough to price a charge is known; then the sats pocket cannot pay.
 */
export class RateSource extends Context.Service<RateSource, {
  readonly current: Effect.Effect<Option.Option<RateSnapshot>>
}>()("spendgate/RateSource") {
  /** A fixed rate from configuration, quoted "now" every time. */
  static readonly fixed = (rate: BtcUsdRate): Layer.Layer<RateSource> =>
    Layer.succeed(RateSource, {
      current: Effect.clockWith((clock) =>
        Effect.succeed(Option.some({ rate, asOf: new Date(clock.currentTimeMillisUnsafe()) }))
      )
    })

  /** No rate at all: only the usd pocket can pay. */
  static readonly none: Layer.Layer<RateSource> = Layer.succeed(RateSource, { current: Effect.succeed(Option.none()) })
}
