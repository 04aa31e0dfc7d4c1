import fc from "fast-check"
import { Effect, ManagedRuntime, Result } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import * as MemoryStore from "../../../adapters/memory/MemoryStore.ts"
import { makeTimeline } from "../../../adapters/memory/timeline.ts"
import { Agents } from "../../../src/agents/Agents.ts"
import { newAuditId, newReservationId, newTransactionId, type Reservation, utcDay } from "../../../src/domain/Ledger.ts"
import { MicroUsd } from "../../../src/domain/Money.ts"
import type { RecentActivity } from "../../../src/ports/Store.ts"
import { Store } from "../../../src/ports/Store.ts"
import { planHold, planLateSettle, planSettle } from "../../../src/wallet/decide.ts"
import { reservationSpend } from "../../../src/wallet/entries.ts"
import { Wallets } from "../../../src/wallet/Wallets.ts"
import { testLayer } from "../../wallet/ledger.contract.ts"

/**
 * The memory store's velocity window (adapters/memory/timeline.ts) against a
 * walk of every reservation, on random histories: stamps out of order (a call
 * that waited for the lock), on the window's edges, after `now`; spends that
 * change as holds are settled or released.
 */

const BASE = Date.parse("2026-05-04T12:00:00Z")
const HOUR = 3_600_000

/** What the window should say: every reservation walked, as the store did before the timeline. */
const walked = (all: ReadonlyArray<{ readonly createdAt: Date; readonly spend: bigint }>, now: Date): RecentActivity => {
  let spentLastHourMicroUsd = 0n
  let callsLastMinute = 0
  let oldest: Date | null = null
  for (const r of all) {
    const at = r.createdAt.getTime()
    if (at <= now.getTime() - HOUR) continue
    spentLastHourMicroUsd += r.spend
    if (at > now.getTime() - 60_000) {
      callsLastMinute++
      if (oldest === null || at < oldest.getTime()) oldest = r.createdAt
    }
  }
  return { spentLastHourMicroUsd, callsLastMinute, oldestCallLastMinuteAt: oldest }
}

/** An offset from BASE: anywhere within two hours either way, or exactly on an edge of a window of BASE. */
const offsetArb = fc.oneof(
  fc.integer({ min: -2 * HOUR, max: 2 * HOUR }),
  fc.constantFrom(-HOUR, -HOUR + 1, -HOUR - 1, -60_000, -59_999, -60_001, 0, 1)
)

describe("the memory store's timeline", () => {
  it("sums the window exactly, whatever order the stamps come in and however spends change", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({ op: fc.constant("add" as const), offset: offsetArb, spend: fc.bigInt({ min: 0n, max: 5_000_000n }) }),
            fc.record({ op: fc.constant("update" as const), pick: fc.nat(), spend: fc.bigInt({ min: 0n, max: 5_000_000n }) }),
            fc.record({ op: fc.constant("ask" as const), offset: offsetArb })
          ),
          { maxLength: 80 }
        ),
        (ops) => {
          const timeline = makeTimeline()
          const all: Array<{ id: string; createdAt: Date; spend: bigint }> = []
          for (const op of ops) {
            if (op.op === "add") {
              const createdAt = new Date(BASE + op.offset)
              const id = `r${all.length}`
              all.push({ id, createdAt, spend: op.spend })
              timeline.add({ at: createdAt.getTime(), id, createdAt }, op.spend)
            } else if (op.op === "update") {
              if (all.length === 0) continue
              const target = all[op.pick % all.length]!
              target.spend = op.spend
              timeline.update(target.id, op.spend)
            } else {
              const now = new Date(BASE + op.offset)
              expect(timeline.recent(now)).toEqual(walked(all, now))
            }
          }
          // And at the end, seen from every edge.
          for (const offset of [-HOUR, 0, HOUR, 2 * HOUR, 3 * HOUR + 1]) {
            const now = new Date(BASE + offset)
            expect(timeline.recent(now)).toEqual(walked(all, now))
          }
        }
      ),
      { numRuns: 400 }
    )
  })
})

describe("the memory store's recent activity", () => {
  const runtime = ManagedRuntime.make(testLayer(MemoryStore.layer))
  afterAll(() => runtime.dispose())

  it("is what a walk of the agent's reservations finds, after holds stamped out of order, settles and releases; the sweep walks the held ones", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.oneof(
            fc.record({ op: fc.constant("reserve" as const), offset: offsetArb, quote: fc.bigInt({ min: 0n, max: 2_000_000n }) }),
            fc.record({ op: fc.constant("settle" as const), pick: fc.nat(), actual: fc.bigInt({ min: 0n, max: 3_000_000n }) }),
            fc.record({ op: fc.constant("release" as const), pick: fc.nat() })
          ),
          { minLength: 1, maxLength: 30 }
        ),
        fc.array(offsetArb, { minLength: 1, maxLength: 5 }),
        (ops, asks) =>
          runtime.runPromise(Effect.gen(function*() {
            const store = yield* Store
            const agents = yield* Agents
            const wallets = yield* Wallets
            const signup = yield* agents.signup({ name: "timeline" })
            const principal = yield* agents.authenticate(signup.apiKey)
            const accountId = signup.accountId
            yield* wallets.credit({ accountId, key: "fund", pocket: "usd", amount: 1_000_000_000n, description: "fund" })
            const held: Array<Reservation> = []
            for (const op of ops) {
              if (op.op === "reserve") {
                const now = new Date(BASE + op.offset)
                const result = yield* store.reserve({
                  reservationId: newReservationId(),
                  auditId: newAuditId(),
                  accountId,
                  agentId: principal.agent.id,
                  capability: "search",
                  provider: "p",
                  quotedMicroUsd: MicroUsd.make(op.quote),
                  rate: null,
                  day: utcDay(now),
                  now,
                  expiresAt: new Date(now.getTime() + 60_000),
                  decide: (snapshot) => planHold(snapshot, "search", MicroUsd.make(op.quote), null)
                })
                if (Result.isSuccess(result)) held.push(result.success)
              } else if (held.length > 0) {
                const [target] = held.splice(op.pick % held.length, 1)
                const now = new Date(target!.createdAt.getTime() + 1_000)
                if (op.op === "settle") {
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
                } else {
                  yield* store.release({ reservationId: target!.id, accountId, auditId: newAuditId(), reason: "p", now })
                }
              }
              const reservations = (yield* store.listReservations(accountId, { limit: 1_000, offset: 0 })).items
                .map((r) => ({ createdAt: r.createdAt, spend: reservationSpend(r) }))
              for (const offset of asks) {
                const now = new Date(BASE + offset)
                expect(yield* store.recentActivity(accountId, principal.agent.id, now)).toEqual(walked(reservations, now))
              }
            }
            // The sweep's walk is of the held ones only: a limit of exactly their number ends them all.
            const stillHeld = (yield* store.listReservations(accountId, { limit: 1_000, offset: 0 })).items
              .filter((r) => r.status === "held").length
            expect(yield* store.sweepExpired(new Date(BASE + 10 * HOUR), stillHeld)).toBe(stillHeld)
            expect((yield* store.listReservations(accountId, { limit: 1_000, offset: 0 })).items
              .filter((r) => r.status === "held")).toEqual([])
          }))
      ),
      { numRuns: 100 }
    )
  }, 120_000)
})
