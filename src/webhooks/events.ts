import { Schema } from "effect"
import type { Agent } from "../domain/Agent.ts"
import type { AccountId } from "../domain/ids.ts"
import { sortableRandomId } from "../domain/ids.ts"
import type { Invoice } from "../domain/Invoice.ts"
import type { Transaction } from "../domain/Ledger.ts"
import { microUsdToCents, msatToSats } from "../domain/Money.ts"

/**
 * The events of the webhooks, in one place: their type names, their payload
 * schemas (the Standard Webhooks shape `{ type, id, timestamp, data }`) and
 * the pure builders the stores call inside the transaction of the change an
 * event describes (the transactional outbox: a credit and its `invoice.paid`
 * commit together or not at all). docs/webhooks.md is the catalogue.
 */

export const eventTypes = [
  "invoice.paid",
  "invoice.expired",
  "invoice.late_payment",
  "wallet.low_balance",
  "agent.created",
  "agent.killed",
  "agent.revived",
  "agent.daily_cap_reached",
  "agent.budget_threshold",
  "spend.refused",
  "charge.refunded",
  "pay.succeeded",
  "pay.failed",
  "webhook_endpoint.disabled"
] as const

export const EventType = Schema.Literals(eventTypes)
export type EventType = typeof EventType.Type

export const isEventType = Schema.is(EventType)

const Timestamp = Schema.String.annotate({ description: "ISO 8601 timestamp (UTC)" })
const InvoiceKind = Schema.Literals(["lightning", "card"])

export const InvoicePaidData = Schema.Struct({
  invoiceId: Schema.String,
  invoiceType: InvoiceKind,
  amountSats: Schema.optional(Schema.Number),
  amountUsdCents: Schema.optional(Schema.Number),
  paidAt: Timestamp,
  transactionId: Schema.String
})
export const InvoiceExpiredData = Schema.Struct({
  invoiceId: Schema.String,
  invoiceType: InvoiceKind,
  amountSats: Schema.optional(Schema.Number),
  amountUsdCents: Schema.optional(Schema.Number),
  expiresAt: Timestamp
})
export const InvoiceLatePaymentData = Schema.Struct({
  invoiceId: Schema.String,
  invoiceType: InvoiceKind,
  /** "expired": paid after expiry; "refused": the credit would overfill the pocket. */
  status: Schema.Literals(["expired", "refused"]),
  paidAt: Timestamp,
  amountSats: Schema.optional(Schema.Number),
  amountUsdCents: Schema.optional(Schema.Number)
})
export const WalletLowBalanceData = Schema.Struct({
  balanceUsdCents: Schema.Number,
  thresholdUsdCents: Schema.Number
})
export const AgentCreatedData = Schema.Struct({
  agentId: Schema.String,
  name: Schema.String,
  role: Schema.Literals(["owner", "agent"])
})
export const AgentKilledData = Schema.Struct({
  agentId: Schema.String,
  reason: Schema.Literals(["owner", "velocity"])
})
export const AgentRevivedData = Schema.Struct({ agentId: Schema.String })
export const AgentDailyCapReachedData = Schema.Struct({
  agentId: Schema.String,
  dailySpentUsdCents: Schema.Number,
  dailyCapUsdCents: Schema.Number,
  day: Schema.String
})
export const AgentBudgetThresholdData = Schema.Struct({
  agentId: Schema.String,
  dailySpentUsdCents: Schema.Number,
  dailyCapUsdCents: Schema.Number,
  thresholdPercent: Schema.Number,
  day: Schema.String
})
export const SpendRefusedData = Schema.Struct({
  agentId: Schema.String,
  code: Schema.String,
  capability: Schema.String,
  quotedUsdCents: Schema.Number
})
export const ChargeRefundedData = Schema.Struct({
  transactionId: Schema.String,
  refundTransactionId: Schema.String,
  agentId: Schema.NullOr(Schema.String),
  amountUsdCents: Schema.Number
})
export const PaySucceededData = Schema.Struct({
  paymentHash: Schema.String,
  agentId: Schema.String,
  url: Schema.String.annotate({ description: "The paywalled URL (origin and path)" }),
  amountSats: Schema.Number,
  routingFeeSats: Schema.Number,
  transactionId: Schema.NullOr(Schema.String).annotate({ description: "The charge (null when it was already charged)" })
})
export const PayFailedData = Schema.Struct({
  paymentHash: Schema.String,
  agentId: Schema.String,
  url: Schema.String,
  amountSats: Schema.Number,
  reason: Schema.String
})
export const WebhookEndpointDisabledData = Schema.Struct({
  endpointId: Schema.String,
  url: Schema.String,
  consecutiveFailures: Schema.Number
})

const event = <T extends EventType, D extends Schema.Top>(type: T, data: D) =>
  Schema.Struct({
    type: Schema.Literal(type),
    id: Schema.String.annotate({ description: "evt_…; the same in every delivery (webhook-id header)" }),
    timestamp: Timestamp,
    data
  })

