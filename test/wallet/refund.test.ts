import fc from "fast-check"
import { Result } from "effect"
import { describe, expect, it } from "vitest"
import type { AccountId } from "../../src/domain/ids.ts"
import type { Transaction } from "../../src/domain/Ledger.ts"
import { MicroUsd, Msat, msatToMicroUsdValue, MSAT_PER_BTC, usdToMsatForCharge } from "../../src/domain/Money.ts"
import { keptByCharge, NOTHING_REFUNDED, planRefund, type Refunded, remainingOf } from "../../src/wallet/refund.ts"

/**
 * The refund rule on its own: any sequence of partial refunds (some asking
 * for more than remains) gives back, in each pocket, at most what the charge
 * took; one that reaches the charge's amount gives back exactly that.
 */

const CENT = 10_000n
const BIG = { usdMicroUsd: 0n, satsMsat: 0n }

const charge = (fields: { amount: bigint; usd: bigint; sats: bigint; rate: bigint | null; type?: Transaction["type"] }): Transaction => ({
  id: "txn_charge",
  accountId: "acc_test" as AccountId,
  agentId: null,
  type: fields.type ?? "charge",
  amountMicroUsd: MicroUsd.make(fields.amount),
  usdMicroUsd: MicroUsd.make(fields.usd),
  satsMsat: Msat.make(fields.sats),
  rateMicroUsdPerBtc: fields.rate,
  description: "a call",
  capability: "search",
  provider: "test",
  auditId: "aud_charge",
  refundOf: null,
  createdAt: new Date(0)
})

const apply = (c: Transaction, refunded: Refunded, amount: bigint | undefined) =>
  planRefund({ charge: c, refunded, bounded: BIG }, amount)

/** A charge as the settle rule builds one: usd first, the rest in sats at the rate, rounded up (possibly capped by the hold). */
const chargeArb = fc.record({
  amount: fc.bigInt({ min: 0n, max: 50_000_000n }),
  usdShare: fc.double({ min: 0, max: 1, noNaN: true }),
  rate: fc.oneof(
    fc.constant(null),
    fc.bigInt({ min: 1_000_000n, max: 100_000_000_000_000n })
  ),
  capMsat: fc.bigInt({ min: 0n, max: 3n })
}).map(({ amount, usdShare, rate, capMsat }) => {
  if (rate === null) return charge({ amount, usd: amount, sats: 0n, rate })
  const usd = BigInt(Math.floor(Number(amount) * usdShare))
  const full = usdToMsatForCharge(MicroUsd.make(amount - usd), { microUsdPerBtc: rate })
  // planSettle never takes more sats than the hold had: the charge may carry a few msat less.
  const sats = full > capMsat ? full - capMsat : full
  return charge({ amount, usd, sats, rate })
})

