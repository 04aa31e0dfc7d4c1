import { assert, describe, it } from "@effect/vitest"
import { Cause, Clock, Context, Effect, Exit, Layer, Option, Result, Scope } from "effect"
import { NodeHttpClient } from "@effect/platform-node"
import { TestClock } from "effect/testing"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Exchanges from "../../adapters/rates/Exchanges.ts"
import { formatBtcUsdRate, parseBtcUsdRate } from "../../src/domain/Money.ts"
import { type RateReport, RateSource, RateStatus } from "../../src/ports/RateSource.ts"

// ---------------------------------------------------------------------------
// Fake exchanges: real HTTP servers on 127.0.0.1 answering the documented payloads
// ---------------------------------------------------------------------------

type Behaviour =
  | { readonly _tag: "price"; readonly price: string }
  | { readonly _tag: "json"; readonly status: number; readonly body: unknown }
  | { readonly _tag: "text"; readonly status: number; readonly text: string }
  | { readonly _tag: "hang" }
  | { readonly _tag: "endless" }

const price = (value: string): Behaviour => ({ _tag: "price", price: value })

interface Fake {
  readonly name: Exchanges.ExchangeName
  readonly url: string
  readonly requests: Array<{ readonly method: string; readonly url: string; readonly accept: string | undefined }>
  behaviour: Behaviour
}

/** Each exchange's documented ticker payload around one price. */
const payload = (name: Exchanges.ExchangeName, value: string): unknown => {
  switch (name) {
    case "coinbase":
      return { data: { amount: value, base: "BTC", currency: "USD" } }
    case "kraken":
      return {
        error: [],
        result: {
          XXBTZUSD: {
            a: ["65010.00000", "1", "1.000"],
            b: ["65009.90000", "2", "2.000"],
            c: [value, "0.00100000"],
            v: ["1000.0", "2000.0"],
            p: ["64900.1", "64800.2"],
            t: [34619, 38907],
            l: ["64000.00000", "63900.00000"],
            h: ["66000.00000", "66100.00000"],
            o: "64500.00000"
          }
        }
      }
    case "bitstamp":
      return {
        timestamp: "1700000000",
        open: "64500",
        high: "66000",
        low: "64000",
        last: value,
        volume: "1234.5",
        vwap: "64900",
        bid: "64999",
        ask: "65001",
        side: "0",
        open_24: "64400",
        percent_change_24: "0.93"
      }
  }
}

const startFake = (name: Exchanges.ExchangeName, behaviour: Behaviour) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ fake: Fake; server: Http.Server }>((resolve) => {
        const fake: Fake = { name, url: "", requests: [], behaviour }
        const server = Http.createServer((req, res) => {
          fake.requests.push({ method: req.method ?? "", url: req.url ?? "", accept: req.headers.accept })
          res.on("error", () => {})
          const current = fake.behaviour
          switch (current._tag) {
            case "price":
              res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(payload(name, current.price)))
              return
            case "json":
              res.writeHead(current.status, { "content-type": "application/json" }).end(JSON.stringify(current.body))
              return
            case "text":
              res.writeHead(current.status, { "content-type": "application/json" }).end(current.text)
              return
            case "hang":
              return
            case "endless": {
              // A body that never ends, sent without a content-length.
              res.writeHead(200, { "content-type": "application/json" })
              const chunk = Buffer.alloc(16 * 1024, " ")
              res.write("{\"last\":\"")
              let sent = 0
              const pump = () => {
                while (!res.destroyed && sent < 64 * 1024 * 1024) {
                  sent += chunk.length
                  if (!res.write(chunk)) return void res.once("drain", pump)
                }
                res.end("\"}")
              }
              pump()
              return
            }
          }
        })
        server.listen(0, "127.0.0.1", () => {
          const { port } = server.address() as AddressInfo
          resolve({ fake: Object.assign(fake, { url: `http://127.0.0.1:${port}` }), server })
        })
      })
    ),
    ({ server }) =>
      Effect.promise(() =>
        new Promise<void>((resolve) => {
          server.closeAllConnections()
          server.close(() => resolve())
        })
      )
  ).pipe(Effect.map(({ fake }) => fake))

