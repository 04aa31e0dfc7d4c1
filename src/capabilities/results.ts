import { Schema } from "effect"
import type { Capability } from "../domain/Capability.ts"
import type { ModelNotPriced, NotFound, SpendRefusal, ValidationError } from "../domain/errors.ts"
import type { UnsafeUrl } from "../ports/Net.ts"
import type { QuoteRefusal, StoredQuote } from "../quotes/Quote.ts"
import type { SpendReceipt } from "../wallet/Spend.ts"
import type { ProviderFailure } from "./Provider.ts"

/** What the capability pipeline answers and refuses (src/capabilities/Capabilities.ts, quoted.ts). */

export interface ExecutionResult<O> {
  readonly data: O
  readonly receipt: SpendReceipt
  readonly provider: string
  readonly model: string | undefined
  /** The binding quote that paid for the call, when it named one. */
  readonly quoteId?: string | undefined
}

export type ExecuteError =
  | SpendRefusal
  | QuoteRefusal
  | ProviderFailure
  | NotFound
  | ModelNotPriced
  | ValidationError
  | UnsafeUrl
  | NoProvider

export interface ExecuteOptions {
  /**
   * Run with this binding quote (`POST /v1/quotes`): on the quoted provider,
   * held at the quoted price and charged at most that price; the quote is
   * used up with the hold.
   */
  readonly quoteId?: string | undefined
}

/** A binding quote as issued: the stored quote and the estimate it was made from. */
export interface IssuedQuote {
  readonly quote: StoredQuote
  readonly estimate: Estimate
}

export type QuoteError = EstimateError | SpendRefusal

export interface CapabilitiesOptions {
  /** How long a quote can be used (default 60 s; 1 s to 1 h). */
  readonly quoteTtlMs: number
}

/** No configured (or healthy) provider can serve the capability. */
export class NoProvider extends Schema.TaggedError<NoProvider>()("NoProvider", {
  capability: Schema.String
}) {
  readonly code = "PROVIDER_UNAVAILABLE"
  override get message() {
    return `No configured provider can serve "${this.capability}" right now`
  }
  get details() {
    return { capability: this.capability }
  }
}

/** What a call would cost and whether it would be allowed now, with nothing held or charged. */
export interface Estimate {
  readonly capability: Capability
  readonly provider: string
  readonly model: string | undefined
  readonly quotedMicroUsd: bigint
  /** Null when allowed; else the refusal the spend pipeline would answer. */
  readonly refusal: SpendRefusal | null
  readonly remainingTodayMicroUsd: bigint | null
  readonly remainingThisMonthMicroUsd: bigint | null
  readonly remainingThisHourMicroUsd: bigint | null
}

export type EstimateError = NotFound | ModelNotPriced | ValidationError | UnsafeUrl | NoProvider