/** Every event as it is posted to an endpoint (the request body). */
export const WebhookEvent = Schema.Union([
  event("invoice.paid", InvoicePaidData),
  event("invoice.expired", InvoiceExpiredData),
  event("invoice.late_payment", InvoiceLatePaymentData),
  event("wallet.low_balance", WalletLowBalanceData),
  event("agent.created", AgentCreatedData),
  event("agent.killed", AgentKilledData),
  event("agent.revived", AgentRevivedData),
  event("agent.daily_cap_reached", AgentDailyCapReachedData),
  event("agent.budget_threshold", AgentBudgetThresholdData),
  event("spend.refused", SpendRefusedData),
  event("charge.refunded", ChargeRefundedData),
  event("pay.succeeded", PaySucceededData),
  event("pay.failed", PayFailedData),
  event("webhook_endpoint.disabled", WebhookEndpointDisabledData)
])
export type WebhookEvent = typeof WebhookEvent.Type

/** An event as the outbox stores it: the account it belongs to and its body. */
export interface OutboxEvent {
  readonly id: string
  readonly accountId: AccountId
  readonly type: EventType
  readonly createdAt: Date
  /** The JSON body posted, exactly as signed. */
  readonly payload: string
  /** Events of one kind and period share a key; the outbox keeps only the first. */
  readonly dedupeKey?: string | undefined
}

export const newEventId = () => `evt_${sortableRandomId()}`

type DataOf<T extends EventType> = Extract<WebhookEvent, { readonly type: T }>["data"]

/** Builds an outbox event; the body is fixed here, once, so every delivery signs the same bytes. */
export const makeEvent = <T extends EventType>(accountId: AccountId, type: T, at: Date, data: DataOf<T>): OutboxEvent => {
  const id = newEventId()
  return {
    id,
    accountId,
    type,
    createdAt: at,
    payload: JSON.stringify({ type, id, timestamp: at.toISOString(), data })
  }
}

/** An outbound L402 payment went through (docs/l402.md). */
export const paySucceeded = (accountId: AccountId, at: Date, data: DataOf<"pay.succeeded">): OutboxEvent =>
  makeEvent(accountId, "pay.succeeded", at, data)

/** An outbound L402 payment failed: its hold was released, nothing charged. */
export const payFailed = (accountId: AccountId, at: Date, data: DataOf<"pay.failed">): OutboxEvent =>
  makeEvent(accountId, "pay.failed", at, data)

const invoiceAmount = (invoice: Invoice) => ({
  ...(invoice.amountMsat !== null ? { amountSats: msatToSats(invoice.amountMsat) } : {}),
  ...(invoice.amountMicroUsd !== null ? { amountUsdCents: microUsdToCents(invoice.amountMicroUsd) } : {})
})

export const invoicePaid = (invoice: Invoice, paidAt: Date, transactionId: string, at: Date): OutboxEvent =>
  makeEvent(invoice.accountId, "invoice.paid", at, {
    invoiceId: invoice.id,
    invoiceType: invoice.type,
    ...invoiceAmount(invoice),
    paidAt: paidAt.toISOString(),
    transactionId
  })

/** A charge given back in part or whole: the refund transaction names the charge. */
export const chargeRefunded = (refund: Transaction, chargeId: string, at: Date): OutboxEvent =>
  makeEvent(refund.accountId, "charge.refunded", at, {
    transactionId: chargeId,
    refundTransactionId: refund.id,
    agentId: refund.agentId,
    amountUsdCents: microUsdToCents(refund.amountMicroUsd)
  })

export const invoiceExpired = (invoice: Invoice, at: Date): OutboxEvent =>
  makeEvent(invoice.accountId, "invoice.expired", at, {
    invoiceId: invoice.id,
    invoiceType: invoice.type,
    ...invoiceAmount(invoice),
    expiresAt: invoice.expiresAt.toISOString()
  })

/** `amount` is in the invoice's unit (msat for Lightning, µUSD for card); null when the rail's figure could not be kept. */
export const invoiceLatePayment = (
  invoice: Invoice,
  status: "expired" | "refused",
  paidAt: Date,
  amount: bigint | null,
  at: Date
): OutboxEvent =>
  makeEvent(invoice.accountId, "invoice.late_payment", at, {
    invoiceId: invoice.id,
    invoiceType: invoice.type,
    status,
    paidAt: paidAt.toISOString(),
    ...(amount === null
      ? {}
      : invoice.type === "lightning"
      ? { amountSats: msatToSats(amount) }
      : { amountUsdCents: microUsdToCents(amount) })
  })

export const agentCreated = (agent: Agent): OutboxEvent =>
  makeEvent(agent.accountId, "agent.created", agent.createdAt, { agentId: agent.id, name: agent.name, role: agent.role })

/** The events of an agent change: killed or revived (nothing for a rename or a deletion). */
export const agentChangeEvents = (before: Agent, after: Agent, at: Date): ReadonlyArray<OutboxEvent> => {
  if (!before.killed && after.killed) {
    return [makeEvent(after.accountId, "agent.killed", at, { agentId: after.id, reason: after.killReason ?? "owner" })]
  }
  if (before.killed && !after.killed) return [makeEvent(after.accountId, "agent.revived", at, { agentId: after.id })]
  return []
}

export const endpointDisabled = (
  accountId: AccountId,
  endpoint: { readonly id: string; readonly url: string },
  consecutiveFailures: number,
  at: Date
): OutboxEvent =>
  makeEvent(accountId, "webhook_endpoint.disabled", at, { endpointId: endpoint.id, url: endpoint.url, consecutiveFailures })

/** Whether an endpoint subscribed to `type` (an empty list means every event). */
export const subscribes = (events: ReadonlyArray<EventType>, type: EventType): boolean =>
  events.length === 0 || events.includes(type)
