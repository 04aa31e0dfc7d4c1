import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option } from "effect"
import { Capabilities } from "../../src/capabilities/Capabilities.ts"
import { Funding } from "../../src/funding/Funding.ts"
import { Store } from "../../src/ports/Store.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { FakeProvider, TestGateway, TestRails, TestTime } from "../../adapters/testing/index.ts"

/**
 * The testing kit itself: scripted providers go through the real spend
 * pipeline (a scripted failure releases its hold, scripted latency is Clock
 * time, scripted usage is what is charged), the rails pay through the
 * production funding path (on time, late, or never), and moving the
 * TestClock runs the gateway's background sweeps and starts new days.
 */

const CENT = 10_000n
const code = (error: unknown) => (error as { code?: string }).code ?? String(error)

describe("TestGateway", () => {
  it.effect("starts the clock at the given instant, and at noon UTC on 2026-01-01 by default", () =>
    Effect.gen(function*() {
      assert.strictEqual((yield* TestTime.now).toISOString(), TestGateway.DEFAULT_START)
      yield* TestTime.advance("90 minutes")
      assert.strictEqual((yield* TestTime.now).toISOString(), "2026-01-01T13:30:00.000Z")
      const at = yield* Effect.provide(TestTime.now, TestGateway.layer({ startAt: "2030-06-01T08:00:00Z" }))
      assert.strictEqual(at.toISOString(), "2030-06-01T08:00:00.000Z")
    }).pipe(Effect.provide(TestGateway.layer())))

  it.effect("funds a wallet through Funding and the rails: one card payment, one credit", () =>
    Effect.gen(function*() {
      const owner = yield* TestGateway.fundedOwner(1_500)
      const wallet = yield* (yield* Wallets).get(owner)
      assert.strictEqual(wallet.usdMicroUsd, 1_500n * CENT)
      const credits = yield* (yield* Wallets).transactions(owner, { type: "credit" }, { limit: 10, offset: 0 })
      assert.deepStrictEqual(credits.items.map((t) => t.description), ["Card funding"])
      const rails = yield* TestRails
      assert.strictEqual(rails.issued.length, 1)
      // Paying the same invoice again is a duplicate notice: nothing more is credited.
      assert.strictEqual(yield* rails.pay(rails.issued[0]!.invoiceId), "duplicate")
      assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 1_500n * CENT)
      // The product's own rules apply: below the card minimum is refused.
      assert.strictEqual(code(yield* Effect.flip(TestGateway.fund(owner, { usdCents: 999 }))), "INVALID_AMOUNT")
    }).pipe(Effect.provide(TestGateway.layer())))
})

