import { Deferred, Effect, Fiber, Option } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, describe, expect, it } from "vitest"
import type { StoreOptions } from "../../../adapters/sql/Database.ts"
import * as PgliteClient from "../../../adapters/sql/PgliteClient.ts"
import { settleIdsOf, Store } from "../../../src/ports/Store.ts"
import { Spend } from "../../../src/wallet/Spend.ts"
import { Wallets } from "../../../src/wallet/Wallets.ts"
import { refuseCharges } from "../../support/chargeFaults.ts"
import { checkAccount } from "../../support/ledger-check.ts"
import { freshPostgresLayer } from "../../support/postgres.ts"
import { sqlStoreRuntime } from "../../support/sqlStore.ts"
import { call, fundedAccount } from "../../wallet/ledger.contract.ts"

/**
 * Settles off the caller's path (docs/ledger-recovery.md): a paid call answers
 * after its hold's commit; its settle rides in the next reserve of the wallet
 * or is written by the settle writer. The settle delay is long here (60 s), and
 * most tests let a settle answered with no reserve in flight wait for the next
 * one too (`settleWhenIdle: "wait"`), so that only a carrying reserve, a read
 * or the writer's explicit wake lands a settle: what each test counts is then
 * exact. `xmin` names the transaction that wrote an audit record (they are
 * never updated).
 */

const backends = [
  ["PGlite", () => PgliteClient.layer({ dataDir: undefined })],
  ["PostgreSQL", () => freshPostgresLayer(8)]
] as const

const CENT = 10_000n

/** A runtime over a migrated store with these options on the backend's client, disposed after the suite. */
const storeRuntime = (options: StoreOptions, client: () => unknown) => {
  const runtime = sqlStoreRuntime(options, client)
  afterAll(() => runtime.dispose())
  return runtime
}

describe.each(backends)("settles after the answer under concurrency over %s (default delay)", (_name, client) => {
  const runtime = storeRuntime({}, client)

  it("200 calls over 3 wallets with reads among them: every receipt is the charge the books hold, once, and the books add up", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const owners = [yield* fundedAccount(300n), yield* fundedAccount(300n), yield* fundedAccount(300n)]
      let seed = 7
      const random = (n: number) => {
        seed = (seed * 1103515245 + 12345) % 2147483648
        return seed % n
      }
      const wallets = yield* Wallets
      const plans = Array.from({ length: 200 }, () => ({ owner: owners[random(3)]!, quote: BigInt(1 + random(5)), actual: BigInt(random(6)) }))
      const results = yield* Effect.all(
        plans.map((plan, i) =>
          i % 10 === 0
            ? Effect.andThen(wallets.get(plan.owner), Effect.exit(call(plan.owner, plan.quote, { actual: plan.actual * CENT / 2n })))
            : Effect.exit(call(plan.owner, plan.quote, { actual: plan.actual * CENT / 2n }))
        ),
        { concurrency: 16 }
      )
      const store = yield* Store
      for (const owner of owners) {
        const accountId = owner.agent.accountId
        const wallet = yield* (yield* Wallets).get(owner)
        const charges = (yield* store.listTransactions(accountId, { type: "charge" }, { limit: 1000, offset: 0 })).items
        const receipts = results.flatMap((exit, i) =>
          exit._tag === "Success" && plans[i]!.owner === owner ? [exit.value.receipt] : []
        )
        expect(charges.length).toBe(receipts.length)
        const byId = new Map(charges.map((t) => [t.id, t]))
        for (const receipt of receipts) {
          const charge = byId.get(receipt.transactionId)
          expect(charge?.amountMicroUsd).toBe(receipt.chargedMicroUsd)
          expect(charge?.auditId).toBe(receipt.auditId)
        }
        const spent = receipts.reduce((sum, r) => sum + r.chargedMicroUsd, 0n)
        expect(wallet.usdMicroUsd).toBe(300n * CENT - spent)
        const { problems, snapshot } = yield* checkAccount(accountId)
        expect(problems).toEqual([])
        expect(snapshot.reservations.filter((r) => r.status === "held")).toEqual([])
      }
    }))
  }, 120_000)
})

