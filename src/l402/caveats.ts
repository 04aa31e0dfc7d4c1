import { Result } from "effect"
import { caveatPairs } from "./macaroon.ts"
import { L402TokenExpired, L402TokenInvalid, type L402Refusal, L402WrongCapability } from "./errors.ts"

/**
 * The caveats of a Spendgate L402 token, first-party `key=value` strings:
 *
 * - `capability=<name>`: the one capability the token buys;
 * - `max_price_micro_usd=<n>`: the most one call may be quoted at (USD, micro-dollars);
 * - `valid_until=<unix seconds>`: when the token stops being accepted;
 * - `calls=<n>`: how many calls it pays for in all.
 *
 * Caveats only narrow: a holder may append any of them again (the strictest
 * value wins), and the signature chain keeps anyone from removing one. A
 * caveat this server does not know fails the token (closed by default).
 */

export const CAVEAT_CAPABILITY = "capability"
export const CAVEAT_MAX_PRICE = "max_price_micro_usd"
export const CAVEAT_VALID_UNTIL = "valid_until"
export const CAVEAT_CALLS = "calls"

export interface TokenTerms {
  readonly capability: string
  readonly maxPriceMicroUsd: bigint
  readonly validUntilSeconds: number
  readonly calls: number
}

export const termsCaveats = (terms: TokenTerms): ReadonlyArray<string> => [
  `${CAVEAT_CAPABILITY}=${terms.capability}`,
  `${CAVEAT_MAX_PRICE}=${terms.maxPriceMicroUsd}`,
  `${CAVEAT_VALID_UNTIL}=${terms.validUntilSeconds}`,
  `${CAVEAT_CALLS}=${terms.calls}`
]

const wholeNumber = /^(0|[1-9][0-9]{0,17})$/

/**
 * The terms the caveats grant, checked against the call: the capability
 * asked for and the time now. Each of the four must appear at least once.
 */
export const checkCaveats = (
  caveats: ReadonlyArray<string>,
  call: { readonly capability: string; readonly nowMs: number }
): Result.Result<TokenTerms, L402Refusal> => {
  let capability: string | undefined
  let maxPrice: bigint | undefined
  let validUntil: number | undefined
  let calls: number | undefined
  const invalid = (reason: string) => Result.fail(new L402TokenInvalid({ reason }))
  for (const [key, value] of caveatPairs(caveats)) {
    switch (key) {
      case CAVEAT_CAPABILITY:
        if (capability !== undefined && capability !== value) return invalid("contradictory capability caveats")
        capability = value
        break
      case CAVEAT_MAX_PRICE: {
        if (!wholeNumber.test(value)) return invalid(`bad ${CAVEAT_MAX_PRICE} caveat`)
        const price = BigInt(value)
        maxPrice = maxPrice === undefined || price < maxPrice ? price : maxPrice
        break
      }
      case CAVEAT_VALID_UNTIL: {
        if (!wholeNumber.test(value)) return invalid(`bad ${CAVEAT_VALID_UNTIL} caveat`)
        const until = Number(value)
        validUntil = validUntil === undefined || until < validUntil ? until : validUntil
        break
      }
      case CAVEAT_CALLS: {
        if (!wholeNumber.test(value) || Number(value) < 1 || Number(value) > 1_000_000) return invalid(`bad ${CAVEAT_CALLS} caveat`)
        const n = Number(value)
        calls = calls === undefined || n < calls ? n : calls
        break
      }
      default:
        return invalid(`unknown caveat "${key.slice(0, 40)}"`)
    }
  }
  if (capability === undefined || maxPrice === undefined || validUntil === undefined || calls === undefined) {
    return invalid("missing caveats")
  }
  if (call.nowMs >= validUntil * 1000) {
    return Result.fail(new L402TokenExpired({ expiredAt: new Date(validUntil * 1000).toISOString() }))
  }
  if (capability !== call.capability) {
    return Result.fail(new L402WrongCapability({ capability: call.capability, tokenCapability: capability }))
  }
  return Result.succeed({ capability, maxPriceMicroUsd: maxPrice, validUntilSeconds: validUntil, calls })
}