describe("FakeProvider", () => {
  it.effect("a scripted failure releases the hold and charges nothing; the next scripted call is charged its usage", () => {
    const search = FakeProvider.make("search", {
      priceMicroUsd: 4_000n,
      script: [FakeProvider.fail("timeout"), FakeProvider.succeed({ usage: { units: 1 }, actualMicroUsd: 3_000n })]
    })
    return Effect.gen(function*() {
      const owner = yield* TestGateway.fundedOwner(1_000)
      const capabilities = yield* Capabilities
      const failed = yield* Effect.flip(capabilities.execute(owner, "search", { query: "first" }))
      assert.strictEqual(code(failed), "PROVIDER_ERROR")
      assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 1_000n * CENT)
      const store = yield* Store
      const holds = yield* store.listReservations(owner.agent.accountId, { limit: 10, offset: 0 })
      assert.deepStrictEqual(holds.items.map((r) => r.status), ["released"])

      const result = yield* capabilities.execute(owner, "search", { query: "second" })
      assert.strictEqual(result.receipt.quotedMicroUsd, 4_000n)
      assert.strictEqual(result.receipt.chargedMicroUsd, 3_000n)
      assert.deepStrictEqual(result.data, { results: [], query: "second", totalResults: 0 })
      assert.deepStrictEqual(search.inputs, [{ query: "first" }, { query: "second" }])
      assert.strictEqual(search.remaining, 0)
      // The script ran out: the default outcome, metered at the quote.
      assert.strictEqual((yield* capabilities.execute(owner, "search", { query: "third" })).receipt.chargedMicroUsd, 4_000n)
      assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 1_000n * CENT - 7_000n)
    }).pipe(Effect.provide(TestGateway.layer({ providers: [search] })))
  })

  it.effect("meters a reason call from scripted token usage with the model's prices", () => {
    const llm = FakeProvider.make("reason", {
      script: [FakeProvider.succeed({
        usage: { promptTokens: 12, completionTokens: 500 },
        output: { content: "hi", finishReason: "stop", usage: { promptTokens: 12, completionTokens: 500, totalTokens: 512 } }
      })]
    })
    return Effect.gen(function*() {
      const owner = yield* TestGateway.fundedOwner(1_000)
      const result = yield* (yield* Capabilities).execute(owner, "reason", { prompt: "Hello", maxTokens: 1_000 })
      // Quoted: (5 bytes + 16 overhead) tokens in at 1,000 µUSD per 1k, 1000 out at 2,000 per 1k.
      assert.strictEqual(result.receipt.quotedMicroUsd, 21n + 2_000n)
      // Charged: 12 tokens in, 500 out, as the upstream reported.
      assert.strictEqual(result.receipt.chargedMicroUsd, 12n + 1_000n)
      assert.strictEqual(result.model, "fake-model")
      assert.strictEqual(result.data.content, "hi")
      assert.strictEqual(llm.calls[0]!.quote.maxTokens, 1_000)
    }).pipe(Effect.provide(TestGateway.layer({ providers: [llm] })))
  })

  it.effect("scripted latency is TestClock time: the call answers when the clock reaches it", () => {
    const read = FakeProvider.make("read", { script: [FakeProvider.succeed({ latency: "3 seconds" })] })
    return Effect.gen(function*() {
      const owner = yield* TestGateway.fundedOwner(1_000)
      const fiber = yield* Effect.forkChild((yield* Capabilities).execute(owner, "read", { url: "https://example.com/a" }))
      yield* read.awaitCalls(1)
      yield* TestTime.advance("2999 millis")
      assert.isUndefined(fiber.pollUnsafe(), "still waiting on the upstream")
      yield* TestTime.advance("1 milli")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(result.receipt.latencyMs, 3_000)
      assert.strictEqual(result.data.url, "https://example.com/a")
    }).pipe(Effect.provide(TestGateway.layer({ providers: [read] })))
  })

  it.effect("a call that outlives its hold: the recovery sweep releases the hold on the clock, and the late answer is still charged once", () => {
    const slow = FakeProvider.make("search", { priceMicroUsd: 5_000n, script: [FakeProvider.succeed({ latency: "20 minutes" })] })
    return Effect.gen(function*() {
      const owner = yield* TestGateway.fundedOwner(1_000)
      const store = yield* Store
      const fiber = yield* Effect.forkChild((yield* Capabilities).execute(owner, "search", { query: "slow" }))
      yield* slow.awaitCalls(1)
      const held = yield* store.listReservations(owner.agent.accountId, { limit: 10, offset: 0 })
      assert.deepStrictEqual(held.items.map((r) => r.status), ["held"])
      yield* TestTime.advance("17 minutes")
      const swept = yield* store.listReservations(owner.agent.accountId, { limit: 10, offset: 0 })
      assert.deepStrictEqual(swept.items.map((r) => r.status), ["released"], "the sweeper ran on the TestClock")
      assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 1_000n * CENT)
      yield* TestTime.advance("3 minutes")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(result.receipt.chargedMicroUsd, 5_000n)
      assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 1_000n * CENT - 5_000n)
    }).pipe(Effect.provide(TestGateway.layer({ providers: [slow] })))
  })

  it.effect("a hanging call is ended by interruption, and its hold is released", () => {
    const stuck = FakeProvider.make("search", { otherwise: FakeProvider.hang })
    return Effect.gen(function*() {
      const owner = yield* TestGateway.fundedOwner(1_000)
      const outcome = yield* (yield* Capabilities).execute(owner, "search", { query: "q" }).pipe(
        Effect.timeoutOption("10 seconds"),
        Effect.forkChild,
        Effect.tap(() => stuck.awaitCalls(1)),
        Effect.tap(() => TestTime.advance("10 seconds")),
        Effect.flatMap(Fiber.join)
      )
      assert.isTrue(Option.isNone(outcome))
      const holds = yield* (yield* Store).listReservations(owner.agent.accountId, { limit: 10, offset: 0 })
      assert.deepStrictEqual(holds.items.map((r) => r.status), ["released"])
      assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 1_000n * CENT)
    }).pipe(Effect.provide(TestGateway.layer({ providers: [stuck] })))
  })
})

