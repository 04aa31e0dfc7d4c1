/**
 * The BTC/USD rate from public exchange tickers (Coinbase, Kraken, Bitstamp).
 *
 * Every `refreshEveryMs` all configured exchanges are asked at once; the rate is the
 * median of those that answered with a plausible price, stamped with the clock time
 * at which the refresh began. `RateSource.current` serves that quote while it is
 * younger than `maxAgeMs` and None afterwards, so a rate that cannot be refreshed
 * makes sats-funded charges fail instead of using a wrong price.
 *
 * A refresh in which fewer than `minSources` exchanges answered produces no quote; the
 * previous quote (itself backed by at least `minSources` exchanges) is kept and simply
 * ages out. Until a refresh has succeeded there is no quote at all.
 *
 * Prices travel as JSON strings and are read with `parseBtcUsdRate`, never through a
 * float; the median is integer arithmetic on micro-dollars.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Clock, Context, Data, Effect, Layer, Option, Ref, Result, type Scope, Stream } from "effect"
import { HttpClient, type HttpClientError } from "effect/http"
import type { RateSnapshot } from "../../src/domain/Ledger.ts"
import { type BtcUsdRate, formatBtcUsdRate, parseBtcUsdRate } from "../../src/domain/Money.ts"
import { type RateReport, RateSource, RateStatus, type SourceStatus } from "../../src/ports/RateSource.ts"

// ---------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------

export type ExchangeName = "coinbase" | "kraken" | "bitstamp"

export const EXCHANGES: ReadonlyArray<ExchangeName> = ["coinbase", "kraken", "bitstamp"]

/** The exchanges' public API hosts. */
export const DEFAULT_BASE_URLS: Readonly<Record<ExchangeName, string>> = {
  coinbase: "https://api.coinbase.com",
  kraken: "https://api.kraken.com",
  bitstamp: "https://www.bitstamp.net"
}

export const DEFAULT_REFRESH_EVERY_MS = 60_000
export const DEFAULT_MAX_AGE_MS = 10 * 60_000
export const DEFAULT_TIMEOUT_MS = 5_000
/** A ticker is a few hundred bytes; anything this large is not one. */
export const DEFAULT_MAX_BODY_BYTES = 64 * 1024

/** Prices outside this range (USD per BTC, inclusive) are treated as a broken source. */
export const MIN_PLAUSIBLE_MICRO_USD_PER_BTC = 1_000n * 1_000_000n
export const MAX_PLAUSIBLE_MICRO_USD_PER_BTC = 10_000_000n * 1_000_000n

export interface Options {
  /** Which exchanges to ask; default all three. */
  readonly sources?: ReadonlyArray<ExchangeName>
  /** Base URL per exchange (scheme, host and optional path prefix); default the public API hosts. */
  readonly baseUrls?: Partial<Record<ExchangeName, string>>
  /** Pause between the end of one refresh and the start of the next; default 60 s. */
  readonly refreshEveryMs?: number
  /** A quote this old or older is not served; default 10 min. */
  readonly maxAgeMs?: number
  /** Per-exchange limit for connecting, the response and its body; default 5 s. */
  readonly timeoutMs?: number
  /** Exchanges that must answer for a refresh to produce a quote; default 1. */
  readonly minSources?: number
  /** Largest response body accepted from an exchange; default 64 KiB. */
  readonly maxBodyBytes?: number
}

interface Settings {
  readonly sources: ReadonlyArray<{ readonly name: ExchangeName; readonly url: string }>
  readonly refreshEveryMs: number
  readonly maxAgeMs: number
  readonly timeoutMs: number
  readonly minSources: number
  readonly maxBodyBytes: number
}

const positive = (name: string, value: number | undefined, fallback: number): number => {
  const resolved = value ?? fallback
  if (!Number.isFinite(resolved) || resolved <= 0) {
    throw new RangeError(`Exchanges: ${name} must be a positive number of milliseconds, got ${resolved}`)
  }
  return resolved
}

