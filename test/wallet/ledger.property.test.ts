import type { RegistryStore } from "../../src/ports/RegistryStore.ts"
import fc from "fast-check"
import { Effect, Layer, ManagedRuntime, Option, Result } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, describe, expect, it } from "vitest"
import { storeOverClient } from "../../adapters/sql/Database.ts"
import * as PgliteClient from "../../adapters/sql/PgliteClient.ts"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import { Agents } from "../../src/agents/Agents.ts"
import { newAuditId, newReservationId, newTransactionId, type Reservation, utcDay } from "../../src/domain/Ledger.ts"
import type { IdempotencyStore } from "../../src/ports/IdempotencyStore.ts"
import { Store } from "../../src/ports/Store.ts"
import { planHold, planLateSettle, planSettle } from "../../src/wallet/decide.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { planRefund } from "../../src/wallet/refund.ts"
import { MicroUsd } from "../../src/domain/Money.ts"
import { freshPostgresLayer } from "../support/postgres.ts"
import { RATE, testLayer } from "./ledger.contract.ts"

/**
 * Random sequences of credit, reserve, settle, release, sweep and refund, checked
 * after every step against the ledger: each pocket equals what its ledger
 * entries add up to, nothing is negative, and every hold is accounted for as
 * charged plus returned. On SQL storage, under an hourly limit (half the
 * runs), each day counter's hours (migration 0023) hold exactly what the
 * reservations of each UTC hour spend, whichever way (a ledger function or
 * the general path in TypeScript) wrote them; without one they are NULL.
 * Bounded: a fixed number of runs of at most 25 steps.
 */

type Op =
  | { readonly op: "credit"; readonly pocket: "usd" | "sats"; readonly amount: bigint }
  | { readonly op: "reserve"; readonly quote: bigint; readonly withRate: boolean }
  | { readonly op: "settle"; readonly pick: number; readonly actual: bigint }
  | { readonly op: "release"; readonly pick: number }
  | { readonly op: "sweep"; readonly advanceMs: number }
  /** A whole call: a hold and its settle at once (so that sequences have charges to refund). */
  | { readonly op: "call"; readonly quote: bigint; readonly actual: bigint; readonly withRate: boolean }
  /** A refund of one of the account's charges: a part (µUSD), or all that remains (null). */
  | { readonly op: "refund"; readonly pick: number; readonly amount: bigint | null }

const refundArb = fc.record({
  op: fc.constant("refund" as const),
  pick: fc.nat(),
  amount: fc.option(fc.bigInt({ min: 1n, max: 2_000_000n }), { nil: null })
})

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ op: fc.constant("credit" as const), pocket: fc.constantFrom("usd" as const, "sats" as const), amount: fc.bigInt({ min: 1n, max: 5_000_000n }) }),
  fc.record({ op: fc.constant("reserve" as const), quote: fc.bigInt({ min: 0n, max: 3_000_000n }), withRate: fc.boolean() }),
  fc.record({ op: fc.constant("settle" as const), pick: fc.nat(), actual: fc.bigInt({ min: 0n, max: 4_000_000n }) }),
  fc.record({ op: fc.constant("release" as const), pick: fc.nat() }),
  fc.record({ op: fc.constant("sweep" as const), advanceMs: fc.integer({ min: 0, max: 120_000 }) }),
  fc.record({
    op: fc.constant("call" as const),
    quote: fc.bigInt({ min: 0n, max: 3_000_000n }),
    actual: fc.bigInt({ min: 0n, max: 4_000_000n }),
    withRate: fc.boolean()
  }),
  refundArb,
  refundArb
)