describe.each(backends)("the settle writer over %s", (_name, client) => {
  const runtime = storeRuntime({ settleDelayMs: 300, settleWhenIdle: "wait" }, client)

  it("a hold of another wallet carries the settles answered before it: calls one after another over three wallets", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const owners = [yield* fundedAccount(50n), yield* fundedAccount(50n), yield* fundedAccount(50n)]
      // Well within the writer's 300 ms wait, no read among them.
      for (const owner of owners) yield* call(owner, 10n, { actual: 3n * CENT })
      const sql = yield* SqlClient.SqlClient
      const ids = owners.map((owner) => owner.agent.accountId)
      const records = sql<{ account_id: string; kind: string; tx: string }>`
        SELECT account_id, kind, xmin::text AS tx FROM audit_log
        WHERE kind IN ('reserve', 'settle') AND account_id IN (${ids[0]!}, ${ids[1]!}, ${ids[2]!})`
      for (let i = 0; i < 100 && (yield* records).filter((r) => r.kind === "settle").length < 3; i++) {
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 50)))
      }
      const rows = yield* records
      const tx = (accountId: string, kind: string) => rows.find((r) => r.account_id === accountId && r.kind === kind)?.tx
      expect(rows.filter((r) => r.kind === "settle").length).toBe(3)
      // The first wallet's settle landed in the second wallet's hold's commit, the second's in the third's.
      expect(tx(ids[0]!, "settle")).toBe(tx(ids[1]!, "reserve"))
      expect(tx(ids[1]!, "settle")).toBe(tx(ids[2]!, "reserve"))
      // The last one, which no hold came to carry, the writer sent on its own.
      expect(tx(ids[2]!, "settle")).not.toBe(tx(ids[2]!, "reserve"))
      for (const accountId of ids) expect((yield* checkAccount(accountId)).problems).toEqual([])
    }))
  }, 60_000)

  it("sends the queued settles of several wallets in one call, once no reserve carried them", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const owners = [yield* fundedAccount(50n), yield* fundedAccount(50n), yield* fundedAccount(50n)]
      const spend = yield* Spend
      // Three calls at once whose upstream answers only once all three are held: their settles
      // are queued together, after every hold, and no reserve comes after them.
      const held = yield* Effect.all(owners.map(() => Deferred.make<void>()))
      const answer = Effect.andThen(Effect.forEach(held, Deferred.await), Effect.succeed({ value: "ok", actualMicroUsd: 3n * CENT }))
      yield* Effect.all(
        owners.map((owner, i) =>
          spend.spend(owner, {
            capability: "search",
            provider: "test",
            quotedMicroUsd: 10n * CENT,
            description: "test call",
            run: Effect.andThen(Deferred.succeed(held[i]!, undefined), answer)
          })
        ),
        { concurrency: "unbounded" }
      )
      const sql = yield* SqlClient.SqlClient
      const ids = owners.map((owner) => owner.agent.accountId)
      const count = sql<{ n: number | string; settles: number | string }>`
        SELECT COUNT(DISTINCT xmin::text) AS n, COUNT(*) AS settles FROM audit_log
        WHERE kind = 'settle' AND account_id IN (${ids[0]!}, ${ids[1]!}, ${ids[2]!})`
      for (let i = 0; i < 100 && Number((yield* count)[0]!.settles) < 3; i++) {
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 50)))
      }
      const rows = yield* count
      expect(Number(rows[0]!.settles)).toBe(3)
      expect(Number(rows[0]!.n)).toBe(1)
    }))
  }, 60_000)
})

