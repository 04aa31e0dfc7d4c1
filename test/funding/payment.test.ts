import { assert, describe, it } from "vitest"
import type { AccountId, AgentId } from "../../src/domain/ids.ts"
import type { Invoice } from "../../src/domain/Invoice.ts"
import { decidePayment } from "../../src/funding/payment.ts"
import type { PayInvoiceInput } from "../../src/ports/Store.ts"

const createdAt = new Date("2026-11-22T09:00:00.000Z")
const expiresAt = new Date("2026-11-22T10:00:00.000Z")

const invoice = (overrides: Partial<Invoice> = {}): Invoice => ({
  id: "inv_0VbevmAt001dmniAoJ87QKk4",
  accountId: "acc_0VbevmAt000I01jfSWp8uhwZ" as AccountId,
  agentId: "agt_0VbevmAt001dmniAoJ87QKk4" as AgentId,
  type: "lightning",
  amountMsat: 2_000_000n,
  amountMicroUsd: null,
  status: "pending",
  rail: "dev",
  externalId: "ab".repeat(32),
  paymentRequest: "lnbcrt20u1p...",
  checkoutUrl: null,
  createdAt,
  expiresAt,
  paidAt: null,
  latePaymentAt: null,
  latePaymentAmount: null,
  transactionId: null,
  ...overrides
})

const payment = (overrides: Partial<PayInvoiceInput> = {}): PayInvoiceInput => ({
  type: "lightning",
  externalId: "ab".repeat(32),
  paidAt: new Date(expiresAt.getTime() - 1),
  amountPaid: undefined,
  source: "dev",
  transactionId: "txn_1",
  auditId: "aud_1",
  // 1 msat = 0.5 µUSD at this rate (50,000 USD/BTC), rounded down.
  valueOfMsat: (msat) => ({ valueMicroUsd: msat / 2n, rateMicroUsdPerBtc: 50_000_000_000n }),
  now: new Date(expiresAt.getTime() + 5_000),
  ...overrides
})

describe("decidePayment", () => {
  it("credits a Lightning payment made before the expiry instant to the sats pocket, valued at the rate", () => {
    const decision = decidePayment(invoice(), payment({ amountPaid: 2_000_123n }))
    assert.deepStrictEqual(decision, {
      _tag: "Credit",
      credit: {
        accountId: invoice().accountId,
        agentId: invoice().agentId,
        creditKey: invoice().id,
        pocket: "sats",
        amount: 2_000_123n,
        valueMicroUsd: 1_000_061n,
        rateMicroUsdPerBtc: 50_000_000_000n,
        description: "Lightning funding",
        transactionId: "txn_1",
        auditId: "aud_1",
        now: payment().now
      }
    })
  })

  it("credits a card payment to the usd pocket at face value, the invoice amount when the rail says none", () => {
    const card = invoice({ type: "card", amountMsat: null, amountMicroUsd: 25_000_000n })
    const decision = decidePayment(card, payment({ type: "card" }))
    assert.strictEqual(decision._tag, "Credit")
    if (decision._tag !== "Credit") return
    assert.strictEqual(decision.credit.pocket, "usd")
    assert.strictEqual(decision.credit.amount, 25_000_000n)
    assert.strictEqual(decision.credit.valueMicroUsd, 25_000_000n)
    assert.isNull(decision.credit.rateMicroUsdPerBtc)
    assert.strictEqual(decision.credit.description, "Card funding")
  })

  it("a payment at the expiry instant or after it, or on an expired invoice, is late with its amount", () => {
    assert.deepStrictEqual(decidePayment(invoice(), payment({ paidAt: expiresAt })), { _tag: "Late", amount: 2_000_000n })
    assert.deepStrictEqual(
      decidePayment(invoice(), payment({ paidAt: new Date(expiresAt.getTime() + 1), amountPaid: 7n })),
      { _tag: "Late", amount: 7n }
    )
    assert.deepStrictEqual(
      decidePayment(invoice({ status: "expired" }), payment({ paidAt: createdAt })),
      { _tag: "Late", amount: 2_000_000n }
    )
  })

  it("a paid invoice is a duplicate, whatever the notice says", () => {
    assert.deepStrictEqual(decidePayment(invoice({ status: "paid" }), payment({ paidAt: new Date(0), amountPaid: 1n })), {
      _tag: "Duplicate"
    })
  })
})