const checkInvariants = (accountId: Parameters<Store["Service"]["getWallet"]>[0], hourlyLimit: boolean) =>
  Effect.gen(function*() {
    const store = yield* Store
    const wallet = yield* store.getWallet(accountId)
    expect(wallet.usdMicroUsd >= 0n && wallet.satsMsat >= 0n).toBe(true)
    const txns = (yield* store.listTransactions(accountId, {}, { limit: 1000, offset: 0 })).items
    const reservations = (yield* store.listReservations(accountId, { limit: 1000, offset: 0 })).items
    const audit = yield* store.listAudit(accountId, 0n, 10_000)
    let usd = 0n
    let sats = 0n
    for (const t of txns) {
      const sign = t.type === "charge" ? -1n : 1n
      usd += sign * t.usdMicroUsd
      sats += sign * t.satsMsat
    }
    for (const r of reservations) {
      if (r.status === "held") {
        usd -= r.heldUsdMicroUsd
        sats -= r.heldSatsMsat
      }
    }
    expect(wallet.usdMicroUsd).toBe(usd)
    expect(wallet.satsMsat).toBe(sats)
    // Pocket = sum of the audit log's signed changes, too.
    expect(audit.reduce((s, r) => s + r.usdDeltaMicroUsd, 0n)).toBe(wallet.usdMicroUsd)
    expect(audit.reduce((s, r) => s + r.satsDeltaMsat, 0n)).toBe(wallet.satsMsat)
    // Every hold: what it took = what was charged + what came back.
    for (const r of reservations) {
      const records = audit.filter((a) => a.reservationId === r.id)
      const charge = txns.find((t) => t.type === "charge" && records.some((a) => a.transactionId === t.id))
      const returnedUsd = records.filter((a) => a.kind !== "reserve").reduce((s, a) => s + a.usdDeltaMicroUsd, 0n)
      const returnedSats = records.filter((a) => a.kind !== "reserve").reduce((s, a) => s + a.satsDeltaMsat, 0n)
      if (r.status === "held") {
        expect(records.map((a) => a.kind)).toEqual(["reserve"])
      } else {
        expect(returnedUsd + (charge?.usdMicroUsd ?? 0n)).toBe(r.heldUsdMicroUsd)
        expect(returnedSats + (charge?.satsMsat ?? 0n)).toBe(r.heldSatsMsat)
        expect(r.status === "settled" ? charge !== undefined : charge === undefined).toBe(true)
        if (r.status === "settled") expect((r.settledMicroUsd ?? 0n) + 0n <= r.quotedMicroUsd).toBe(true)
      }
    }
    // Refunds: each names a charge, and together never give back more than it took, in value or in either pocket.
    for (const c of txns.filter((t) => t.type === "charge")) {
      const refunds = txns.filter((t) => t.type === "refund" && t.refundOf === c.id)
      expect(refunds.reduce((s, t) => s + t.amountMicroUsd, 0n) <= c.amountMicroUsd).toBe(true)
      expect(refunds.reduce((s, t) => s + t.usdMicroUsd, 0n) <= c.usdMicroUsd).toBe(true)
      expect(refunds.reduce((s, t) => s + t.satsMsat, 0n) <= c.satsMsat).toBe(true)
    }
    for (const t of txns.filter((t) => t.type === "refund")) {
      expect(txns.some((c) => c.type === "charge" && c.id === t.refundOf)).toBe(true)
    }
    // A refund does not lower the day's spend: what follows still counts every hold and charge.
    const daily = yield* store.agentSpend(accountId, reservations[0]?.agentId ?? ("agt_none" as never), reservations[0]?.day ?? "")
    if (reservations[0] !== undefined) {
      const expected = reservations
        .filter((r) => r.day === reservations[0]!.day && r.agentId === reservations[0]!.agentId)
        .reduce((s, r) => s + (r.status === "held" ? r.quotedMicroUsd : r.status === "settled" ? r.settledMicroUsd ?? 0n : 0n), 0n)
      expect(daily.dailySpentMicroUsd).toBe(expected)
    }
    const sql = yield* Effect.serviceOption(SqlClient.SqlClient)
    if (Option.isSome(sql)) {
      const counters = yield* sql.value<{ agent_id: string; day: string; spent_micro_usd: string | bigint; hours: string | null }>`
        SELECT agent_id, day, spent_micro_usd, array_to_string(hours_micro_usd, ',') AS hours FROM agent_daily_spend
        WHERE agent_id IN (SELECT id FROM agents WHERE account_id = ${accountId})`
      for (const row of counters) {
        const expectedHours = Array.from({ length: 24 }, () => 0n)
        for (const r of reservations) {
          if (r.agentId !== row.agent_id || r.day !== row.day) continue
          const hour = r.createdAt.getUTCHours()
          expectedHours[hour] = expectedHours[hour]! +
            (r.status === "held" ? r.quotedMicroUsd : r.status === "settled" ? r.settledMicroUsd ?? 0n : 0n)
        }
        expect(BigInt(row.spent_micro_usd)).toBe(expectedHours.reduce((sum, h) => sum + h, 0n))
        // Without an hourly limit the day is not counted by the hour (hours NULL).
        expect(row.hours).toBe(hourlyLimit ? expectedHours.join(",") : null)
      }
    }
  })

