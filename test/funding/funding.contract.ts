import type { RegistryStore } from "../../src/ports/RegistryStore.ts"
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Exit, type Layer, Option, Result } from "effect"
import { TestClock } from "effect/testing"
import { Agents } from "../../src/agents/Agents.ts"
import { newAuditId, newReservationId, utcDay } from "../../src/domain/Ledger.ts"
import { MAX_SATS_POCKET_MSAT, MAX_USD_POCKET_MICRO_USD, MicroUsd } from "../../src/domain/Money.ts"
import { planHold } from "../../src/wallet/decide.ts"
import { Funding } from "../../src/funding/Funding.ts"
import type { IdempotencyStore } from "../../src/ports/IdempotencyStore.ts"
import { PaymentSink } from "../../src/ports/Rails.ts"
import { Store } from "../../src/ports/Store.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { fundedAccount, newWorker, testLayer } from "../wallet/ledger.contract.ts"

/** The invoice lifecycle, against every Store implementation, with the dev rails. */

const errCode = (error: unknown): string => (error as { code?: string }).code ?? String(error)
const HOUR = 3_600_000

const lightningNotice = (externalId: string, paidAt: Date, amountPaid?: bigint) => ({
  type: "lightning" as const,
  externalId,
  paidAt,
  source: "test",
  ...(amountPaid === undefined ? {} : { amountPaid })
})

