import { Effect, Option } from "effect"
import { describe, expect, it } from "vitest"
import type { AccountId, AgentId } from "../../src/domain/ids.ts"
import { MAX_RESOLVED_PAYMENTS, memoryFallback } from "../../src/l402/memoryStore.ts"
import type { OutboundPayment } from "../../src/ports/L402PaymentStore.ts"

/** The L402 payment records of memory deployments stay bounded: old resolved ones go, pending ones stay. */
describe("the L402 payment records without a durable store", () => {
  const payment = (n: number): OutboundPayment => ({
    paymentHash: n.toString(16).padStart(64, "0"),
    accountId: "acc_000000000000000000000000" as AccountId,
    agentId: "agt_000000000000000000000000" as AgentId,
    reservationId: `rsv_${n}`,
    url: "https://paywall.test/x",
    paymentRequest: "lnbc1",
    amountMsat: 1000n,
    feeLimitMsat: 1000n,
    rateMicroUsdPerBtc: 100_000_000_000n,
    status: "pending",
    preimage: null,
    feeMsat: null,
    transactionId: null,
    createdAt: new Date(0),
    resolvedAt: null
  })

  it("keeps every pending payment and at most MAX_RESOLVED_PAYMENTS resolved ones, forgetting the oldest first", async () => {
    await Effect.runPromise(Effect.gen(function*() {
      const store = yield* memoryFallback
      const pendingHash = payment(0).paymentHash
      expect(yield* store.beginPayment(payment(0))).toBe(true)
      const total = MAX_RESOLVED_PAYMENTS + 50
      for (let n = 1; n <= total; n++) {
        yield* store.beginPayment(payment(n))
        yield* store.resolvePayment(payment(n).paymentHash, {
          status: "failed",
          preimage: null,
          feeMsat: null,
          transactionId: null,
          resolvedAt: new Date(n)
        }, [])
      }
      expect(Option.isSome(yield* store.findPayment(pendingHash))).toBe(true)
      expect((yield* store.pendingPayments(10)).map((p) => p.paymentHash)).toEqual([pendingHash])
      // The 50 oldest resolved records are gone, the newest kept.
      expect(Option.isNone(yield* store.findPayment(payment(1).paymentHash))).toBe(true)
      expect(Option.isNone(yield* store.findPayment(payment(50).paymentHash))).toBe(true)
      expect(Option.isSome(yield* store.findPayment(payment(51).paymentHash))).toBe(true)
      expect(Option.isSome(yield* store.findPayment(payment(total).paymentHash))).toBe(true)
    }))
  })
})
