import { Clock, Effect, Option, Result } from "effect"
import type { Principal } from "../domain/Agent.ts"
import { MicroUsd } from "../domain/Money.ts"
import type { UnsafeUrl } from "../ports/Net.ts"
import type { QuoteClaim, Store } from "../ports/Store.ts"
import { checkQuoteUse, newQuoteId, requestHash, type StoredQuote } from "../quotes/Quote.ts"
import type { Estimate, EstimateError, ExecuteError, ExecutionResult, IssuedQuote, NoProvider, QuoteError } from "./results.ts"
import type { Provider, Quote } from "./Provider.ts"
import type { BuiltCapability, CapabilityIO } from "./schemas.ts"

/**
 * Binding quotes on top of the capability pipeline (docs/quotes.md): issuing
 * one from the estimate, and a call made with one. The rule deciding whether
 * a call may use a quote is `checkQuoteUse` (src/quotes/Quote.ts); the store
 * applies it again, and uses the quote up, in the atomic step of the hold.
 */

/** A binding quote on its way to the hold: the price held, and the claim the store checks and uses up. */
export interface Bound {
  readonly quotedMicroUsd: bigint
  readonly claim: QuoteClaim
}

/** What the quote calls need from the capability pipeline. */
export interface QuotedParts {
  readonly store: Store["Service"]
  readonly quoteTtlMs: number
  readonly estimate: <C extends BuiltCapability>(
    principal: Principal,
    capability: C,
    input: CapabilityIO[C]["input"]
  ) => Effect.Effect<Estimate, EstimateError>
  /** The configured provider of this name if it can be used now (usable here, circuit closed); else NoProvider. */
  readonly providerNow: <C extends BuiltCapability>(capability: C, name: string) => Effect.Effect<Provider<C>, NoProvider>
  /** The caller's URL (read, scrape) checked, as before any call. */
  readonly checkUrl: (input: unknown) => Effect.Effect<void, UnsafeUrl>
  /** One call on one provider through the spend pipeline (no fallback). */
  readonly attempt: <C extends BuiltCapability>(
    principal: Principal,
    capability: C,
    provider: Provider<C>,
    input: CapabilityIO[C]["input"],
    quote: Quote,
    bound: Bound
  ) => Effect.Effect<ExecutionResult<CapabilityIO[C]["output"]>, ExecuteError>
}

export const quotedCalls = (parts: QuotedParts) => {
  const { store, quoteTtlMs } = parts

  /**
   * The estimate of the call; when the spend rules would refuse it now, that
   * refusal and nothing stored; else a stored quote for the calling agent.
   */
  const issue = <C extends BuiltCapability>(
    principal: Principal,
    capability: C,
    input: CapabilityIO[C]["input"]
  ): Effect.Effect<IssuedQuote, QuoteError> =>
    Effect.gen(function*() {
      const found = yield* parts.estimate(principal, capability, input)
      if (found.refusal !== null) return yield* Effect.fail(found.refusal)
      const createdAt = new Date(yield* Clock.currentTimeMillis)
      const stored: StoredQuote = {
        id: newQuoteId(),
        accountId: principal.agent.accountId,
        agentId: principal.agent.id,
        capability,
        provider: found.provider,
        model: found.model ?? null,
        requestHash: yield* requestHash(capability, input),
        quotedMicroUsd: MicroUsd.make(found.quotedMicroUsd),
        createdAt,
        expiresAt: new Date(createdAt.getTime() + quoteTtlMs),
        usedAt: null,
        reservationId: null
      }
      yield* store.createQuote(stored)
      return { quote: stored, estimate: found }
    })

  /**
   * A call made with a binding quote. Checked first without the lock (so a
   * call that cannot use the quote reaches no provider), then again under
   * the wallet lock with the hold, which uses the quote up. Only the
   * quoted provider runs: when it cannot be used now (gone, unusable, its
   * circuit open), 503 PROVIDER_UNAVAILABLE and the quote stays unused.
   * The hold is the quoted price, even when the provider's quote is now
   * higher; the charge is the actual cost, never above the quoted price.
   */
  const execute = <C extends BuiltCapability>(
    principal: Principal,
    capability: C,
    input: CapabilityIO[C]["input"],
    quoteId: string
  ): Effect.Effect<ExecutionResult<CapabilityIO[C]["output"]>, ExecuteError> =>
    Effect.gen(function*() {
      const { accountId, id: agentId } = principal.agent
      const hash = yield* requestHash(capability, input)
      const use = (quote: StoredQuote | null, now: Date) =>
        checkQuoteUse(quote, { quoteId, agentId, capability, requestHash: hash, now })
      const found = yield* store.findQuote(accountId, quoteId)
      const early = use(Option.getOrNull(found), new Date(yield* Clock.currentTimeMillis))
      if (Result.isFailure(early)) return yield* Effect.fail(early.failure)
      const stored = early.success
      const provider = yield* parts.providerNow(capability, stored.provider)
      yield* parts.checkUrl(input)
      const fresh = provider.quote(input)
      if (Result.isFailure(fresh)) return yield* Effect.fail(fresh.failure)
      // Checked again under the wallet lock, at the reservation's time, and used up with the hold.
      const result = yield* parts.attempt(principal, capability, provider, input, fresh.success, {
        quotedMicroUsd: stored.quotedMicroUsd,
        claim: { quoteId, check: use }
      })
      return { ...result, quoteId }
    })

  return { issue, execute }
}
