import { Deferred, Effect, Exit, Fiber, Layer, ManagedRuntime } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, describe, expect, it } from "vitest"
import { storeOverClient } from "../../../adapters/sql/Database.ts"
import * as PgliteClient from "../../../adapters/sql/PgliteClient.ts"
import { verifyChainSegment } from "../../../src/audit/chain.ts"
import { Store } from "../../../src/ports/Store.ts"
import { Wallets } from "../../../src/wallet/Wallets.ts"
import { freshPostgresLayer } from "../../support/postgres.ts"
import { sqlStoreRuntime } from "../../support/sqlStore.ts"
import { call, fundedAccount, testLayer } from "../../wallet/ledger.contract.ts"

/**
 * Group commit of holds: concurrent reserves — of one hot wallet, and of
 * many wallets — are coalesced into one transaction (the reserve audit
 * records of a batch share the transaction id that wrote them), each still
 * decided on its own, in arrival order within its wallet, under its wallet's
 * lock; wallets are locked in one order, so calls and the settle writer
 * never deadlock.
 */

const backends = [
  ["PGlite", () => PgliteClient.layer({ dataDir: undefined })],
  ["PostgreSQL", () => freshPostgresLayer(8)]
] as const

describe.each(backends)("batched holds over %s", (_name, client) => {
  const runtime = ManagedRuntime.make(
    Layer.provideMerge(testLayer(storeOverClient), client() as Layer.Layer<SqlClient.SqlClient, unknown>)
  )
  afterAll(() => runtime.dispose())

  it("30 concurrent 10-cent calls on a 100-cent wallet: exactly 10 held, in fewer transactions than holds", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const owner = yield* fundedAccount(100n)
      const exits = yield* Effect.all(
        Array.from({ length: 30 }, () => Effect.exit(call(owner, 10n))),
        { concurrency: "unbounded" }
      )
      expect(exits.filter(Exit.isSuccess).length).toBe(10)
      expect((yield* (yield* Wallets).get(owner)).usdMicroUsd).toBe(0n)
      const sql = yield* SqlClient.SqlClient
      // xmin: the transaction that wrote the row (audit records are never updated).
      const rows = yield* sql<{ holds: number | string; transactions: number | string }>`
        SELECT COUNT(*) AS holds, COUNT(DISTINCT xmin::text) AS transactions FROM audit_log
        WHERE account_id = ${owner.agent.accountId} AND kind = 'reserve'`
      expect(Number(rows[0]!.holds)).toBe(10)
      expect(Number(rows[0]!.transactions)).toBeLessThan(10)
      const store = yield* Store
      const audit = yield* store.listAudit(owner.agent.accountId, 0n, 1000)
      expect(yield* verifyChainSegment(null, audit)).toBeNull()
    }))
  }, 60_000)

  it("a batch with a hold that fires an event: it is recorded with its event, once, in order", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const owner = yield* fundedAccount(100n)
      const store = yield* Store
      const accountId = owner.agent.accountId
      // The 6th 10-cent hold takes the wallet from 50 cents to 40: below the threshold.
      yield* store.setLowBalanceThreshold(accountId, 450_000n)
      const exits = yield* Effect.all(
        Array.from({ length: 30 }, () => Effect.exit(call(owner, 10n))),
        { concurrency: "unbounded" }
      )
      expect(exits.filter(Exit.isSuccess).length).toBe(10)
      expect((yield* (yield* Wallets).get(owner)).usdMicroUsd).toBe(0n)
      const events = (yield* store.listWebhookEvents(accountId, { limit: 100, offset: 0 })).items
      expect(events.filter((event) => event.type === "wallet.low_balance").length).toBe(1)
      // Every refusal after the wallet ran dry recorded its spend.refused (one per minute: the outbox keeps one).
      expect(events.filter((event) => event.type === "spend.refused").length).toBe(1)
      const audit = yield* store.listAudit(accountId, 0n, 1000)
      expect(audit.filter((record) => record.kind === "reserve").length).toBe(10)
      expect(yield* verifyChainSegment(null, audit)).toBeNull()
    }))
  }, 60_000)

  it("a batch step that fails after earlier steps committed: those holds are handed out, none is left held", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const owner = yield* fundedAccount(100n)
      const store = yield* Store
      const accountId = owner.agent.accountId
      // The 6th hold crosses the threshold (the general path, a step of its own); the 7th hold
      // attempted fails in the database, in the batch call after it.
      yield* store.setLowBalanceThreshold(accountId, 450_000n)
      const sql = yield* SqlClient.SqlClient
      yield* sql.unsafe(`CREATE SEQUENCE IF NOT EXISTS injected_fault_seq`)
      yield* sql.unsafe(`SELECT setval('injected_fault_seq', 1, false)`)
      yield* sql.unsafe(`
        CREATE OR REPLACE FUNCTION injected_fault() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.account_id = '${accountId}' AND nextval('injected_fault_seq') = 7 THEN
            RAISE EXCEPTION 'injected fault';
          END IF;
          RETURN NEW;
        END $$`)
      yield* sql.unsafe(`DROP TRIGGER IF EXISTS injected_fault ON reservations`)
      yield* sql.unsafe(`CREATE TRIGGER injected_fault BEFORE INSERT ON reservations FOR EACH ROW EXECUTE FUNCTION injected_fault()`)
      const exits = yield* Effect.all(
        Array.from({ length: 30 }, () => Effect.exit(call(owner, 10n))),
        { concurrency: "unbounded" }
      ).pipe(Effect.ensuring(Effect.orDie(sql.unsafe(`DROP TRIGGER injected_fault ON reservations`))))
      const succeeded = exits.filter(Exit.isSuccess).length
      expect(exits.some(Exit.isFailure)).toBe(true)
      // Every hold made was settled by its call: none is stranded as held, and the wallet paid exactly the successes.
      // (The wallet is read first: a read waits for the settles this instance answered before it.)
      expect((yield* (yield* Wallets).get(owner)).usdMicroUsd).toBe(BigInt(100 - 10 * succeeded) * 10_000n)
      const held = yield* sql<{ n: number | string }>`
        SELECT COUNT(*) AS n FROM reservations WHERE account_id = ${accountId} AND status = 'held'`
      expect(Number(held[0]!.n)).toBe(0)
      expect(yield* verifyChainSegment(null, yield* store.listAudit(accountId, 0n, 1000))).toBeNull()
    }))
  }, 60_000)

  it("calls over many wallets at once: each wallet holds exactly what it can, wallets share transactions, no deadlock", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      // Eight wallets of 100 cents and one empty one; 20 calls of 10 cents on each, all at once and
      // interleaved, while the settles of the earlier calls are written (and carried) meanwhile.
      const owners = yield* Effect.all(Array.from({ length: 8 }, () => fundedAccount(100n)))
      const empty = yield* fundedAccount(0n)
      const everyone = [...owners, empty]
      const calls = Array.from({ length: 20 * everyone.length }, (_, i) => everyone[i % everyone.length]!)
      const exits = yield* Effect.all(calls.map((owner) => Effect.exit(call(owner, 10n))), { concurrency: "unbounded" })
      for (const owner of owners) {
        const mine = exits.filter((_, i) => calls[i] === owner)
        expect(mine.filter(Exit.isSuccess).length).toBe(10)
        expect((yield* (yield* Wallets).get(owner)).usdMicroUsd).toBe(0n)
      }
      // The empty wallet's refusals (each takes the general path) stop no other wallet's holds.
      expect(exits.filter((_, i) => calls[i] === empty).every(Exit.isFailure)).toBe(true)
      const sql = yield* SqlClient.SqlClient
      const accounts = owners.map((owner) => owner.agent.accountId)
      const rows = yield* sql<{ holds: number | string; transactions: number | string; shared: number | string }>`
        SELECT COUNT(*) AS holds, COUNT(DISTINCT xmin::text) AS transactions,
          (SELECT COUNT(*) FROM (
            SELECT xmin::text FROM audit_log WHERE kind = 'reserve' AND account_id IN ${sql.in(accounts)}
            GROUP BY xmin::text HAVING COUNT(DISTINCT account_id) > 1) AS s) AS shared
        FROM audit_log WHERE kind = 'reserve' AND account_id IN ${sql.in(accounts)}`
      expect(Number(rows[0]!.holds)).toBe(80)
      expect(Number(rows[0]!.transactions)).toBeLessThan(80)
      // Some transaction wrote the holds of more than one wallet.
      expect(Number(rows[0]!.shared)).toBeGreaterThan(0)
      const store = yield* Store
      for (const accountId of accounts) {
        const audit = yield* store.listAudit(accountId, 0n, 1000)
        expect(audit.filter((record) => record.kind === "settle").length).toBe(10)
        expect(yield* verifyChainSegment(null, audit)).toBeNull()
      }
    }))
  }, 60_000)

  it("a call of several wallets that fails in the database: its reserves of every wallet fail, nothing of it is held, the books add up", async () => {
    // One call in flight at a time: the first reserve goes alone, all the others wait and go together in
    // the next call, which the injected fault fails.
    const single = sqlStoreRuntime({ reserveFlights: 1 }, client)
    try {
      await single.runPromise(Effect.gen(function*() {
        const owners = yield* Effect.all(Array.from({ length: 6 }, () => fundedAccount(100n)))
        const faulty = owners[0]!.agent.accountId
        const sql = yield* SqlClient.SqlClient
        // The second reservation the first wallet would write fails (its first goes alone).
        yield* sql.unsafe(`CREATE SEQUENCE IF NOT EXISTS injected_fault_many_seq`)
        yield* sql.unsafe(`SELECT setval('injected_fault_many_seq', 1, false)`)
        yield* sql.unsafe(`
          CREATE OR REPLACE FUNCTION injected_fault_many() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN
            IF NEW.account_id = '${faulty}' AND nextval('injected_fault_many_seq') = 2 THEN
              RAISE EXCEPTION 'injected fault';
            END IF;
            RETURN NEW;
          END $$`)
        yield* sql.unsafe(`DROP TRIGGER IF EXISTS injected_fault_many ON reservations`)
        yield* sql.unsafe(
          `CREATE TRIGGER injected_fault_many BEFORE INSERT ON reservations FOR EACH ROW EXECUTE FUNCTION injected_fault_many()`
        )
        const calls = Array.from({ length: 5 * owners.length }, (_, i) => owners[i % owners.length]!)
        const exits = yield* Effect.all(calls.map((owner) => Effect.exit(call(owner, 10n))), { concurrency: "unbounded" })
          .pipe(Effect.ensuring(Effect.orDie(sql.unsafe(`DROP TRIGGER injected_fault_many ON reservations`))))
        // The failed call held for several wallets: calls of wallets other than the faulty one failed with it.
        expect(exits.some((exit, i) => calls[i] !== owners[0] && Exit.isFailure(exit))).toBe(true)
        const store = yield* Store
        for (const owner of owners) {
          const accountId = owner.agent.accountId
          const succeeded = exits.filter((exit, i) => calls[i] === owner && Exit.isSuccess(exit)).length
          // A read waits for the settles this instance answered before it.
          expect((yield* (yield* Wallets).get(owner)).usdMicroUsd).toBe(BigInt(100 - 10 * succeeded) * 10_000n)
          const held = yield* sql<{ n: number | string }>`
            SELECT COUNT(*) AS n FROM reservations WHERE account_id = ${accountId} AND status = 'held'`
          expect(Number(held[0]!.n)).toBe(0)
          const audit = yield* store.listAudit(accountId, 0n, 1000)
          expect(audit.filter((record) => record.kind === "settle").length).toBe(succeeded)
          expect(yield* verifyChainSegment(null, audit)).toBeNull()
        }
        // The wallets serve the next calls: no flight was left claimed.
        for (const owner of owners) expect(Exit.isSuccess(yield* Effect.exit(call(owner, 10n)))).toBe(true)
      }))
    } finally {
      await single.dispose()
    }
  }, 60_000)
})

