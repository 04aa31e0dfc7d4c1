import fc from "fast-check"
import { assert, describe, it } from "vitest"
import type { AccountId, AgentId } from "../../src/domain/ids.ts"
import type { Invoice } from "../../src/domain/Invoice.ts"
import {
  MAX_CARD_FUNDING_MICRO_USD,
  MAX_LIGHTNING_FUNDING_MSAT,
  MAX_SATS_POCKET_MSAT,
  MAX_USD_POCKET_MICRO_USD
} from "../../src/domain/Money.ts"
import { decidePayment, type PocketBalances } from "../../src/funding/payment.ts"
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

const empty = { usdMicroUsd: 0n, satsMsat: 0n }

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
    const decision = decidePayment(invoice(), payment({ amountPaid: 2_000_123n }), empty)
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
    const decision = decidePayment(card, payment({ type: "card" }), empty)
    assert.strictEqual(decision._tag, "Credit")
    if (decision._tag !== "Credit") return
    assert.strictEqual(decision.credit.pocket, "usd")
    assert.strictEqual(decision.credit.amount, 25_000_000n)
    assert.strictEqual(decision.credit.valueMicroUsd, 25_000_000n)
    assert.isNull(decision.credit.rateMicroUsdPerBtc)
    assert.strictEqual(decision.credit.description, "Card funding")
  })

  it("a payment at the expiry instant or after it, or on an expired invoice, is late with its amount", () => {
    assert.deepStrictEqual(decidePayment(invoice(), payment({ paidAt: expiresAt }), empty), { _tag: "Late", amount: 2_000_000n })
    assert.deepStrictEqual(
      decidePayment(invoice(), payment({ paidAt: new Date(expiresAt.getTime() + 1), amountPaid: 7n }), empty),
      { _tag: "Late", amount: 7n }
    )
    assert.deepStrictEqual(
      decidePayment(invoice({ status: "expired" }), payment({ paidAt: createdAt }), empty),
      { _tag: "Late", amount: 2_000_000n }
    )
  })

  it("a paid invoice is a duplicate, whatever the notice says", () => {
    assert.deepStrictEqual(decidePayment(invoice({ status: "paid" }), payment({ paidAt: new Date(0), amountPaid: 1n }), empty), {
      _tag: "Duplicate"
    })
  })

  it("refuses a payment that would take the pocket above its maximum, with the amount and the maximum", () => {
    const nearlyFull = { usdMicroUsd: MAX_USD_POCKET_MICRO_USD - 10_000_000n, satsMsat: MAX_SATS_POCKET_MSAT - 1_999_999n }
    assert.deepStrictEqual(decidePayment(invoice(), payment(), nearlyFull), {
      _tag: "Refused",
      amount: 2_000_000n,
      maximum: MAX_SATS_POCKET_MSAT
    })
    // Exactly to the maximum is allowed.
    assert.strictEqual(decidePayment(invoice(), payment({ amountPaid: 1_999_999n }), nearlyFull)._tag, "Credit")
    const card = invoice({ type: "card", amountMsat: null, amountMicroUsd: 10_000_000n })
    assert.strictEqual(decidePayment(card, payment({ type: "card" }), nearlyFull)._tag, "Credit")
    assert.deepStrictEqual(decidePayment(card, payment({ type: "card", amountPaid: 10_000_001n }), nearlyFull), {
      _tag: "Refused",
      amount: 10_000_001n,
      maximum: MAX_USD_POCKET_MICRO_USD
    })
    // A rail reporting an absurd amount (far beyond what storage could add) is refused, not overflowed.
    assert.deepStrictEqual(decidePayment(invoice(), payment({ amountPaid: 2n ** 64n }), empty), {
      _tag: "Refused",
      amount: null,
      maximum: MAX_SATS_POCKET_MSAT
    })
    assert.deepStrictEqual(decidePayment(invoice(), payment({ amountPaid: 2n ** 63n, paidAt: expiresAt }), empty), {
      _tag: "Late",
      amount: null
    })
    assert.strictEqual(decidePayment(invoice(), payment({ amountPaid: 0n }), empty)._tag, "Refused")
  })

  it("a refused invoice stays refused: a second notice is a duplicate", () => {
    assert.deepStrictEqual(decidePayment(invoice({ status: "refused" }), payment(), empty), { _tag: "Duplicate" })
  })

  it("property: applying its decisions, no pocket ever exceeds its maximum and every payment is credited or recorded", () => {
    const notice = fc.record({
      type: fc.constantFrom("lightning" as const, "card" as const),
      // Up to the per-invoice maximum, and sometimes what a misbehaving rail reports.
      amount: fc.oneof(
        fc.bigInt({ min: 1n, max: MAX_LIGHTNING_FUNDING_MSAT }),
        fc.bigInt({ min: MAX_USD_POCKET_MICRO_USD / 4n, max: MAX_USD_POCKET_MICRO_USD }),
        fc.bigInt({ min: 1n, max: 2n ** 70n })
      ),
      late: fc.boolean(),
      repeat: fc.boolean()
    })
    const start = fc.record({
      usdMicroUsd: fc.bigInt({ min: 0n, max: MAX_USD_POCKET_MICRO_USD }),
      satsMsat: fc.bigInt({ min: 0n, max: MAX_SATS_POCKET_MSAT })
    })
    fc.assert(
      fc.property(start, fc.array(notice, { maxLength: 60 }), (initial, notices) => {
        let balances: PocketBalances = initial
        let credited = 0n
        let recorded = 0n
        let paid = 0n
        notices.forEach((n, i) => {
          let current = invoice({
            id: `inv_${i}`,
            type: n.type,
            amountMsat: n.type === "lightning" ? MAX_LIGHTNING_FUNDING_MSAT : null,
            amountMicroUsd: n.type === "card" ? MAX_CARD_FUNDING_MICRO_USD : null
          })
          const input = payment({ type: n.type, amountPaid: n.amount, paidAt: n.late ? expiresAt : createdAt })
          paid += n.amount
          for (let round = 0; round < (n.repeat ? 2 : 1); round++) {
            const decision = decidePayment(current, input, balances)
            if (decision._tag === "Credit") {
              const { amount, pocket } = decision.credit
              assert.strictEqual(amount, n.amount)
              balances = pocket === "usd"
                ? { ...balances, usdMicroUsd: balances.usdMicroUsd + amount }
                : { ...balances, satsMsat: balances.satsMsat + amount }
              credited += amount
              current = { ...current, status: "paid" }
            } else if (decision._tag === "Late" || decision._tag === "Refused") {
              // Recorded as said, or as null (a payment of unknown amount) beyond what storage holds.
              assert.strictEqual(decision.amount, n.amount < 2n ** 63n ? n.amount : null)
              // The stores keep the first record of an uncredited payment.
              if (current.status === "pending") recorded += n.amount
              current = { ...current, status: decision._tag === "Late" ? "expired" : "refused" }
            }
            assert.isAtMost(Number(balances.usdMicroUsd - MAX_USD_POCKET_MICRO_USD), 0)
            assert.isAtMost(Number(balances.satsMsat - MAX_SATS_POCKET_MSAT), 0)
            assert.isTrue(balances.usdMicroUsd < 2n ** 63n && balances.satsMsat < 2n ** 63n)
          }
          if (n.late) assert.strictEqual(current.status, "expired")
        })
        // Each payment is credited once or recorded once: never twice, never lost.
        assert.strictEqual(credited + recorded, paid)
      }),
      { numRuns: 300 }
    )
  })
})