interface Fakes {
  readonly coinbase: Fake
  readonly kraken: Fake
  readonly bitstamp: Fake
  readonly all: ReadonlyArray<Fake>
  readonly baseUrls: Record<Exchanges.ExchangeName, string>
}

const startFakes = (behaviours: Record<Exchanges.ExchangeName, Behaviour>) =>
  Effect.gen(function*() {
    const coinbase = yield* startFake("coinbase", behaviours.coinbase)
    const kraken = yield* startFake("kraken", behaviours.kraken)
    const bitstamp = yield* startFake("bitstamp", behaviours.bitstamp)
    return {
      coinbase,
      kraken,
      bitstamp,
      all: [coinbase, kraken, bitstamp],
      baseUrls: { coinbase: coinbase.url, kraken: kraken.url, bitstamp: bitstamp.url }
    } satisfies Fakes
  })

/** Builds the rate services in the test's scope (start-up refresh included). */
const build = (options: Exchanges.Options) =>
  Effect.gen(function*() {
    const scope = yield* Scope.Scope
    const context = yield* Layer.buildWithScope(
      Exchanges.layer(options).pipe(Layer.provide(NodeHttpClient.layerUndici)),
      scope
    )
    const rateSource = Context.get(context, RateSource)
    const rateStatus = Context.get(context, RateStatus)
    return { current: rateSource.current, status: rateStatus.status }
  })

/** Real time, whatever clock the test runs under. */
const realSleep = (ms: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, ms)))

/** Polls `check` on real time, for at most `timeoutMs`. */
const eventually = (what: string, check: Effect.Effect<boolean>, timeoutMs = 5_000) =>
  Effect.gen(function*() {
    const deadline = Date.now() + timeoutMs
    while (!(yield* check)) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* realSleep(5)
    }
  })

/** Waits until every source has reported at the current (test) clock time. */
const refreshedAt = (status: Effect.Effect<RateReport>, at: number) =>
  eventually(
    `a refresh at ${at}`,
    Effect.map(status, (report) => report.sources.length > 0 && report.sources.every((s) => s.at.getTime() === at))
  )

const micro = (snapshot: Option.Option<{ readonly rate: { readonly microUsdPerBtc: bigint } }>) =>
  Option.isSome(snapshot) ? snapshot.value.rate.microUsdPerBtc : null

const sourceStatus = (report: RateReport, name: string) => {
  const found = report.sources.find((s) => s.name === name)
  if (found === undefined) throw new Error(`no status for ${name}`)
  return found
}

// ---------------------------------------------------------------------------
// Pure parts
// ---------------------------------------------------------------------------

