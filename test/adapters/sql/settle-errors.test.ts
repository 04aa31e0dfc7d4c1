import { Effect, Exit, Fiber, Layer, Logger, ManagedRuntime, Option, Scope } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, describe, expect, it } from "vitest"
import { storeOverClientWith, type StoreOptions } from "../../../adapters/sql/Database.ts"
import * as PgliteClient from "../../../adapters/sql/PgliteClient.ts"
import type { AccountId } from "../../../src/domain/ids.ts"
import { Store } from "../../../src/ports/Store.ts"
import { Wallets } from "../../../src/wallet/Wallets.ts"
import { refuseCharges } from "../../support/chargeFaults.ts"
import { checkAccount } from "../../support/ledger-check.ts"
import { freshPostgresLayer } from "../../support/postgres.ts"
import { sqlStoreRuntime } from "../../support/sqlStore.ts"
import { call, fundedAccount, testLayer } from "../../wallet/ledger.contract.ts"

/**
 * The error paths of the settles written after the answer
 * (docs/ledger-recovery.md): the settle writer outliving a batch whose
 * handling fails, a settle refused again and again that stops holding up
 * reads, and a shutdown that gives up on a settle that cannot land.
 */

const backends = [
  ["PGlite", () => PgliteClient.layer({ dataDir: undefined })],
  ["PostgreSQL", () => freshPostgresLayer(8)]
] as const

const CENT = 10_000n

/** A logger that keeps every line (level and text) for the test to read. */
const captureLogs = () => {
  const lines: Array<string> = []
  const logger = Logger.make<unknown, void>(({ logLevel, message }) => {
    const parts = Array.isArray(message) ? message : [message]
    lines.push(`${logLevel}: ${parts.map((part) => (typeof part === "string" ? part : String(part))).join(" ")}`)
  })
  return { lines, layer: Logger.layer([logger]) }
}

const pause = (ms: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, ms)))

/** Polls `check` every 20 ms until it holds, for at most `ms`; answers whether it held. */
const eventually = <E, R>(check: Effect.Effect<boolean, E, R>, ms: number) =>
  Effect.gen(function*() {
    const deadline = Date.now() + ms
    for (;;) {
      if (yield* check) return true
      if (Date.now() > deadline) return false
      yield* pause(20)
    }
  })

/** Settle audit records of the account, read straight from the database (a read of the store would write them). */
const settleRecords = (accountId: AccountId) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ n: number | string }>`
      SELECT COUNT(*) AS n FROM audit_log WHERE kind = 'settle' AND account_id = ${accountId}`
    return Number(rows[0]!.n)
  })

type SettleLater = NonNullable<Store["Service"]["settleLater"]>

/** The store with its own settleLater seen through `wrap`. */
const wrapSettleLater = (wrap: (settleLater: SettleLater) => SettleLater) =>
  Layer.effect(
    Store,
    Effect.gen(function*() {
      const store = yield* Store
      return Store.of({ ...store, settleLater: wrap(store.settleLater!) })
    })
  )

/** The store's own settleLater, counting each call's `onLanded` by reservation. */
const countingOnLanded = (counts: Map<string, number>) =>
  wrapSettleLater((settleLater) => (input) =>
    settleLater({
      ...input,
      onLanded: () => {
        counts.set(input.reservationId, (counts.get(input.reservationId) ?? 0) + 1)
        input.onLanded?.()
      }
    })
  )

