import { type Effect, type Result, Schema } from "effect"
import type { ModelNotPriced, NotFound, ValidationError } from "../domain/errors.ts"
import type { BuiltCapability, CapabilityIO } from "./schemas.ts"

/**
 * The provider port. A provider serves one capability: it declares its
 * price card (and models, for `reason`), quotes an upper bound of a call's
 * cost before anything is spent, and runs the call, metering the actual cost
 * from the upstream's own usage report. Adding a provider is one adapter
 * file plus one price-card entry.
 */

/** Why an upstream call failed. Every such failure releases the hold; the next provider may be tried. */
export class ProviderFailure extends Schema.TaggedError<ProviderFailure>()("ProviderFailure", {
  provider: Schema.String,
  reason: Schema.Literals(["timeout", "rate_limited", "unavailable", "rejected", "malformed", "too_large", "network", "blocked"]),
  message: Schema.String
}) {
  readonly code = "PROVIDER_ERROR"
  get details() {
    return { provider: this.provider }
  }
}

/** A model a `reason` provider offers, with its prices in micro-dollars per 1000 tokens. */
export interface ModelInfo {
  readonly id: string
  readonly inputPer1kMicroUsd: bigint
  readonly outputPer1kMicroUsd: bigint
  /**
   * Prompt tokens the upstream served from its prompt cache (OpenAI's
   * `cached_tokens`, Anthropic's `cache_read_input_tokens`); absent: the input price.
   * Never above the input price (checked when the card is read).
   */
  readonly cachedInputPer1kMicroUsd?: bigint | undefined
  /**
   * Prompt tokens written to the upstream's prompt cache (Anthropic's
   * `cache_creation_input_tokens`, billed above input); absent: the input price.
   * The quote bounds prompt tokens at the higher of this and the input price.
   */
  readonly cacheWritePer1kMicroUsd?: bigint | undefined
  /** The model's context window (prompt plus completion), when the card gives it. */
  readonly contextTokens?: number | undefined
  /** The most completion tokens a call may ask for. */
  readonly maxTokens: number
  /** Completion tokens asked for when the caller gives no `maxTokens`. */
  readonly defaultMaxTokens: number
}

/** A flat price: micro-dollars per unit (`query`, `page`, `second`, `image`, `1k_chars`, `message`, `segment`). */
export interface UnitPrice {
  readonly per: string
  readonly priceMicroUsd: bigint
}

export interface Quote {
  /** Upper bound of the cost, in micro-dollars. */
  readonly microUsd: bigint
  /** The model the call will use (`reason`). */
  readonly model?: string | undefined
  /** The completion-token cap the upstream is called with (`reason`). */
  readonly maxTokens?: number | undefined
}

export interface Metered<O> {
  readonly output: O
  /** What the upstream reports was used, priced; the pipeline charges at most the quote. */
  readonly actualMicroUsd: bigint
  readonly model?: string | undefined
}

export interface Provider<C extends BuiltCapability = BuiltCapability> {
  readonly name: string
  readonly capability: C
  /** `reason` providers: the models offered; the first is the default. */
  readonly models?: ReadonlyArray<ModelInfo> | undefined
  /** Other capabilities: the flat price. */
  readonly unitPrice?: UnitPrice | undefined
  /** What the provider found at start-up about working here (see ProviderStatus); absent: able. */
  readonly status?: { readonly ok: true; readonly degraded?: string | undefined } | { readonly ok: false; readonly reason: string } | undefined
  /** A model its price card does not list → ModelNotPriced; input the provider cannot take → ValidationError. */
  readonly quote: (input: CapabilityIO[C]["input"]) => Result.Result<Quote, NotFound | ModelNotPriced | ValidationError>
  readonly run: (
    input: CapabilityIO[C]["input"],
    quote: Quote
  ) => Effect.Effect<Metered<CapabilityIO[C]["output"]>, ProviderFailure>
}

export type AnyProvider = { readonly [C in BuiltCapability]: Provider<C> }[BuiltCapability]

