import { type Invoice, paidInTime } from "../domain/Invoice.ts"
import type { CreditInput, PayInvoiceInput } from "../ports/Store.ts"

/**
 * What a payment notice does to an invoice, decided once here so that every
 * Store implementation applies the same rule under its own lock:
 *
 * - `Duplicate`: the invoice is paid already; nothing changes.
 * - `Late`: the invoice had expired (or the payment came at or after its
 *   expiry instant); it is marked expired with the late payment recorded
 *   (the first one kept), and nothing is credited.
 * - `Credit`: the wallet is credited — msat to the `sats` pocket valued at
 *   the current rate, µUSD to the `usd` pocket — keyed by the invoice id, and
 *   the invoice is marked paid.
 *
 * The amount is what the rail says was paid, or the invoice amount when it
 * does not say (msat for Lightning, µUSD for card).
 */
export type PaymentDecision =
  | { readonly _tag: "Duplicate" }
  | { readonly _tag: "Late"; readonly amount: bigint }
  | { readonly _tag: "Credit"; readonly credit: CreditInput }

export const decidePayment = (invoice: Invoice, input: PayInvoiceInput): PaymentDecision => {
  if (invoice.status === "paid") return { _tag: "Duplicate" }
  const amount = input.amountPaid ?? (invoice.type === "lightning" ? invoice.amountMsat! : invoice.amountMicroUsd!)
  if (invoice.status === "expired" || !paidInTime(invoice, input.paidAt)) return { _tag: "Late", amount }
  const value = invoice.type === "lightning"
    ? input.valueOfMsat(amount)
    : { valueMicroUsd: amount, rateMicroUsdPerBtc: null }
  return {
    _tag: "Credit",
    credit: {
      accountId: invoice.accountId,
      agentId: invoice.agentId,
      creditKey: invoice.id,
      pocket: invoice.type === "lightning" ? "sats" : "usd",
      amount,
      valueMicroUsd: value.valueMicroUsd,
      rateMicroUsdPerBtc: value.rateMicroUsdPerBtc,
      description: invoice.type === "lightning" ? "Lightning funding" : "Card funding",
      transactionId: input.transactionId,
      auditId: input.auditId,
      now: input.now
    }
  }
}