describe.each(backends)("what a settle batch's handling survives over %s", (_name, client) => {
  const logs = captureLogs()
  /** Accounts whose next settle's `onLanded` throws (after the settle committed). */
  const throwing = new Set<string>()
  /** Accounts whose next settle carries a time that cannot be sent (an invalid date). */
  const unsendable = new Set<string>()
  // The store's own settleLater, with the caller's `onLanded` made to throw, or the settle's
  // time made invalid, for an armed account.
  const faulty = wrapSettleLater((settleLater) => (input) =>
    Effect.suspend(() => {
      if (unsendable.delete(input.accountId)) return settleLater({ ...input, now: new Date(Number.NaN) })
      if (!throwing.delete(input.accountId)) return settleLater(input)
      return settleLater({
        ...input,
        onLanded: () => {
          input.onLanded?.()
          throw new Error("injected: onLanded threw")
        }
      })
    })
  )
  const runtime = ManagedRuntime.make(
    Layer.provideMerge(
      testLayer(Layer.provideMerge(
        faulty,
        // Settles wait for the writer's batch even with no hold coming: the batch is what is tested.
        storeOverClientWith({
          settleDelayMs: 1_500,
          settleWhenIdle: "wait",
          settleRetryMaxPauseMs: 40,
          settleShutdownTimeoutMs: 200
        })
      )),
      Layer.merge(client() as Layer.Layer<SqlClient.SqlClient, unknown>, logs.layer)
    )
  )
  afterAll(() => runtime.dispose())

  /** Every receipt is the charge the books hold, once; nothing left held; a read answers at once. */
  const booksHold = (owner: Parameters<typeof call>[0], receipt: Effect.Success<ReturnType<typeof call>>["receipt"], left: bigint) =>
    Effect.gen(function*() {
      const accountId = owner.agent.accountId
      const started = Date.now()
      expect((yield* (yield* Wallets).get(owner)).usdMicroUsd).toBe(left * CENT)
      expect(Date.now() - started).toBeLessThan(1_500)
      const charge = Option.getOrThrow(yield* (yield* Store).getTransaction(accountId, receipt.transactionId))
      expect(charge.amountMicroUsd).toBe(receipt.chargedMicroUsd)
      expect(charge.auditId).toBe(receipt.auditId)
      expect(yield* settleRecords(accountId)).toBe(1)
      const { problems, snapshot } = yield* checkAccount(accountId)
      expect(problems).toEqual([])
      expect(snapshot.reservations.filter((r) => r.status === "held")).toEqual([])
      expect(snapshot.transactions.filter((t) => t.type === "charge")).toHaveLength(1)
    })

  it("a call's onLanded that throws is logged; the batch's other settles are handed out and the writer goes on", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const [a, b, c] = [yield* fundedAccount(50n), yield* fundedAccount(50n), yield* fundedAccount(50n)]
      const accounts = [a, b, c].map((owner) => owner.agent.accountId)
      throwing.add(accounts[0]!)
      // Two settles well within the writer's 1.5 s wait, no read among them: one batch, a's first.
      const first = yield* call(a, 10n, { actual: 3n * CENT })
      const second = yield* call(b, 10n, { actual: 3n * CENT })
      const threw = Effect.sync(() => logs.lines.some((l) => l.startsWith("Error: ") && l.includes("its onLanded callback threw")))
      expect(yield* eventually(threw, 5_000)).toBe(true)
      expect(throwing.size).toBe(0)
      const sql = yield* SqlClient.SqlClient
      // Both settles committed in one call.
      const together = yield* sql<{ n: number | string }>`
        SELECT COUNT(DISTINCT xmin::text) AS n FROM audit_log
        WHERE kind = 'settle' AND account_id IN (${accounts[0]!}, ${accounts[1]!})`
      expect(Number(together[0]!.n)).toBe(1)

      // The writer is still there: a later settle of a third wallet lands with no read or
      // reserve of that wallet to carry it.
      const third = yield* call(c, 10n, { actual: 2n * CENT })
      expect(yield* eventually(Effect.map(settleRecords(accounts[2]!), (n) => n === 1), 5_000)).toBe(true)

      yield* booksHold(a, first.receipt, 47n)
      yield* booksHold(b, second.receipt, 47n)
      yield* booksHold(c, third.receipt, 48n)
      // b's outcome was handed out with the batch: never retried, so never "found nothing held".
      expect(logs.lines.filter((l) => l.includes("found nothing held") || l.includes("a batch failed"))).toEqual([])
    }))
  }, 60_000)

  it("a settle that cannot be sent fails alone: the other settles of its batch land from the same pass", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const [a, b] = [yield* fundedAccount(50n), yield* fundedAccount(50n)]
      unsendable.add(a.agent.accountId)
      const bad = yield* call(a, 10n, { actual: 3n * CENT })
      const good = yield* call(b, 10n, { actual: 3n * CENT })
      expect(yield* eventually(Effect.map(settleRecords(b.agent.accountId), (n) => n === 1), 5_000)).toBe(true)
      yield* booksHold(b, good.receipt, 47n)
      // The writer's batch failed as a call, not as a whole: nothing was handed to the catch-all.
      expect(logs.lines.filter((l) => l.includes("a batch failed"))).toEqual([])
      // The bad one is retried (and logged every 12th failure), its hold still held for recovery.
      const logged = Effect.sync(() =>
        logs.lines.some((l) => l.startsWith("Error: ") && l.includes(`Settle of ${bad.receipt.reservationId} could not be written after 12 attempts`))
      )
      expect(yield* eventually(logged, 10_000)).toBe(true)
      expect(yield* settleRecords(a.agent.accountId)).toBe(0)
    }))
  }, 60_000)
})