/** Checks the options once; a mistake is a programming or configuration error (a defect). */
const resolveSettings = (options: Options): Settings => {
  const names = options.sources ?? EXCHANGES
  if (names.length === 0) throw new RangeError("Exchanges: at least one source is required")
  for (const name of names) {
    if (!EXCHANGES.includes(name)) throw new RangeError(`Exchanges: unknown source ${JSON.stringify(name)}`)
  }
  if (new Set(names).size !== names.length) throw new RangeError("Exchanges: a source is listed twice")
  const sources = names.map((name) => {
    const base = options.baseUrls?.[name] ?? DEFAULT_BASE_URLS[name]
    let parsed: URL
    try {
      parsed = new URL(base)
    } catch {
      throw new RangeError(`Exchanges: the ${name} base URL is not a URL: ${JSON.stringify(base)}`)
    }
    if (parsed.protocol !== "https:" && parsed.protocol !== "http:") {
      throw new RangeError(`Exchanges: the ${name} base URL must be http(s): ${JSON.stringify(base)}`)
    }
    return { name, url: base.replace(/\/+$/, "") + ENDPOINTS[name].path }
  })
  const minSources = options.minSources ?? 1
  if (!Number.isInteger(minSources) || minSources < 1 || minSources > sources.length) {
    throw new RangeError(`Exchanges: minSources must be an integer between 1 and ${sources.length}, got ${minSources}`)
  }
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
  if (!Number.isInteger(maxBodyBytes) || maxBodyBytes <= 0) {
    throw new RangeError(`Exchanges: maxBodyBytes must be a positive integer, got ${maxBodyBytes}`)
  }
  return {
    sources,
    refreshEveryMs: positive("refreshEveryMs", options.refreshEveryMs, DEFAULT_REFRESH_EVERY_MS),
    maxAgeMs: positive("maxAgeMs", options.maxAgeMs, DEFAULT_MAX_AGE_MS),
    timeoutMs: positive("timeoutMs", options.timeoutMs, DEFAULT_TIMEOUT_MS),
    minSources,
    maxBodyBytes
  }
}

// ---------------------------------------------------------------------------
// Wire formats
// ---------------------------------------------------------------------------

type Extract = (body: unknown) => Result.Result<string, string>

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** What a field holds, for error messages that never echo large or odd values. */
const describe = (value: unknown): string =>
  typeof value === "string" ? JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value) :
    value === null ? "null" :
    Array.isArray(value) ? "an array" :
    typeof value

/** GET {base}/v2/prices/BTC-USD/spot -> { "data": { "amount": "65000.12", "base": "BTC", "currency": "USD" } } */
const coinbase: Extract = (body) => {
  const data = isRecord(body) ? body.data : undefined
  if (!isRecord(data)) return Result.fail("no \"data\" object")
  if (data.base !== undefined && data.base !== "BTC") return Result.fail(`unexpected base ${describe(data.base)}`)
  if (data.currency !== undefined && data.currency !== "USD") {
    return Result.fail(`unexpected currency ${describe(data.currency)}`)
  }
  if (typeof data.amount !== "string") return Result.fail(`"data.amount" is ${describe(data.amount)}, not a string`)
  return Result.succeed(data.amount)
}

/**
 * GET {base}/0/public/Ticker?pair=XBTUSD ->
 * { "error": [], "result": { "XXBTZUSD": { "c": ["65000.10000", "0.001"], ... } } }
 * The result is keyed by Kraken's own pair name, which is not the one asked for.
 */
const kraken: Extract = (body) => {
  if (!isRecord(body)) return Result.fail("not a JSON object")
  if (body.error !== undefined) {
    if (!Array.isArray(body.error)) return Result.fail("\"error\" is not an array")
    if (body.error.length > 0) {
      return Result.fail(`exchange error: ${body.error.slice(0, 3).map((e) => String(e).slice(0, 80)).join("; ")}`)
    }
  }
  if (!isRecord(body.result)) return Result.fail("no \"result\" object")
  const pairs = Object.keys(body.result)
  if (pairs.length !== 1) return Result.fail(`expected one pair in "result", got ${pairs.length}`)
  const ticker = body.result[pairs[0]!]
  const last = isRecord(ticker) && Array.isArray(ticker.c) ? ticker.c[0] : undefined
  if (typeof last !== "string") return Result.fail(`last trade price "c[0]" is ${describe(last)}, not a string`)
  return Result.succeed(last)
}

/** GET {base}/api/v2/ticker/btcusd/ -> { "last": "65000", "bid": ..., "ask": ..., ... } */
const bitstamp: Extract = (body) => {
  if (!isRecord(body)) return Result.fail("not a JSON object")
  if (typeof body.last !== "string") return Result.fail(`"last" is ${describe(body.last)}, not a string`)
  return Result.succeed(body.last)
}

const ENDPOINTS: Readonly<Record<ExchangeName, { readonly path: string; readonly extract: Extract }>> = {
  coinbase: { path: "/v2/prices/BTC-USD/spot", extract: coinbase },
  kraken: { path: "/0/public/Ticker?pair=XBTUSD", extract: kraken },
  bitstamp: { path: "/api/v2/ticker/btcusd/", extract: bitstamp }
}