describe("refund rule (src/wallet/refund.ts)", () => {
  it("refunds a usd-only charge in full, then refuses with nothing remaining", () => {
    const c = charge({ amount: 10n * CENT, usd: 10n * CENT, sats: 0n, rate: null })
    const full = Result.getOrThrow(apply(c, NOTHING_REFUNDED, undefined))
    expect(full).toMatchObject({ amountMicroUsd: 10n * CENT, usdMicroUsd: 10n * CENT, satsMsat: 0n })
    const again = apply(c, full.refundedAfter, undefined)
    expect(Result.isFailure(again) && again.failure._tag).toBe("RefundExceedsCharge")
    if (Result.isFailure(again) && again.failure._tag === "RefundExceedsCharge") {
      expect(again.failure.details).toEqual({ charged: 10, refunded: 10, remaining: 0, requested: 0 })
    }
  })

  it("gives back the sats part first, at the charge's own rate, rounded down", () => {
    // 10 cents: 4 from usd, 6 cents in sats at 50,000 USD/BTC (1 sat = 0.05 cents): 120 sats.
    const rate = 50_000_000_000n
    const c = charge({ amount: 10n * CENT, usd: 4n * CENT, sats: 120_000n, rate })
    const first = Result.getOrThrow(apply(c, NOTHING_REFUNDED, 3n * CENT))
    expect(first).toMatchObject({ usdMicroUsd: 0n, satsMsat: 60_000n })
    const second = Result.getOrThrow(apply(c, first.refundedAfter, 5n * CENT))
    expect(second).toMatchObject({ usdMicroUsd: 2n * CENT, satsMsat: 60_000n })
    const rest = Result.getOrThrow(apply(c, second.refundedAfter, undefined))
    expect(rest).toMatchObject({ amountMicroUsd: 2n * CENT, usdMicroUsd: 2n * CENT, satsMsat: 0n })
    expect(rest.refundedAfter).toEqual({ microUsd: 10n * CENT, usdMicroUsd: 4n * CENT, satsMsat: 120_000n })
  })

  it("refuses a credit or a refund, a zero amount, and more than remains (naming what remains)", () => {
    expect(Result.isFailure(apply(charge({ amount: CENT, usd: CENT, sats: 0n, rate: null, type: "credit" }), NOTHING_REFUNDED, undefined)))
      .toBe(true)
    const c = charge({ amount: 10n * CENT, usd: 10n * CENT, sats: 0n, rate: null })
    const over = apply(c, { microUsd: 7n * CENT, usdMicroUsd: 7n * CENT, satsMsat: 0n }, 4n * CENT)
    expect(Result.isFailure(over) && over.failure.code).toBe("REFUND_EXCEEDS_CHARGE")
    if (Result.isFailure(over) && over.failure._tag === "RefundExceedsCharge") expect(over.failure.details.remaining).toBe(3)
    expect(Result.isFailure(apply(c, NOTHING_REFUNDED, 0n))).toBe(true)
    const notCharge = apply(charge({ amount: CENT, usd: CENT, sats: 0n, rate: null, type: "refund" }), NOTHING_REFUNDED, CENT)
    expect(Result.isFailure(notCharge) && notCharge.failure._tag).toBe("NotRefundable")
  })

  it("refuses a refund that would take a pocket above its maximum", () => {
    const c = charge({ amount: 10n * CENT, usd: 10n * CENT, sats: 0n, rate: null })
    const full = planRefund({ charge: c, refunded: NOTHING_REFUNDED, bounded: { usdMicroUsd: 1_000_000_000_000_000n, satsMsat: 0n } }, undefined)
    expect(Result.isFailure(full) && full.failure._tag).toBe("RefundPocketFull")
  })

  it("what a charge keeps only goes down as more is refunded, from the whole charge to nothing", () => {
    fc.assert(
      fc.property(chargeArb, fc.array(fc.bigInt({ min: 0n, max: 50_000_000n }), { maxLength: 20 }), (c, nets) => {
        expect(keptByCharge(c, c.amountMicroUsd)).toEqual({ usdMicroUsd: c.usdMicroUsd, satsMsat: c.satsMsat })
        expect(keptByCharge(c, 0n)).toEqual({ usdMicroUsd: 0n, satsMsat: 0n })
        const sorted = [...nets].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
        for (let i = 1; i < sorted.length; i++) {
          const lower = keptByCharge(c, sorted[i - 1]!)
          const higher = keptByCharge(c, sorted[i]!)
          expect(lower.usdMicroUsd <= higher.usdMicroUsd && lower.satsMsat <= higher.satsMsat).toBe(true)
        }
      }),
      { numRuns: 300 }
    )
  })

  it("any sequence of partial refunds: each pocket gets back at most what the charge took, exactly that once all is refunded", () => {
    fc.assert(
      fc.property(
        chargeArb,
        fc.array(fc.bigInt({ min: 0n, max: 20_000_000n }), { maxLength: 30 }),
        fc.boolean(),
        (c, requests, finish) => {
          let refunded = NOTHING_REFUNDED
          let usdBack = 0n
          let satsBack = 0n
          let amounts = 0n
          const step = (request: bigint | undefined) => {
            const remaining = remainingOf(c, refunded)
            const plan = apply(c, refunded, request)
            if (Result.isFailure(plan)) {
              // Refused only when it asks for nothing or for more than remains.
              const asked = request ?? remaining
              expect(asked <= 0n || asked > remaining).toBe(true)
              return
            }
            const p = plan.success
            expect(p.amountMicroUsd).toBe(request ?? remaining)
            expect(p.usdMicroUsd >= 0n && p.satsMsat >= 0n).toBe(true)
            usdBack += p.usdMicroUsd
            satsBack += p.satsMsat
            amounts += p.amountMicroUsd
            expect(p.refundedAfter).toEqual({ microUsd: amounts, usdMicroUsd: usdBack, satsMsat: satsBack })
            refunded = p.refundedAfter
            // Never more than the charge took, in value or in either pocket.
            expect(amounts <= c.amountMicroUsd).toBe(true)
            expect(usdBack <= c.usdMicroUsd && satsBack <= c.satsMsat).toBe(true)
            // The value given back never exceeds the amounts refunded by more than the charge's own sub-msat rounding.
            if (c.rateMicroUsdPerBtc !== null) {
              const value = usdBack + msatToMicroUsdValue(Msat.make(satsBack), { microUsdPerBtc: c.rateMicroUsdPerBtc })
              expect(value <= amounts + c.rateMicroUsdPerBtc / MSAT_PER_BTC + 1n).toBe(true)
            }
          }
          for (const request of requests) step(request)
          if (finish) {
            step(undefined)
            expect(usdBack).toBe(c.usdMicroUsd)
            expect(satsBack).toBe(c.satsMsat)
            expect(amounts).toBe(c.amountMicroUsd)
          }
        }
      ),
      { numRuns: 500 }
    )
  })
})
