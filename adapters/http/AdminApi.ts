import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { BadRequest, Conflict, NotFound } from "./errors.ts"
import { SubmissionResponse } from "./ServicesApi.ts"
import { InvoiceResponse } from "./FundingApi.ts"
import { AgentResponse } from "./resources.ts"
import { IsoDate, TransactionResponse } from "./WalletApi.ts"
import { AccessControl, AdminAuthentication, IdempotencyKeys } from "./middleware.ts"
import { Cents } from "../../src/domain/Money.ts"
import { MAX_REFUND_REASON_LENGTH } from "../../src/admin/Admin.ts"

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

const Paging = {
  limit: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100 }))),
  offset: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 1_000_000_000 })))
}
const Id = Schema.String.check(Schema.isMaxLength(64))
const list = <S extends Schema.Top>(key: string, item: S) =>
  Schema.Struct({ [key]: Schema.Array(item), total: Schema.Number, limit: Schema.Number, offset: Schema.Number })

export const StatsResponse = Schema.Struct({
  from: Schema.String,
  until: Schema.String,
  accounts: Schema.Number,
  agents: Schema.Struct({ total: Schema.Number, killed: Schema.Number, owners: Schema.Number }),
  balances: Schema.Struct({ usdCents: Schema.Number, sats: Schema.Number }),
  spend: Schema.Array(Schema.Struct({
    day: Schema.String,
    capability: Schema.String,
    provider: Schema.String,
    calls: Schema.Number,
    amountUsdCents: Schema.Number
  })),
  funding: Schema.Array(Schema.Struct({
    day: Schema.String,
    pocket: Schema.Literals(["usd", "sats"]),
    credits: Schema.Number,
    usdCents: Schema.Number,
    sats: Schema.Number
  }))
})

export const AdminAuditRecord = Schema.Struct({
  id: Schema.String,
  accountId: Schema.String,
  seq: Schema.Number,
  kind: Schema.String,
  agentId: Schema.NullOr(Schema.String),
  reservationId: Schema.NullOr(Schema.String),
  transactionId: Schema.NullOr(Schema.String),
  amountUsdCents: Schema.Number,
  pocketChange: Schema.Struct({ usdCents: Schema.Number, sats: Schema.Number }),
  details: Schema.Unknown,
  createdAt: Schema.String,
  prevHash: Schema.String,
  hash: Schema.String
})

export const ServiceHealthResponse = Schema.Struct({
  providers: Schema.Array(Schema.Struct({
    name: Schema.String,
    capability: Schema.String,
    configured: Schema.Boolean,
    status: Schema.Literals(["ok", "degraded", "unavailable"]),
    reason: Schema.optional(Schema.String),
    circuit: Schema.Literals(["closed", "open", "half-open"]),
    calls: Schema.Number,
    successRate: Schema.NullOr(Schema.Number),
    p50LatencyMs: Schema.NullOr(Schema.Number),
    p95LatencyMs: Schema.NullOr(Schema.Number),
    lastError: Schema.NullOr(Schema.String),
    lastErrorAt: Schema.NullOr(Schema.String)
  }))
})

export const RefundRequest = Schema.Struct({
  amountUsdCents: Schema.optional(Cents).annotate({
    description: "USD cents to refund, more than 0 and at most what remains of the charge; leave out to refund all that remains"
  }),
  reason: Schema.Trim.check(
    Schema.isMinLength(1, { message: "reason must not be empty" }),
    Schema.isMaxLength(MAX_REFUND_REASON_LENGTH, { message: `reason must be at most ${MAX_REFUND_REASON_LENGTH} characters` }),
    Schema.isPattern(/^[^\u0000-\u001f\u007f]*$/, { message: "reason must not contain control characters" })
  ).annotate({ description: "Why the charge is refunded; kept on the refund and in the audit log" })
})