const runSequence = (ops: ReadonlyArray<Op>, hourlyLimit: boolean) =>
  Effect.gen(function*() {
    const store = yield* Store
    const agents = yield* Agents
    const wallets = yield* Wallets
    const signup = yield* agents.signup({ name: "prop" })
    const principal = yield* agents.authenticate(signup.apiKey)
    const accountId = signup.accountId
    // An hourly limit far above any spend: its days are counted by the hour (on SQL storage).
    const sql = yield* Effect.serviceOption(SqlClient.SqlClient)
    if (hourlyLimit && Option.isSome(sql)) {
      yield* sql.value`UPDATE agents SET max_per_hour_micro_usd = 1000000000000 WHERE id = ${principal.agent.id}`
    }
    // Sweeps move the clock on by up to 50 minutes in all: across 11:00 in some runs.
    let clockMs = Date.parse("2026-03-01T10:40:00Z")
    const held: Array<Reservation> = []
    let n = 0
    for (const op of ops) {
      const now = new Date(clockMs)
      switch (op.op) {
        case "credit":
          yield* wallets.credit({ accountId, key: `k${n++}`, pocket: op.pocket, amount: op.amount, description: "p" })
          break
        case "reserve":
        case "call": {
          const rate = op.withRate ? { rate: RATE, asOf: now } : null
          const result = yield* store.reserve({
            reservationId: newReservationId(),
            auditId: newAuditId(),
            accountId,
            agentId: principal.agent.id,
            capability: "search",
            provider: "p",
            quotedMicroUsd: MicroUsd.make(op.quote),
            rate,
            day: utcDay(now),
            now,
            expiresAt: new Date(clockMs + 60_000),
            decide: (snapshot) => planHold(snapshot, "search", MicroUsd.make(op.quote), rate?.rate ?? null)
          })
          if (Result.isFailure(result)) break
          if (op.op === "reserve") {
            held.push(result.success)
            break
          }
          const actual = op.actual
          yield* store.settle({
            reservationId: result.success.id,
            accountId,
            actualMicroUsd: actual,
            transactionId: newTransactionId(),
            auditId: newAuditId(),
            description: "p",
            now,
            plan: (r) => planSettle(r, actual),
            planLate: (r, snapshot) => planLateSettle(r, actual, snapshot)
          })
          break
        }
        case "settle": {
          if (held.length === 0) break
          const [target] = held.splice(op.pick % held.length, 1)
          yield* store.settle({
            reservationId: target!.id,
            accountId,
            actualMicroUsd: op.actual,
            transactionId: newTransactionId(),
            auditId: newAuditId(),
            description: "p",
            now,
            plan: (r) => planSettle(r, op.actual),
            planLate: (r, snapshot) => planLateSettle(r, op.actual, snapshot)
          })
          break
        }
        case "release": {
          if (held.length === 0) break
          const [target] = held.splice(op.pick % held.length, 1)
          yield* store.release({ reservationId: target!.id, accountId, auditId: newAuditId(), reason: "p", now })
          break
        }
        case "refund": {
          const charges = (yield* store.listTransactions(accountId, { type: "charge" }, { limit: 1000, offset: 0 })).items
          if (charges.length === 0) break
          const target = charges[op.pick % charges.length]!
          yield* store.refund({
            chargeId: target.id,
            refundTransactionId: newTransactionId(),
            auditId: newAuditId(),
            reason: "p",
            now,
            plan: (snapshot) => planRefund(snapshot, op.amount ?? undefined)
          })
          break
        }
        case "sweep":
          clockMs += op.advanceMs
          yield* store.sweepExpired(new Date(clockMs), 100)
          break
      }
      yield* checkInvariants(accountId, hourlyLimit)
    }
    expect(yield* wallets.verifyChain(accountId)).toBeNull()
  })

const backends: ReadonlyArray<readonly [string, () => Layer.Layer<Store | IdempotencyStore | RegistryStore, unknown>, number]> = [
  ["memory", () => MemoryStore.layer, 150],
  ["PGlite", () => storeOverClient.pipe(Layer.provideMerge(PgliteClient.layer({ dataDir: undefined }))), 25],
  ["PostgreSQL", () => storeOverClient.pipe(Layer.provideMerge(freshPostgresLayer())), 25]
]

describe.each(backends)("ledger properties over %s", (_name, store, runs) => {
  const runtime = ManagedRuntime.make(testLayer(store()))
  afterAll(() => runtime.dispose())

  it("pockets always equal their ledger, nothing goes negative, every hold is charged or returned", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 25 }), fc.boolean(), (ops, hourlyLimit) =>
        runtime.runPromise(runSequence(ops, hourlyLimit))),
      { numRuns: runs }
    )
  }, 120_000)
})
