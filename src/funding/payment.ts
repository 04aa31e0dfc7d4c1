import { type Invoice, paidInTime } from "../domain/Invoice.ts"
import { creditFits, pocketMaximum } from "../domain/Money.ts"
import type { CreditInput, PayInvoiceInput } from "../ports/Store.ts"

/**
 * What a payment notice does to an invoice, decided once here so that every
 * Store implementation applies the same rule under its own lock:
 *
 * - `Duplicate`: the invoice is paid (or refused) already; nothing changes.
 * - `Late`: the invoice had expired (or the payment came at or after its
 *   expiry instant); it is marked expired with the late payment recorded
 *   (the first one kept), and nothing is credited.
 * - `Refused`: the payment came in time, but crediting it would take the
 *   pocket above its maximum (`pocketMaximum`); the invoice is marked
 *   `refused` with the payment recorded for the operator, and nothing is
 *   credited. The notice is answered, so no rail retries it.
 * - `Credit`: the wallet is credited — msat to the `sats` pocket valued at
 *   the current rate, µUSD to the `usd` pocket — keyed by the invoice id, and
 *   the invoice is marked paid.
 *
 * The amount is what the rail says was paid, or the invoice amount when it
 * does not say (msat for Lightning, µUSD for card). `balances` are the
 * wallet's pockets as read under the lock, each with what its held
 * reservations may still give back (a release or a refund must never take a
 * pocket above its maximum either). An amount beyond storage is never
 * credited (no pocket can take it) and is recorded as null.
 */
export type PaymentDecision =
  | { readonly _tag: "Duplicate" }
  | { readonly _tag: "Late"; readonly amount: RecordedAmount }
  | { readonly _tag: "Refused"; readonly amount: RecordedAmount; readonly maximum: bigint }
  | { readonly _tag: "Credit"; readonly credit: CreditInput }

/**
 * The amount recorded for a payment that was not credited: what the rail said,
 * or null when that is beyond what storage can hold (a BIGINT, 2^63 - 1); the
 * record's time still says that a payment came.
 */
export type RecordedAmount = bigint | null

const MAX_STORABLE = 2n ** 63n - 1n
const recordable = (amount: bigint): RecordedAmount => (amount >= -MAX_STORABLE && amount <= MAX_STORABLE ? amount : null)

export interface PocketBalances {
  readonly usdMicroUsd: bigint
  readonly satsMsat: bigint
}

export const decidePayment = (
  invoice: Invoice,
  input: PayInvoiceInput,
  balances: PocketBalances
): PaymentDecision => {
  if (invoice.status === "paid" || invoice.status === "refused") return { _tag: "Duplicate" }
  const amount = input.amountPaid ?? (invoice.type === "lightning" ? invoice.amountMsat! : invoice.amountMicroUsd!)
  if (invoice.status === "expired" || !paidInTime(invoice, input.paidAt)) return { _tag: "Late", amount: recordable(amount) }
  const pocket = invoice.type === "lightning" ? "sats" : "usd"
  const balance = pocket === "sats" ? balances.satsMsat : balances.usdMicroUsd
  if (amount <= 0n || !creditFits(pocket, balance, amount)) {
    return { _tag: "Refused", amount: recordable(amount), maximum: pocketMaximum(pocket) }
  }
  const value = invoice.type === "lightning"
    ? input.valueOfMsat(amount)
    : { valueMicroUsd: amount, rateMicroUsdPerBtc: null }
  return {
    _tag: "Credit",
    credit: {
      accountId: invoice.accountId,
      agentId: invoice.agentId,
      creditKey: invoice.id,
      pocket,
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
