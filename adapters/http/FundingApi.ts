import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { BadGateway, BadRequest, Forbidden, NotFound } from "./errors.ts"
import { AccessControl, Authentication, IdempotencyKeys } from "./middleware.ts"

/** Funding the wallet: Lightning invoices, card checkout sessions, and their list. */

const Timestamp = Schema.String.annotate({ description: "ISO 8601 timestamp (UTC)" })

export const InvoiceResponse = Schema.Struct({
  id: Schema.String,
  type: Schema.Literals(["lightning", "card"]),
  amountSats: Schema.optional(Schema.Number),
  amountUsdCents: Schema.optional(Schema.Number),
  status: Schema.Literals(["pending", "paid", "expired", "refused"]).annotate({
    description: "refused: paid in time, but the credit would take the wallet pocket above its maximum " +
      "($1,000,000,000 in USD, 10^12 sats); recorded, not credited; contact the operator"
  }),
  createdAt: Timestamp,
  expiresAt: Timestamp,
  paidAt: Schema.optional(Timestamp),
  paymentRequest: Schema.optional(Schema.String),
  paymentHash: Schema.optional(Schema.String),
  checkoutUrl: Schema.optional(Schema.String),
  sessionId: Schema.optional(Schema.String),
  latePaymentAt: Schema.optional(Timestamp).annotate({
    description: "A payment was recorded and not credited (it arrived after expiry, or the invoice was refused); contact the operator"
  })
})

const errors = [BadRequest, Forbidden, NotFound, BadGateway] as const

export class FundingApi extends HttpApiGroup.make("funding")
  .add(
    HttpApiEndpoint.post("fund", "/v1/wallet/fund", {
      payload: Schema.Struct({
        amountSats: Schema.Number.annotate({
          description: "Whole number of sats from 1 to 100,000,000 (1 BTC); otherwise 400 INVALID_AMOUNT with details { minimum, maximum }"
        })
      }),
      success: Schema.Struct({
        invoiceId: Schema.String,
        paymentRequest: Schema.String.annotate({ description: "BOLT11 invoice" }),
        paymentHash: Schema.String,
        amountSats: Schema.Number,
        expiresAt: Timestamp
      }),
      error: errors
    }).middleware(IdempotencyKeys),
    HttpApiEndpoint.post("fundCard", "/v1/wallet/fund-card", {
      payload: Schema.Struct({
        amountUsdCents: Schema.Number.annotate({
          description: "Whole cents from 1000 ($10) to 10,000,000 ($100,000); otherwise 400 INVALID_AMOUNT with details { minimum, maximum }"
        })
      }),
      success: Schema.Struct({
        invoiceId: Schema.String,
        checkoutUrl: Schema.String,
        sessionId: Schema.String,
        amountUsdCents: Schema.Number,
        expiresAt: Timestamp
      }),
      error: errors
    }).middleware(IdempotencyKeys),
    HttpApiEndpoint.get("invoices", "/v1/wallet/invoices", {
      query: {
        status: Schema.optional(Schema.Literals(["pending", "paid", "expired", "refused"])),
        limit: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100 }))),
        offset: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 1_000_000_000 })))
      },
      success: Schema.Struct({
        invoices: Schema.Array(InvoiceResponse),
        total: Schema.Number,
        limit: Schema.Number,
        offset: Schema.Number
      }),
      error: errors
    })
  )
  .middleware(AccessControl)
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Funding", description: "Lightning invoices and card checkout" }))
{}