/** A price text as a rate, refusing anything that cannot be a BTC/USD price. */
export const plausibleRate = (price: string): Result.Result<BtcUsdRate, string> => {
  const parsed = parseBtcUsdRate(price)
  if (Result.isFailure(parsed)) return Result.fail(`price ${describe(price)} refused: ${parsed.failure.message}`)
  const micro = parsed.success.microUsdPerBtc
  if (micro < MIN_PLAUSIBLE_MICRO_USD_PER_BTC || micro > MAX_PLAUSIBLE_MICRO_USD_PER_BTC) {
    return Result.fail(`price ${describe(price)} is outside the plausible range`)
  }
  return Result.succeed(parsed.success)
}

/**
 * The median of some rates. For an even count it is the mean of the two middle values,
 * rounded down to the micro-dollar.
 */
export const medianRate = (rates: ReadonlyArray<BtcUsdRate>): BtcUsdRate => {
  if (rates.length === 0) throw new RangeError("medianRate: no rates")
  const sorted = rates.map((rate) => rate.microUsdPerBtc).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
  const middle = sorted.length >> 1
  const microUsdPerBtc = sorted.length % 2 === 1
    ? sorted[middle]!
    // Both values are positive, so truncating division rounds down.
    : (sorted[middle - 1]! + sorted[middle]!) / 2n
  return { microUsdPerBtc }
}

// ---------------------------------------------------------------------------
// Fetching
// ---------------------------------------------------------------------------

class SourceError extends Data.TaggedError("SourceError")<{ readonly message: string }> {}

/** A short reason for a transport or body failure, without the request's details. */
const describeHttpError = (error: HttpClientError.HttpClientError): string => {
  const cause: unknown = error.reason._tag === "TransportError" || error.reason._tag === "DecodeError"
    ? error.reason.cause
    : undefined
  const detail = (value: unknown): string | undefined => {
    if (!(value instanceof Error)) return undefined
    const code = (value as { code?: unknown }).code
    if (typeof code === "string") return code
    return detail((value as { cause?: unknown }).cause) ?? value.message
  }
  const text = detail(cause)
  const kind = error.reason._tag === "TransportError" ? "transport error" : `HTTP client error (${error.reason._tag})`
  return (text === undefined ? kind : `${kind}: ${text}`).slice(0, 200)
}

/** Reads a body of at most `maxBytes`, failing as soon as more arrives. */
const readBounded = (stream: Stream.Stream<Uint8Array, HttpClientError.HttpClientError>, maxBytes: number) =>
  Effect.suspend(() => {
    const chunks: Array<Uint8Array> = []
    let size = 0
    return stream.pipe(
      Stream.mapError((error) => new SourceError({ message: describeHttpError(error) })),
      Stream.runForEach((chunk) => {
        size += chunk.byteLength
        if (size > maxBytes) return Effect.fail(new SourceError({ message: `response body larger than ${maxBytes} bytes` }))
        chunks.push(chunk)
        return Effect.void
      }),
      Effect.as(chunks),
      Effect.map((parts) => {
        const bytes = new Uint8Array(size)
        let offset = 0
        for (const part of parts) {
          bytes.set(part, offset)
          offset += part.byteLength
        }
        return bytes
      })
    )
  })

const utf8 = new TextDecoder("utf-8", { fatal: true })

interface Answer {
  readonly name: ExchangeName
  readonly rate: BtcUsdRate | undefined
  readonly status: SourceStatus
}

const askSource = (
  client: HttpClient.HttpClient.With<HttpClientError.HttpClientError, Scope.Scope>,
  source: Settings["sources"][number],
  settings: Settings
): Effect.Effect<Answer> => {
  const { extract } = ENDPOINTS[source.name]
  // The request is tied to this scope: closing it (done, failed or timed out) aborts
  // the connection, so a slow or endless body is not left running.
  const fetchRate = Effect.scoped(Effect.gen(function*() {
    const response = yield* client.get(source.url, { headers: { accept: "application/json" } }).pipe(
      Effect.mapError((error) => new SourceError({ message: describeHttpError(error) }))
    )
    if (response.status < 200 || response.status >= 300) {
      return yield* new SourceError({ message: `HTTP ${response.status}` })
    }
    const declared = Number(response.headers["content-length"])
    if (Number.isFinite(declared) && declared > settings.maxBodyBytes) {
      return yield* new SourceError({ message: `response body larger than ${settings.maxBodyBytes} bytes` })
    }
    const bytes = yield* readBounded(response.stream, settings.maxBodyBytes)
    const body = yield* Effect.try({
      try: () => JSON.parse(utf8.decode(bytes)) as unknown,
      catch: () => new SourceError({ message: "malformed response: not JSON" })
    })
    const price = extract(body)
    if (Result.isFailure(price)) return yield* new SourceError({ message: `malformed response: ${price.failure}` })
    const rate = plausibleRate(price.success)
    if (Result.isFailure(rate)) return yield* new SourceError({ message: rate.failure })
    return rate.success
  }))
  return fetchRate.pipe(
    Effect.timeoutOrElse({
      duration: settings.timeoutMs,
      orElse: () => Effect.fail(new SourceError({ message: `no answer within ${settings.timeoutMs} ms` }))
    }),
    Effect.catchDefect((defect) => Effect.fail(new SourceError({ message: `unexpected failure: ${String(defect)}`.slice(0, 200) }))),
    Effect.matchEffect({
      onSuccess: (rate) =>
        Effect.map(Clock.currentTimeMillis, (now): Answer => ({
          name: source.name,
          rate,
          status: { name: source.name, ok: true, rate: formatBtcUsdRate(rate), at: new Date(now) }
        })),
      onFailure: (error) =>
        Effect.map(Clock.currentTimeMillis, (now): Answer => ({
          name: source.name,
          rate: undefined,
          status: { name: source.name, ok: false, error: error.message, at: new Date(now) }
        }))
    })
  )
}

