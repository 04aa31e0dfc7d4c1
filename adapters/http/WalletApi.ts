import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { AccessControl, Authentication } from "./middleware.ts"
import { BadRequest, Forbidden, NotFound } from "./errors.ts"
import { MAX_SPEND_DAYS } from "../../src/wallet/reports.ts"

/** The wallet, its ledger and audit receipts: the HTTP contract. */

const Timestamp = Schema.String.annotate({ description: "ISO 8601 timestamp (UTC)" })
const PathId = Schema.String.check(Schema.isMaxLength(64))

/** A calendar date YYYY-MM-DD that exists (no 2026-02-30). */
export const IsoDate = Schema.String.check(
  Schema.makeFilter((text: string) => {
    if (!/^\d{4}-\d{2}-\d{2}$/.test(text)) return "Expected a date as YYYY-MM-DD"
    const parsed = new Date(`${text}T00:00:00.000Z`)
    return !Number.isNaN(parsed.getTime()) && parsed.toISOString().slice(0, 10) === text
      ? undefined
      : "Expected a calendar date that exists"
  })
)

export const WalletResponse = Schema.Struct({
  accountId: Schema.String,
  balanceUsdCents: Schema.Number,
  balanceSats: Schema.Number,
  spendableUsdCents: Schema.Number.annotate({
    description: "usd pocket plus the sats pocket at the current BTC/USD rate (usd only when no rate is known)"
  })
})

export const AgentWalletResponse = Schema.Struct({
  ...WalletResponse.fields,
  agentId: Schema.String,
  dailySpentUsdCents: Schema.Number,
  lifetimeSpentUsdCents: Schema.Number
})

const Pockets = Schema.Struct({ usdCents: Schema.Number, sats: Schema.Number })

export const TransactionResponse = Schema.Struct({
  id: Schema.String,
  type: Schema.Literals(["charge", "credit", "refund"]),
  amountUsdCents: Schema.Number,
  amountSats: Schema.Number,
  description: Schema.String,
  agentId: Schema.NullOr(Schema.String),
  capability: Schema.NullOr(Schema.String),
  provider: Schema.NullOr(Schema.String),
  auditId: Schema.String,
  createdAt: Timestamp,
  pockets: Pockets.annotate({ description: "What each pocket lost (charge) or gained (credit, refund)" }),
  btcUsdRate: Schema.NullOr(Schema.Number).annotate({ description: "The rate snapshot used, USD per BTC" }),
  refundOf: Schema.optional(Schema.String).annotate({ description: "For a refund: the id of the charge it refunds" })
})

export const AuditResponse = Schema.Struct({
  id: Schema.String,
  seq: Schema.Number,
  kind: Schema.Literals(["reserve", "settle", "release", "credit", "refund"]),
  agentId: Schema.NullOr(Schema.String),
  reservationId: Schema.NullOr(Schema.String),
  transactionId: Schema.NullOr(Schema.String),
  amountUsdCents: Schema.Number,
  pocketChange: Pockets,
  details: Schema.Unknown,
  createdAt: Timestamp,
  prevHash: Schema.String,
  hash: Schema.String,
  verified: Schema.Boolean
})

const SpendLine = {
  calls: Schema.Number.annotate({ description: "Charges (paid calls) in the window" }),
  chargedUsdCents: Schema.Number.annotate({ description: "What those charges cost, USD cents" }),
  refundedUsdCents: Schema.Number.annotate({ description: "Refunds made in the window, USD cents" })
}

export const SpendSummaryResponse = Schema.Struct({
  from: Timestamp.annotate({ description: "Start of the first UTC day of the window" }),
  until: Timestamp.annotate({ description: "End of the window (exclusive): the coming midnight UTC" }),
  days: Schema.Number,
  agentId: Schema.NullOr(Schema.String).annotate({ description: "The agent the summary is limited to, if any" }),
  total: Schema.Struct(SpendLine),
  byDay: Schema.Array(Schema.Struct({ day: Schema.String, ...SpendLine })).annotate({
    description: "Every UTC day of the window, oldest first, days without spend included"
  }),
  byAgent: Schema.Array(Schema.Struct({ agentId: Schema.String, name: Schema.NullOr(Schema.String), ...SpendLine }))
    .annotate({ description: "Largest charge total first" }),
  byCapability: Schema.Array(Schema.Struct({ capability: Schema.String, ...SpendLine })),
  byProvider: Schema.Array(Schema.Struct({ provider: Schema.String, ...SpendLine }))
})

export const TransactionFilters = {
  type: Schema.optional(Schema.Literals(["charge", "credit", "refund"])),
  agentId: Schema.optional(Schema.String.check(Schema.isMaxLength(64))),
  startDate: Schema.optional(IsoDate),
  endDate: Schema.optional(IsoDate)
}

const errors = [BadRequest, Forbidden, NotFound] as const

export class WalletApi extends HttpApiGroup.make("wallet")
  .add(
    HttpApiEndpoint.get("wallet", "/v1/wallet", { success: WalletResponse, error: errors }),
    HttpApiEndpoint.get("agentWallet", "/v1/agents/:id/wallet", {
      params: { id: PathId },
      success: AgentWalletResponse,
      error: errors
    }),
    HttpApiEndpoint.get("transactions", "/v1/wallet/transactions", {
      query: {
        ...TransactionFilters,
        limit: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100 }))),
        offset: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 1_000_000_000 })))
      },
      success: Schema.Struct({
        transactions: Schema.Array(TransactionResponse),
        total: Schema.Number,
        limit: Schema.Number,
        offset: Schema.Number
      }),
      error: errors
    }),
    HttpApiEndpoint.get("transactionsCsv", "/v1/wallet/transactions.csv", {
      query: TransactionFilters,
      success: Schema.String.pipe(HttpApiSchema.asText({ contentType: "text/csv" })).annotate({
        description:
          "Every transaction the filters match (all pages), newest first, as RFC 4180 CSV with a header row; money as in the JSON (USD cents, sats). A cell starting with = + - @, tab or carriage return is prefixed with an apostrophe so spreadsheets do not run it. At most 100000 rows: a larger export is 400 VALIDATION_ERROR (narrow the dates)."
      }),
      error: errors
    }),
    HttpApiEndpoint.get("transaction", "/v1/wallet/transactions/:transactionId", {
      params: { transactionId: PathId },
      success: TransactionResponse,
      error: errors
    }),
    HttpApiEndpoint.get("spend", "/v1/wallet/spend", {
      query: {
        days: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: MAX_SPEND_DAYS }))).annotate({
          description: "The last N UTC days, today included (1 = today); default 30"
        }),
        agentId: Schema.optional(Schema.String.check(Schema.isMaxLength(64)))
      },
      success: SpendSummaryResponse,
      error: errors
    }),
    HttpApiEndpoint.get("audit", "/v1/audit/:auditId", {
      params: { auditId: PathId },
      success: AuditResponse,
      error: errors
    })
  )
  .middleware(AccessControl)
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Wallet", description: "Balance, ledger and audit receipts" }))
{}
