import fc from "fast-check"
import { Result, Schema } from "effect"
import { describe, expect, it } from "vitest"
import {
  type BtcUsdRate,
  Cents,
  ceilDivide,
  centsToMicroUsd,
  creditFits,
  MAX_API_MSAT,
  MAX_BTC_USD_RATE_MICRO_USD,
  MAX_CARD_FUNDING_MICRO_USD,
  MAX_LIGHTNING_FUNDING_MSAT,
  MAX_SATS_POCKET_MSAT,
  MAX_USD_POCKET_MICRO_USD,
  pocketMaximum,
  floorDivide,
  formatBtcUsdRate,
  fractionalSatsToMsat,
  MicroUsd,
  microUsdToCents,
  Msat,
  MSAT_PER_BTC,
  msatToMicroUsdValue,
  msatToSats,
  parseBtcUsdRate,
  priceForUnits,
  priceFromPer1k,
  Sats,
  satsToMsat,
  spendableMicroUsd,
  splitCharge,
  usdToMsatForCharge,
  WholeSats
} from "../../src/domain/Money.ts"

const microUsdArb = (max: bigint) => fc.bigInt({ min: 0n, max }).map((x) => MicroUsd.make(x))
const msatArb = (max: bigint) => fc.bigInt({ min: 0n, max }).map((x) => Msat.make(x))
// From 1 µUSD per BTC up to $10^9 per BTC, with a bias toward realistic rates.
const rateArb: fc.Arbitrary<BtcUsdRate> = fc
  .oneof(
    fc.bigInt({ min: 1n, max: 1_000_000_000_000_000n }),
    fc.bigInt({ min: 10_000_000_000n, max: 500_000_000_000n })
  )
  .map((microUsdPerBtc) => ({ microUsdPerBtc }))

/** Number of decimals in a number's shortest text, exponent forms included. */
const decimalsOf = (n: number): number => {
  const [mantissa, exponent] = String(n).split("e")
  const fractionLength = (mantissa!.split(".")[1] ?? "").length
  return Math.max(0, fractionLength - Number(exponent ?? "0"))
}

const success = <A, E>(result: Result.Result<A, E>): A => {
  if (Result.isFailure(result)) throw new Error(`expected success, got ${JSON.stringify(result.failure)}`)
  return result.success
}

const rate65k = success(parseBtcUsdRate("65000"))

describe("integer division", () => {
  it("ceilDivide and floorDivide bracket the exact quotient", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }), fc.bigInt({ min: 1n, max: 10n ** 20n }), (a, b) => {
        const up = ceilDivide(a, b)
        const down = floorDivide(a, b)
        expect(up * b >= a).toBe(true)
        expect((up - 1n) * b < a).toBe(true)
        expect(down * b <= a).toBe(true)
        expect((down + 1n) * b > a).toBe(true)
      })
    )
  })

  it("refuses a non-positive denominator", () => {
    expect(() => ceilDivide(1n, 0n)).toThrow(RangeError)
    expect(() => floorDivide(1n, -1n)).toThrow(RangeError)
  })
})

describe("prices", () => {
  it("rounds a price up to the next micro-dollar", () => {
    expect(priceFromPer1k(1n, MicroUsd.make(150n))).toBe(1n)
    expect(priceFromPer1k(1000n, MicroUsd.make(150n))).toBe(150n)
    expect(priceFromPer1k(1001n, MicroUsd.make(150n))).toBe(151n)
    expect(priceFromPer1k(0n, MicroUsd.make(150n))).toBe(0n)
    expect(priceForUnits(7n, MicroUsd.make(10n), 3n)).toBe(24n)
  })

  it("never under-prices and over-prices by less than one micro-dollar", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 9n }), microUsdArb(10n ** 12n), (units, pricePer1k) => {
        const price = priceFromPer1k(units, pricePer1k)
        expect(price * 1000n >= units * pricePer1k).toBe(true)
        expect((price - 1n) * 1000n < units * pricePer1k).toBe(true)
      })
    )
  })
})