export const fundingContract = (name: string, store: () => Layer.Layer<Store | IdempotencyStore | RegistryStore, unknown>) =>
  describe(`Funding: ${name}`, () => {
    layer(testLayer(store()), { timeout: 120_000, excludeTestServices: true })((it) => {
      it.effect("creates a pending Lightning invoice that expires at exactly one hour", () =>
        Effect.gen(function*() {
          yield* TestClock.setTime(Date.parse("2026-11-21T10:00:00.000Z"))
          const owner = yield* fundedAccount(0n)
          const funding = yield* Funding
          const invoice = yield* funding.fundLightning(owner, 2_100)
          assert.strictEqual(invoice.type, "lightning")
          assert.strictEqual(invoice.status, "pending")
          assert.strictEqual(invoice.amountMsat, 2_100_000n)
          assert.match(invoice.paymentRequest ?? "", /^lnbcrt21u1/)
          assert.match(invoice.externalId, /^[0-9a-f]{64}$/)
          assert.strictEqual(invoice.expiresAt.toISOString(), "2026-11-21T11:00:00.000Z")
          yield* TestClock.adjust(HOUR - 1)
          const before = yield* funding.invoices(owner, undefined, { limit: 10, offset: 0 })
          assert.deepStrictEqual(before.items.map((i) => i.status), ["pending"])
          yield* TestClock.adjust(1)
          const after = yield* funding.invoices(owner, undefined, { limit: 10, offset: 0 })
          assert.deepStrictEqual(after.items.map((i) => i.status), ["expired"])
          assert.strictEqual((yield* funding.invoices(owner, "pending", { limit: 10, offset: 0 })).total, 0)
          assert.strictEqual((yield* funding.invoices(owner, "expired", { limit: 10, offset: 0 })).total, 1)
          assert.isTrue((yield* funding.expireDue) >= 1)
        }).pipe(Effect.provide(TestClock.layer())))

      it.effect("a card session expires at exactly 30 minutes", () =>
        Effect.gen(function*() {
          yield* TestClock.setTime(Date.parse("2026-11-21T10:00:00.000Z"))
          const owner = yield* fundedAccount(0n)
          const funding = yield* Funding
          const invoice = yield* funding.fundCard(owner, 2_500)
          assert.strictEqual(invoice.amountMicroUsd, 25_000_000n)
          assert.strictEqual(invoice.expiresAt.toISOString(), "2026-11-21T10:30:00.000Z")
          assert.match(invoice.checkoutUrl ?? "", /\/dev\/checkout\/cs_dev_/)
          yield* TestClock.adjust(30 * 60_000 - 1)
          assert.strictEqual((yield* funding.invoices(owner, "pending", { limit: 10, offset: 0 })).total, 1)
          yield* TestClock.adjust(1)
          assert.strictEqual((yield* funding.invoices(owner, "expired", { limit: 10, offset: 0 })).total, 1)
        }).pipe(Effect.provide(TestClock.layer())))

      it.effect("refuses bad amounts and non-owners", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(0n)
          const funding = yield* Funding
          for (const sats of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
            assert.strictEqual(errCode(yield* Effect.flip(funding.fundLightning(owner, sats))), "INVALID_AMOUNT")
          }
          const below = yield* Effect.flip(funding.fundCard(owner, 999.99))
          assert.strictEqual(errCode(below), "INVALID_AMOUNT")
          assert.deepStrictEqual((below as { details?: unknown }).details, { minimum: 1000, maximum: 10_000_000 })
          assert.strictEqual(errCode(yield* Effect.flip(funding.fundCard(owner, 1000.5))), "INVALID_AMOUNT")
          yield* funding.fundCard(owner, 1000)
          const worker = yield* newWorker(owner)
          assert.strictEqual(errCode(yield* Effect.flip(funding.fundLightning(worker, 10))), "FORBIDDEN")
          assert.strictEqual(errCode(yield* Effect.flip(funding.fundCard(worker, 1000))), "FORBIDDEN")
          assert.strictEqual(errCode(yield* Effect.flip(funding.invoices(worker, undefined, { limit: 1, offset: 0 }))), "FORBIDDEN")
        }))

      it.effect("refuses funding amounts above the per-invoice maximum with INVALID_AMOUNT { minimum, maximum }", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(0n)
          const funding = yield* Funding
          for (const cents of [10_000_001, 1e15, 9.2e14, 1e300]) {
            const refused = yield* Effect.flip(funding.fundCard(owner, cents))
            assert.strictEqual(errCode(refused), "INVALID_AMOUNT")
            assert.deepStrictEqual((refused as { details?: unknown }).details, { minimum: 1000, maximum: 10_000_000 })
          }
          for (const sats of [100_000_001, 1e15, Number.MAX_SAFE_INTEGER]) {
            const refused = yield* Effect.flip(funding.fundLightning(owner, sats))
            assert.strictEqual(errCode(refused), "INVALID_AMOUNT")
            assert.deepStrictEqual((refused as { details?: unknown }).details, { minimum: 1, maximum: 100_000_000 })
          }
          assert.strictEqual((yield* funding.fundCard(owner, 10_000_000)).amountMicroUsd, 100_000_000_000n)
          assert.strictEqual((yield* funding.fundLightning(owner, 100_000_000)).amountMsat, 100_000_000_000n)
          assert.strictEqual((yield* funding.invoices(owner, undefined, { limit: 10, offset: 0 })).total, 2)
        }))

      it.effect("a payment that would take a pocket above its maximum is refused and recorded; later credits still work", () =>
        Effect.gen(function*() {
          const store = yield* Store
          const funding = yield* Funding
          const sink = yield* PaymentSink
          const wallets = yield* Wallets
          // 5,000 cents short of the usd pocket's maximum ($1,000,000,000).
          const owner = yield* fundedAccount(MAX_USD_POCKET_MICRO_USD / 10_000n - 5_000n)
          const before = yield* wallets.get(owner)
          const big = yield* funding.fundCard(owner, 10_000)
          const card = (externalId: string) => ({ type: "card" as const, externalId, paidAt: big.createdAt, source: "test" })
          assert.strictEqual(yield* sink.record(card(big.externalId)), "refused")
          // Delivered again (a webhook retry): answered the same way, still nothing credited.
          assert.strictEqual(yield* sink.record(card(big.externalId)), "duplicate")
          assert.deepStrictEqual(yield* wallets.get(owner), before)
          const refused = Option.getOrThrow(yield* store.findInvoice({ type: "card", externalId: big.externalId }))
          assert.strictEqual(refused.status, "refused")
          assert.strictEqual(refused.paidAt, null)
          assert.strictEqual(refused.transactionId, null)
          assert.strictEqual(refused.latePaymentAt?.toISOString(), big.createdAt.toISOString())
          assert.strictEqual(refused.latePaymentAmount, 100_000_000n)
          const listed = yield* funding.invoices(owner, "refused", { limit: 10, offset: 0 })
          assert.deepStrictEqual(listed.items.map((i) => i.id), [big.id])
          const operator = yield* store.listLatePayments({ limit: 100, offset: 0 })
          assert.isTrue(operator.items.some((i) => i.id === big.id && i.status === "refused"))
          // A credit that fits still goes through, up to exactly the maximum.
          const fits = yield* funding.fundCard(owner, 5_000)
          assert.strictEqual(yield* sink.record(card(fits.externalId)), "credited")
          assert.strictEqual((yield* wallets.get(owner)).usdMicroUsd, MAX_USD_POCKET_MICRO_USD)
          const one = yield* funding.fundCard(owner, 1_000)
          assert.strictEqual(yield* sink.record(card(one.externalId)), "refused")
          assert.strictEqual((yield* wallets.get(owner)).usdMicroUsd, MAX_USD_POCKET_MICRO_USD)
          // The sats pocket is bounded the same way, whatever the rail says was paid.
          const ln = yield* funding.fundLightning(owner, 1_000)
          assert.strictEqual(yield* sink.record(lightningNotice(ln.externalId, ln.createdAt, MAX_SATS_POCKET_MSAT + 1n)), "refused")
          assert.strictEqual((yield* wallets.get(owner)).satsMsat, 0n)
          // Even an amount beyond what storage can hold is answered and recorded (without its amount).
          const absurd = yield* funding.fundLightning(owner, 1_000)
          assert.strictEqual(yield* sink.record(lightningNotice(absurd.externalId, absurd.createdAt, 2n ** 64n)), "refused")
          const absurdRecord = Option.getOrThrow(yield* store.findInvoice({ type: "lightning", externalId: absurd.externalId }))
          assert.strictEqual(absurdRecord.status, "refused")
          assert.strictEqual(absurdRecord.latePaymentAmount, null)
          assert.isNotNull(absurdRecord.latePaymentAt)
          const ln2 = yield* funding.fundLightning(owner, 1_000)
          assert.strictEqual(yield* sink.record(lightningNotice(ln2.externalId, ln2.createdAt)), "credited")
          assert.strictEqual((yield* wallets.get(owner)).satsMsat, 1_000_000n)
        }))

      it.effect("money held by a reservation counts toward the maximum, so its release cannot overfill the pocket", () =>
        Effect.gen(function*() {
          const store = yield* Store
          const funding = yield* Funding
          const sink = yield* PaymentSink
          const wallets = yield* Wallets
          // 10,000 cents short of the maximum, then 10,000 cents held by a call in flight.
          const owner = yield* fundedAccount(MAX_USD_POCKET_MICRO_USD / 10_000n - 10_000n)
          const now = new Date()
          const held = 10_000n * 10_000n
          const reserved = yield* store.reserve({
            reservationId: newReservationId(),
            auditId: newAuditId(),
            accountId: owner.agent.accountId,
            agentId: owner.agent.id,
            capability: "search",
            provider: "test",
            quotedMicroUsd: MicroUsd.make(held),
            rate: null,
            day: utcDay(now),
            now,
            expiresAt: new Date(now.getTime() + 60_000),
            decide: (snapshot) => planHold(snapshot, "search", MicroUsd.make(held), null)
          })
          assert.isTrue(Result.isSuccess(reserved))
          if (Result.isFailure(reserved)) return
          // The pocket alone has room for 20,000 cents, but the hold may come back.
          const tooMuch = yield* funding.fundCard(owner, 10_001)
          const card = (externalId: string) => ({ type: "card" as const, externalId, paidAt: tooMuch.createdAt, source: "test" })
          assert.strictEqual(yield* sink.record(card(tooMuch.externalId)), "refused")
          const fits = yield* funding.fundCard(owner, 10_000)
          assert.strictEqual(yield* sink.record(card(fits.externalId)), "credited")
          const viaLedger = yield* wallets.credit({ accountId: owner.agent.accountId, key: "one-more", pocket: "usd", amount: 1n, description: "x" })
          assert.strictEqual(viaLedger._tag, "Refused")
          assert.strictEqual(
            yield* store.release({ reservationId: reserved.success.id, accountId: owner.agent.accountId, auditId: newAuditId(), reason: "test", now }),
            "Released"
          )
          assert.strictEqual((yield* wallets.get(owner)).usdMicroUsd, MAX_USD_POCKET_MICRO_USD)
        }))

      it.effect("the ledger's own credit refuses to overfill a pocket instead of failing", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(0n)
          const wallets = yield* Wallets
          const accountId = owner.agent.accountId
          const full = yield* wallets.credit({ accountId, key: "fill", pocket: "sats", amount: MAX_SATS_POCKET_MSAT, description: "fill" })
          assert.strictEqual(full._tag, "Credited")
          const over = yield* wallets.credit({ accountId, key: "over", pocket: "sats", amount: 1n, description: "over" })
          assert.deepStrictEqual(over, { _tag: "Refused", maximum: MAX_SATS_POCKET_MSAT })
          const huge = yield* wallets.credit({ accountId, key: "huge", pocket: "usd", amount: 2n ** 63n, description: "huge" })
          assert.strictEqual(huge._tag, "Refused")
          const wallet = yield* wallets.get(owner)
          assert.strictEqual(wallet.satsMsat, MAX_SATS_POCKET_MSAT)
          assert.strictEqual(wallet.usdMicroUsd, 0n)
        }))

      it.effect("the same settlement delivered 5 times concurrently credits once", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(0n)
          const funding = yield* Funding
          const sink = yield* PaymentSink
          const invoice = yield* funding.fundLightning(owner, 5_000)
          const paidAt = new Date(invoice.createdAt.getTime() + 60_000)
          const outcomes = yield* Effect.all(
            Array.from({ length: 5 }, () => sink.record(lightningNotice(invoice.externalId, paidAt))),
            { concurrency: "unbounded" }
          )
          assert.deepStrictEqual([...outcomes].sort(), ["credited", "duplicate", "duplicate", "duplicate", "duplicate"])
          const wallet = yield* (yield* Wallets).get(owner)
          assert.strictEqual(wallet.satsMsat, 5_000_000n)
          assert.strictEqual(wallet.usdMicroUsd, 0n)
          const credits = yield* (yield* Wallets).transactions(owner, { type: "credit" }, { limit: 10, offset: 0 })
          assert.strictEqual(credits.total, 1)
          assert.strictEqual(credits.items[0]?.satsMsat, 5_000_000n)
          const [paid] = (yield* funding.invoices(owner, undefined, { limit: 1, offset: 0 })).items
          assert.strictEqual(paid?.status, "paid")
          assert.strictEqual(paid?.paidAt?.toISOString(), paidAt.toISOString())
          assert.strictEqual(paid?.transactionId, credits.items[0]?.id)
          assert.strictEqual(yield* sink.record(lightningNotice(invoice.externalId, paidAt)), "duplicate")
          assert.strictEqual(yield* (yield* Wallets).verifyChain(owner.agent.accountId), null)
        }))

      it.effect("a card payment credits the usd pocket", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(0n)
          const funding = yield* Funding
          const sink = yield* PaymentSink
          const invoice = yield* funding.fundCard(owner, 1_234)
          const outcome = yield* sink.record({ type: "card", externalId: invoice.externalId, paidAt: invoice.createdAt, source: "test" })
          assert.strictEqual(outcome, "credited")
          const wallet = yield* (yield* Wallets).get(owner)
          assert.strictEqual(wallet.usdMicroUsd, 12_340_000n)
          assert.strictEqual(wallet.satsMsat, 0n)
        }))

      it.effect("an expired invoice is never credited; the late payment is recorded", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(0n)
          const funding = yield* Funding
          const sink = yield* PaymentSink
          const onTime = yield* funding.fundLightning(owner, 100)
          const late = yield* funding.fundLightning(owner, 200)
          const atExpiry = late.expiresAt
          assert.strictEqual(yield* sink.record(lightningNotice(late.externalId, atExpiry)), "late")
          assert.strictEqual(yield* sink.record(lightningNotice(late.externalId, atExpiry)), "late")
          const justBefore = new Date(onTime.expiresAt.getTime() - 1)
          assert.strictEqual(yield* sink.record(lightningNotice(onTime.externalId, justBefore)), "credited")
          const wallet = yield* (yield* Wallets).get(owner)
          assert.strictEqual(wallet.satsMsat, 100_000n)
          const store = yield* Store
          const recorded = Option.getOrThrow(yield* store.findInvoice({ type: "lightning", externalId: late.externalId }))
          assert.strictEqual(recorded.status, "expired")
          assert.strictEqual(recorded.latePaymentAt?.toISOString(), atExpiry.toISOString())
          assert.strictEqual(recorded.latePaymentAmount, 200_000n)
          assert.strictEqual(recorded.transactionId, null)
        }))

      it.effect("a rail's expiry notice closes a pending invoice; a later payment is late", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(0n)
          const funding = yield* Funding
          const sink = yield* PaymentSink
          const invoice = yield* funding.fundCard(owner, 5_000)
          yield* sink.recordExpiry("card", invoice.externalId, invoice.createdAt)
          const outcome = yield* sink.record({ type: "card", externalId: invoice.externalId, paidAt: invoice.createdAt, source: "test" })
          assert.strictEqual(outcome, "late")
          assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 0n)
        }))

      it.effect("credits what was actually paid, and ignores unknown ids", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(0n)
          const funding = yield* Funding
          const sink = yield* PaymentSink
          const invoice = yield* funding.fundLightning(owner, 1_000)
          // Lightning lets a payer pay more than asked; nothing paid is lost.
          assert.strictEqual(yield* sink.record(lightningNotice(invoice.externalId, invoice.createdAt, 1_000_500n)), "credited")
          assert.strictEqual((yield* (yield* Wallets).get(owner)).satsMsat, 1_000_500n)
          assert.strictEqual(yield* sink.record(lightningNotice("ff".repeat(32), invoice.createdAt)), "unknown")
        }))

      it.effect("keeps a rail's stream cursor", () =>
        Effect.gen(function*() {
          const sink = yield* PaymentSink
          const name = `test-${Math.random()}`
          assert.strictEqual(yield* sink.loadCursor(name), null)
          yield* sink.saveCursor(name, "41")
          yield* sink.saveCursor(name, "42")
          assert.strictEqual(yield* sink.loadCursor(name), "42")
        }))

      it.effect("invoices of another account are not listed", () =>
        Effect.gen(function*() {
          const a = yield* fundedAccount(0n)
          const b = yield* fundedAccount(0n)
          const funding = yield* Funding
          yield* funding.fundLightning(a, 1)
          assert.strictEqual((yield* funding.invoices(b, undefined, { limit: 10, offset: 0 })).total, 0)
          const agents = yield* Agents
          const exit = yield* Effect.exit(agents.get(b, a.agent.id))
          assert.isTrue(Exit.isFailure(exit))
        }))
    })
  })
