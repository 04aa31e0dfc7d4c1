import { Schema } from "effect"

/**
 * Why an L402 token is refused. Each maps to one row of the error table
 * (docs/errors.md); none says more than the caller already knows.
 */

/** Unreadable token, bad signature, wrong preimage, a caveat this server does not know, or a payment not credited. */
export class L402TokenInvalid extends Schema.TaggedError<L402TokenInvalid>()("L402TokenInvalid", {
  reason: Schema.String
}) {
  readonly code = "L402_TOKEN_INVALID"
  override get message() {
    return `Invalid L402 token: ${this.reason}`
  }
}

/** Past the token's `valid_until` caveat. */
export class L402TokenExpired extends Schema.TaggedError<L402TokenExpired>()("L402TokenExpired", {
  expiredAt: Schema.String
}) {
  readonly code = "L402_TOKEN_EXPIRED"
  override get message() {
    return `This L402 token expired at ${this.expiredAt}; call without it for a new challenge`
  }
  get details() {
    return { expiredAt: this.expiredAt }
  }
}

/** The token's `capability` caveat names another capability. */
export class L402WrongCapability extends Schema.TaggedError<L402WrongCapability>()("L402WrongCapability", {
  capability: Schema.String,
  tokenCapability: Schema.String
}) {
  readonly code = "L402_WRONG_CAPABILITY"
  override get message() {
    return `This L402 token buys "${this.tokenCapability}", not "${this.capability}"`
  }
  get details() {
    return { capability: this.capability, tokenCapability: this.tokenCapability }
  }
}

/** The request's quote is above the token's `max_price_micro_usd` caveat. */
export class L402PriceExceeded extends Schema.TaggedError<L402PriceExceeded>()("L402PriceExceeded", {
  quotedMicroUsd: Schema.BigInt,
  maxPriceMicroUsd: Schema.BigInt
}) {
  readonly code = "L402_PRICE_EXCEEDED"
  override get message() {
    return "This request costs more than the L402 token's maximum price; call without the token for a new challenge"
  }
  get details() {
    return { quotedCost: Number(this.quotedMicroUsd) / 10_000, maxPrice: Number(this.maxPriceMicroUsd) / 10_000 }
  }
}

/** Every call the token's `calls` caveat allows has been made. */
export class L402TokenUsed extends Schema.TaggedError<L402TokenUsed>()("L402TokenUsed", {
  callsAllowed: Schema.Number
}) {
  readonly code = "L402_TOKEN_USED"
  override get message() {
    return `This L402 token has been used for all its ${this.callsAllowed} call(s); call without it for a new challenge`
  }
  get details() {
    return { callsAllowed: this.callsAllowed }
  }
}

export type L402Refusal = L402TokenInvalid | L402TokenExpired | L402WrongCapability | L402PriceExceeded | L402TokenUsed