describe("a full reserve queue over PostgreSQL", () => {
  it("a reserve that finds the queue full never passes the waiting reserves of its own wallet", async () => {
    // One call in flight, two reserves may wait: the third reserve of a wallet finds the queue full.
    const tight = sqlStoreRuntime({ reserveFlights: 1, maxQueued: 2 }, () => freshPostgresLayer(8))
    try {
      await tight.runPromise(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const blocker = yield* fundedAccount(100n)
        // Enough for one 10-cent call: whichever reserve is decided first holds it.
        const scarce = yield* fundedAccount(10n)
        const bystander = yield* fundedAccount(100n)
        // Another connection holds the blocker's wallet lock: the one call in flight waits for it.
        const release = yield* Deferred.make<void>()
        const locked = yield* Deferred.make<void>()
        const holder = yield* Effect.forkChild(sql.withTransaction(Effect.gen(function*() {
          yield* sql`SELECT 1 FROM wallets WHERE account_id = ${blocker.agent.accountId} FOR UPDATE`
          yield* Deferred.succeed(locked, undefined)
          yield* Deferred.await(release)
        })))
        yield* Deferred.await(locked)
        const first = yield* Effect.forkChild(Effect.exit(call(blocker, 10n)))
        // Until the call in flight waits for that lock in the database.
        for (let waited = 0;; waited += 20) {
          const rows = yield* sql<{ n: number | string }>`
            SELECT COUNT(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`
          if (Number(rows[0]!.n) > 0) break
          if (waited > 10_000) throw new Error("the call in flight never waited for the lock")
          yield* Effect.sleep("20 millis")
        }
        // Three reserves of the scarce wallet, one after the other: two wait, the third finds the queue full.
        const scarceCalls = []
        for (let i = 0; i < 3; i++) {
          scarceCalls.push(yield* Effect.forkChild(Effect.exit(call(scarce, 10n))))
          yield* Effect.sleep("100 millis")
        }
        // A wallet with nothing waiting still takes its own lock at once while the queue is full.
        // (Waited for from outside: a reserve cannot be interrupted.)
        const alone = yield* Effect.forkChild(call(bystander, 10n))
        expect(Exit.isSuccess(yield* Effect.exit(Fiber.join(alone).pipe(Effect.timeout("5 seconds"))))).toBe(true)
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(holder)
        expect(Exit.isSuccess(yield* Fiber.join(first))).toBe(true)
        const exits = yield* Effect.forEach(scarceCalls, Fiber.join)
        // Arrival order: the first holds the wallet's 10 cents, the two after it are refused.
        expect(exits.map(Exit.isSuccess)).toEqual([true, false, false])
        expect((yield* (yield* Wallets).get(scarce)).usdMicroUsd).toBe(0n)
        const store = yield* Store
        const audit = yield* store.listAudit(scarce.agent.accountId, 0n, 1000)
        expect(yield* verifyChainSegment(null, audit)).toBeNull()
      }))
    } finally {
      await tight.dispose()
    }
  }, 60_000)
})
