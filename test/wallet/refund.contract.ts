import { assert, describe, layer } from "@effect/vitest"
import { Effect, Exit, Layer, Option } from "effect"
import * as Admin from "../../src/admin/Admin.ts"
import { Policies } from "../../src/agents/Policies.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { AdminStore } from "../../src/ports/AdminStore.ts"
import type { IdempotencyStore } from "../../src/ports/IdempotencyStore.ts"
import type { RegistryStore } from "../../src/ports/RegistryStore.ts"
import { Store } from "../../src/ports/Store.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { checkAccount } from "../support/ledger-check.ts"
import { call, fundedAccount, newWorker, testLayer } from "./ledger.contract.ts"

/**
 * Refunds of charges (`Admin.refund` over `Store.refund`), run against every
 * Store implementation. 1 cent = 10_000 µUSD; the rate is 50,000 USD/BTC,
 * so 1 sat = 0.05 cents = 500 µUSD.
 */

const CENT = 10_000n

type Stores = Store | AdminStore | IdempotencyStore | RegistryStore

const refundLayer = (store: Layer.Layer<Stores, unknown>) =>
  Admin.layer.pipe(Layer.provideMerge(Layer.merge(testLayer(store), store)))

const codeOf = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isSuccess(exit)
    ? "ok"
    : Option.match(Exit.findErrorOption(exit), {
      onNone: () => "defect",
      onSome: (e) => (typeof e === "object" && e !== null && "code" in e ? String(e.code) : String(e))
    })

const refund = (chargeId: string, amountCents?: bigint, reason = "overcharged") =>
  Effect.flatMap(Admin.Admin, (admin: Admin.Admin["Service"]) =>
    admin.refund(chargeId, { amountMicroUsd: amountCents === undefined ? undefined : amountCents * CENT, reason }))

/** The account adds up (ledger-check) and its audit chain verifies. */
const assertBooksBalance = (accountId: AccountId) =>
  Effect.gen(function*() {
    const { problems } = yield* checkAccount(accountId)
    assert.deepStrictEqual(problems, [])
  })

const refundsOf = (accountId: AccountId) =>
  Effect.gen(function*() {
    const store = yield* Store
    return (yield* store.listTransactions(accountId, { type: "refund" }, { limit: 100, offset: 0 })).items
  })

