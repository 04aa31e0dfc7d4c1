import { Effect, Result, Schema } from "effect"
import type { Capability } from "../domain/Capability.ts"
import { NotFound } from "../domain/errors.ts"
import { type AccountId, type AgentId, sortableRandomId } from "../domain/ids.ts"
import type { MicroUsd } from "../domain/Money.ts"

/**
 * Binding quotes (docs/quotes.md): `POST /v1/quotes` fixes the provider and
 * the price of one call for a short time; the call made with the quote is
 * held at that price, charged at most that price, runs on that provider, and
 * uses the quote up. The rule that decides whether a quote may be used
 * (`checkQuoteUse`) is pure: every store applies it under the wallet lock,
 * in the transaction that makes the hold, so memory, PGlite and PostgreSQL
 * cannot disagree and two calls with one quote cannot both hold.
 */

/** How long a quote can be used, by default. */
export const DEFAULT_QUOTE_TTL_MS = 60_000
/** Bounds of the configurable lifetime. */
export const MIN_QUOTE_TTL_MS = 1_000
export const MAX_QUOTE_TTL_MS = 3_600_000

export const QuoteId = Schema.String.check(Schema.isPattern(/^quo_[A-Za-z0-9]{24}$/)).annotate({
  description: "A quote id, `quo_` and 24 characters of [A-Za-z0-9]"
})
export type QuoteId = typeof QuoteId.Type

export const newQuoteId = (): string => `quo_${sortableRandomId()}`

export interface StoredQuote {
  readonly id: string
  readonly accountId: AccountId
  readonly agentId: AgentId
  readonly capability: Capability
  readonly provider: string
  readonly model: string | null
  /** `requestHash` of the capability and input the quote was given for. */
  readonly requestHash: string
  /** The price: the hold of the call made with the quote, and the most it is charged. */
  readonly quotedMicroUsd: MicroUsd
  readonly createdAt: Date
  readonly expiresAt: Date
  /** When a call made with it was held (the quote is used up); null while unused. */
  readonly usedAt: Date | null
  /** The reservation of that call. */
  readonly reservationId: string | null
}

export class QuoteExpired extends Schema.TaggedError<QuoteExpired>()("QuoteExpired", {
  quoteId: Schema.String,
  expiresAt: Schema.Date
}) {
  readonly code = "QUOTE_EXPIRED"
  override get message() {
    return `Quote ${this.quoteId} expired at ${this.expiresAt.toISOString()}; ask for a new one`
  }
  get details() {
    return { quoteId: this.quoteId, expiresAt: this.expiresAt.toISOString() }
  }
}

export class QuoteUsed extends Schema.TaggedError<QuoteUsed>()("QuoteUsed", {
  quoteId: Schema.String,
  usedAt: Schema.Date
}) {
  readonly code = "QUOTE_USED"
  override get message() {
    return `Quote ${this.quoteId} was already used; a quote pays for one call`
  }
  get details() {
    return { quoteId: this.quoteId, usedAt: this.usedAt.toISOString() }
  }
}

export class QuoteMismatch extends Schema.TaggedError<QuoteMismatch>()("QuoteMismatch", {
  quoteId: Schema.String,
  field: Schema.Literals(["capability", "input"])
}) {
  readonly code = "QUOTE_MISMATCH"
  override get message() {
    return this.field === "capability"
      ? `Quote ${this.quoteId} was given for another capability`
      : `Quote ${this.quoteId} was given for a different input; the call must send the quoted input unchanged`
  }
  get details() {
    return { quoteId: this.quoteId, field: this.field }
  }
}

/** Why a call may not use the quote it names; the quote is left as it was. */
export type QuoteRefusal = NotFound | QuoteExpired | QuoteUsed | QuoteMismatch

/** What the call that names a quote is. */
export interface QuoteUse {
  readonly quoteId: string
  readonly agentId: AgentId
  readonly capability: Capability
  readonly requestHash: string
  readonly now: Date
}

/**
 * Whether a call may use a quote, in this order: the quote must exist and
 * belong to the calling agent (another agent's or account's quote is 404,
 * so existence never leaks), be unused (409 QUOTE_USED), unexpired at `now`
 * (409 QUOTE_EXPIRED; a quote is good until, not at, `expiresAt`), and be for
 * the same capability and input (409 QUOTE_MISMATCH).
 */
export const checkQuoteUse = (quote: StoredQuote | null, use: QuoteUse): Result.Result<StoredQuote, QuoteRefusal> => {
  if (quote === null || quote.id !== use.quoteId || quote.agentId !== use.agentId) {
    return Result.fail(new NotFound({ resource: "Quote" }))
  }
  if (quote.usedAt !== null) return Result.fail(new QuoteUsed({ quoteId: quote.id, usedAt: quote.usedAt }))
  if (use.now.getTime() >= quote.expiresAt.getTime()) {
    return Result.fail(new QuoteExpired({ quoteId: quote.id, expiresAt: quote.expiresAt }))
  }
  if (quote.capability !== use.capability) return Result.fail(new QuoteMismatch({ quoteId: quote.id, field: "capability" }))
  if (quote.requestHash !== use.requestHash) return Result.fail(new QuoteMismatch({ quoteId: quote.id, field: "input" }))
  return Result.succeed(quote)
}

/**
 * The canonical text of a JSON value: object keys sorted, no white space,
 * `undefined` members left out. Two inputs that decode to the same value
 * (whatever their key order or spacing) have the same text.
 */
export const canonicalJson = (value: unknown): string => {
  if (value === null || typeof value !== "object") {
    if (typeof value === "bigint") return JSON.stringify(value.toString())
    return JSON.stringify(value) ?? "null"
  }
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`
  const entries = Object.keys(value)
    .filter((key) => (value as Record<string, unknown>)[key] !== undefined)
    .sort()
    .map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`)
  return `{${entries.join(",")}}`
}

/** Lower-case hex SHA-256 of the canonical `{ capability, input }`: what a quote is bound to. */
export const requestHash = (capability: Capability, input: unknown): Effect.Effect<string> =>
  Effect.promise(() =>
    globalThis.crypto.subtle.digest("SHA-256", new TextEncoder().encode(canonicalJson({ capability, input })))
  ).pipe(Effect.map((digest) => {
    let hex = ""
    for (const byte of new Uint8Array(digest)) hex += byte.toString(16).padStart(2, "0")
    return hex
  }))