describe("rate", () => {
  it("parses decimal USD per BTC exactly", () => {
    expect(success(parseBtcUsdRate("65000.12")).microUsdPerBtc).toBe(65_000_120_000n)
    expect(success(parseBtcUsdRate(65000.12)).microUsdPerBtc).toBe(65_000_120_000n)
    expect(success(parseBtcUsdRate("0.000001")).microUsdPerBtc).toBe(1n)
    expect(success(parseBtcUsdRate("1e5")).microUsdPerBtc).toBe(100_000_000_000n)
    expect(formatBtcUsdRate(success(parseBtcUsdRate("65000.12")))).toBe("65000.12")
  })

  it("refuses rates above $100,000,000 per BTC, so a full sats pocket's value stays inside storage", () => {
    expect(success(parseBtcUsdRate("100000000")).microUsdPerBtc).toBe(MAX_BTC_USD_RATE_MICRO_USD)
    for (const input of ["100000000.000001", "1e9", 1e15, "9223372036854775807"]) {
      expect(Result.isFailure(parseBtcUsdRate(input)), String(input)).toBe(true)
    }
    const fullPocketValue = msatToMicroUsdValue(Msat.make(MAX_SATS_POCKET_MSAT), { microUsdPerBtc: MAX_BTC_USD_RATE_MICRO_USD })
    expect(fullPocketValue + MAX_USD_POCKET_MICRO_USD < 2n ** 63n - 1n).toBe(true)
  })

  it("refuses zero, negatives, excess precision and junk", () => {
    for (const input of ["0", "0.000000", 0, -1, "-65000", "65000.1234567", "0.0000001", "", "abc", " 1", "1e999999999", NaN, Infinity]) {
      expect(Result.isFailure(parseBtcUsdRate(input)), String(input)).toBe(true)
    }
  })
})

describe("funding and pocket bounds", () => {
  it("per-invoice maximums are $100,000 and 1 BTC; pockets hold at most 10^15 of their unit", () => {
    expect(MAX_CARD_FUNDING_MICRO_USD).toBe(10_000_000n * 10_000n)
    expect(MAX_LIGHTNING_FUNDING_MSAT).toBe(100_000_000n * 1_000n)
    expect(pocketMaximum("usd")).toBe(MAX_USD_POCKET_MICRO_USD)
    expect(pocketMaximum("sats")).toBe(MAX_SATS_POCKET_MSAT)
    // Every balance the API shows is exact as a JSON number.
    expect(microUsdToCents(MAX_USD_POCKET_MICRO_USD)).toBe(100_000_000_000)
    expect(msatToSats(MAX_SATS_POCKET_MSAT)).toBe(1_000_000_000_000)
  })

  it("creditFits: up to the maximum exactly, never past it, never a negative amount", () => {
    expect(creditFits("usd", MAX_USD_POCKET_MICRO_USD - 5n, 5n)).toBe(true)
    expect(creditFits("usd", MAX_USD_POCKET_MICRO_USD - 5n, 6n)).toBe(false)
    expect(creditFits("sats", 0n, MAX_SATS_POCKET_MSAT + 1n)).toBe(false)
    expect(creditFits("sats", 0n, -1n)).toBe(false)
    fc.assert(
      fc.property(
        fc.constantFrom("usd" as const, "sats" as const),
        fc.bigInt({ min: 0n, max: MAX_API_MSAT }),
        fc.bigInt({ min: -(2n ** 64n), max: 2n ** 64n }),
        (pocket, balance, amount) => {
          const fits = creditFits(pocket, balance, amount)
          expect(fits).toBe(amount >= 0n && balance + amount <= pocketMaximum(pocket))
          if (fits) expect(balance + amount < 2n ** 63n).toBe(true)
        }
      )
    )
  })
})

describe("conversions at a rate", () => {
  it("a charge never under-collects and over-collects by less than one msat", () => {
    fc.assert(
      fc.property(microUsdArb(10n ** 15n), rateArb, (amount, rate) => {
        const msat = usdToMsatForCharge(amount, rate)
        expect(msat * rate.microUsdPerBtc >= amount * MSAT_PER_BTC).toBe(true)
        expect((msat - 1n) * rate.microUsdPerBtc < amount * MSAT_PER_BTC).toBe(true)
      })
    )
  })

  it("a sats value is never over-valued and under-valued by less than one micro-dollar", () => {
    fc.assert(
      fc.property(msatArb(10n ** 18n), rateArb, (msat, rate) => {
        const value = msatToMicroUsdValue(msat, rate)
        expect(value * MSAT_PER_BTC <= msat * rate.microUsdPerBtc).toBe(true)
        expect((value + 1n) * MSAT_PER_BTC > msat * rate.microUsdPerBtc).toBe(true)
      })
    )
  })

  it("examples at $65,000/BTC", () => {
    // $1 = 1/65000 BTC = 1_538_461.538... msat, charged as 1_538_462.
    expect(usdToMsatForCharge(MicroUsd.make(1_000_000n), rate65k)).toBe(1_538_462n)
    // ...and valued back at 1_000_000.3 µUSD, shown as 1_000_000.
    expect(msatToMicroUsdValue(Msat.make(1_538_462n), rate65k)).toBe(1_000_000n)
    expect(msatToMicroUsdValue(Msat.make(1_538_461n), rate65k)).toBe(999_999n)
    expect(usdToMsatForCharge(MicroUsd.make(0n), rate65k)).toBe(0n)
  })
})