// ---------------------------------------------------------------------------
// The service
// ---------------------------------------------------------------------------

interface State {
  /** The last quote made from at least `minSources` answers. */
  readonly quote: RateSnapshot | undefined
  /** The answers of the last refresh, in the configured order. */
  readonly sources: ReadonlyArray<SourceStatus>
}

/**
 * Builds RateSource and RateStatus: one refresh before returning (bounded by
 * `timeoutMs`, as the exchanges are asked concurrently), then a refresh every
 * `refreshEveryMs` in a fiber that lives as long as the scope.
 */
export const make = Effect.fnUntraced(function*(
  options: Options = {}
): Effect.fn.Return<Context.Context<RateSource | RateStatus>, never, HttpClient.HttpClient | Scope.Scope> {
  const settings = resolveSettings(options)
  const client = HttpClient.withScope(yield* HttpClient.HttpClient)
  const state = yield* Ref.make<State>({ quote: undefined, sources: [] })

  const refresh = Effect.gen(function*() {
    const startedAt = yield* Clock.currentTimeMillis
    const answers = yield* Effect.forEach(settings.sources, (source) => askSource(client, source, settings), {
      concurrency: "unbounded"
    })
    const rates = answers.flatMap((answer) => (answer.rate === undefined ? [] : [answer.rate]))
    const failed = answers.filter((answer) => answer.rate === undefined)
    const quote = rates.length >= settings.minSources
      ? { rate: medianRate(rates), asOf: new Date(startedAt) }
      : undefined
    yield* Ref.update(state, (previous) => ({
      quote: quote ?? previous.quote,
      sources: answers.map((answer) => answer.status)
    }))
    if (failed.length > 0) {
      yield* Effect.logWarning(
        quote === undefined
          ? `BTC/USD rate: only ${rates.length} of ${answers.length} exchanges answered (need ${settings.minSources}); no new quote`
          : `BTC/USD rate: ${failed.length} of ${answers.length} exchanges did not answer`
      ).pipe(Effect.annotateLogs(Object.fromEntries(failed.map((answer) => [answer.name, answer.status.error]))))
    }
  })

  const isFresh = (quote: RateSnapshot | undefined, now: number): quote is RateSnapshot =>
    quote !== undefined && now - quote.asOf.getTime() < settings.maxAgeMs

  const current = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const { quote } = yield* Ref.get(state)
    return isFresh(quote, now) ? Option.some(quote) : Option.none<RateSnapshot>()
  })

  const status = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const { quote, sources } = yield* Ref.get(state)
    return {
      rate: quote === undefined ? null : formatBtcUsdRate(quote.rate),
      asOf: quote === undefined ? null : quote.asOf,
      stale: !isFresh(quote, now),
      sources
    } satisfies RateReport
  })

  yield* refresh
  yield* Effect.sleep(settings.refreshEveryMs).pipe(Effect.andThen(refresh), Effect.forever, Effect.forkScoped)

  return Context.make(RateSource, RateSource.of({ current })).pipe(
    Context.add(RateStatus, RateStatus.of({ status }))
  )
})

/** RateSource and RateStatus from exchange tickers; needs an HttpClient. */
export const layer = (options: Options = {}): Layer.Layer<RateSource | RateStatus, never, HttpClient.HttpClient> =>
  Layer.effectContext(make(options))

/** `layer` over Node's undici HTTP client. */
export const layerNode = (options: Options = {}): Layer.Layer<RateSource | RateStatus> =>
  layer(options).pipe(Layer.provide(NodeHttpClient.layerUndici))