describe.each(backends)("a settle the database refuses again and again over %s", (_name, client) => {
  const logs = captureLogs()
  const landings = new Map<string, number>()
  // Retries at most 40 ms apart (5 s by default), so that twelve failures take well under a second.
  const runtime = ManagedRuntime.make(
    Layer.provideMerge(
      testLayer(Layer.provideMerge(countingOnLanded(landings), storeOverClientWith({ settleDelayMs: 5, settleRetryMaxPauseMs: 40 }))),
      Layer.merge(client() as Layer.Layer<SqlClient.SqlClient, unknown>, logs.layer)
    )
  )
  afterAll(() => runtime.dispose())

  it("after 12 failures stops holding up reads, is still retried, and lands once with the receipt's amount when the fault lifts", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const owner = yield* fundedAccount(100n)
      const accountId = owner.agent.accountId
      const fault = yield* refuseCharges("settle_refused", { accountId })
      const result = yield* Effect.ensuring(
        Effect.gen(function*() {
          const result = yield* call(owner, 10n, { actual: 4n * CENT })
          const logged = Effect.sync(() =>
            logs.lines.some((l) => l.startsWith("Error: ") && l.includes(`Settle of ${result.receipt.reservationId} could not be written after 12 attempts`))
          )
          expect(yield* eventually(logged, 15_000)).toBe(true)
          // A read no longer waits for it (it would wait 2 s for a settle still held up): it
          // sees the hold, the settle not landed.
          const started = Date.now()
          expect((yield* (yield* Wallets).get(owner)).usdMicroUsd).toBe(90n * CENT)
          expect(Date.now() - started).toBeLessThan(1_000)
          expect(yield* settleRecords(accountId)).toBe(0)
          // Still retried.
          const refused = yield* fault.refusals
          expect(refused).toBeGreaterThanOrEqual(12)
          expect(yield* eventually(Effect.map(fault.refusals, (n) => n >= refused + 3), 5_000)).toBe(true)
          return result
        }),
        fault.lift
      )
      // The fault lifted: the next retry lands it (no read or reserve carries it).
      expect(yield* eventually(Effect.map(settleRecords(accountId), (n) => n === 1), 5_000)).toBe(true)
      const charge = Option.getOrThrow(yield* (yield* Store).getTransaction(accountId, result.receipt.transactionId))
      expect(charge.amountMicroUsd).toBe(4n * CENT)
      expect(charge.amountMicroUsd).toBe(result.receipt.chargedMicroUsd)
      expect(charge.auditId).toBe(result.receipt.auditId)
      expect((yield* (yield* Wallets).get(owner)).usdMicroUsd).toBe(96n * CENT)
      // Once: a few retry pauses later nothing more was written, its call was told once, and no
      // attempt found the hold already gone.
      yield* pause(300)
      expect(yield* settleRecords(accountId)).toBe(1)
      expect(landings.get(result.receipt.reservationId)).toBe(1)
      expect(logs.lines.filter((l) => l.includes("found nothing held") || l.includes("had already landed"))).toEqual([])
      const { problems, snapshot } = yield* checkAccount(accountId)
      expect(problems).toEqual([])
      expect(snapshot.reservations.filter((r) => r.status === "held")).toEqual([])
      expect(snapshot.transactions.filter((t) => t.type === "charge")).toHaveLength(1)
    }))
  }, 60_000)
})