describe("splitCharge", () => {
  it("takes the usd pocket first and the remainder from sats, conserving value", () => {
    fc.assert(
      fc.property(microUsdArb(10n ** 12n), microUsdArb(10n ** 12n), msatArb(10n ** 15n), rateArb, (price, usd, sats, rate) => {
        const split = splitCharge({ priceMicroUsd: price, usdPocketMicroUsd: usd, satsPocketMsat: sats, rate })
        const spendable = spendableMicroUsd(usd, sats, rate)
        if (Result.isFailure(split)) {
          expect(spendable < price).toBe(true)
          expect(split.failure).toEqual({ _tag: "InsufficientFunds", priceMicroUsd: price, spendableMicroUsd: spendable })
          return
        }
        const { fromSatsMsat, fromUsdMicroUsd } = split.success
        expect(spendable >= price).toBe(true)
        expect(fromUsdMicroUsd).toBe(price < usd ? price : usd)
        expect(fromUsdMicroUsd <= usd).toBe(true)
        expect(fromSatsMsat <= sats).toBe(true)
        // The sats taken cover the remainder exactly or by less than one msat.
        const remainder = price - fromUsdMicroUsd
        expect(fromSatsMsat * rate.microUsdPerBtc >= remainder * MSAT_PER_BTC).toBe(true)
        expect(fromSatsMsat === 0n || (fromSatsMsat - 1n) * rate.microUsdPerBtc < remainder * MSAT_PER_BTC).toBe(true)
        if (remainder === 0n) expect(fromSatsMsat).toBe(0n)
      })
    )
  })

  it("succeeds exactly when the spendable value covers the price", () => {
    fc.assert(
      fc.property(microUsdArb(10n ** 6n), msatArb(10n ** 9n), rateArb, (usd, sats, rate) => {
        const spendable = spendableMicroUsd(usd, sats, rate)
        const atLimit = splitCharge({ priceMicroUsd: spendable, usdPocketMicroUsd: usd, satsPocketMsat: sats, rate })
        const beyond = splitCharge({
          priceMicroUsd: MicroUsd.make(spendable + 1n),
          usdPocketMicroUsd: usd,
          satsPocketMsat: sats,
          rate
        })
        expect(Result.isSuccess(atLimit)).toBe(true)
        expect(Result.isFailure(beyond)).toBe(true)
      })
    )
  })

  it("examples", () => {
    const usd = MicroUsd.make(500_000n) // 50 cents
    const sats = Msat.make(10_000_000n) // 10_000 sats = $6.50 at $65k
    expect(
      success(splitCharge({ priceMicroUsd: MicroUsd.make(200_000n), usdPocketMicroUsd: usd, satsPocketMsat: sats, rate: rate65k }))
    ).toEqual({ fromUsdMicroUsd: 200_000n, fromSatsMsat: 0n })
    expect(
      success(splitCharge({ priceMicroUsd: MicroUsd.make(1_500_000n), usdPocketMicroUsd: usd, satsPocketMsat: sats, rate: rate65k }))
    ).toEqual({ fromUsdMicroUsd: 500_000n, fromSatsMsat: 1_538_462n })
    const short = splitCharge({ priceMicroUsd: MicroUsd.make(7_000_001n), usdPocketMicroUsd: usd, satsPocketMsat: sats, rate: rate65k })
    expect(Result.isFailure(short) && short.failure.spendableMicroUsd).toBe(7_000_000n)
  })
})

