import { Clock, Context, Effect, Layer, Option } from "effect"
import type { RateSnapshot } from "../domain/Ledger.ts"
import { type BtcUsdRate, formatBtcUsdRate } from "../domain/Money.ts"

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

/** One source's answer at the last refresh. */
export interface SourceStatus {
  readonly name: string
  readonly ok: boolean
  /** USD per BTC as decimal text, when the source answered. */
  readonly rate?: string
  /** Why the source's answer was not used. */
  readonly error?: string
  /** When the answer (or the failure) came in. */
  readonly at: Date
}

/** What the operator sees at `GET /v1/admin/rate`. */
export interface RateReport {
  /** The last quote, USD per BTC as decimal text; null when there never was one. */
  readonly rate: string | null
  readonly asOf: Date | null
  /** True when `RateSource.current` is None: no quote, or one too old to use. */
  readonly stale: boolean
  readonly sources: ReadonlyArray<SourceStatus>
}

/** How the rate source is doing, for the operator; provided beside `RateSource` by whatever implements it. */
export class RateStatus extends Context.Service<RateStatus, {
  readonly status: Effect.Effect<RateReport>
}>()("spendgate/RateStatus") {
  /** For a rate fixed in configuration: always fresh, quoted "now". */
  static readonly fixed = (rate: BtcUsdRate): Layer.Layer<RateStatus> =>
    Layer.succeed(RateStatus, {
      status: Effect.map(Clock.currentTimeMillis, (now) => {
        const at = new Date(now)
        const text = formatBtcUsdRate(rate)
        return { rate: text, asOf: at, stale: false, sources: [{ name: "fixed", ok: true, rate: text, at }] }
      })
    })

  /** No rate at all: stale, no sources. */
  static readonly none: Layer.Layer<RateStatus> = Layer.succeed(RateStatus, {
    status: Effect.succeed({ rate: null, asOf: null, stale: true, sources: [] })
  })
}