export const RefundResponse = Schema.Struct({
  refund: Schema.Struct({ ...TransactionResponse.fields, accountId: Schema.String, reason: Schema.String }),
  charge: Schema.Struct({
    id: Schema.String,
    amountUsdCents: Schema.Number,
    refundedUsdCents: Schema.Number.annotate({ description: "All refunds of the charge so far, this one included" }),
    remainingUsdCents: Schema.Number.annotate({ description: "What may still be refunded" }),
    refundedPockets: Schema.Struct({ usdCents: Schema.Number, sats: Schema.Number })
  }),
  wallet: Schema.Struct({ balanceUsdCents: Schema.Number, balanceSats: Schema.Number })
})

const Review = Schema.Struct({ note: Schema.optional(Schema.String.check(Schema.isMaxLength(2000))) })

export class AdminApi extends HttpApiGroup.make("admin")
  .add(
    HttpApiEndpoint.get("stats", "/v1/admin/stats", {
      query: { days: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 366 }))) },
      success: StatsResponse,
      error: BadRequest
    }),
    HttpApiEndpoint.get("agents", "/v1/admin/agents", {
      query: {
        accountId: Schema.optional(Id),
        role: Schema.optional(Schema.Literals(["owner", "agent"])),
        killed: Schema.optional(Schema.Literals(["true", "false"])),
        ...Paging
      },
      success: list("agents", Schema.Struct({ ...AgentResponse.fields, accountId: Schema.String })),
      error: BadRequest
    }),
    HttpApiEndpoint.get("transactions", "/v1/admin/transactions", {
      query: {
        accountId: Schema.optional(Id),
        agentId: Schema.optional(Id),
        type: Schema.optional(Schema.Literals(["charge", "credit", "refund"])),
        startDate: Schema.optional(IsoDate),
        endDate: Schema.optional(IsoDate),
        ...Paging
      },
      success: list("transactions", Schema.Struct({ ...TransactionResponse.fields, accountId: Schema.String })),
      error: BadRequest
    }),
    HttpApiEndpoint.post("refund", "/v1/admin/transactions/:id/refund", {
      params: { id: Id },
      payload: RefundRequest,
      success: RefundResponse.pipe(HttpApiSchema.status(201)),
      // 400 bad input or amount 0; 404 unknown transaction; 409 REFUND_EXCEEDS_CHARGE, or CONFLICT when not a charge.
      error: [BadRequest, NotFound, Conflict]
    }).middleware(IdempotencyKeys),
    HttpApiEndpoint.get("auditLogs", "/v1/admin/audit-logs", {
      query: {
        accountId: Schema.optional(Id),
        kind: Schema.optional(Schema.Literals(["reserve", "settle", "release", "credit", "refund"])),
        startDate: Schema.optional(IsoDate),
        endDate: Schema.optional(IsoDate),
        ...Paging
      },
      success: list("auditLogs", AdminAuditRecord),
      error: BadRequest
    }),
    HttpApiEndpoint.get("serviceHealth", "/v1/admin/service-health", { success: ServiceHealthResponse, error: BadRequest }),
    HttpApiEndpoint.get("submissions", "/v1/admin/registry/submissions", {
      query: { status: Schema.optional(Schema.Literals(["pending", "approved", "rejected"])), ...Paging },
      success: list("submissions", Schema.Struct({ ...SubmissionResponse.fields, accountId: Schema.String })),
      error: BadRequest
    }),
    HttpApiEndpoint.post("approve", "/v1/admin/registry/submissions/:id/approve", {
      params: { id: Id },
      payload: Review,
      success: SubmissionResponse,
      error: [BadRequest, NotFound, Conflict]
    }),
    HttpApiEndpoint.post("reject", "/v1/admin/registry/submissions/:id/reject", {
      params: { id: Id },
      payload: Review,
      success: SubmissionResponse,
      error: [BadRequest, NotFound, Conflict]
    }),
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
  .middleware(AccessControl)
  .middleware(AdminAuthentication)
  .annotateMerge(OpenApi.annotations({ title: "Admin", description: "The operator's API (Bearer ADMIN_TOKEN)" }))
{}