describe("API cents", () => {
  it("parses cents exactly through their decimal text", () => {
    expect(success(centsToMicroUsd(0.0375))).toBe(375n)
    expect(success(centsToMicroUsd(19.99))).toBe(199_900n)
    expect(success(centsToMicroUsd(0.0001))).toBe(1n)
    expect(success(centsToMicroUsd(1000))).toBe(10_000_000n)
    expect(success(centsToMicroUsd(0))).toBe(0n)
    expect(success(centsToMicroUsd(-0))).toBe(0n)
    expect(success(centsToMicroUsd(1e11))).toBe(10n ** 15n)
    expect(success(centsToMicroUsd(99_999_999_999.9999))).toBe(10n ** 15n - 1n)
  })

  it("refuses what is not an amount of cents", () => {
    for (const input of [1e-7, 1.5e-5, 0.00001, 19.99999, -1, -0.0001, NaN, Infinity, -Infinity, 1e21, 1e11 + 0.0002, 0.1 + 0.2, "1", null, 1n]) {
      const result = centsToMicroUsd(input)
      expect(Result.isFailure(result), String(input)).toBe(true)
      expect(Result.isFailure(result) && result.failure._tag).toBe("InvalidAmount")
    }
  })

  it("formats micro-dollars as cents with at most 4 decimals", () => {
    expect(microUsdToCents(375n)).toBe(0.0375)
    expect(microUsdToCents(199_900n)).toBe(19.99)
    expect(microUsdToCents(1n)).toBe(0.0001)
    expect(microUsdToCents(0n)).toBe(0)
    expect(microUsdToCents(-375n)).toBe(-0.0375)
  })

  it("round-trips every amount up to 10^15 µUSD", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 15n }), (amount) => {
        const cents = microUsdToCents(amount)
        expect(decimalsOf(cents)).toBeLessThanOrEqual(4)
        expect(success(centsToMicroUsd(cents))).toBe(amount)
      }),
      { numRuns: 2000 }
    )
  })

  it("Cents schema decodes JSON numbers and encodes back", () => {
    expect(Schema.decodeUnknownSync(Cents)(0.0375)).toBe(375n)
    expect(Schema.encodeSync(Cents)(MicroUsd.make(199_900n))).toBe(19.99)
    expect(() => Schema.decodeUnknownSync(Cents)(1e-7)).toThrow(/at most 4 decimals/)
    expect(() => Schema.decodeUnknownSync(Cents)(-5)).toThrow(/negative/)
    expect(() => Schema.decodeUnknownSync(Cents)("5")).toThrow()
  })
})

describe("API sats", () => {
  it("formats msat as sats with at most 3 decimals and round-trips", () => {
    expect(msatToSats(1n)).toBe(0.001)
    expect(msatToSats(1_538_462n)).toBe(1538.462)
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 15n }), (amount) => {
        const sats = msatToSats(amount)
        expect(decimalsOf(sats)).toBeLessThanOrEqual(3)
        expect(success(fractionalSatsToMsat(sats))).toBe(amount)
      }),
      { numRuns: 2000 }
    )
  })

  it("satsToMsat takes whole positive sats only", () => {
    expect(success(satsToMsat(1))).toBe(1000n)
    expect(success(satsToMsat(21_000))).toBe(21_000_000n)
    for (const input of [0, -1, 1.5, 0.001, NaN, Infinity, 1e13, "10", null]) {
      expect(Result.isFailure(satsToMsat(input)), String(input)).toBe(true)
    }
  })

  it("fractionalSatsToMsat refuses more than 3 decimals", () => {
    expect(success(fractionalSatsToMsat(0.001))).toBe(1n)
    expect(Result.isFailure(fractionalSatsToMsat(0.0001))).toBe(true)
    expect(Result.isFailure(fractionalSatsToMsat(1e-7))).toBe(true)
  })

  it("Sats and WholeSats schemas", () => {
    expect(Schema.decodeUnknownSync(Sats)(1538.462)).toBe(1_538_462n)
    expect(Schema.encodeSync(Sats)(Msat.make(1n))).toBe(0.001)
    expect(Schema.decodeUnknownSync(WholeSats)(5000)).toBe(5_000_000n)
    expect(() => Schema.decodeUnknownSync(WholeSats)(0)).toThrow(/positive integer/)
    expect(() => Schema.decodeUnknownSync(WholeSats)(1.5)).toThrow(/positive integer/)
  })
})

describe("branded amounts", () => {
  it("refuse negatives", () => {
    expect(() => MicroUsd.make(-1n)).toThrow()
    expect(() => Msat.make(-1n)).toThrow()
    expect(MicroUsd.makeOption(-1n)._tag).toBe("None")
  })
})