export const refundContract = (name: string, store: () => Layer.Layer<Stores, unknown>) =>
  describe(`Refunds: ${name}`, () => {
    layer(refundLayer(store()), { timeout: 120_000, excludeTestServices: true })((it) => {
      it.effect("a full refund gives the charge back, shows as a refund transaction, and cannot be repeated", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(100n)
          const accountId = owner.agent.accountId
          const { receipt } = yield* call(owner, 10n, { actual: 7n * CENT })
          const wallets = yield* Wallets
          assert.strictEqual((yield* wallets.get(owner)).usdMicroUsd, 93n * CENT)
          const result = yield* refund(receipt.transactionId, undefined, "upstream returned garbage")
          assert.strictEqual(result.refund.type, "refund")
          assert.strictEqual(result.refund.refundOf, receipt.transactionId)
          assert.strictEqual(result.refund.amountMicroUsd, 7n * CENT)
          assert.strictEqual(result.refund.usdMicroUsd, 7n * CENT)
          assert.strictEqual(result.refund.agentId, owner.agent.id)
          assert.include(result.refund.description, "upstream returned garbage")
          assert.strictEqual(result.remainingMicroUsd, 0n)
          assert.strictEqual(result.wallet.usdMicroUsd, 100n * CENT)
          assert.strictEqual((yield* wallets.get(owner)).usdMicroUsd, 100n * CENT)
          // In the account's own list, with type refund.
          const listed = yield* wallets.transactions(owner, { type: "refund" }, { limit: 10, offset: 0 })
          assert.deepStrictEqual(listed.items.map((t) => t.id), [result.refund.id])
          // Its audit record: kind refund, pockets credited, linked to the refund transaction.
          const record = yield* (yield* Store).getAudit(accountId, result.refund.auditId)
          assert.isTrue(Option.isSome(record))
          const audit = Option.getOrThrow(record)
          assert.strictEqual(audit.kind, "refund")
          assert.strictEqual(audit.transactionId, result.refund.id)
          assert.strictEqual(audit.usdDeltaMicroUsd, 7n * CENT)
          assert.deepStrictEqual(JSON.parse(audit.details), { refundOf: receipt.transactionId, reason: "upstream returned garbage" })
          const again = yield* Effect.exit(refund(receipt.transactionId))
          assert.strictEqual(codeOf(again), "REFUND_EXCEEDS_CHARGE")
          assert.strictEqual((yield* wallets.get(owner)).usdMicroUsd, 100n * CENT)
          yield* assertBooksBalance(accountId)
        }))

      it.effect("several partial refunds up to the charge, then refused with what remains; nothing moves on a refusal", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(100n)
          const accountId = owner.agent.accountId
          const { receipt } = yield* call(owner, 10n)
          const first = yield* refund(receipt.transactionId, 3n)
          assert.strictEqual(first.remainingMicroUsd, 7n * CENT)
          const over = yield* Effect.flip(refund(receipt.transactionId, 8n))
          assert.strictEqual(over.code, "REFUND_EXCEEDS_CHARGE")
          assert.deepStrictEqual((over as { details: unknown }).details, { charged: 10, refunded: 3, remaining: 7, requested: 8 })
          const second = yield* refund(receipt.transactionId, 4n)
          assert.strictEqual(second.remainingMicroUsd, 3n * CENT)
          const last = yield* refund(receipt.transactionId, 3n)
          assert.strictEqual(last.remainingMicroUsd, 0n)
          assert.deepStrictEqual(last.refunded, { microUsd: 10n * CENT, usdMicroUsd: 10n * CENT, satsMsat: 0n })
          assert.strictEqual(codeOf(yield* Effect.exit(refund(receipt.transactionId, 1n))), "REFUND_EXCEEDS_CHARGE")
          assert.strictEqual(codeOf(yield* Effect.exit(refund(receipt.transactionId, 0n))), "INVALID_AMOUNT")
          assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 100n * CENT)
          assert.strictEqual((yield* refundsOf(accountId)).length, 3)
          yield* assertBooksBalance(accountId)
        }))

      it.effect("a charge paid partly in sats is given back to both pockets at its own rate, sats first", () =>
        Effect.gen(function*() {
          // 4 cents in usd, 1000 sats (50 cents) in sats: a 10-cent call takes 4 cents and 120 sats.
          const owner = yield* fundedAccount(4n, 1000n)
          const accountId = owner.agent.accountId
          const { receipt } = yield* call(owner, 10n)
          assert.strictEqual(receipt.debitedUsdMicroUsd, 4n * CENT)
          assert.strictEqual(receipt.debitedSatsMsat, 120_000n)
          const first = yield* refund(receipt.transactionId, 3n)
          assert.strictEqual(first.refund.usdMicroUsd, 0n)
          assert.strictEqual(first.refund.satsMsat, 60_000n)
          assert.strictEqual(first.refund.rateMicroUsdPerBtc, 50_000_000_000n)
          const rest = yield* refund(receipt.transactionId)
          assert.strictEqual(rest.refund.amountMicroUsd, 7n * CENT)
          assert.strictEqual(rest.refund.usdMicroUsd, 4n * CENT)
          assert.strictEqual(rest.refund.satsMsat, 60_000n)
          const wallet = yield* (yield* Wallets).get(owner)
          assert.strictEqual(wallet.usdMicroUsd, 4n * CENT)
          assert.strictEqual(wallet.satsMsat, 1_000_000n)
          yield* assertBooksBalance(accountId)
        }))

      it.effect("only a charge can be refunded; an unknown id is not found", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(100n)
          const credit = (yield* (yield* Wallets).transactions(owner, { type: "credit" }, { limit: 1, offset: 0 })).items[0]!
          const refused = yield* Effect.flip(refund(credit.id))
          assert.strictEqual(refused._tag, "NotRefundable")
          assert.strictEqual(refused.code, "CONFLICT")
          const { receipt } = yield* call(owner, 10n)
          const done = yield* refund(receipt.transactionId, 2n)
          assert.strictEqual((yield* Effect.flip(refund(done.refund.id)))._tag, "NotRefundable")
          assert.strictEqual(codeOf(yield* Effect.exit(refund("txn_nope"))), "NOT_FOUND")
          assert.strictEqual(codeOf(yield* Effect.exit(refund(receipt.transactionId, 1n, "  "))), "VALIDATION_ERROR")
          assert.strictEqual(codeOf(yield* Effect.exit(refund(receipt.transactionId, 1n, "x".repeat(501)))), "VALIDATION_ERROR")
          assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 92n * CENT)
          yield* assertBooksBalance(owner.agent.accountId)
        }))

      it.effect("20 concurrent refunds of one charge never give back more than it took (exact sums)", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(100n, 2000n)
          const accountId = owner.agent.accountId
          // 150 cents: 100 from usd, 50 cents (1000 sats) from sats.
          const { receipt } = yield* call(owner, 150n)
          const before = yield* (yield* Wallets).get(owner)
          const amounts = [7n, 13n, 3n, 11n, 9n, 17n, 5n, 8n, 12n, 10n, 6n, 14n, 4n, 16n, 2n, 15n, 1n, 19n, 20n, 18n]
          const exits = yield* Effect.all(
            amounts.map((cents) => Effect.exit(refund(receipt.transactionId, cents))),
            { concurrency: "unbounded" }
          )
          const succeeded = exits.flatMap((exit, i) => (Exit.isSuccess(exit) ? [{ exit: exit.value, cents: amounts[i]! }] : []))
          for (const exit of exits) assert.oneOf(codeOf(exit), ["ok", "REFUND_EXCEEDS_CHARGE"])
          const refundedCents = succeeded.reduce((sum, s) => sum + s.cents, 0n)
          assert.isAtMost(Number(refundedCents), 150)
          // Every refusal asked for more than was left once the others were applied.
          const refused = amounts.filter((_, i) => !Exit.isSuccess(exits[i]!))
          for (const cents of refused) assert.isAbove(Number(cents), Number(150n - refundedCents))
          const rows = yield* refundsOf(accountId)
          assert.strictEqual(rows.length, succeeded.length)
          const usdBack = rows.reduce((sum, t) => sum + t.usdMicroUsd, 0n)
          const satsBack = rows.reduce((sum, t) => sum + t.satsMsat, 0n)
          assert.strictEqual(rows.reduce((sum, t) => sum + t.amountMicroUsd, 0n), refundedCents * CENT)
          assert.isTrue(usdBack <= 100n * CENT && satsBack <= 1_000_000n)
          const after = yield* (yield* Wallets).get(owner)
          assert.strictEqual(after.usdMicroUsd - before.usdMicroUsd, usdBack)
          assert.strictEqual(after.satsMsat - before.satsMsat, satsBack)
          const stored = Option.getOrThrow(yield* (yield* Store).refundedOf(receipt.transactionId))
          assert.deepStrictEqual(stored.refunded, { microUsd: refundedCents * CENT, usdMicroUsd: usdBack, satsMsat: satsBack })
          // Then 20 concurrent full refunds of what remains: exactly one wins, and the charge is all given back.
          const fulls = yield* Effect.all(
            Array.from({ length: 20 }, () => Effect.exit(refund(receipt.transactionId))),
            { concurrency: "unbounded" }
          )
          const wins = fulls.filter(Exit.isSuccess).length
          assert.strictEqual(wins, refundedCents === 150n ? 0 : 1)
          const final = yield* (yield* Wallets).get(owner)
          assert.strictEqual(final.usdMicroUsd, 100n * CENT)
          assert.strictEqual(final.satsMsat, 2_000_000n)
          yield* assertBooksBalance(accountId)
        }))

      it.effect("a refund does not lower the agent's daily spend (the caps keep counting what was spent)", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(100n)
          const worker = yield* newWorker(owner)
          const policies = yield* Policies
          yield* policies.replace(owner, worker.agent.id, { maxPerDayMicroUsd: 10n * CENT })
          const { receipt } = yield* call(worker, 10n)
          yield* refund(receipt.transactionId)
          const policy = yield* policies.get(owner, worker.agent.id)
          assert.strictEqual(policy.dailySpentMicroUsd, 10n * CENT)
          assert.strictEqual(codeOf(yield* Effect.exit(call(worker, 1n))), "BUDGET_EXCEEDED")
          yield* assertBooksBalance(owner.agent.accountId)
        }))
    })
  })
