import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import type { InvoiceView } from "../../src/funding/Funding.ts"
import { Funding } from "../../src/funding/Funding.ts"
import { microUsdToCents, msatToSats } from "../../src/domain/Money.ts"
import { Api } from "./Api.ts"
import { toHttpError } from "./errors.ts"
import { CurrentPrincipal } from "./middleware.ts"

export const invoiceJson = (invoice: InvoiceView) => ({
  id: invoice.id,
  type: invoice.type,
  ...(invoice.amountMsat !== null ? { amountSats: msatToSats(invoice.amountMsat) } : {}),
  ...(invoice.amountMicroUsd !== null ? { amountUsdCents: microUsdToCents(invoice.amountMicroUsd) } : {}),
  status: invoice.status,
  createdAt: invoice.createdAt.toISOString(),
  expiresAt: invoice.expiresAt.toISOString(),
  ...(invoice.paidAt !== null ? { paidAt: invoice.paidAt.toISOString() } : {}),
  ...(invoice.paymentRequest !== null ? { paymentRequest: invoice.paymentRequest, paymentHash: invoice.externalId } : {}),
  ...(invoice.checkoutUrl !== null ? { checkoutUrl: invoice.checkoutUrl, sessionId: invoice.externalId } : {}),
  ...(invoice.latePaymentAt !== null ? { latePaymentAt: invoice.latePaymentAt.toISOString() } : {})
})

export const FundingHandlers = HttpApiBuilder.group(
  Api,
  "funding",
  Effect.fn(function*(handlers) {
    const funding = yield* Funding
    return handlers
      .handle("fund", ({ payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const invoice = yield* funding.fundLightning(principal, payload.amountSats).pipe(Effect.mapError(toHttpError))
          return {
            invoiceId: invoice.id,
            paymentRequest: invoice.paymentRequest ?? "",
            paymentHash: invoice.externalId,
            amountSats: msatToSats(invoice.amountMsat ?? 0n),
            expiresAt: invoice.expiresAt.toISOString()
          }
        }))
      .handle("fundCard", ({ payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const invoice = yield* funding.fundCard(principal, payload.amountUsdCents).pipe(Effect.mapError(toHttpError))
          return {
            invoiceId: invoice.id,
            checkoutUrl: invoice.checkoutUrl ?? "",
            sessionId: invoice.externalId,
            amountUsdCents: microUsdToCents(invoice.amountMicroUsd ?? 0n),
            expiresAt: invoice.expiresAt.toISOString()
          }
        }))
      .handle("invoices", ({ query }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const page = { limit: query.limit ?? 50, offset: query.offset ?? 0 }
          const result = yield* funding.invoices(principal, query.status, page).pipe(Effect.mapError(toHttpError))
          return { invoices: result.items.map(invoiceJson), total: result.total, ...page }
        }))
  })
)
