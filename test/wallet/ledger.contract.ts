import type { RegistryStore } from "../../src/ports/RegistryStore.ts"
import { registryOnly } from "../../adapters/services/transport.ts"
import { assert, describe, layer } from "@effect/vitest"
import { Clock, Deferred, Effect, Exit, Fiber, Layer, Option, Result } from "effect"
import { TestClock } from "effect/testing"
import { Agents } from "../../src/agents/Agents.ts"
import { Policies } from "../../src/agents/Policies.ts"
import type { Principal } from "../../src/domain/Agent.ts"
import type { Capability } from "../../src/domain/Capability.ts"
import { newAuditId, newReservationId, newTransactionId, utcDay } from "../../src/domain/Ledger.ts"
import { MicroUsd, parseBtcUsdRate } from "../../src/domain/Money.ts"
import * as DevCard from "../../adapters/rails/DevCard.ts"
import * as DevLightning from "../../adapters/rails/DevLightning.ts"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import * as Gateway from "../../src/Gateway.ts"
import { RateSource } from "../../src/ports/RateSource.ts"
import type { IdempotencyStore } from "../../src/ports/IdempotencyStore.ts"
import { settleIdsOf, Store } from "../../src/ports/Store.ts"
import { planHold, planLateSettle, planSettle } from "../../src/wallet/decide.ts"
import { captureSettleInput } from "../../src/wallet/entries.ts"
import { Spend } from "../../src/wallet/Spend.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"

/**
 * The money rules, run against every Store implementation. Amounts: 1 cent =
 * 10_000 µUSD. The rate is 50,000 USD/BTC, so 1 sat = 0.05 cents = 500 µUSD.
 */

export const RATE = Result.getOrThrow(parseBtcUsdRate("50000"))
const CENT = 10_000n

export const testLayer = <R = never>(store: Layer.Layer<Store | IdempotencyStore | RegistryStore, unknown, R>) =>
  Gateway.layer.pipe(Layer.provideMerge(Layer.mergeAll(
    store,
    RateSource.fixed(RATE),
    DevLightning.layer({ dataDir: undefined }),
    DevCard.layer({ publicUrl: "http://spendgate.test" }),
    Providers.make([]), registryOnly
  )))

/** A new account whose usd pocket holds `usdCents` (and sats pocket `sats`). */
export const fundedAccount = (usdCents: bigint, sats = 0n) =>
  Effect.gen(function*() {
    const agents = yield* Agents
    const wallets = yield* Wallets
    const signup = yield* agents.signup({ name: "owner" })
    const owner = yield* agents.authenticate(signup.apiKey)
    if (usdCents > 0n) {
      yield* wallets.credit({ accountId: signup.accountId, key: "seed-usd", pocket: "usd", amount: usdCents * CENT, description: "seed" })
    }
    if (sats > 0n) {
      yield* wallets.credit({ accountId: signup.accountId, key: "seed-sats", pocket: "sats", amount: sats * 1000n, description: "seed" })
    }
    return owner
  })

export const newWorker = (owner: Principal, name = "worker") =>
  Effect.gen(function*() {
    const agents = yield* Agents
    const created = yield* agents.create(owner, { name })
    return yield* agents.authenticate(created.apiKey)
  })

export const call = (
  principal: Principal,
  quoteCents: bigint,
  options: { actual?: bigint; capability?: Capability; fail?: boolean } = {}
) =>
  Effect.gen(function*() {
    const spend = yield* Spend
    return yield* spend.spend(principal, {
      capability: options.capability ?? "search",
      provider: "test",
      quotedMicroUsd: quoteCents * CENT,
      description: "test call",
      run: options.fail === true
        ? Effect.fail("upstream down" as const)
        : Effect.succeed({ value: "ok", actualMicroUsd: options.actual ?? quoteCents * CENT })
    })
  })

const errCode = (error: unknown): string => (error as { code?: string }).code ?? String(error)

const codeOf = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isSuccess(exit)
    ? "ok"
    : Option.match(Exit.findErrorOption(exit), {
      onNone: () => "defect",
      onSome: (e) => (typeof e === "object" && e !== null && "code" in e ? String(e.code) : String(e))
    })

const countCodes = (exits: ReadonlyArray<Exit.Exit<unknown, unknown>>) => {
  const counts: Record<string, number> = {}
  for (const exit of exits) counts[codeOf(exit)] = (counts[codeOf(exit)] ?? 0) + 1
  return counts
}

