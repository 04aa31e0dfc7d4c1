import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import * as PgliteClient from "../../../adapters/sql/PgliteClient.ts"
import { paged } from "../../../adapters/sql/paging.ts"
import { freshPostgresLayer } from "../../support/postgres.ts"

/**
 * A listing's page and its `total` describe the same rows even when a write
 * lands while the listing is being read. The write is made to land between
 * any two statements of the listing (right after each statement it runs), so
 * a page and a total read by two statements would disagree.
 */

const backends: ReadonlyArray<readonly [string, () => Layer.Layer<SqlClient.SqlClient, unknown>]> = [
  ["PGlite", () => PgliteClient.layer({ dataDir: undefined })],
  ["PostgreSQL", () => freshPostgresLayer(2)]
]

interface Row {
  readonly id: string
  readonly created_at: Date
  readonly tag: string
}

/** `sql` whose every statement is followed by `after` (identifier and other helper calls pass through). */
const interleaving = (sql: SqlClient.SqlClient, after: Effect.Effect<void, unknown>): SqlClient.SqlClient =>
  new Proxy(sql, {
    apply(target, thisArg, args) {
      const result = Reflect.apply(target as unknown as (...a: Array<unknown>) => unknown, thisArg, args)
      const isStatement = Array.isArray(args[0]) && "raw" in (args[0] as object)
      return isStatement ? Effect.tap(result as Effect.Effect<unknown, unknown>, () => Effect.orDie(after)) : result
    }
  })

for (const [name, layer] of backends) {
  describe(`paging (${name})`, () => {
    it.effect("page and total come from the same snapshot under a concurrent insert", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TABLE paging_probe (id text PRIMARY KEY, created_at timestamptz NOT NULL, tag text NOT NULL)`
        for (let i = 0; i < 5; i++) {
          yield* sql`INSERT INTO paging_probe ${sql.insert({ id: `r${i}`, created_at: new Date(Date.UTC(2026, 0, 1, 0, 0, i)), tag: "a" })}`
        }
        let inserted = 0
        const insertOne = Effect.suspend(() => {
          inserted++
          return sql`INSERT INTO paging_probe ${sql.insert({ id: `late${inserted}`, created_at: new Date(), tag: "a" })}`
        })
        const spied = interleaving(sql, insertOne)
        const map = (row: Row) => {
          assert.notProperty(row, "spendgate_paging_total", "the window column is not part of a row")
          return row.id
        }

        // Everything on one page: the total must be the page's length.
        const whole = yield* paged<Row, string>(spied, "paging_probe", sql`tag = ${"a"}`, map, { limit: 100, offset: 0 })
        assert.strictEqual(whole.total, whole.items.length)
        assert.deepStrictEqual(whole.items, ["r4", "r3", "r2", "r1", "r0"])

        // A partial page: the total is what matched when the page was read (5 rows + the one inserted after the first listing).
        const partial = yield* paged<Row, string>(spied, "paging_probe", sql`tag = ${"a"}`, map, { limit: 2, offset: 1 })
        assert.strictEqual(partial.items.length, 2)
        assert.strictEqual(partial.total, 6)

        // Past the end: nothing to carry the total, so it is counted on its own.
        const past = yield* paged<Row, string>(sql, "paging_probe", sql`tag = ${"a"}`, map, { limit: 10, offset: 50 })
        assert.deepStrictEqual(past.items, [])
        assert.strictEqual(past.total, 5 + inserted)

        // An empty filter on the first page is simply empty.
        const none = yield* paged<Row, string>(sql, "paging_probe", sql`tag = ${"zzz"}`, map, { limit: 10, offset: 0 })
        assert.deepStrictEqual(none, { items: [], total: 0 })
      }).pipe(Effect.provide(layer()), Effect.scoped), 60_000)
  })
}
