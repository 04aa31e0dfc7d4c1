/**
 * Money: integer amounts, the BTC/USD rate, conversions and the API number formats.
 *
 * - USD is kept in micro-dollars: 1 USD = 1_000_000 µUSD, 1 cent = 10_000 µUSD.
 * - Bitcoin is kept in millisatoshis: 1 sat = 1_000 msat, 1 BTC = 10^8 sat = 10^11 msat.
 * - Every stored or compared amount is a `bigint`. Floating point appears only at the
 *   API edge, where cents and sats travel as JSON numbers; those are converted through
 *   their decimal text, never by multiplying floats.
 *
 * Rounding never favours anybody by accident:
 * - a price is rounded up to the next micro-dollar;
 * - USD -> msat for a charge is rounded up to the next msat (a charge never under-collects);
 * - msat -> USD for a balance or credit is rounded down (a value is never rounded up).
 */
import { Effect, Result, Schema, SchemaIssue, SchemaTransformation } from "effect"

// ---------------------------------------------------------------------------
// Units
// ---------------------------------------------------------------------------

export const MICRO_USD_PER_USD = 1_000_000n
export const MICRO_USD_PER_CENT = 10_000n
export const MSAT_PER_SAT = 1_000n
export const MSAT_PER_BTC = 100_000_000_000n

/** A non-negative amount of USD in micro-dollars. */
export const MicroUsd = Schema.BigInt.check(Schema.isGreaterThanOrEqualToBigInt(0n)).pipe(
  Schema.brand("MicroUsd")
)
export type MicroUsd = typeof MicroUsd.Type

/** A non-negative amount of bitcoin in millisatoshis. */
export const Msat = Schema.BigInt.check(Schema.isGreaterThanOrEqualToBigInt(0n)).pipe(Schema.brand("Msat"))
export type Msat = typeof Msat.Type

// `MicroUsd.make(x)` / `Msat.make(x)` validate and throw on a negative value (a
// programming error); `makeOption` returns `None` instead. The helpers below brand the
// results of arithmetic whose sign is already guaranteed by non-negative inputs.
const asMicroUsd = (amountMicroUsd: bigint): MicroUsd => amountMicroUsd as MicroUsd
const asMsat = (amountMsat: bigint): Msat => amountMsat as Msat

/** Why an amount from outside was refused. */
export interface InvalidAmount {
  readonly _tag: "InvalidAmount"
  readonly input: unknown
  readonly message: string
}

const invalidAmount = (input: unknown, message: string): Result.Result<never, InvalidAmount> =>
  Result.fail({ _tag: "InvalidAmount", input, message })

// ---------------------------------------------------------------------------
// Integer division
// ---------------------------------------------------------------------------

/** `ceil(numerator / denominator)` for a positive denominator. */
export const ceilDivide = (numerator: bigint, denominator: bigint): bigint => {
  if (denominator <= 0n) throw new RangeError("ceilDivide: denominator must be positive")
  const quotient = numerator / denominator // truncates toward zero
  return numerator % denominator > 0n ? quotient + 1n : quotient
}

/** `floor(numerator / denominator)` for a positive denominator. */
export const floorDivide = (numerator: bigint, denominator: bigint): bigint => {
  if (denominator <= 0n) throw new RangeError("floorDivide: denominator must be positive")
  const quotient = numerator / denominator // truncates toward zero
  return numerator % denominator < 0n ? quotient - 1n : quotient
}

// ---------------------------------------------------------------------------
// Prices
// ---------------------------------------------------------------------------

/**
 * The price of `units` when `priceMicroUsd` buys `perUnits` of them (e.g. 1000 tokens).
 * Rounding: a price is rounded UP to the next micro-dollar.
 */
export const priceForUnits = (units: bigint, priceMicroUsd: MicroUsd, perUnits: bigint): MicroUsd => {
  if (units < 0n) throw new RangeError("priceForUnits: units must be non-negative")
  return asMicroUsd(ceilDivide(units * priceMicroUsd, perUnits))
}

/** `ceil(units * pricePer1kMicroUsd / 1000)`: a price per 1k units, rounded UP. */
export const priceFromPer1k = (units: bigint, pricePer1kMicroUsd: MicroUsd): MicroUsd =>
  priceForUnits(units, pricePer1kMicroUsd, 1000n)

// ---------------------------------------------------------------------------
// Decimal text
// ---------------------------------------------------------------------------