describe.each(backends)("closing the store over %s", (_name, client) => {
  const runtime = ManagedRuntime.make(client() as Layer.Layer<SqlClient.SqlClient, unknown>)
  afterAll(() => runtime.dispose())

  /** A store (and the services over it) built in a scope of its own, to be closed by the test. */
  const closableStore = (options: StoreOptions, wrap?: Layer.Layer<Store, never, Store>) =>
    Effect.gen(function*() {
      const logs = captureLogs()
      const scope = yield* Scope.make()
      const store = wrap === undefined ? storeOverClientWith(options) : Layer.provideMerge(wrap, storeOverClientWith(options))
      const context = yield* Layer.buildWithScope(Layer.provideMerge(testLayer(store), logs.layer), scope)
      return { logs, scope, context }
    })

  /** A funded owner's call whose settle the database refuses (until `fault.lift`). */
  const refusedCall = (faultName: string) =>
    Effect.gen(function*() {
      const owner = yield* fundedAccount(100n)
      const accountId = owner.agent.accountId
      const fault = yield* refuseCharges(faultName, { accountId })
      const result = yield* call(owner, 10n, { actual: 4n * CENT })
      return { accountId, result, fault }
    })

  /** Closes the scope; how long that took (ms). */
  const closeTimed = (scope: Scope.Closeable) =>
    Effect.gen(function*() {
      const started = Date.now()
      yield* Scope.close(scope, Exit.void)
      return Date.now() - started
    })

  const GAVE_UP =
    "Error: 1 settle(s) not confirmed landed after 1000 ms; if the process ends now, recovery charges their holds at their quotes"

  it("gives up after its timeout with an error line, instead of waiting for the settle", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const { logs, scope, context } = yield* closableStore({ settleShutdownTimeoutMs: 1_000 })
      const { accountId, result, fault } = yield* refusedCall("settle_at_close").pipe(Effect.provide(context))
      // The writer has tried it and been refused.
      expect(yield* eventually(Effect.map(fault.refusals, (n) => n >= 1), 5_000)).toBe(true)
      const took = yield* closeTimed(scope)
      yield* fault.lift
      expect(took).toBeGreaterThanOrEqual(900)
      expect(took).toBeLessThan(3_500)
      expect(logs.lines.filter((l) => l.includes("not confirmed landed"))).toEqual([GAVE_UP])
      // It did not land: the hold is still held for recovery to capture.
      expect(yield* settleRecords(accountId)).toBe(0)
      const sql = yield* SqlClient.SqlClient
      const held = yield* sql<{ status: string }>`SELECT status FROM reservations WHERE id = ${result.receipt.reservationId}`
      expect(held.map((r) => r.status)).toEqual(["held"])
    }))
  }, 60_000)

  it("a call answered after it closed its queue has its settle written on its own path: charged as its receipt says, nothing left held", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const landings = new Map<string, number>()
      const { scope, context } = yield* closableStore({ settleDelayMs: 60_000 }, countingOnLanded(landings))
      const owner = yield* fundedAccount(100n).pipe(Effect.provide(context))
      yield* Scope.close(scope, Exit.void)
      // A request still in flight at shutdown answers after the store's queue has closed.
      const result = yield* call(owner, 10n, { actual: 3n * CENT }).pipe(Effect.provide(context))
      const accountId = owner.agent.accountId
      // Written before the call returned: no writer is left to take it.
      expect(yield* settleRecords(accountId)).toBe(1)
      expect(landings.get(result.receipt.reservationId)).toBe(1)
      const sql = yield* SqlClient.SqlClient
      const charge = yield* sql<{ amount_micro_usd: number | string }>`
        SELECT amount_micro_usd FROM transactions WHERE id = ${result.receipt.transactionId}`
      expect(charge.map((row) => BigInt(row.amount_micro_usd))).toEqual([result.receipt.chargedMicroUsd])
      const { problems, snapshot } = yield* checkAccount(accountId).pipe(Effect.provide(context))
      expect(problems).toEqual([])
      expect(snapshot.reservations.filter((r) => r.status === "held")).toEqual([])
    }))
  }, 60_000)

  it("a settle reads no longer wait for is still waited for up to the timeout, and said not to have landed", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const { logs, scope, context } = yield* closableStore({ settleShutdownTimeoutMs: 1_000, settleRetryMaxPauseMs: 40 })
      const { result, fault } = yield* refusedCall("settle_detached_at_close").pipe(Effect.provide(context))
      // Detached: reads no longer wait for it.
      const logged = Effect.sync(() => logs.lines.some((l) => l.includes(`Settle of ${result.receipt.reservationId} could not be written after 12 attempts`)))
      expect(yield* eventually(logged, 15_000)).toBe(true)
      const took = yield* closeTimed(scope)
      yield* fault.lift
      expect(took).toBeGreaterThanOrEqual(900)
      expect(logs.lines.filter((l) => l.includes("not confirmed landed"))).toEqual([GAVE_UP])
    }))
  }, 60_000)
})

