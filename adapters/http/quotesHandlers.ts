import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Capabilities, type IssuedQuote } from "../../src/capabilities/Capabilities.ts"
import type { BuiltCapability, CapabilityIO } from "../../src/capabilities/schemas.ts"
import { microUsdToCents } from "../../src/domain/Money.ts"
import { Api } from "./Api.ts"
import { failAsHttpError } from "./errors.ts"
import { CurrentPrincipal } from "./middleware.ts"

/** A quote on the wire: USD cents, ISO 8601 times, and what is left of the caps as the estimate says. */
export const quoteJson = ({ estimate, quote }: IssuedQuote) => ({
  quoteId: quote.id,
  capability: quote.capability,
  provider: quote.provider,
  ...(quote.model === null ? {} : { model: quote.model }),
  quotedUsdCents: microUsdToCents(quote.quotedMicroUsd),
  createdAt: quote.createdAt.toISOString(),
  expiresAt: quote.expiresAt.toISOString(),
  remainingTodayUsdCents: estimate.remainingTodayMicroUsd === null ? null : microUsdToCents(estimate.remainingTodayMicroUsd),
  remainingThisMonthUsdCents: estimate.remainingThisMonthMicroUsd === null
    ? null
    : microUsdToCents(estimate.remainingThisMonthMicroUsd),
  remainingThisHourUsdCents: estimate.remainingThisHourMicroUsd === null
    ? null
    : microUsdToCents(estimate.remainingThisHourMicroUsd)
})

export const QuotesHandlers = HttpApiBuilder.group(
  Api,
  "quotes",
  Effect.fn(function*(handlers) {
    const capabilities = yield* Capabilities
    return handlers.handle("create", ({ payload }) =>
      Effect.flatMap(CurrentPrincipal, (principal) =>
        capabilities.quote(
          principal,
          payload.capability as BuiltCapability,
          payload.input as CapabilityIO[BuiltCapability]["input"]
        ).pipe(Effect.map(quoteJson), Effect.catch(failAsHttpError))))
  })
)