describe.each(backends)("settles after the answer over %s", (_name, client) => {
  const runtime = storeRuntime({ settleDelayMs: 60_000, settleWhenIdle: "wait" }, client)

  const transactionsOf = (accountId: string, kind?: string) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ n: number | string }>`
        SELECT COUNT(DISTINCT xmin::text) AS n FROM audit_log
        WHERE account_id = ${accountId} ${kind === undefined ? sql`` : sql`AND kind = ${kind}`}`
      return Number(rows[0]!.n)
    })

  it("a hot wallet's calls one after another: each settle rides in the next call's commit, and every read sees every answer", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const owner = yield* fundedAccount(100n)
      const accountId = owner.agent.accountId
      for (let i = 0; i < 10; i++) yield* call(owner, 5n, { actual: 2n * CENT })
      // Ten calls: one transaction each (the hold, carrying the settle before it), and the
      // last settle, landed by this read. The credit is one more.
      expect((yield* (yield* Wallets).get(owner)).usdMicroUsd).toBe(80n * CENT)
      expect(yield* transactionsOf(accountId)).toBe(1 + 10 + 1)
      // Read your own writes after each call.
      for (let i = 1; i <= 5; i++) {
        const result = yield* call(owner, 5n, { actual: 1n * CENT })
        expect((yield* (yield* Wallets).get(owner)).usdMicroUsd).toBe((80n - BigInt(i)) * CENT)
        const { transactionId, auditId } = settleIdsOf(result.receipt.reservationId)
        expect(result.receipt.transactionId).toBe(transactionId)
        expect(result.receipt.auditId).toBe(auditId)
        expect(result.receipt.balanceAfterMicroUsd).toBe((80n - BigInt(i)) * CENT)
        const charge = Option.getOrThrow(yield* (yield* Store).getTransaction(accountId, transactionId))
        expect(charge.amountMicroUsd).toBe(1n * CENT)
        expect(charge.auditId).toBe(auditId)
      }
      expect(yield* (yield* Wallets).verifyChain(accountId)).toBeNull()
    }))
  }, 60_000)

  it("a read writes its account's queued settles itself, and only those", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const owners = [yield* fundedAccount(50n), yield* fundedAccount(50n)]
      for (const owner of owners) yield* call(owner, 10n, { actual: 3n * CENT })
      expect((yield* (yield* Wallets).get(owners[0]!)).usdMicroUsd).toBe(47n * CENT)
      const sql = yield* SqlClient.SqlClient
      const settles = (accountId: string) =>
        sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM audit_log WHERE kind = 'settle' AND account_id = ${accountId}`.pipe(
          Effect.map((rows) => Number(rows[0]!.n))
        )
      expect(yield* settles(owners[0]!.agent.accountId)).toBe(1)
      // The other wallet's settle is still queued (the writer waits 60 s here), and lands when read.
      expect(yield* settles(owners[1]!.agent.accountId)).toBe(0)
      expect((yield* (yield* Wallets).get(owners[1]!)).usdMicroUsd).toBe(47n * CENT)
      expect(yield* settles(owners[1]!.agent.accountId)).toBe(1)
    }))
  }, 60_000)

  it("a settle the database refuses once is written again, and a read waits for it", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const owner = yield* fundedAccount(100n)
      const accountId = owner.agent.accountId
      const fault = yield* refuseCharges("settle_fault", { accountId, once: true })
      try {
        const result = yield* call(owner, 10n, { actual: 4n * CENT })
        expect((yield* (yield* Wallets).get(owner)).usdMicroUsd).toBe(96n * CENT)
        const charge = yield* (yield* Store).getTransaction(accountId, result.receipt.transactionId)
        expect(Option.getOrThrow(charge).amountMicroUsd).toBe(4n * CENT)
        expect(yield* fault.seen).toBeGreaterThanOrEqual(2)
      } finally {
        yield* fault.lift
      }
      expect(yield* transactionsOf(accountId, "settle")).toBe(1)
      expect(yield* (yield* Wallets).verifyChain(accountId)).toBeNull()
    }))
  }, 60_000)
})

/** The audit records (kind, account, transaction) of the accounts, once `settles` settles have landed (at most 10 s). */
const transactionsOnceSettled = (accountIds: ReadonlyArray<string>, settles: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const records = sql<{ account_id: string; kind: string; tx: string }>`
      SELECT account_id, kind, xmin::text AS tx FROM audit_log
      WHERE kind IN ('reserve', 'settle') AND account_id IN ${sql.in(accountIds)}`
    for (let i = 0; i < 200 && (yield* records).filter((r) => r.kind === "settle").length < settles; i++) {
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 50)))
    }
    return yield* records
  })

/** A client's turn between calls (the next call would otherwise start before the writer's fiber has run at all). */
const clientTurn = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))

describe.each(backends)("a settle answered while no reserve is in flight or waiting, with settleWhenIdle now, over %s", (name, client) => {
  // The delay is long: a settle that lands soon was written at once, not after it.
  const runtime = storeRuntime({ settleDelayMs: 60_000, settleWhenIdle: "now" }, client)

  it("calls one after another: each settle is written at once, in a transaction of its own, and lands as the receipt says", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const owners = [yield* fundedAccount(50n), yield* fundedAccount(50n), yield* fundedAccount(50n)]
      const receipts = []
      for (const owner of owners) {
        receipts.push((yield* call(owner, 10n, { actual: 3n * CENT })).receipt)
        yield* clientTurn
      }
      const ids = owners.map((owner) => owner.agent.accountId)
      const started = Date.now()
      // No read among them: only the writer can land them, and it does not wait the 60 s.
      const rows = yield* transactionsOnceSettled(ids, 3)
      expect(Date.now() - started).toBeLessThan(10_000)
      const settles = rows.filter((r) => r.kind === "settle")
      const reserves = rows.filter((r) => r.kind === "reserve")
      expect(settles.length).toBe(3)
      expect(reserves.length).toBe(3)
      // None rode in a hold's commit: the next hold's work is not the settle's.
      for (const settle of settles) expect(reserves.map((r) => r.tx)).not.toContain(settle.tx)
      const store = yield* Store
      for (const [i, owner] of owners.entries()) {
        const charge = yield* store.getTransaction(owner.agent.accountId, receipts[i]!.transactionId)
        expect(Option.getOrThrow(charge).amountMicroUsd).toBe(3n * CENT)
        expect((yield* checkAccount(owner.agent.accountId)).problems).toEqual([])
      }
    }))
  }, 60_000)

  it.skipIf(name === "PGlite")("a settle answered while a reserve is in flight waits for a reserve to carry it", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const [a, b, c] = [yield* fundedAccount(50n), yield* fundedAccount(50n), yield* fundedAccount(50n)]
      const sql = yield* SqlClient.SqlClient
      // B's wallet locked by another transaction: B's reserve stays in flight until it ends.
      const locked = yield* Deferred.make<void>()
      const unlock = yield* Deferred.make<void>()
      const lock = yield* Effect.forkDetach(
        sql.withTransaction(Effect.gen(function*() {
          yield* sql`SELECT account_id FROM wallets WHERE account_id = ${b.agent.accountId} FOR UPDATE`
          yield* Deferred.succeed(locked, undefined)
          yield* Deferred.await(unlock)
        }))
      )
      yield* Deferred.await(locked)
      const blocked = yield* Effect.forkDetach(call(b, 10n, { actual: 3n * CENT }))
      // B's reserve has reached the database (it waits on the lock there) before A's call starts.
      for (let i = 0; i < 200; i++) {
        const waiting = yield* sql<{ n: number | string }>`
          SELECT COUNT(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`
        if (Number(waiting[0]!.n) > 0) break
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))
      }
      yield* call(a, 10n, { actual: 3n * CENT })
      // A's settle was answered while B's reserve was in flight: it waits (60 s here) for a reserve.
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 300)))
      const settledA = sql<{ n: number | string }>`
        SELECT COUNT(*) AS n FROM audit_log WHERE kind = 'settle' AND account_id = ${a.agent.accountId}`
      expect(Number((yield* settledA)[0]!.n)).toBe(0)
      // C's hold carries it: one commit for both.
      yield* call(c, 10n, { actual: 3n * CENT })
      const rows = yield* transactionsOnceSettled([a.agent.accountId, c.agent.accountId], 1)
      const tx = (accountId: string, kind: string) => rows.find((r) => r.account_id === accountId && r.kind === kind)?.tx
      expect(tx(a.agent.accountId, "settle")).toBeDefined()
      expect(tx(a.agent.accountId, "settle")).toBe(tx(c.agent.accountId, "reserve"))
      yield* Deferred.succeed(unlock, undefined)
      yield* Fiber.join(lock)
      yield* Fiber.join(blocked)
      // Every wallet's books add up once its settles have landed (a read lands them).
      for (const owner of [a, b, c]) {
        expect((yield* (yield* Wallets).get(owner)).usdMicroUsd).toBe(47n * CENT)
        expect((yield* checkAccount(owner.agent.accountId)).problems).toEqual([])
      }
    }))
  }, 60_000)
})

describe.each(backends)("the store's default for a settle with no hold coming, over %s", (name, client) => {
  const runtime = storeRuntime({ settleDelayMs: 60_000 }, client)

  it(name === "PostgreSQL"
    ? "at once on PostgreSQL: the settle lands in a transaction of its own"
    : "wait on PGlite (one connection, in this process): the next hold carries the settle", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const [a, b] = [yield* fundedAccount(50n), yield* fundedAccount(50n)]
      yield* call(a, 10n, { actual: 3n * CENT })
      yield* clientTurn
      yield* call(b, 10n, { actual: 3n * CENT })
      const rows = yield* transactionsOnceSettled([a.agent.accountId, b.agent.accountId], 1)
      const tx = (owner: typeof a, kind: string) =>
        rows.find((r) => r.account_id === owner.agent.accountId && r.kind === kind)?.tx
      expect(tx(a, "settle")).toBeDefined()
      if (name === "PostgreSQL") expect(tx(a, "settle")).not.toBe(tx(b, "reserve"))
      else expect(tx(a, "settle")).toBe(tx(b, "reserve"))
    }))
  }, 60_000)
})

describe.each(backends)("a hold of a wallet whose settle is being written, over %s", (_name, client) => {
  // Settles are written at once; a refused one is tried again within 200 ms.
  const retrying = storeRuntime({ settleDelayMs: 2, settleWhenIdle: "now", settleRetryMaxPauseMs: 200 }, client)
  // 60 cents and 1,000 sats (50 cents). The first call holds the 60 cents and costs 10; the second
  // holds 30 cents, from the usd pocket once the first's settle has landed (it returned 50), and
  // from sats if it were decided before. A refusal would not tell: it is decided again on the
  // general path, which waits for the wallet's settles itself.

  it("waits for it to land, then decides on it: the pocket it draws from shows which it saw", async () => {
    await retrying.runPromise(Effect.gen(function*() {
      const owner = yield* fundedAccount(60n, 1_000n)
      const accountId = owner.agent.accountId
      const fault = yield* refuseCharges("refuse_while_testing", { accountId })
      yield* call(owner, 60n, { actual: 10n * CENT })
      // The settle was tried and refused: between its tries it is still being written, not landed.
      for (let i = 0; i < 500 && (yield* fault.refusals) < 1; i++) {
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))
      }
      expect(yield* fault.refusals).toBeGreaterThanOrEqual(1)
      // The next hold waits for it (at most 2 s), and decides on it once the fault lifts.
      const next = yield* Effect.forkDetach(Effect.exit(call(owner, 30n, { actual: 30n * CENT })))
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 300)))
      yield* fault.lift
      const exit = yield* Fiber.join(next)
      expect(exit._tag === "Success" ? exit.value.receipt.chargedMicroUsd : exit).toBe(30n * CENT)
      // Both calls charged from the usd pocket: 60 - 10 - 30 cents left, the sats untouched.
      const wallet = yield* (yield* Wallets).get(owner)
      expect([wallet.usdMicroUsd, wallet.satsMsat]).toEqual([20n * CENT, 1_000_000n])
      const { problems, snapshot } = yield* checkAccount(accountId)
      expect(problems).toEqual([])
      expect(snapshot.reservations.filter((r) => r.status === "held")).toEqual([])
    }))
  }, 60_000)
})
