import type { AccountId, AgentId } from "./ids.ts"
import { sortableRandomId } from "./ids.ts"

/**
 * A funding request: a Lightning invoice (sats) or a card checkout session
 * (USD). Pending until paid before it expires (Lightning 1 h, card 30 min
 * after creation); paid exactly once; never credited once expired.
 *
 * `refused` is terminal too: the payment arrived in time but crediting it
 * would have taken the wallet pocket above its maximum (`pocketMaximum` in
 * Money.ts). The payment is recorded on the invoice for the operator (like a
 * late one) and nothing is credited.
 */

export type InvoiceType = "lightning" | "card"
export type InvoiceStatus = "pending" | "paid" | "expired" | "refused"
export const invoiceStatuses: ReadonlyArray<InvoiceStatus> = ["pending", "paid", "expired", "refused"]

export const LIGHTNING_INVOICE_TTL_MS = 60 * 60 * 1000
export const CARD_SESSION_TTL_MS = 30 * 60 * 1000
/** Card funding minimum, in micro-dollars (1000 cents). */
export const CARD_MINIMUM_MICRO_USD = 10_000_000n

export interface Invoice {
  readonly id: string
  readonly accountId: AccountId
  readonly agentId: AgentId
  readonly type: InvoiceType
  /** Lightning: the amount in msat (whole sats). Card: null. */
  readonly amountMsat: bigint | null
  /** Card: the amount in micro-dollars (whole cents). Lightning: null. */
  readonly amountMicroUsd: bigint | null
  /** As stored; see `effectiveStatus` for what to show. */
  readonly status: InvoiceStatus
  /** "dev", "lnd" or "stripe". */
  readonly rail: string
  /** Payment hash (hex) or checkout session id: what the rail reports payments by. */
  readonly externalId: string
  readonly paymentRequest: string | null
  readonly checkoutUrl: string | null
  readonly createdAt: Date
  readonly expiresAt: Date
  readonly paidAt: Date | null
  /**
   * Set when a payment was recorded for the operator and not credited: it arrived
   * after expiry (status `expired`) or would have overfilled the pocket (`refused`).
   */
  readonly latePaymentAt: Date | null
  readonly latePaymentAmount: bigint | null
  readonly transactionId: string | null
}

export const newInvoiceId = () => `inv_${sortableRandomId()}`

/** A pending invoice whose time has come is expired, whether or not the sweep has written it yet. */
export const effectiveStatus = (invoice: Invoice, now: Date): InvoiceStatus =>
  invoice.status === "pending" && now.getTime() >= invoice.expiresAt.getTime() ? "expired" : invoice.status

/** A payment counts only if it happened strictly before the expiry instant. */
export const paidInTime = (invoice: Invoice, paidAt: Date): boolean => paidAt.getTime() < invoice.expiresAt.getTime()

/** What became of a payment notice. */
export type PaymentOutcome =
  /** The wallet was credited now. */
  | "credited"
  /** This payment had been credited before; nothing changed. */
  | "duplicate"
  /** The invoice had expired: recorded for the operator, not credited. */
  | "late"
  /** Crediting it would take the wallet pocket above its maximum: recorded for the operator, not credited. */
  | "refused"
  /** No invoice of ours has this id; ignored (and logged). */
  | "unknown"
