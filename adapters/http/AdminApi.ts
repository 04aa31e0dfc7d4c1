import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { BadRequest } from "./errors.ts"
import { InvoiceResponse } from "./FundingApi.ts"
import { AdminAuthentication } from "./middleware.ts"

/** The operator's API, behind ADMIN_TOKEN; 404 when no token is configured. */

export const RateResponse = Schema.Struct({
  rate: Schema.NullOr(Schema.Number).annotate({ description: "USD per BTC" }),
  asOf: Schema.NullOr(Schema.String),
  stale: Schema.Boolean.annotate({ description: "True when the rate may not be used: sats cannot pay" }),
  sources: Schema.Array(Schema.Struct({
    name: Schema.String,
    ok: Schema.Boolean,
    rate: Schema.optional(Schema.Number),
    error: Schema.optional(Schema.String),
    at: Schema.String
  }))
})

export class AdminApi extends HttpApiGroup.make("admin")
  .add(
    HttpApiEndpoint.get("rate", "/v1/admin/rate", { success: RateResponse, error: BadRequest }),
    HttpApiEndpoint.get("latePayments", "/v1/admin/late-payments", {
      query: {
        limit: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100 }))),
        offset: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 1_000_000_000 })))
      },
      success: Schema.Struct({
        invoices: Schema.Array(Schema.Struct({
          ...InvoiceResponse.fields,
          accountId: Schema.String,
          latePaymentAmountSats: Schema.optional(Schema.Number),
          latePaymentAmountUsdCents: Schema.optional(Schema.Number)
        })),
        total: Schema.Number,
        limit: Schema.Number,
        offset: Schema.Number
      }),
      error: BadRequest
    })
  )
  .middleware(AdminAuthentication)
  .annotateMerge(OpenApi.annotations({ title: "Admin", description: "The operator's API (Bearer ADMIN_TOKEN)" }))
{}