describe("FakeRails", () => {
  it.effect("pay late: the clock moves to the expiry, the payment lands in late payments, nothing is credited", () =>
    Effect.gen(function*() {
      const owner = yield* TestGateway.signup()
      const invoice = yield* (yield* Funding).fundLightning(owner, 2_100)
      const rails = yield* TestRails
      assert.strictEqual(yield* rails.payLate(invoice), "late")
      assert.strictEqual((yield* TestTime.now).getTime(), invoice.expiresAt.getTime())
      const late = yield* (yield* Store).listLatePayments({ limit: 10, offset: 0 })
      assert.deepStrictEqual(late.items.map((i) => [i.id, i.status, i.latePaymentAmount]), [[invoice.id, "expired", 2_100_000n]])
      assert.strictEqual((yield* (yield* Wallets).get(owner)).satsMsat, 0n)
      assert.strictEqual((yield* (yield* Wallets).transactions(owner, { type: "credit" }, { limit: 10, offset: 0 })).total, 0)
    }).pipe(Effect.provide(TestGateway.layer())))

  it.effect("pay on time credits the right pocket; an unpaid invoice is expired by the sweep on the clock, and a payment after that is late", () =>
    Effect.gen(function*() {
      const owner = yield* TestGateway.signup()
      const funding = yield* Funding
      const rails = yield* TestRails
      const paid = yield* funding.fundLightning(owner, 500)
      assert.strictEqual(yield* rails.pay(paid, { amountPaid: 500_123n }), "credited")
      assert.strictEqual((yield* (yield* Wallets).get(owner)).satsMsat, 500_123n)

      const never = yield* funding.fundCard(owner, 2_000)
      yield* TestTime.advanceToExpiry(never)
      yield* TestTime.advance("1 minute")
      const stored = yield* (yield* Store).findInvoice({ type: "card", externalId: never.externalId })
      assert.strictEqual(Option.getOrThrow(stored).status, "expired", "written by the expiry sweep, not only shown so")
      assert.strictEqual(yield* rails.pay(never), "late")
      assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 0n)
    }).pipe(Effect.provide(TestGateway.layer())))

  it.effect("with background: false, moving the clock runs no sweep: an expired invoice is only shown expired", () =>
    Effect.gen(function*() {
      const owner = yield* TestGateway.signup()
      const funding = yield* Funding
      const invoice = yield* funding.fundCard(owner, 1_000)
      yield* TestTime.advanceToExpiry(invoice)
      yield* TestTime.advance("5 minutes")
      const stored = yield* (yield* Store).findInvoice({ type: "card", externalId: invoice.externalId })
      assert.strictEqual(Option.getOrThrow(stored).status, "pending")
      assert.strictEqual((yield* funding.invoices(owner, "expired", { limit: 10, offset: 0 })).total, 1)
    }).pipe(Effect.provide(TestGateway.layer({ background: false }))))

  it.effect("a rail told to refuse fails the funding request with the rail's error, and creates no invoice", () =>
    Effect.gen(function*() {
      const owner = yield* TestGateway.signup()
      const rails = yield* TestRails
      rails.refuseNext("card")
      const funding = yield* Funding
      assert.strictEqual(code(yield* Effect.flip(funding.fundCard(owner, 1_000))), "PROVIDER_ERROR")
      assert.strictEqual((yield* funding.invoices(owner, undefined, { limit: 10, offset: 0 })).total, 0)
      yield* funding.fundCard(owner, 1_000)
      assert.strictEqual(rails.issued.length, 1)
    }).pipe(Effect.provide(TestGateway.layer())))

  it.effect("paying an invoice these rails never issued is a defect that names it", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit((yield* TestRails).pay("inv_nope"))
      assert.isTrue(exit._tag === "Failure" && String(exit.cause).includes("inv_nope"))
    }).pipe(Effect.provide(TestGateway.layer())))
})

describe("TestTime", () => {
  it.effect("midnight UTC resets the daily cap", () => {
    const search = FakeProvider.make("search", { priceMicroUsd: 30n * CENT })
    return Effect.gen(function*() {
      const owner = yield* TestGateway.fundedOwner(1_000)
      const worker = yield* TestGateway.worker(owner, { policy: { maxPerDayMicroUsd: 100n * CENT } })
      const capabilities = yield* Capabilities
      for (let i = 0; i < 3; i++) yield* capabilities.execute(worker, "search", { query: `q${i}` })
      assert.strictEqual(code(yield* Effect.flip(capabilities.execute(worker, "search", { query: "q3" }))), "BUDGET_EXCEEDED")
      yield* TestTime.advance("11 hours")
      assert.strictEqual((yield* TestTime.now).toISOString(), "2026-01-01T23:00:00.000Z")
      assert.strictEqual(code(yield* Effect.flip(capabilities.execute(worker, "search", { query: "q3" }))), "BUDGET_EXCEEDED")
      yield* TestTime.advanceToNextMidnightUtc
      assert.strictEqual((yield* TestTime.now).toISOString(), "2026-01-02T00:00:00.000Z")
      const again = yield* capabilities.execute(worker, "search", { query: "q3" })
      assert.strictEqual(again.receipt.chargedMicroUsd, 30n * CENT)
      assert.strictEqual(search.calls.length, 4, "refusals never reached the provider")
    }).pipe(Effect.provide(TestGateway.layer({ providers: [search] })))
  })

  it("computes the next midnight strictly after an instant", () => {
    assert.strictEqual(TestTime.nextMidnightUtc(new Date("2026-03-04T23:59:59.999Z")).toISOString(), "2026-03-05T00:00:00.000Z")
    assert.strictEqual(TestTime.nextMidnightUtc(new Date("2026-03-05T00:00:00.000Z")).toISOString(), "2026-03-06T00:00:00.000Z")
  })

  it.effect("time only moves forward", () =>
    Effect.gen(function*() {
      const before = yield* TestTime.now
      yield* TestTime.advanceTo(new Date("2020-01-01T00:00:00Z"))
      assert.strictEqual((yield* TestTime.now).getTime(), before.getTime())
      assert.isTrue((yield* Effect.exit(TestTime.advance(-1)))._tag === "Failure")
    }).pipe(Effect.provide(TestGateway.layer())))
})