describe("rate arithmetic", () => {
  const rate = (text: string) => Result.getOrThrow(parseBtcUsdRate(text))

  it("median of an odd count is the middle value", () => {
    assert.strictEqual(Exchanges.medianRate([rate("3000"), rate("1000"), rate("2000")]).microUsdPerBtc, 2_000_000_000n)
    assert.strictEqual(Exchanges.medianRate([rate("65000.12")]).microUsdPerBtc, 65_000_120_000n)
  })

  it("median of an even count is the mean of the middle two, rounded down to the micro-dollar", () => {
    assert.strictEqual(
      Exchanges.medianRate([rate("65000.000001"), rate("65000.000002")]).microUsdPerBtc,
      65_000_000_001n
    )
    assert.strictEqual(
      Exchanges.medianRate([rate("1"), rate("65000.1"), rate("65000.2"), rate("9999999")]).microUsdPerBtc,
      65_000_150_000n
    )
  })

  it("reads prices exactly and refuses implausible ones", () => {
    assert.strictEqual(Result.getOrThrow(Exchanges.plausibleRate("65000.12")).microUsdPerBtc, 65_000_120_000n)
    assert.strictEqual(Result.getOrThrow(Exchanges.plausibleRate("65000.10000")).microUsdPerBtc, 65_000_100_000n)
    // 0.1 + 0.2 style drift would show here
    assert.strictEqual(Result.getOrThrow(Exchanges.plausibleRate("64999.3")).microUsdPerBtc, 64_999_300_000n)
    assert.strictEqual(Result.getOrThrow(Exchanges.plausibleRate("1000")).microUsdPerBtc, 1_000_000_000n)
    assert.strictEqual(Result.getOrThrow(Exchanges.plausibleRate("10000000")).microUsdPerBtc, 10_000_000_000_000n)
    for (const bad of ["-65000", "0", "999.999999", "10000000.000001", "abc", "", "65000.1234567", "NaN"]) {
      assert.isTrue(Result.isFailure(Exchanges.plausibleRate(bad)), bad)
    }
  })

  it("refuses invalid options at start-up", () =>
    Effect.gen(function*() {
      for (
        const options of [
          { minSources: 4 },
          { minSources: 0 },
          { sources: [] },
          { sources: ["coinbase", "coinbase"] as const },
          { refreshEveryMs: 0 },
          { maxAgeMs: -1 },
          { timeoutMs: Number.NaN },
          { baseUrls: { kraken: "not a url" } },
          { baseUrls: { kraken: "ftp://example.com" } }
        ] as ReadonlyArray<Exchanges.Options>
      ) {
        // Nothing listens on port 1: an option that slipped through would not reach the network.
        const closed = { coinbase: "http://127.0.0.1:1", kraken: "http://127.0.0.1:1", bitstamp: "http://127.0.0.1:1" }
        const exit = yield* Effect.exit(Effect.scoped(build({ ...options, baseUrls: { ...closed, ...options.baseUrls } })))
        assert.isTrue(Exit.isFailure(exit), JSON.stringify(options))
        assert.match(String(Cause.squash((exit as Exit.Failure<unknown, unknown>).cause)), /RangeError: Exchanges: /)
      }
    }).pipe(Effect.provide(TestClock.layer()), Effect.runPromise))
})

// ---------------------------------------------------------------------------
// Against fake exchanges
// ---------------------------------------------------------------------------