const DECIMAL = /^(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/
// Bounds the work done on hostile input such as "1e999999999".
const MAX_DECIMAL_TEXT_LENGTH = 64
const MAX_DECIMAL_EXPONENT = 400

/**
 * The exact value of a non-negative decimal text (plain or exponent form, as produced
 * by `String(number)`) times 10^scale, or a message when that is not an integer
 * (the text carries more than `scale` decimals).
 */
const scaleDecimalText = (text: string, scale: number): Result.Result<bigint, string> => {
  const match = text.length <= MAX_DECIMAL_TEXT_LENGTH ? DECIMAL.exec(text) : null
  if (match === null) return Result.fail("not a plain decimal number")
  const integerDigits = match[1]!
  const fractionDigits = match[2] ?? ""
  const exponent = match[3] === undefined ? 0 : Number(match[3])
  if (Math.abs(exponent) > MAX_DECIMAL_EXPONENT) return Result.fail("exponent out of range")
  const digits = BigInt(integerDigits + fractionDigits)
  const shift = exponent - fractionDigits.length + scale
  if (shift >= 0) return Result.succeed(digits * 10n ** BigInt(shift))
  const divisor = 10n ** BigInt(-shift)
  if (digits % divisor !== 0n) return Result.fail(`more than ${scale} decimals`)
  return Result.succeed(digits / divisor)
}

/** The decimal text of `amount / 10^scale`, trailing zeros removed. */
const formatScaled = (amount: bigint, scale: bigint): string => {
  const sign = amount < 0n ? "-" : ""
  const magnitude = amount < 0n ? -amount : amount
  const unit = 10n ** scale
  const fraction = (magnitude % unit).toString().padStart(Number(scale), "0").replace(/0+$/, "")
  const integer = (magnitude / unit).toString()
  return fraction === "" ? `${sign}${integer}` : `${sign}${integer}.${fraction}`
}

/**
 * Reads a JSON number as an exact count of 10^-scale units, through its shortest
 * decimal representation (`String(n)`), so that 0.0375 is 375 ten-thousandths and not
 * 0.0375 * 10_000 = 374.99999999999994.
 */
const numberToScaled = (
  input: unknown,
  scale: number,
  maxUnits: bigint,
  what: string
): Result.Result<bigint, InvalidAmount> => {
  if (typeof input !== "number" || !Number.isFinite(input)) {
    return invalidAmount(input, `${what} must be a finite number`)
  }
  if (input < 0) return invalidAmount(input, `${what} must not be negative`)
  const maxNumber = Number(formatScaled(maxUnits, BigInt(scale)))
  if (input > maxNumber) return invalidAmount(input, `${what} must be at most ${maxNumber}`)
  const scaled = scaleDecimalText(String(input), scale)
  if (Result.isFailure(scaled)) {
    return invalidAmount(input, `${what} must have at most ${scale} decimals`)
  }
  return Result.succeed(scaled.success)
}

// ---------------------------------------------------------------------------
// API numbers: cents and sats
// ---------------------------------------------------------------------------

/**
 * The largest amount that crosses the API as a JSON number, in either unit: 10^15
 * (10^11 cents = $1,000,000,000; 10^12 sats = 10,000 BTC). Every integer up to 10^15
 * has at most 15 significant digits, so its decimal text survives the trip through a
 * float exactly; beyond that it would not.
 */
export const MAX_API_MICRO_USD = 1_000_000_000_000_000n
export const MAX_API_MSAT = 1_000_000_000_000_000n

// ---------------------------------------------------------------------------
// Upper bounds: funding and pockets
// ---------------------------------------------------------------------------

/**
 * The most one card funding request may ask for: 10,000,000 cents ($100,000),
 * in micro-dollars.
 */
export const MAX_CARD_FUNDING_MICRO_USD = 100_000_000_000n
/** The most one Lightning invoice may ask for: 100,000,000 sats (1 BTC), in msat. */
export const MAX_LIGHTNING_FUNDING_MSAT = 100_000_000_000n

/**
 * The most a wallet pocket may hold: 10^15 micro-dollars ($1,000,000,000) in the
 * `usd` pocket, 10^15 msat (10^12 sats, 10,000 BTC) in the `sats` pocket. These are
 * the largest amounts the API shows exactly as JSON numbers, and they sit more
 * than 9,000 times below the storage limit (2^63 - 1), so no sum of a pocket and
 * any single amount the gateway accepts can overflow. A credit that would take a
 * pocket above its maximum is refused (see `creditFits`).
 */
export const MAX_USD_POCKET_MICRO_USD = MAX_API_MICRO_USD
export const MAX_SATS_POCKET_MSAT = MAX_API_MSAT

/** The maximum of a pocket, in its own unit (µUSD for `usd`, msat for `sats`). */
export const pocketMaximum = (pocket: "usd" | "sats"): bigint =>
  pocket === "usd" ? MAX_USD_POCKET_MICRO_USD : MAX_SATS_POCKET_MSAT

/**
 * Whether crediting `amount` (in the pocket's unit) to a pocket that holds
 * `balance` keeps it within `pocketMaximum`. Negative amounts never fit.
 */
export const creditFits = (pocket: "usd" | "sats", balance: bigint, amount: bigint): boolean =>
  amount >= 0n && balance + amount <= pocketMaximum(pocket)

/**
 * Micro-dollars as a JSON number of cents, with at most 4 decimals. Exact for
 * |amount| <= MAX_API_MICRO_USD (the nearest float beyond it).
 */
export const microUsdToCents = (amountMicroUsd: bigint): number => Number(formatScaled(amountMicroUsd, 4n))

/**
 * Millisatoshis as a JSON number of sats, with at most 3 decimals. Exact for
 * |amount| <= MAX_API_MSAT (the nearest float beyond it).
 */
export const msatToSats = (amountMsat: bigint): number => Number(formatScaled(amountMsat, 3n))

/**
 * A JSON number of cents (>= 0, at most 4 decimals, at most 10^11) as micro-dollars.
 * Exact: 0.0375 -> 375, 19.99 -> 199_900. Refuses NaN, infinities, negatives, more
 * decimals (1e-7) and larger values.
 */
export const centsToMicroUsd = (amountCents: unknown): Result.Result<MicroUsd, InvalidAmount> =>
  Result.map(numberToScaled(amountCents, 4, MAX_API_MICRO_USD, "an amount in cents"), asMicroUsd)

/**
 * A JSON number of sats (>= 0, at most 3 decimals, at most 10^12) as millisatoshis:
 * the inverse of `msatToSats`.
 */
export const fractionalSatsToMsat = (amountSats: unknown): Result.Result<Msat, InvalidAmount> =>
  Result.map(numberToScaled(amountSats, 3, MAX_API_MSAT, "an amount in sats"), asMsat)

/** A JSON number of whole sats (a positive integer, at most 10^12) as millisatoshis. */
export const satsToMsat = (amountSats: unknown): Result.Result<Msat, InvalidAmount> => {
  if (typeof amountSats !== "number" || !Number.isInteger(amountSats) || amountSats <= 0) {
    return invalidAmount(amountSats, "an amount in sats must be a positive integer")
  }
  return fractionalSatsToMsat(amountSats)
}

const fromResult = <A>(
  decoded: Result.Result<A, InvalidAmount>
): Effect.Effect<A, SchemaIssue.Issue> =>
  Result.isSuccess(decoded)
    ? Effect.succeed(decoded.success)
    : Effect.fail(new SchemaIssue.InvalidValue({ message: decoded.failure.message }, decoded.failure.input))

/** API cents (JSON number, at most 4 decimals) <-> MicroUsd. */
export const Cents = Schema.Finite.pipe(
  Schema.decodeTo(
    MicroUsd,
    SchemaTransformation.transformEffect({
      decode: (amountCents: number) => fromResult(centsToMicroUsd(amountCents)),
      encode: (amountMicroUsd: bigint) => Effect.succeed(microUsdToCents(amountMicroUsd))
    })
  )
).annotate({ description: "USD cents; at most 4 decimals" })

/** API sats (JSON number, at most 3 decimals) <-> Msat. */
export const Sats = Schema.Finite.pipe(
  Schema.decodeTo(
    Msat,
    SchemaTransformation.transformEffect({
      decode: (amountSats: number) => fromResult(fractionalSatsToMsat(amountSats)),
      encode: (amountMsat: bigint) => Effect.succeed(msatToSats(amountMsat))
    })
  )
).annotate({ description: "sats; at most 3 decimals" })

/** API sats as a positive whole number (funding amounts) <-> Msat. */
export const WholeSats = Schema.Finite.pipe(
  Schema.decodeTo(
    Msat,
    SchemaTransformation.transformEffect({
      decode: (amountSats: number) => fromResult(satsToMsat(amountSats)),
      encode: (amountMsat: bigint) => Effect.succeed(msatToSats(amountMsat))
    })
  )
).annotate({ description: "whole sats; a positive integer" })

// ---------------------------------------------------------------------------
// BTC/USD rate
// ---------------------------------------------------------------------------

/** A BTC/USD rate, exact: micro-dollars per whole bitcoin (always positive). */
export const BtcUsdRate = Schema.Struct({
  microUsdPerBtc: Schema.BigInt.check(Schema.isGreaterThanBigInt(0n))
})
export type BtcUsdRate = typeof BtcUsdRate.Type

/**
 * The highest BTC/USD rate accepted: $100,000,000 per BTC, in micro-dollars. Far
 * above any real price, and low enough that the USD value of a full sats pocket
 * (MAX_SATS_POCKET_MSAT at this rate: 10^18 µUSD) stays inside BIGINT storage.
 */
export const MAX_BTC_USD_RATE_MICRO_USD = 100_000_000_000_000n

/**
 * A rate from USD per BTC given as decimal text ("65000.12") or a number (read through
 * its shortest decimal text). Refuses more precision than a micro-dollar, rates <= 0
 * and rates above MAX_BTC_USD_RATE_MICRO_USD.
 */
export const parseBtcUsdRate = (usdPerBtc: string | number): Result.Result<BtcUsdRate, InvalidAmount> => {
  if (typeof usdPerBtc === "number" && !Number.isFinite(usdPerBtc)) {
    return invalidAmount(usdPerBtc, "a BTC/USD rate must be a finite number")
  }
  const scaled = scaleDecimalText(String(usdPerBtc), 6)
  if (Result.isFailure(scaled)) {
    return invalidAmount(usdPerBtc, `a BTC/USD rate must be a positive decimal number: ${scaled.failure}`)
  }
  if (scaled.success <= 0n) return invalidAmount(usdPerBtc, "a BTC/USD rate must be positive")
  if (scaled.success > MAX_BTC_USD_RATE_MICRO_USD) {
    return invalidAmount(usdPerBtc, "a BTC/USD rate must be at most 100000000 USD per BTC")
  }
  return Result.succeed({ microUsdPerBtc: scaled.success })
}

/** The rate as decimal USD per BTC text, e.g. "65000.12". */
export const formatBtcUsdRate = (rate: BtcUsdRate): string => formatScaled(rate.microUsdPerBtc, 6n)

// ---------------------------------------------------------------------------
// Conversions at a rate
// ---------------------------------------------------------------------------

/**
 * The msat that pay for `amountMicroUsd` at `rate`.
 * Rounding: UP to the next msat, so msat * rate >= µUSD * 10^11 always holds and a
 * charge never under-collects; it over-collects by less than one msat.
 */
export const usdToMsatForCharge = (amountMicroUsd: MicroUsd, rate: BtcUsdRate): Msat =>
  asMsat(ceilDivide(amountMicroUsd * MSAT_PER_BTC, rate.microUsdPerBtc))

/**
 * The USD value of `amountMsat` at `rate`.
 * Rounding: DOWN to the micro-dollar, so a balance or credit is never valued above
 * what the sats are worth.
 */
export const msatToMicroUsdValue = (amountMsat: Msat, rate: BtcUsdRate): MicroUsd =>
  asMicroUsd(floorDivide(amountMsat * rate.microUsdPerBtc, MSAT_PER_BTC))

/**
 * The wallet's total spendable value: the usd pocket plus the sats pocket valued at
 * `rate`, rounded DOWN (see `msatToMicroUsdValue`).
 */
export const spendableMicroUsd = (usdPocketMicroUsd: MicroUsd, satsPocketMsat: Msat, rate: BtcUsdRate): MicroUsd =>
  asMicroUsd(usdPocketMicroUsd + msatToMicroUsdValue(satsPocketMsat, rate))

/** What each pocket loses for one charge. */
export interface ChargeSplit {
  readonly fromUsdMicroUsd: MicroUsd
  readonly fromSatsMsat: Msat
}

/** The two pockets together cannot cover the price. */
export interface InsufficientFunds {
  readonly _tag: "InsufficientFunds"
  readonly priceMicroUsd: MicroUsd
  readonly spendableMicroUsd: MicroUsd
}

/**
 * Splits a charge across the two pockets: the usd pocket pays first, as much of the
 * price as it holds; the remainder is taken from the sats pocket at `rate`.
 * Rounding: the remainder is converted with `usdToMsatForCharge`, i.e. rounded UP to
 * the next msat.
 *
 * Succeeds exactly when `spendableMicroUsd(...) >= priceMicroUsd`: with the value
 * rounded down and the charge rounded up, both sides agree on whether the sats cover
 * the remainder.
 */
export const splitCharge = (options: {
  readonly priceMicroUsd: MicroUsd
  readonly usdPocketMicroUsd: MicroUsd
  readonly satsPocketMsat: Msat
  readonly rate: BtcUsdRate
}): Result.Result<ChargeSplit, InsufficientFunds> => {
  const { priceMicroUsd, rate, satsPocketMsat, usdPocketMicroUsd } = options
  const fromUsdMicroUsd = priceMicroUsd < usdPocketMicroUsd ? priceMicroUsd : usdPocketMicroUsd
  const remainderMicroUsd = asMicroUsd(priceMicroUsd - fromUsdMicroUsd)
  const fromSatsMsat = usdToMsatForCharge(remainderMicroUsd, rate)
  if (fromSatsMsat > satsPocketMsat) {
    return Result.fail({
      _tag: "InsufficientFunds",
      priceMicroUsd,
      spendableMicroUsd: spendableMicroUsd(usdPocketMicroUsd, satsPocketMsat, rate)
    })
  }
  return Result.succeed({ fromUsdMicroUsd, fromSatsMsat })
}
