import { PgClient } from "@effect/sql-pg"
import { Duration, Effect, Exit, Layer, Redacted, Scope } from "effect"
import { Reactivity } from "effect/reactivity"
import { describe, expect, it } from "vitest"
import { storeOverClientWith } from "../../../adapters/sql/Database.ts"
import { freshDatabaseUrl, POSTGRES_ADMIN_URL } from "../../support/postgres.ts"
import { call, fundedAccount, testLayer } from "../../wallet/ledger.contract.ts"

/**
 * The store's last act when it closes is to write the settles still queued (the settle
 * writer's finalizer). That needs a connection, and the pool may have closed every idle one
 * by then: an `@effect/sql-pg` pool opens a connection by starting a fiber in the scope it
 * was made in, which is refused once that scope is closing (docs/performance.md, "The
 * general path bounded by the hour"). The store is therefore built as the server builds it,
 * on the SQL client's own layer, whose scope closes after the store's: checked here with a
 * pool that closes idle connections after 300 ms and a settle that waits to be carried.
 */

const CENT = 10_000n

/** One statement on the test's database, on a client of its own (never the store's pool). */
const query = <A extends object>(url: string, statement: string) =>
  Effect.scoped(Effect.gen(function*() {
    const sql = yield* PgClient.make({ url: Redacted.make(url), maxConnections: 1 })
    return yield* sql.unsafe<A>(statement)
  })).pipe(Effect.provide(Reactivity.layer))

describe("closing a SQL store on PostgreSQL after its pool went idle", () => {
  it("writes the settle still queued: a connection is opened for it", async () => {
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const url = yield* freshDatabaseUrl
      const database = new URL(url).pathname.slice(1)
      const client = PgClient.layer({ url: Redacted.make(url), maxConnections: 2, idleTimeout: Duration.millis(300) })
      // The settle waits 60 s for a hold to carry it; the read cache does not listen (no connection of its own).
      const layer = testLayer(
        storeOverClientWith({ settleDelayMs: 60_000, settleWhenIdle: "wait", settleShutdownTimeoutMs: 5_000, cache: "local" })
      ).pipe(Layer.provideMerge(client))
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(layer, scope)
      const receipt = yield* Effect.gen(function*() {
        const owner = yield* fundedAccount(10n)
        return (yield* call(owner, 5n, { actual: 2n * CENT })).receipt
      }).pipe(Effect.provide(context))
      expect(receipt.chargedMicroUsd).toBe(2n * CENT)

      // Before the store closes: the settle is still queued, and the pool holds no connection.
      const held = yield* query<{ status: string }>(url, `SELECT status FROM reservations`)
      expect(held).toEqual([{ status: "held" }])
      let open = -1
      for (let waited = 0; waited < 10_000 && open !== 0; waited += 100) {
        const [row] = yield* query<{ n: number }>(
          POSTGRES_ADMIN_URL,
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = '${database}' AND backend_type = 'client backend'`
        )
        open = row!.n
        if (open !== 0) yield* Effect.sleep(Duration.millis(100))
      }
      expect(open).toBe(0)

      yield* Scope.close(scope, Exit.void)

      // After: the settle landed as the receipt said, and nothing is left held.
      const reservations = yield* query<{ status: string; settled: string }>(
        url,
        `SELECT status, settled_micro_usd::text AS settled FROM reservations`
      )
      expect(reservations).toEqual([{ status: "settled", settled: String(2n * CENT) }])
      const charges = yield* query<{ id: string; amount: string }>(
        url,
        `SELECT id, amount_micro_usd::text AS amount FROM transactions WHERE type = 'charge'`
      )
      expect(charges).toEqual([{ id: receipt.transactionId, amount: String(2n * CENT) }])
    })))
  }, 60_000)
})