describe("exchange rate service", () => {
  it.effect("asks each exchange's documented endpoint and quotes the median of three, exactly", () =>
    Effect.gen(function*() {
      const fakes = yield* startFakes({
        coinbase: price("65000.12"),
        kraken: price("65010.50000"),
        bitstamp: price("64990")
      })
      const rates = yield* build({ baseUrls: fakes.baseUrls })

      assert.deepStrictEqual(fakes.coinbase.requests.map((r) => `${r.method} ${r.url}`), ["GET /v2/prices/BTC-USD/spot"])
      assert.deepStrictEqual(fakes.kraken.requests.map((r) => `${r.method} ${r.url}`), ["GET /0/public/Ticker?pair=XBTUSD"])
      assert.deepStrictEqual(fakes.bitstamp.requests.map((r) => `${r.method} ${r.url}`), ["GET /api/v2/ticker/btcusd/"])
      for (const fake of fakes.all) assert.strictEqual(fake.requests[0]!.accept, "application/json")

      const current = yield* rates.current
      assert.isTrue(Option.isSome(current))
      const snapshot = Option.getOrThrow(current)
      assert.strictEqual(snapshot.rate.microUsdPerBtc, 65_000_120_000n)
      assert.strictEqual(formatBtcUsdRate(snapshot.rate), "65000.12")
      assert.strictEqual(snapshot.asOf.getTime(), 0) // the TestClock's time at the refresh

      const report = yield* rates.status
      assert.strictEqual(report.rate, "65000.12")
      assert.strictEqual(report.asOf?.getTime(), 0)
      assert.isFalse(report.stale)
      assert.deepStrictEqual(report.sources.map((s) => [s.name, s.ok, s.rate, s.error]), [
        ["coinbase", true, "65000.12", undefined],
        ["kraken", true, "65010.5", undefined],
        ["bitstamp", true, "64990", undefined]
      ])
    }))

  it.effect("an even count quotes the mean of the two middle prices, rounded down", () =>
    Effect.gen(function*() {
      const fakes = yield* startFakes({
        coinbase: price("65000.000001"),
        kraken: price("65000.000002"),
        bitstamp: price("70000")
      })
      const rates = yield* build({ baseUrls: fakes.baseUrls, sources: ["coinbase", "kraken"] })
      assert.strictEqual(micro(yield* rates.current), 65_000_000_001n)
      assert.strictEqual((yield* rates.status).rate, "65000.000001")
      assert.strictEqual(fakes.bitstamp.requests.length, 0) // not configured, not asked
    }))

  it.effect("takes Kraken's single result key whatever it is called", () =>
    Effect.gen(function*() {
      const ticker = { c: ["64000.00000", "0.5"] }
      const fakes = yield* startFakes({
        coinbase: price("1"),
        kraken: { _tag: "json", status: 200, body: { error: [], result: { XBTUSD: ticker } } },
        bitstamp: price("1")
      })
      const rates = yield* build({ baseUrls: fakes.baseUrls, sources: ["kraken"] })
      assert.strictEqual(micro(yield* rates.current), 64_000_000_000n)
    }))

  const failures: ReadonlyArray<[string, Behaviour, RegExp]> = [
    ["HTTP 500", { _tag: "json", status: 500, body: { error: "internal" } }, /HTTP 500/],
    ["HTTP 404", { _tag: "text", status: 404, text: "not found" }, /HTTP 404/],
    ["malformed JSON", { _tag: "text", status: 200, text: "{\"last\": \"65000\"" }, /not JSON/],
    ["an HTML page", { _tag: "text", status: 200, text: "<html>maintenance</html>" }, /not JSON/],
    ["a negative price", { _tag: "json", status: 200, body: { last: "-65000" } }, /refused/],
    ["a zero price", { _tag: "json", status: 200, body: { last: "0" } }, /refused|range/],
    ["an absurdly low price", { _tag: "json", status: 200, body: { last: "650.00" } }, /plausible range/],
    ["an absurdly high price", { _tag: "json", status: 200, body: { last: "65000000" } }, /plausible range/],
    ["a price as a JSON number", { _tag: "json", status: 200, body: { last: 65000.1 } }, /not a string/],
    ["a price with more than micro-dollar precision", { _tag: "json", status: 200, body: { last: "65000.1234567" } }, /refused/],
    ["a body without the field", { _tag: "json", status: 200, body: { error: "unknown pair" } }, /"last"/],
    ["a huge body", { _tag: "endless" }, /larger than 65536 bytes/]
  ]

  it.effect.each(failures)("one exchange answering %s: median of the others, error in status", ([_, behaviour, error]) =>
    Effect.gen(function*() {
      const fakes = yield* startFakes({ coinbase: price("65000"), kraken: price("65003.00000"), bitstamp: behaviour })
      const rates = yield* build({ baseUrls: fakes.baseUrls })
      assert.strictEqual(micro(yield* rates.current), 65_001_500_000n)
      const report = yield* rates.status
      assert.isFalse(report.stale)
      const bitstamp = sourceStatus(report, "bitstamp")
      assert.isFalse(bitstamp.ok)
      assert.isUndefined(bitstamp.rate)
      assert.match(bitstamp.error ?? "", error)
      assert.isTrue(sourceStatus(report, "coinbase").ok)
      assert.isTrue(sourceStatus(report, "kraken").ok)
    }))

  it.effect("Kraken errors and odd result shapes are source failures", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<[unknown, RegExp]> = [
        [{ error: ["EQuery:Unknown asset pair"], result: {} }, /EQuery:Unknown asset pair/],
        [{ error: [], result: {} }, /expected one pair/],
        [{ error: [], result: { XXBTZUSD: { c: ["1"] }, XETHZUSD: { c: ["1"] } } }, /expected one pair/],
        [{ error: [], result: { XXBTZUSD: { c: [] } } }, /c\[0\]/],
        [{ error: "nope", result: {} }, /not an array/]
      ]
      for (const [body, error] of cases) {
        yield* Effect.scoped(Effect.gen(function*() {
          const fakes = yield* startFakes({
            coinbase: price("65000"),
            kraken: { _tag: "json", status: 200, body },
            bitstamp: price("65000")
          })
          const rates = yield* build({ baseUrls: fakes.baseUrls })
          const kraken = sourceStatus(yield* rates.status, "kraken")
          assert.isFalse(kraken.ok)
          assert.match(kraken.error ?? "", error)
          assert.strictEqual(micro(yield* rates.current), 65_000_000_000n)
        }))
      }
    }))

  it.effect("an exchange that is down (connection refused) is a source failure", () =>
    Effect.gen(function*() {
      const fakes = yield* startFakes({ coinbase: price("65000"), kraken: price("65002"), bitstamp: price("1") })
      const rates = yield* build({ baseUrls: { ...fakes.baseUrls, bitstamp: "http://127.0.0.1:1" } })
      assert.strictEqual(micro(yield* rates.current), 65_001_000_000n)
      const bitstamp = sourceStatus(yield* rates.status, "bitstamp")
      assert.isFalse(bitstamp.ok)
      assert.match(bitstamp.error ?? "", /transport error/)
    }))

  it.live("an exchange that never answers is dropped after timeoutMs, and start-up waits no longer", () =>
    Effect.gen(function*() {
      const fakes = yield* startFakes({ coinbase: price("65000"), kraken: { _tag: "hang" }, bitstamp: price("65004") })
      const started = Date.now()
      const rates = yield* build({ baseUrls: fakes.baseUrls, timeoutMs: 300 })
      const elapsed = Date.now() - started
      assert.isAtLeast(elapsed, 250)
      assert.isBelow(elapsed, 2_000)
      assert.strictEqual(micro(yield* rates.current), 65_002_000_000n)
      const kraken = sourceStatus(yield* rates.status, "kraken")
      assert.isFalse(kraken.ok)
      assert.match(kraken.error ?? "", /no answer within 300 ms/)
    }))

  it.live("every exchange silent: start-up still completes within the timeout, with no rate", () =>
    Effect.gen(function*() {
      const fakes = yield* startFakes({ coinbase: { _tag: "hang" }, kraken: { _tag: "hang" }, bitstamp: { _tag: "hang" } })
      const started = Date.now()
      const rates = yield* build({ baseUrls: fakes.baseUrls, timeoutMs: 200 })
      assert.isBelow(Date.now() - started, 2_000)
      assert.isTrue(Option.isNone(yield* rates.current))
    }))

  it.effect("all exchanges failing: no rate, and status says why", () =>
    Effect.gen(function*() {
      const fakes = yield* startFakes({
        coinbase: { _tag: "json", status: 503, body: {} },
        kraken: { _tag: "text", status: 200, text: "garbage" },
        bitstamp: { _tag: "json", status: 200, body: { last: "-1" } }
      })
      const rates = yield* build({ baseUrls: fakes.baseUrls })
      assert.isTrue(Option.isNone(yield* rates.current))
      const report = yield* rates.status
      assert.strictEqual(report.rate, null)
      assert.strictEqual(report.asOf, null)
      assert.isTrue(report.stale)
      assert.deepStrictEqual(report.sources.map((s) => s.ok), [false, false, false])
      assert.isTrue(report.sources.every((s) => typeof s.error === "string" && s.error.length > 0))
    }))

  it.effect("a quote is served until maxAgeMs while refreshes fail, then None, then fresh again", () =>
    Effect.gen(function*() {
      const fakes = yield* startFakes({ coinbase: price("65000"), kraken: price("65100"), bitstamp: price("65200") })
      const rates = yield* build({ baseUrls: fakes.baseUrls, refreshEveryMs: 60_000, maxAgeMs: 600_000 })
      assert.strictEqual(micro(yield* rates.current), 65_100_000_000n)

      for (const fake of fakes.all) fake.behaviour = { _tag: "json", status: 500, body: {} }
      // One refresh interval at a time, each refresh finished before the clock moves on.
      for (let at = 60_000; at <= 540_000; at += 60_000) {
        yield* TestClock.adjust(60_000)
        yield* refreshedAt(rates.status, at)
        const current = yield* rates.current
        assert.strictEqual(micro(current), 65_100_000_000n, `at ${at}`)
        assert.strictEqual(Option.getOrThrow(current).asOf.getTime(), 0)
        const report = yield* rates.status
        assert.isFalse(report.stale)
        assert.isTrue(report.sources.every((s) => !s.ok))
      }
      yield* TestClock.adjust(59_999) // 1 ms short of maxAgeMs
      assert.strictEqual(micro(yield* rates.current), 65_100_000_000n)

      yield* TestClock.adjust(1) // 600_000: the quote is maxAgeMs old and this refresh fails too
      yield* refreshedAt(rates.status, 600_000)
      assert.isTrue(Option.isNone(yield* rates.current))
      const stale = yield* rates.status
      assert.isTrue(stale.stale)
      assert.strictEqual(stale.rate, "65100") // the last quote stays visible to the operator
      assert.strictEqual(stale.asOf?.getTime(), 0)

      fakes.coinbase.behaviour = price("66000")
      fakes.kraken.behaviour = price("66001")
      fakes.bitstamp.behaviour = price("66002")
      yield* TestClock.adjust(60_000)
      yield* refreshedAt(rates.status, 660_000)
      const fresh = yield* rates.current
      assert.strictEqual(micro(fresh), 66_001_000_000n)
      assert.strictEqual(Option.getOrThrow(fresh).asOf.getTime(), 660_000)
      assert.isFalse((yield* rates.status).stale)
    }))

  it.effect("refreshes in the background every refreshEveryMs", () =>
    Effect.gen(function*() {
      const fakes = yield* startFakes({ coinbase: price("65000"), kraken: price("65000"), bitstamp: price("65000") })
      const rates = yield* build({ baseUrls: fakes.baseUrls, refreshEveryMs: 30_000 })
      for (const fake of fakes.all) assert.strictEqual(fake.requests.length, 1)

      yield* TestClock.adjust(29_999)
      yield* realSleep(50) // a refresh started now would have reached the fakes
      for (const fake of fakes.all) assert.strictEqual(fake.requests.length, 1)

      fakes.kraken.behaviour = price("70000")
      fakes.bitstamp.behaviour = price("70000")
      yield* TestClock.adjust(1)
      yield* refreshedAt(rates.status, 30_000)
      for (const fake of fakes.all) assert.strictEqual(fake.requests.length, 2)
      const current = Option.getOrThrow(yield* rates.current)
      assert.strictEqual(current.rate.microUsdPerBtc, 70_000_000_000n)
      assert.strictEqual(current.asOf.getTime(), 30_000)

      yield* TestClock.adjust(30_000)
      yield* refreshedAt(rates.status, 60_000)
      for (const fake of fakes.all) assert.strictEqual(fake.requests.length, 3)
    }))

  it.effect("minSources: too few answers at start means no rate", () =>
    Effect.gen(function*() {
      const fakes = yield* startFakes({
        coinbase: price("65000"),
        kraken: { _tag: "json", status: 500, body: {} },
        bitstamp: { _tag: "json", status: 500, body: {} }
      })
      const rates = yield* build({ baseUrls: fakes.baseUrls, minSources: 2 })
      assert.isTrue(Option.isNone(yield* rates.current))
      const report = yield* rates.status
      assert.isTrue(report.stale)
      assert.strictEqual(report.rate, null)
      assert.deepStrictEqual(report.sources.map((s) => s.ok), [true, false, false])

      fakes.bitstamp.behaviour = price("65010")
      yield* TestClock.adjust(60_000)
      yield* refreshedAt(rates.status, 60_000)
      assert.strictEqual(micro(yield* rates.current), 65_005_000_000n)
    }))

  it.effect("minSources: a refresh with too few answers keeps the previous quote, which ages out", () =>
    Effect.gen(function*() {
      const fakes = yield* startFakes({ coinbase: price("65000"), kraken: price("65002"), bitstamp: price("65004") })
      const rates = yield* build({ baseUrls: fakes.baseUrls, minSources: 2, refreshEveryMs: 60_000, maxAgeMs: 120_000 })
      assert.strictEqual(micro(yield* rates.current), 65_002_000_000n)

      // Only one exchange left: its price is not used on its own.
      fakes.coinbase.behaviour = price("90000")
      fakes.kraken.behaviour = { _tag: "json", status: 500, body: {} }
      fakes.bitstamp.behaviour = { _tag: "json", status: 500, body: {} }
      yield* TestClock.adjust(60_000)
      yield* refreshedAt(rates.status, 60_000)
      const kept = Option.getOrThrow(yield* rates.current)
      assert.strictEqual(kept.rate.microUsdPerBtc, 65_002_000_000n)
      assert.strictEqual(kept.asOf.getTime(), 0)
      assert.strictEqual(sourceStatus(yield* rates.status, "coinbase").rate, "90000")

      yield* TestClock.adjust(60_000)
      yield* refreshedAt(rates.status, 120_000)
      assert.isTrue(Option.isNone(yield* rates.current))
    }))

  it.live("the background refresh stops when the layer's scope closes", () =>
    Effect.gen(function*() {
      const fakes = yield* startFakes({ coinbase: price("65000"), kraken: price("65000"), bitstamp: price("65000") })
      yield* Effect.scoped(Effect.gen(function*() {
        yield* build({ baseUrls: fakes.baseUrls, refreshEveryMs: 20 })
        yield* eventually("a background refresh", Effect.sync(() => fakes.coinbase.requests.length >= 3))
      }))
      const after = fakes.coinbase.requests.length
      yield* realSleep(150)
      assert.strictEqual(fakes.coinbase.requests.length, after)
    }))

  it.effect("a base URL may carry a path prefix and a trailing slash", () =>
    Effect.gen(function*() {
      const fakes = yield* startFakes({ coinbase: price("65000.5"), kraken: price("1"), bitstamp: price("1") })
      const rates = yield* build({ baseUrls: { coinbase: `${fakes.coinbase.url}/proxy/` }, sources: ["coinbase"] })
      assert.deepStrictEqual(fakes.coinbase.requests.map((r) => r.url), ["/proxy/v2/prices/BTC-USD/spot"])
      assert.strictEqual(micro(yield* rates.current), 65_000_500_000n)
    }))
})

describe("RateStatus.fixed", () => {
  it.effect("reports the configured rate as fresh, quoted now", () =>
    Effect.gen(function*() {
      yield* TestClock.adjust(5_000)
      const rate = Result.getOrThrow(parseBtcUsdRate("65000.5"))
      const report = yield* RateStatus.use((s) => s.status).pipe(Effect.provide(RateStatus.fixed(rate)))
      const now = yield* Clock.currentTimeMillis
      assert.strictEqual(now, 5_000)
      assert.deepStrictEqual(report, {
        rate: "65000.5",
        asOf: new Date(5_000),
        stale: false,
        sources: [{ name: "fixed", ok: true, rate: "65000.5", at: new Date(5_000) }]
      })
    }))
})