export const ledgerContract = (name: string, store: () => Layer.Layer<Store | IdempotencyStore | RegistryStore, unknown>) =>
  describe(`Wallet ledger: ${name}`, () => {
    layer(testLayer(store()), { timeout: 120_000, excludeTestServices: true })((it) => {
      it.effect("50 concurrent 10-cent calls on a 100-cent wallet: exactly 10 succeed, balance ends at 0", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(100n)
          const exits = yield* Effect.all(
            Array.from({ length: 50 }, () => Effect.exit(call(owner, 10n))),
            { concurrency: "unbounded" }
          )
          assert.deepStrictEqual(countCodes(exits), { ok: 10, INSUFFICIENT_BALANCE: 40 })
          const wallet = yield* (yield* Wallets).get(owner)
          assert.strictEqual(wallet.usdMicroUsd, 0n)
          const txns = yield* (yield* Wallets).transactions(owner, { type: "charge" }, { limit: 100, offset: 0 })
          assert.strictEqual(txns.total, 10)
        }))

      it.effect("the same race against a daily cap: exactly the cap is spent", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(10_000n)
          const worker = yield* newWorker(owner)
          yield* (yield* Policies).replace(owner, worker.agent.id, { maxPerDayMicroUsd: 100n * CENT })
          const exits = yield* Effect.all(
            Array.from({ length: 50 }, () => Effect.exit(call(worker, 10n))),
            { concurrency: "unbounded" }
          )
          assert.deepStrictEqual(countCodes(exits), { ok: 10, BUDGET_EXCEEDED: 40 })
          const policy = yield* (yield* Policies).get(owner, worker.agent.id)
          assert.strictEqual(policy.dailySpentMicroUsd, 100n * CENT)
          assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 9_900n * CENT)
        }))

      it.effect("the same race against a monthly cap: exactly the cap is spent", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(10_000n)
          const worker = yield* newWorker(owner)
          yield* (yield* Policies).replace(owner, worker.agent.id, { maxPerMonthMicroUsd: 100n * CENT })
          const exits = yield* Effect.all(
            Array.from({ length: 50 }, () => Effect.exit(call(worker, 10n))),
            { concurrency: "unbounded" }
          )
          assert.deepStrictEqual(countCodes(exits), { ok: 10, BUDGET_EXCEEDED: 40 })
          const policy = yield* (yield* Policies).get(owner, worker.agent.id)
          assert.strictEqual(policy.monthlySpentMicroUsd, 100n * CENT)
          assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 9_900n * CENT)
        }))

      it.effect("the monthly cap counts every day of the calendar month (UTC), names itself, and resets on the 1st", () =>
        Effect.gen(function*() {
          yield* TestClock.setTime(Date.parse("2026-11-29T12:00:00.000Z"))
          const owner = yield* fundedAccount(100n)
          yield* (yield* Policies).replace(owner, owner.agent.id, {
            maxPerDayMicroUsd: 8n * CENT,
            maxPerMonthMicroUsd: 10n * CENT
          })
          yield* call(owner, 6n)
          yield* TestClock.setTime(Date.parse("2026-11-30T23:59:59.999Z"))
          // 6 spent this month, 0 today: the daily cap allows 5, the monthly one does not.
          const refused = yield* Effect.flip(call(owner, 5n))
          assert.strictEqual(errCode(refused), "BUDGET_EXCEEDED")
          assert.deepStrictEqual((refused as { details: unknown }).details, {
            period: "month",
            monthlySpent: 6,
            monthlyCap: 10,
            quotedCost: 5
          })
          // Over both: the daily cap names it.
          const overBoth = yield* Effect.flip(call(owner, 9n))
          assert.strictEqual((overBoth as { details: { period: string } }).details.period, "day")
          yield* call(owner, 4n)
          const estimate = yield* (yield* Spend).estimate(owner, "search", 1n)
          assert.strictEqual(estimate.monthlySpentMicroUsd, 10n * CENT)
          assert.strictEqual(estimate.remainingThisMonthMicroUsd, 0n)
          assert.strictEqual(estimate.remainingTodayMicroUsd, 4n * CENT)
          assert.isTrue(Result.isFailure(estimate.decision))
          yield* TestClock.adjust(1)
          yield* call(owner, 8n)
          const policy = yield* (yield* Policies).get(owner, owner.agent.id)
          assert.strictEqual(policy.monthlySpentMicroUsd, 8n * CENT)
          assert.strictEqual(policy.dailySpentMicroUsd, 8n * CENT)
        }).pipe(Effect.provide(TestClock.layer())))

      it.effect("a deleted agent's call in flight settles normally and its history still names it", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(100n)
          const worker = yield* newWorker(owner)
          const spend = yield* Spend
          const store = yield* Store
          const gate = yield* Deferred.make<void>()
          const fiber = yield* spend.spend(worker, {
            capability: "search",
            provider: "gated",
            quotedMicroUsd: 10n * CENT,
            description: "call in flight",
            run: Effect.as(Deferred.await(gate), { value: "answer", actualMicroUsd: 7n * CENT })
          }).pipe(Effect.forkChild)
          for (let i = 0; i < 400; i++) {
            const holds = yield* store.listReservations(owner.agent.accountId, { limit: 10, offset: 0 })
            if (holds.items.some((r) => r.status === "held")) break
            yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
          }
          const deleted = yield* (yield* Agents).delete(owner, worker.agent.id)
          assert.isNotNull(deleted.deletedAt)
          // A new call of the deleted agent is refused, whatever it authenticated with before.
          assert.strictEqual(errCode(yield* Effect.flip(call(worker, 1n))), "AGENT_KILLED")
          yield* Deferred.succeed(gate, undefined)
          const { receipt } = yield* Fiber.join(fiber)
          assert.strictEqual(receipt.chargedMicroUsd, 7n * CENT)
          assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 93n * CENT)
          const txns = yield* (yield* Wallets).transactions(owner, { agentId: worker.agent.id }, { limit: 10, offset: 0 })
          assert.deepStrictEqual(
            txns.items.map((t): [string, string | null, bigint] => [t.type, t.agentId, t.amountMicroUsd]),
            [["charge", worker.agent.id, 7n * CENT]]
          )
          const audit = yield* (yield* Wallets).audit(owner, receipt.auditId)
          assert.strictEqual(audit.record.agentId, worker.agent.id)
          assert.isTrue(audit.verified)
          const held = yield* store.listReservations(owner.agent.accountId, { limit: 10, offset: 0 })
          assert.deepStrictEqual(held.items.map((r) => r.status), ["settled"])
        }))

      it.effect("calls per minute: a loop of calls is stopped at the limit until the oldest call is a minute old", () =>
        Effect.gen(function*() {
          yield* TestClock.setTime(Date.parse("2026-06-03T10:00:00.000Z"))
          const owner = yield* fundedAccount(1_000n)
          const worker = yield* newWorker(owner)
          yield* (yield* Policies).replace(owner, worker.agent.id, { maxCallsPerMinute: 3 })
          const codes: Array<string> = []
          for (let i = 0; i < 6; i++) {
            if (i > 0) yield* TestClock.adjust(10_000)
            codes.push(codeOf(yield* Effect.exit(call(worker, 1n))))
          }
          assert.deepStrictEqual(codes, ["ok", "ok", "ok", "RATE_LIMITED", "RATE_LIMITED", "RATE_LIMITED"])
          const refused = yield* Effect.flip(call(worker, 1n))
          assert.deepStrictEqual((refused as { details: unknown }).details, {
            scope: "policy",
            limit: 3,
            resetAt: "2026-06-03T10:01:00.000Z",
            agentKilled: false
          })
          assert.strictEqual((refused as { retryAfterSeconds: number }).retryAfterSeconds, 10)
          // 60 s after the first call, one call may start again; the agent was not killed.
          yield* TestClock.setTime(Date.parse("2026-06-03T10:01:00.000Z"))
          yield* call(worker, 1n)
          assert.strictEqual(codeOf(yield* Effect.exit(call(worker, 1n))), "RATE_LIMITED")
          const agent = yield* (yield* Agents).get(owner, worker.agent.id)
          assert.strictEqual(agent.killed, false)
          assert.strictEqual((yield* (yield* Wallets).transactions(owner, { type: "charge" }, { limit: 100, offset: 0 })).total, 4)
        }).pipe(Effect.provide(TestClock.layer())))

      it.effect("concurrent calls cannot slip past the calls-per-minute or the hourly money limit", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(10_000n)
          const byCount = yield* newWorker(owner, "count")
          const byMoney = yield* newWorker(owner, "money")
          yield* (yield* Policies).patch(owner, byCount.agent.id, { maxCallsPerMinute: 5 })
          yield* (yield* Policies).patch(owner, byMoney.agent.id, { maxPerHourMicroUsd: 30n * CENT })
          const [counted, spent] = yield* Effect.all([
            Effect.all(Array.from({ length: 30 }, () => Effect.exit(call(byCount, 1n))), { concurrency: "unbounded" }),
            Effect.all(Array.from({ length: 30 }, () => Effect.exit(call(byMoney, 10n))), { concurrency: "unbounded" })
          ], { concurrency: "unbounded" })
          assert.deepStrictEqual(countCodes(counted), { ok: 5, RATE_LIMITED: 25 })
          assert.deepStrictEqual(countCodes(spent), { ok: 3, VELOCITY_EXCEEDED: 27 })
          assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, (10_000n - 5n - 30n) * CENT)
        }))

      it.effect("the hourly limit is rolling, counts charges and holds, and not released holds", () =>
        Effect.gen(function*() {
          yield* TestClock.setTime(Date.parse("2026-06-03T10:00:00.000Z"))
          const owner = yield* fundedAccount(1_000n)
          yield* (yield* Policies).replace(owner, owner.agent.id, { maxPerHourMicroUsd: 20n * CENT })
          yield* call(owner, 15n, { actual: 8n * CENT })
          yield* Effect.exit(call(owner, 10n, { fail: true }))
          yield* TestClock.adjust(30 * 60_000)
          yield* call(owner, 12n)
          const refused = yield* Effect.flip(call(owner, 1n))
          assert.strictEqual(errCode(refused), "VELOCITY_EXCEEDED")
          assert.deepStrictEqual((refused as { details: unknown }).details, {
            period: "hour",
            spentLastHour: 20,
            hourlyCap: 20,
            quotedCost: 1,
            agentKilled: false
          })
          // The first call leaves the window 60 minutes after it started.
          yield* TestClock.adjust(30 * 60_000 - 1)
          assert.strictEqual(errCode(yield* Effect.flip(call(owner, 1n))), "VELOCITY_EXCEEDED")
          yield* TestClock.adjust(1)
          yield* call(owner, 8n)
          const estimate = yield* (yield* Spend).estimate(owner, "search", 1n)
          assert.strictEqual(Result.isFailure(estimate.decision) && estimate.decision.failure.code, "VELOCITY_EXCEEDED")
        }).pipe(Effect.provide(TestClock.layer())))

      it.effect("autoKill: the call past a velocity limit kills the agent (reason velocity), never an owner", () =>
        Effect.gen(function*() {
          yield* TestClock.setTime(Date.parse("2026-06-03T10:00:00.000Z"))
          const owner = yield* fundedAccount(1_000n)
          const worker = yield* newWorker(owner)
          yield* (yield* Policies).patch(owner, worker.agent.id, { maxCallsPerMinute: 2, autoKill: true })
          yield* (yield* Policies).patch(owner, owner.agent.id, { maxPerHourMicroUsd: 5n * CENT, autoKill: true })
          yield* call(worker, 1n)
          yield* call(worker, 1n)
          const refused = yield* Effect.flip(call(worker, 1n))
          assert.strictEqual(errCode(refused), "RATE_LIMITED")
          assert.strictEqual((refused as { details: { agentKilled: boolean } }).details.agentKilled, true)
          const killed = yield* (yield* Agents).get(owner, worker.agent.id)
          assert.strictEqual(killed.killed, true)
          assert.strictEqual(killed.killReason, "velocity")
          yield* TestClock.adjust(120_000)
          assert.strictEqual(errCode(yield* Effect.flip(call(worker, 1n))), "AGENT_KILLED")
          // An owner over its own hourly limit is refused, never killed.
          const ownerRefused = yield* Effect.flip(call(owner, 6n))
          assert.strictEqual(errCode(ownerRefused), "VELOCITY_EXCEEDED")
          assert.strictEqual((ownerRefused as { details: { agentKilled: boolean } }).details.agentKilled, false)
          assert.strictEqual((yield* (yield* Agents).get(owner, owner.agent.id)).killed, false)
          // Revived by an owner: the reason is cleared.
          const revived = yield* (yield* Agents).update(owner, worker.agent.id, { killed: false })
          assert.strictEqual(revived.killReason, null)
        }).pipe(Effect.provide(TestClock.layer())))

      it.effect("several agents racing on one shared wallet never overdraw it", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(100n)
          const workers = yield* Effect.all(Array.from({ length: 5 }, (_, i) => newWorker(owner, `w${i}`)))
          const exits = yield* Effect.all(
            workers.flatMap((w) => Array.from({ length: 10 }, () => Effect.exit(call(w, 10n)))),
            { concurrency: "unbounded" }
          )
          assert.deepStrictEqual(countCodes(exits), { ok: 10, INSUFFICIENT_BALANCE: 40 })
          assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 0n)
        }))

      it.effect("settles the actual cost, returns the rest, and the receipt, transaction and audit agree", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(100n)
          const { receipt } = yield* call(owner, 10n, { actual: 37_500n })
          assert.strictEqual(receipt.quotedMicroUsd, 100_000n)
          assert.strictEqual(receipt.chargedMicroUsd, 37_500n)
          assert.strictEqual(receipt.debitedUsdMicroUsd, 37_500n)
          assert.strictEqual(receipt.debitedSatsMsat, 0n)
          assert.strictEqual(receipt.balanceAfterMicroUsd, 1_000_000n - 37_500n)
          // 37_500 µUSD = $0.0375; at 50,000 USD/BTC that is 75 sats = 75_000 msat
          assert.strictEqual(receipt.chargedMsat, 75_000n)
          const wallets = yield* Wallets
          assert.strictEqual((yield* wallets.get(owner)).usdMicroUsd, 1_000_000n - 37_500n)
          const [txn] = (yield* wallets.transactions(owner, { type: "charge" }, { limit: 1, offset: 0 })).items
          assert.strictEqual(txn?.amountMicroUsd, 37_500n)
          assert.strictEqual(txn?.auditId, receipt.auditId)
          assert.strictEqual(txn?.capability, "search")
          assert.strictEqual(txn?.provider, "test")
          const audit = yield* wallets.audit(owner, receipt.auditId)
          assert.strictEqual(audit.verified, true)
          assert.strictEqual(audit.record.kind, "settle")
          assert.strictEqual(audit.record.amountMicroUsd, 37_500n)
          assert.strictEqual(audit.record.usdDeltaMicroUsd, 100_000n - 37_500n)
          assert.strictEqual(yield* wallets.verifyChain(owner.agent.accountId), null)
        }))

      it.effect("an actual cost above the quote is charged at the quote", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(100n)
          const { receipt } = yield* call(owner, 10n, { actual: 999_999n })
          assert.strictEqual(receipt.chargedMicroUsd, 100_000n)
        }))

      it.effect("an upstream failure releases the whole hold and records no transaction", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(100n)
          const exit = yield* Effect.exit(call(owner, 10n, { fail: true }))
          assert.strictEqual(codeOf(exit), "upstream down")
          const wallets = yield* Wallets
          assert.strictEqual((yield* wallets.get(owner)).usdMicroUsd, 1_000_000n)
          assert.strictEqual((yield* wallets.transactions(owner, { type: "charge" }, { limit: 10, offset: 0 })).total, 0)
          const reservations = yield* (yield* Store).listReservations(owner.agent.accountId, { limit: 10, offset: 0 })
          assert.deepStrictEqual(reservations.items.map((r) => r.status), ["released"])
          const audit = yield* (yield* Store).listAudit(owner.agent.accountId, 0n, 100)
          assert.deepStrictEqual(audit.map((r) => r.kind), ["credit", "reserve", "release"])
          assert.strictEqual(yield* wallets.verifyChain(owner.agent.accountId), null)
          assert.strictEqual((yield* (yield* Policies).get(owner, owner.agent.id)).dailySpentMicroUsd, 0n)
        }))

      it.effect("interrupting a call mid-upstream releases its hold", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(100n)
          const spend = yield* Spend
          const fiber = yield* spend.spend(owner, {
            capability: "search",
            provider: "test",
            quotedMicroUsd: 50n * CENT,
            description: "never answers",
            run: Effect.never
          }).pipe(Effect.forkChild)
          for (let i = 0; i < 200; i++) {
            const wallet = yield* (yield* Wallets).get(owner)
            if (wallet.usdMicroUsd === 50n * CENT) break
            yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
          }
          assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 50n * CENT)
          yield* Fiber.interrupt(fiber)
          assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 100n * CENT)
        }))

      it.effect("refuses by policy before anything is held", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(100n)
          const worker = yield* newWorker(owner)
          const policies = yield* Policies
          yield* policies.replace(owner, worker.agent.id, { maxPerCallMicroUsd: 5n * CENT, allowedCapabilities: ["search"] })
          const perCall = yield* Effect.flip(call(worker, 6n))
          assert.strictEqual(errCode(perCall), "PER_CALL_LIMIT_EXCEEDED")
          assert.deepStrictEqual((perCall as { details: unknown }).details, { perCallCap: 5, quotedCost: 6 })
          const capability = yield* Effect.flip(call(worker, 1n, { capability: "reason" }))
          assert.strictEqual(errCode(capability), "CAPABILITY_NOT_ALLOWED")
          yield* (yield* Agents).update(owner, worker.agent.id, { killed: true })
          const killed = yield* Effect.flip(call(worker, 1n))
          assert.strictEqual(errCode(killed), "AGENT_KILLED")
          const reservations = yield* (yield* Store).listReservations(owner.agent.accountId, { limit: 10, offset: 0 })
          assert.strictEqual(reservations.total, 0)
          assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 100n * CENT)
        }))

      it.effect("BUDGET_EXCEEDED carries dailySpent, dailyCap and quotedCost in cents", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(100n)
          yield* (yield* Policies).replace(owner, owner.agent.id, { maxPerDayMicroUsd: 25n * CENT })
          yield* call(owner, 20n, { actual: 12n * CENT + 5_000n })
          const refused = yield* Effect.flip(call(owner, 13n))
          assert.strictEqual(errCode(refused), "BUDGET_EXCEEDED")
          assert.deepStrictEqual((refused as { details: unknown }).details, {
            period: "day",
            dailySpent: 12.5,
            dailyCap: 25,
            quotedCost: 13
          })
          yield* call(owner, 12n)
        }))

      it.effect("takes the usd pocket first and the rest from sats at the rate, rounded up to the msat", () =>
        Effect.gen(function*() {
          // 3 cents in usd, 1000 sats (= 50 cents at 50,000 USD/BTC)
          const owner = yield* fundedAccount(3n, 1000n)
          const { receipt } = yield* call(owner, 10n, { actual: 4n * CENT + 1n })
          assert.strictEqual(receipt.debitedUsdMicroUsd, 3n * CENT)
          // remainder 10_001 µUSD = 20.002 sats = 20_002 msat
          assert.strictEqual(receipt.debitedSatsMsat, 20_002n)
          const wallet = yield* (yield* Wallets).get(owner)
          assert.strictEqual(wallet.usdMicroUsd, 0n)
          assert.strictEqual(wallet.satsMsat, 1_000_000n - 20_002n)
          const insufficient = yield* Effect.flip(call(owner, 60n))
          assert.strictEqual(errCode(insufficient), "INSUFFICIENT_BALANCE")
        }))

      it.effect("the daily cap resets at midnight UTC", () =>
        Effect.gen(function*() {
          yield* TestClock.setTime(Date.parse("2026-11-21T23:59:59.000Z"))
          const owner = yield* fundedAccount(100n)
          yield* (yield* Policies).replace(owner, owner.agent.id, { maxPerDayMicroUsd: 10n * CENT })
          yield* call(owner, 10n)
          assert.strictEqual(errCode(yield* Effect.flip(call(owner, 1n))), "BUDGET_EXCEEDED")
          yield* TestClock.adjust(999)
          assert.strictEqual(errCode(yield* Effect.flip(call(owner, 1n))), "BUDGET_EXCEEDED")
          yield* TestClock.adjust(1)
          yield* call(owner, 10n)
          const policy = yield* (yield* Policies).get(owner, owner.agent.id)
          assert.strictEqual(policy.dailySpentMicroUsd, 10n * CENT)
          const ofAgent = yield* (yield* Wallets).ofAgent(owner, owner.agent.id)
          assert.strictEqual(ofAgent.lifetimeSpentMicroUsd, 20n * CENT)
          assert.strictEqual(ofAgent.dailySpentMicroUsd, 10n * CENT)
          // Read through another account, the agent spent nothing there.
          const stranger = yield* fundedAccount(0n)
          const store = yield* Store
          const day = utcDay(new Date(yield* Clock.currentTimeMillis))
          assert.deepStrictEqual(yield* store.agentSpend(stranger.agent.accountId, owner.agent.id, day), {
            dailySpentMicroUsd: 0n,
            monthlySpentMicroUsd: 0n
          })
          assert.strictEqual(yield* store.agentLifetimeSpend(stranger.agent.accountId, owner.agent.id), 0n)
          assert.strictEqual(yield* store.agentLifetimeSpend(owner.agent.accountId, owner.agent.id), 20n * CENT)
        }).pipe(Effect.provide(TestClock.layer())))

      /** What `spend` does up to the upstream call, and then nothing: the process died. */
      const holdOfADeadCall = (owner: Principal, capability: Capability, now: Date) =>
        Effect.gen(function*() {
          const store = yield* Store
          const reservationId = newReservationId()
          const reserved = yield* store.reserve({
            reservationId,
            auditId: newAuditId(),
            accountId: owner.agent.accountId,
            agentId: owner.agent.id,
            capability,
            provider: "test",
            quotedMicroUsd: MicroUsd.make(40n * CENT),
            rate: null,
            day: utcDay(now),
            now,
            expiresAt: new Date(now.getTime() + 60_000),
            decide: (snapshot) => planHold(snapshot, capability, MicroUsd.make(40n * CENT), null)
          })
          assert.isTrue(Result.isSuccess(reserved))
          return reservationId
        })

      it.effect("recovery: a hold whose call started and never settled is captured at its quote, exactly once, under the ids its receipt named", () =>
        Effect.gen(function*() {
          yield* TestClock.setTime(Date.parse("2026-06-01T12:00:00.000Z"))
          const owner = yield* fundedAccount(100n)
          const store = yield* Store
          const reservationId = yield* holdOfADeadCall(owner, "search", new Date(Date.parse("2026-06-01T12:00:00.000Z")))
          const spend = yield* Spend
          assert.strictEqual(yield* spend.sweep, 0)
          assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 60n * CENT)
          yield* TestClock.adjust(60_001)
          const ended = yield* Effect.all([spend.sweep, spend.sweep, spend.sweep], { concurrency: "unbounded" })
          assert.strictEqual(ended.reduce((a, b) => a + b, 0), 1)
          assert.strictEqual(yield* spend.sweep, 0)
          // Charged its quote: nothing comes back, and the day's spend keeps it.
          assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 60n * CENT)
          const { transactionId, auditId } = settleIdsOf(reservationId)
          const charge = Option.getOrThrow(yield* store.getTransaction(owner.agent.accountId, transactionId))
          assert.strictEqual(charge.type, "charge")
          assert.strictEqual(charge.amountMicroUsd, 40n * CENT)
          assert.strictEqual(charge.auditId, auditId)
          assert.match(charge.description, /charged at its quote by recovery/)
          const audit = yield* store.listAudit(owner.agent.accountId, 0n, 100)
          assert.deepStrictEqual(audit.map((r) => r.kind), ["credit", "reserve", "settle"])
          assert.strictEqual(audit[2]!.id, auditId)
          assert.strictEqual((yield* (yield* Policies).get(owner, owner.agent.id)).dailySpentMicroUsd, 40n * CENT)
          assert.strictEqual(yield* (yield* Wallets).verifyChain(owner.agent.accountId), null)
        }).pipe(Effect.provide(TestClock.layer())))

      it.effect("recovery: an expired hold of a Lightning payment (its outcome is the node's) is released, not captured", () =>
        Effect.gen(function*() {
          yield* TestClock.setTime(Date.parse("2026-06-01T12:00:00.000Z"))
          const owner = yield* fundedAccount(100n)
          const store = yield* Store
          yield* holdOfADeadCall(owner, "pay", new Date(Date.parse("2026-06-01T12:00:00.000Z")))
          yield* TestClock.adjust(60_001)
          assert.strictEqual(yield* (yield* Spend).sweep, 1)
          assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 100n * CENT)
          const audit = yield* store.listAudit(owner.agent.accountId, 0n, 100)
          assert.deepStrictEqual(audit.map((r) => r.kind), ["credit", "reserve", "release"])
        }).pipe(Effect.provide(TestClock.layer())))

      it.effect("recovery: a hold released after its call failed (after the sweep read it) is never captured", () =>
        Effect.gen(function*() {
          yield* TestClock.setTime(Date.parse("2026-06-01T12:00:00.000Z"))
          const owner = yield* fundedAccount(100n)
          const store = yield* Store
          const now = new Date(Date.parse("2026-06-01T12:00:00.000Z"))
          const reservationId = yield* holdOfADeadCall(owner, "search", now)
          const held = (yield* store.listReservations(owner.agent.accountId, { limit: 10, offset: 0 })).items
            .find((r) => r.id === reservationId)!
          // The call failed and released its hold; a sweep that read the hold as held before then captures it.
          assert.strictEqual(
            yield* store.release({ reservationId, accountId: owner.agent.accountId, auditId: newAuditId(), reason: "upstream failed", now }),
            "Released"
          )
          const captured = yield* store.settle(captureSettleInput(held, new Date(now.getTime() + 60_001)))
          assert.strictEqual(captured._tag, "NotHeld")
          assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 100n * CENT)
          assert.isTrue(Option.isNone(yield* store.getTransaction(owner.agent.accountId, settleIdsOf(reservationId).transactionId)))
          const audit = yield* store.listAudit(owner.agent.accountId, 0n, 100)
          assert.deepStrictEqual(audit.map((r) => r.kind), ["credit", "reserve", "release"])
        }).pipe(Effect.provide(TestClock.layer())))

      it.effect("the store's sweep without the capture rule releases an expired hold exactly once", () =>
        Effect.gen(function*() {
          yield* TestClock.setTime(Date.parse("2026-06-01T12:00:00.000Z"))
          const owner = yield* fundedAccount(100n)
          const store = yield* Store
          const now = new Date(Date.parse("2026-06-01T12:00:00.000Z"))
          yield* holdOfADeadCall(owner, "search", now)
          assert.strictEqual(yield* store.sweepExpired(now, 100), 0)
          const later = new Date(now.getTime() + 60_001)
          const released = yield* Effect.all(
            [store.sweepExpired(later, 100), store.sweepExpired(later, 100), store.sweepExpired(later, 100)],
            { concurrency: "unbounded" }
          )
          assert.strictEqual(released.reduce((a, b) => a + b, 0), 1)
          assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 100n * CENT)
          const audit = yield* store.listAudit(owner.agent.accountId, 0n, 100)
          assert.deepStrictEqual(audit.map((r) => r.kind), ["credit", "reserve", "release"])
          assert.strictEqual((yield* (yield* Policies).get(owner, owner.agent.id)).dailySpentMicroUsd, 0n)
        }).pipe(Effect.provide(TestClock.layer())))

      /**
       * A call that outlives its hold: `spend` reserves, the upstream is slow,
       * the clock passes the hold's lifetime (15 minutes), the sweep returns the
       * hold, and then the upstream answers and the call settles.
       */
      const slowCall = (principal: Principal, quoteCents: bigint, actualCents: bigint, meanwhile: Effect.Effect<void, unknown, Spend | Wallets | Store | Policies | Agents> = Effect.void) =>
        Effect.gen(function*() {
          const spend = yield* Spend
          const gate = yield* Deferred.make<void>()
          const fiber = yield* spend.spend(principal, {
            capability: "search",
            provider: "slow",
            quotedMicroUsd: quoteCents * CENT,
            description: "slow call",
            run: Effect.as(Deferred.await(gate), { value: "late answer", actualMicroUsd: actualCents * CENT })
          }).pipe(Effect.exit, Effect.forkChild)
          const store = yield* Store
          for (let i = 0; i < 400; i++) {
            const holds = yield* store.listReservations(principal.agent.accountId, { limit: 100, offset: 0 })
            if (holds.items.some((r) => r.provider === "slow" && r.status === "held")) break
            yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
          }
          yield* TestClock.adjust(15 * 60_000 + 1)
          assert.strictEqual(yield* spend.sweep, 1)
          yield* meanwhile
          yield* Deferred.succeed(gate, undefined)
          return yield* Fiber.join(fiber)
        })

      /** Pockets equal the sum of the audit log's changes, and credits less charges. */
      const conserved = (principal: Principal) =>
        Effect.gen(function*() {
          const store = yield* Store
          const accountId = principal.agent.accountId
          const wallet = yield* store.getWallet(accountId)
          const audit = yield* store.listAudit(accountId, 0n, 1000)
          assert.strictEqual(audit.reduce((sum, r) => sum + r.usdDeltaMicroUsd, 0n), wallet.usdMicroUsd)
          assert.strictEqual(audit.reduce((sum, r) => sum + r.satsDeltaMsat, 0n), wallet.satsMsat)
          const txns = (yield* store.listTransactions(accountId, {}, { limit: 1000, offset: 0 })).items
          const held = (yield* store.listReservations(accountId, { limit: 1000, offset: 0 })).items
            .filter((r) => r.status === "held").reduce((sum, r) => sum + r.heldUsdMicroUsd, 0n)
          assert.strictEqual(
            txns.reduce((sum, t) => sum + (t.type === "charge" ? -t.usdMicroUsd : t.usdMicroUsd), 0n) - held,
            wallet.usdMicroUsd
          )
          assert.strictEqual(yield* (yield* Wallets).verifyChain(accountId), null)
        })

      it.effect("a call that outlives its swept hold is charged once, as a new debit, with a receipt", () =>
        Effect.gen(function*() {
          yield* TestClock.setTime(Date.parse("2026-06-02T10:00:00.000Z"))
          const owner = yield* fundedAccount(100n)
          const exit = yield* slowCall(owner, 40n, 30n)
          assert.isTrue(Exit.isSuccess(exit))
          const { receipt, value } = Exit.isSuccess(exit) ? exit.value : assert.fail("refused")
          assert.strictEqual(value, "late answer")
          assert.strictEqual(receipt.chargedMicroUsd, 30n * CENT)
          assert.strictEqual(receipt.debitedUsdMicroUsd, 30n * CENT)
          assert.strictEqual(receipt.balanceAfterMicroUsd, 70n * CENT)
          const wallets = yield* Wallets
          assert.strictEqual((yield* wallets.get(owner)).usdMicroUsd, 70n * CENT)
          const charges = yield* wallets.transactions(owner, { type: "charge" }, { limit: 10, offset: 0 })
          assert.strictEqual(charges.total, 1)
          assert.strictEqual(charges.items[0]!.amountMicroUsd, 30n * CENT)
          const store = yield* Store
          const audit = yield* store.listAudit(owner.agent.accountId, 0n, 100)
          assert.deepStrictEqual(audit.map((r) => r.kind), ["credit", "reserve", "release", "settle"])
          assert.strictEqual(audit[3]!.id, receipt.auditId)
          assert.strictEqual(audit[3]!.usdDeltaMicroUsd, -30n * CENT)
          const [reservation] = (yield* store.listReservations(owner.agent.accountId, { limit: 10, offset: 0 })).items
          assert.strictEqual(reservation!.status, "settled")
          assert.strictEqual(reservation!.settledMicroUsd, 30n * CENT)
          assert.strictEqual((yield* (yield* Policies).get(owner, owner.agent.id)).dailySpentMicroUsd, 30n * CENT)
          // A second settle of the same reservation charges nothing more.
          const again = yield* store.settle({
            reservationId: receipt.reservationId,
            accountId: owner.agent.accountId,
            actualMicroUsd: 30n * CENT,
            transactionId: newTransactionId(),
            auditId: newAuditId(),
            description: "again",
            now: new Date(Date.parse("2026-06-02T10:20:00.000Z")),
            plan: (r) => planSettle(r, 30n * CENT),
            planLate: (r, snapshot) => planLateSettle(r, 30n * CENT, snapshot)
          })
          assert.strictEqual(again._tag, "NotHeld")
          assert.strictEqual((yield* wallets.get(owner)).usdMicroUsd, 70n * CENT)
          yield* conserved(owner)
        }).pipe(Effect.provide(TestClock.layer())))

      it.effect("a late charge takes sats at the hold's rate when the usd pocket is short", () =>
        Effect.gen(function*() {
          yield* TestClock.setTime(Date.parse("2026-06-02T11:00:00.000Z"))
          // 10 cents in usd, 1000 sats (50 cents at 50,000 USD/BTC).
          const owner = yield* fundedAccount(10n, 1000n)
          const exit = yield* slowCall(owner, 20n, 15n)
          const { receipt } = Exit.isSuccess(exit) ? exit.value : assert.fail("refused")
          assert.strictEqual(receipt.debitedUsdMicroUsd, 10n * CENT)
          // 5 cents = 50_000 µUSD = 100 sats.
          assert.strictEqual(receipt.debitedSatsMsat, 100_000n)
          yield* conserved(owner)
        }).pipe(Effect.provide(TestClock.layer())))

      it.effect("a late charge the wallet can no longer cover is recorded as owed and the caller refused", () =>
        Effect.gen(function*() {
          yield* TestClock.setTime(Date.parse("2026-06-02T12:00:00.000Z"))
          const owner = yield* fundedAccount(100n)
          // While the slow call runs past its hold, the returned money is spent.
          const exit = yield* slowCall(owner, 40n, 30n, Effect.asVoid(call(owner, 80n)))
          assert.strictEqual(codeOf(exit), "INSUFFICIENT_BALANCE")
          const wallets = yield* Wallets
          assert.strictEqual((yield* wallets.get(owner)).usdMicroUsd, 20n * CENT)
          const charges = yield* wallets.transactions(owner, { type: "charge" }, { limit: 10, offset: 0 })
          assert.strictEqual(charges.total, 1)
          const store = yield* Store
          const audit = yield* store.listAudit(owner.agent.accountId, 0n, 100)
          const unpaid = audit.at(-1)!
          assert.strictEqual(unpaid.kind, "settle")
          assert.strictEqual(unpaid.transactionId, null)
          assert.strictEqual(unpaid.amountMicroUsd, 30n * CENT)
          assert.strictEqual(unpaid.usdDeltaMicroUsd, 0n)
          assert.strictEqual(JSON.parse(unpaid.details).unpaid, "INSUFFICIENT_BALANCE")
          const slow = (yield* store.listReservations(owner.agent.accountId, { limit: 10, offset: 0 })).items
            .find((r) => r.provider === "slow")!
          assert.strictEqual(slow.status, "released")
          assert.strictEqual(slow.settledMicroUsd, 30n * CENT)
          // Recorded once: settling it again does nothing.
          const again = yield* store.settle({
            reservationId: slow.id,
            accountId: owner.agent.accountId,
            actualMicroUsd: 30n * CENT,
            transactionId: newTransactionId(),
            auditId: newAuditId(),
            description: "again",
            now: new Date(Date.parse("2026-06-02T12:20:00.000Z")),
            plan: (r) => planSettle(r, 30n * CENT),
            planLate: (r, snapshot) => planLateSettle(r, 30n * CENT, snapshot)
          })
          assert.strictEqual(again._tag, "NotHeld")
          assert.strictEqual((yield* store.listAudit(owner.agent.accountId, 0n, 100)).length, audit.length)
          assert.strictEqual((yield* (yield* Policies).get(owner, owner.agent.id)).dailySpentMicroUsd, 80n * CENT)
          yield* conserved(owner)
        }).pipe(Effect.provide(TestClock.layer())))

      it.effect("a late charge past the daily cap is recorded as owed, not taken", () =>
        Effect.gen(function*() {
          yield* TestClock.setTime(Date.parse("2026-06-02T13:00:00.000Z"))
          const owner = yield* fundedAccount(100n)
          yield* (yield* Policies).replace(owner, owner.agent.id, { maxPerDayMicroUsd: 50n * CENT })
          const exit = yield* slowCall(owner, 40n, 30n, Effect.asVoid(call(owner, 30n)))
          assert.strictEqual(codeOf(exit), "BUDGET_EXCEEDED")
          assert.strictEqual((yield* (yield* Wallets).get(owner)).usdMicroUsd, 70n * CENT)
          assert.strictEqual((yield* (yield* Policies).get(owner, owner.agent.id)).dailySpentMicroUsd, 30n * CENT)
          yield* conserved(owner)
        }).pipe(Effect.provide(TestClock.layer())))

      it.effect("a credit with the same key is applied once, however often and concurrently it arrives", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(0n)
          const wallets = yield* Wallets
          const outcomes = yield* Effect.all(
            Array.from({ length: 5 }, () =>
              wallets.credit({
                accountId: owner.agent.accountId,
                key: "invoice-1",
                pocket: "sats",
                amount: 2_000_000n,
                description: "funding"
              })),
            { concurrency: "unbounded" }
          )
          assert.deepStrictEqual(outcomes.map((o) => o._tag).sort(), ["Credited", "Duplicate", "Duplicate", "Duplicate", "Duplicate"])
          const wallet = yield* wallets.get(owner)
          assert.strictEqual(wallet.satsMsat, 2_000_000n)
          // 2000 sats at 50,000 USD/BTC = 1 USD
          assert.strictEqual(wallet.spendableMicroUsd, 1_000_000n)
          assert.strictEqual((yield* wallets.transactions(owner, {}, { limit: 10, offset: 0 })).total, 1)
        }))

      it.effect("an agent-role key lists only its own transactions", () =>
        Effect.gen(function*() {
          const owner = yield* fundedAccount(100n)
          const worker = yield* newWorker(owner)
          yield* call(owner, 1n)
          yield* call(worker, 2n)
          yield* call(worker, 3n)
          const wallets = yield* Wallets
          const mine = yield* wallets.transactions(worker, {}, { limit: 10, offset: 0 })
          assert.strictEqual(mine.total, 2)
          assert.isTrue(mine.items.every((t) => t.agentId === worker.agent.id))
          const other = yield* Effect.flip(wallets.transactions(worker, { agentId: owner.agent.id }, { limit: 10, offset: 0 }))
          assert.strictEqual(errCode(other), "FORBIDDEN")
          const all = yield* wallets.transactions(owner, {}, { limit: 10, offset: 0 })
          assert.strictEqual(all.total, 4)
          assert.deepStrictEqual(all.items.map((t) => t.amountMicroUsd), [30_000n, 20_000n, 10_000n, 1_000_000n])
        }))
    })
  })