describe.each(backends)("a settle refused once on a wallet that is never idle over %s", (_name, client) => {
  const runtime = sqlStoreRuntime({ settleDelayMs: 2, settleRetryMaxPauseMs: 40 }, client)
  afterAll(() => runtime.dispose())

  it("is written by the settle writer while the wallet's holds keep coming, not left until the wallet rests", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const owner = yield* fundedAccount(100_000n)
      const accountId = owner.agent.accountId
      const sql = yield* SqlClient.SqlClient
      // The account's first charge insert is refused, once.
      const fault = yield* refuseCharges("refuse_once", { accountId, once: true })
      const chargeLanded = (transactionId: string) =>
        Effect.map(sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM transactions WHERE id = ${transactionId}`, (rows) => Number(rows[0]!.n) === 1)

      const first = yield* call(owner, 1n, { actual: 1n * CENT })
      // Twelve callers keep the wallet's reserve batches in flight back to back; none reads. Each
      // lets the event loop turn between its calls, as requests arriving over HTTP do (on PGlite,
      // whose queries resolve in process, back-to-back calls would otherwise starve every timer).
      let busy = true
      let calls = 0
      const turn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
      const worker = Effect.whileLoop({
        while: () => busy,
        body: () => Effect.andThen(call(owner, 1n, { actual: 1n * CENT }), turn),
        step: () => {
          calls++
        }
      })
      const workers = yield* Effect.forkChild(Effect.all(Array.from({ length: 12 }, () => worker), { concurrency: "unbounded", discard: true }))
      // The first settle was refused (carried by a reserve batch, or by the writer) and is then the
      // writer's alone: it lands while the wallet is still busy. (On PostgreSQL the writer that
      // skipped a wallet with a batch in flight left it there for the whole load; on PGlite, one
      // connection, the batches leave gaps, so there it would land anyway.)
      const landedWhileBusy = yield* eventually(chargeLanded(first.receipt.transactionId), 10_000)
      busy = false
      yield* Fiber.join(workers)
      expect(yield* fault.refusals).toBe(1)
      expect(landedWhileBusy).toBe(true)
      // Every call charged once as its receipt says, nothing left held (a read waits for the rest).
      const wallet = yield* (yield* Wallets).get(owner)
      expect(wallet.usdMicroUsd).toBe((100_000n - BigInt(calls + 1)) * CENT)
      const { problems, snapshot } = yield* checkAccount(accountId)
      expect(problems).toEqual([])
      expect(snapshot.reservations.filter((r) => r.status === "held")).toEqual([])
      expect(snapshot.transactions.filter((t) => t.type === "charge")).toHaveLength(calls + 1)
    }))
  }, 60_000)
})

describe.each(backends)("a hold waiting for its wallet's settle that keeps failing, over %s", (_name, client) => {
  // Retries pause long: the refused settle is then neither queued nor landed, and the next
  // hold of its wallet finds it being written.
  const runtime = sqlStoreRuntime({ settleDelayMs: 2, settleRetryMaxPauseMs: 5_000 }, client)
  afterAll(() => runtime.dispose())

  it("waits at most 2 s, then decides; both land once the fault lifts", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const owner = yield* fundedAccount(100n)
      const accountId = owner.agent.accountId
      const fault = yield* refuseCharges("refuse_always", { accountId })
      const first = yield* call(owner, 10n, { actual: 3n * CENT })
      // The settle was tried and refused: it waits for its retry.
      expect(yield* eventually(Effect.map(fault.refusals, (n) => n >= 1), 5_000)).toBe(true)
      const started = Date.now()
      const second = yield* call(owner, 10n, { actual: 4n * CENT })
      const took = Date.now() - started
      // Not held up for as long as the settle keeps failing: one 2 s bound for the whole call (not
      // one per wallet it waits on), and held all the same.
      expect(took).toBeLessThan(3_500)
      expect(second.receipt.chargedMicroUsd).toBe(4n * CENT)
      yield* fault.lift
      // A read waits for both settles; each is charged once, as its receipt says.
      expect((yield* (yield* Wallets).get(owner)).usdMicroUsd).toBe(93n * CENT)
      for (const receipt of [first.receipt, second.receipt]) {
        const charge = Option.getOrThrow(yield* (yield* Store).getTransaction(accountId, receipt.transactionId))
        expect(charge.amountMicroUsd).toBe(receipt.chargedMicroUsd)
      }
      const { problems, snapshot } = yield* checkAccount(accountId)
      expect(problems).toEqual([])
      expect(snapshot.reservations.filter((r) => r.status === "held")).toEqual([])
    }))
  }, 60_000)
})
