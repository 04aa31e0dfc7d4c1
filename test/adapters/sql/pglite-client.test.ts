import { assert, describe, it, layer } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { type Array as Arr, Deferred, Effect, Fiber, Redacted, Stream } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient, SqlError } from "effect/sql"
import { mkdtemp, rm, stat } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as PgliteClient from "../../../adapters/sql/PgliteClient.ts"

const POSTGRES_URL = process.env["SPENDGATE_TEST_POSTGRES_URL"] ?? "postgres://postgres@127.0.0.1:5432/test"

const uniqueName = (prefix: string) => `${prefix}_${process.pid}_${Date.now()}_${Math.floor(Math.random() * 1e6)}`

/** A table created for one test and dropped afterwards, so runs against a shared server never collide. */
const scratchTable = Effect.fnUntraced(function*(prefix: string, columns: string) {
  const sql = yield* SqlClient.SqlClient
  const name = uniqueName(prefix)
  yield* Effect.acquireRelease(
    sql`CREATE TABLE ${sql(name)} (${sql.literal(columns)})`,
    () => Effect.orDie(sql`DROP TABLE IF EXISTS ${sql(name)}`)
  )
  return name
})

const expectSqlError = (u: unknown): SqlError.SqlError => {
  assert.isTrue(SqlError.isSqlError(u), `expected a SqlError, got ${String(u)}`)
  return u as SqlError.SqlError
}

/** Read-modify-write of one counter, with a yield between the read and the write to invite interleaving. */
const increment = (table: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ value: bigint }>`SELECT value FROM ${sql(table)} WHERE id = 1`
    yield* Effect.yieldNow
    yield* sql`UPDATE ${sql(table)} SET value = ${rows[0]!.value + 1n} WHERE id = 1`
  })

// Live clock: one test waits on real time to show that another fiber is blocked.
layer(PgliteClient.layer({}), { excludeTestServices: true })("PgliteClient (in memory)", (it) => {
  it.effect("creates a table, inserts with sql.insert and selects with parameters and sql.in", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const table = yield* scratchTable("items", "id int8 PRIMARY KEY, name text NOT NULL, qty int4 NOT NULL")

      const inserted = yield* sql`INSERT INTO ${sql(table)} ${
        sql.insert([
          { id: 1n, name: "apple", qty: 3 },
          { id: 2n, name: "pear", qty: 0 },
          { id: 3n, name: "plum", qty: 7 }
        ])
      } RETURNING id`
      assert.deepStrictEqual(inserted, [{ id: 1n }, { id: 2n }, { id: 3n }])

      const byParam = yield* sql`SELECT name, qty FROM ${sql(table)} WHERE qty > ${2} ORDER BY id`
      assert.deepStrictEqual(byParam, [{ name: "apple", qty: 3 }, { name: "plum", qty: 7 }])

      const byIn = yield* sql`SELECT id, name FROM ${sql(table)} WHERE ${sql.in("id", [1n, 3n])} ORDER BY id`
      assert.deepStrictEqual(byIn, [{ id: 1n, name: "apple" }, { id: 3n, name: "plum" }])

      const byAndOr = yield* sql`SELECT name FROM ${sql(table)} WHERE ${
        sql.or([sql.and([sql`qty = ${0}`, sql`name = ${"pear"}`]), sql`name = ${"plum"}`])
      } ORDER BY id`
      assert.deepStrictEqual(byAndOr, [{ name: "pear" }, { name: "plum" }])

      const compiled = sql`SELECT * FROM ${sql("Mixed Case")} WHERE ${sql.in("id", [1, 2])}`.compile()
      assert.deepStrictEqual(compiled, [`SELECT * FROM "Mixed Case" WHERE "id" IN ($1,$2)`, [1, 2]])
    }))

  it.effect("round-trips int8 values beyond 2^53 as bigint", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const table = yield* scratchTable("big", "id int8 PRIMARY KEY, amount int8 NOT NULL")
      const values = [2n ** 53n + 1n, 2n ** 63n - 1n, -(2n ** 63n)]
      yield* sql`INSERT INTO ${sql(table)} ${
        sql.insert([{ id: 1n, amount: values[0] }, { id: 2n, amount: values[1] }, { id: 3n, amount: values[2] }])
      }`

      const rows = yield* sql<{ amount: bigint }>`SELECT amount FROM ${sql(table)} ORDER BY id`
      assert.deepStrictEqual(rows.map((row) => row.amount), values)
      for (const row of rows) assert.strictEqual(typeof row.amount, "bigint")

      const exact = yield* sql`SELECT id FROM ${sql(table)} WHERE amount = ${2n ** 53n + 1n}`
      assert.deepStrictEqual(exact, [{ id: 1n }])
      const small = yield* sql`SELECT count(*) AS n, ${5n} + 1 AS six FROM ${sql(table)}`
      assert.deepStrictEqual(small, [{ n: 3n, six: 6n }])
    }))

  it.effect("a CHECK violation fails with a SqlError carrying SQLSTATE 23514", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const table = yield* scratchTable("checked", "id int4 PRIMARY KEY, qty int4 NOT NULL CONSTRAINT qty_non_negative CHECK (qty >= 0)")
      const error = expectSqlError(yield* Effect.flip(sql`INSERT INTO ${sql(table)} ${sql.insert({ id: 1, qty: -1 })}`))
      assert.strictEqual(error.reason._tag, "ConstraintError")
      assert.strictEqual(PgliteClient.sqlState(error), "23514")
      const cause = error.reason.cause as { code: string; constraint: string }
      assert.strictEqual(cause.code, "23514")
      assert.strictEqual(cause.constraint, "qty_non_negative")
    }))

  it.effect("a unique violation fails with a SqlError carrying SQLSTATE 23505", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const table = yield* scratchTable("uniq", "id int4 PRIMARY KEY, email text NOT NULL CONSTRAINT email_unique UNIQUE")
      yield* sql`INSERT INTO ${sql(table)} ${sql.insert({ id: 1, email: "a@example.com" })}`
      const error = expectSqlError(
        yield* Effect.flip(sql`INSERT INTO ${sql(table)} ${sql.insert({ id: 2, email: "a@example.com" })}`)
      )
      assert.strictEqual(PgliteClient.sqlState(error), "23505")
      assert.strictEqual(error.reason._tag, "UniqueViolation")
      if (error.reason._tag === "UniqueViolation") assert.strictEqual(error.reason.constraint, "email_unique")
      // The session is usable after the failure.
      const rows = yield* sql`SELECT count(*)::int4 AS n FROM ${sql(table)}`
      assert.deepStrictEqual(rows, [{ n: 1 }])
    }))

  it.effect("withTransaction commits", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const table = yield* scratchTable("tx_commit", "id int4 PRIMARY KEY")
      const result = yield* sql.withTransaction(
        Effect.gen(function*() {
          yield* sql`INSERT INTO ${sql(table)} ${sql.insert([{ id: 1 }, { id: 2 }])}`
          return "done"
        })
      )
      assert.strictEqual(result, "done")
      const rows = yield* sql`SELECT id FROM ${sql(table)} ORDER BY id`
      assert.deepStrictEqual(rows, [{ id: 1 }, { id: 2 }])
    }))

  it.effect("a failing transaction rolls back and keeps its error", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const table = yield* scratchTable("tx_rollback", "id int4 PRIMARY KEY")
      const error = yield* Effect.flip(sql.withTransaction(
        Effect.gen(function*() {
          yield* sql`INSERT INTO ${sql(table)} ${sql.insert({ id: 1 })}`
          return yield* Effect.fail("business rule" as const)
        })
      ))
      assert.strictEqual(error, "business rule")
      const rows = yield* sql`SELECT id FROM ${sql(table)}`
      assert.deepStrictEqual(rows, [])
    }))

  it.effect("a nested transaction that fails rolls back only its savepoint", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const table = yield* scratchTable("tx_nested", "id int4 PRIMARY KEY")
      yield* sql.withTransaction(
        Effect.gen(function*() {
          yield* sql`INSERT INTO ${sql(table)} ${sql.insert({ id: 1 })}`
          const inner = yield* Effect.flip(sql.withTransaction(
            Effect.gen(function*() {
              yield* sql`INSERT INTO ${sql(table)} ${sql.insert({ id: 2 })}`
              // A duplicate key aborts the inner level only.
              yield* sql`INSERT INTO ${sql(table)} ${sql.insert({ id: 1 })}`
            })
          ))
          assert.strictEqual(PgliteClient.sqlState(inner), "23505")
          yield* sql`INSERT INTO ${sql(table)} ${sql.insert({ id: 3 })}`
        })
      )
      const rows = yield* sql`SELECT id FROM ${sql(table)} ORDER BY id`
      assert.deepStrictEqual(rows, [{ id: 1 }, { id: 3 }])
    }))

  it.effect("COMMIT of a transaction aborted by a swallowed error fails", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const table = yield* scratchTable("tx_aborted", "id int4 PRIMARY KEY")
      const error = yield* Effect.flip(sql.withTransaction(
        Effect.gen(function*() {
          yield* sql`INSERT INTO ${sql(table)} ${sql.insert({ id: 1 })}`
          yield* Effect.ignore(sql`INSERT INTO ${sql(table)} ${sql.insert({ id: 1 })}`)
        })
      ))
      assert.isTrue(SqlError.isSqlError(error))
      assert.deepStrictEqual(yield* sql`SELECT id FROM ${sql(table)}`, [])
    }))

  it.effect("serialises concurrent transactions: 2 x 50 read-modify-write increments end at exactly 100", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const table = yield* scratchTable("counter", "id int4 PRIMARY KEY, value int8 NOT NULL")
      yield* sql`INSERT INTO ${sql(table)} ${sql.insert({ id: 1, value: 0n })}`
      const worker = Effect.repeat(sql.withTransaction(increment(table)), { times: 49 })
      yield* Effect.all([worker, worker], { concurrency: "unbounded", discard: true })
      const rows = yield* sql`SELECT value FROM ${sql(table)} WHERE id = 1`
      assert.deepStrictEqual(rows, [{ value: 100n }])
    }))

  it.effect("serialises plain statements against transactions: 2 x 50 increments, one side transactional", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const table = yield* scratchTable("counter_mixed", "id int4 PRIMARY KEY, value int8 NOT NULL")
      yield* sql`INSERT INTO ${sql(table)} ${sql.insert({ id: 1, value: 0n })}`
      // The plain side uses a single atomic statement; the transactional side reads and writes.
      const plain = Effect.repeat(sql`UPDATE ${sql(table)} SET value = value + 1 WHERE id = 1`, { times: 49 })
      const transactional = Effect.repeat(sql.withTransaction(increment(table)), { times: 49 })
      yield* Effect.all([plain, transactional], { concurrency: "unbounded", discard: true })
      const rows = yield* sql`SELECT value FROM ${sql(table)} WHERE id = 1`
      assert.deepStrictEqual(rows, [{ value: 100n }])
    }))

  it.effect("statements from other fibers wait for an open transaction and never see its writes", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const table = yield* scratchTable("isolation", "id int4 PRIMARY KEY")
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()

      const transaction = yield* Effect.forkChild(Effect.exit(sql.withTransaction(
        Effect.gen(function*() {
          yield* sql`INSERT INTO ${sql(table)} ${sql.insert({ id: 1 })}`
          yield* Deferred.succeed(started, undefined)
          yield* Deferred.await(release)
          return yield* Effect.fail("abort" as const)
        })
      )))
      yield* Deferred.await(started)
      const reader = yield* Effect.forkChild(sql<{ n: number }>`SELECT count(*)::int4 AS n FROM ${sql(table)}`)
      yield* Effect.sleep("100 millis")
      assert.isUndefined(reader.pollUnsafe(), "the reader ran while the transaction was open")

      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(transaction)
      assert.deepStrictEqual(yield* Fiber.join(reader), [{ n: 0 }])
    }))

  it.effect("supports stream, values, raw and unprepared execution", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const table = yield* scratchTable("modes", "id int4 PRIMARY KEY, label text NOT NULL")
      yield* sql`INSERT INTO ${sql(table)} ${sql.insert([{ id: 1, label: "a" }, { id: 2, label: "b" }])}`

      const streamed = yield* Stream.runCollect(sql`SELECT id, label FROM ${sql(table)} ORDER BY id`.stream)
      assert.deepStrictEqual(streamed, [{ id: 1, label: "a" }, { id: 2, label: "b" }])

      const values = yield* sql`SELECT id, label FROM ${sql(table)} ORDER BY id`.values
      assert.deepStrictEqual(values, [[1, "a"], [2, "b"]])

      const unprepared = yield* sql`SELECT label FROM ${sql(table)} WHERE id = ${2}`.unprepared
      assert.deepStrictEqual(unprepared, [{ label: "b" }])

      const raw = yield* sql`UPDATE ${sql(table)} SET label = ${"c"} WHERE id = ${1}`.raw
      assert.strictEqual((raw as { command?: string }).command, "UPDATE")
      assert.strictEqual((raw as { affectedRows?: number }).affectedRows, 1)

      const inTransaction = yield* sql.withTransaction(
        Stream.runCollect(sql`SELECT label FROM ${sql(table)} ORDER BY id`.stream)
      )
      assert.deepStrictEqual(inTransaction, [{ label: "c" }, { label: "b" }])
    }))

  it.effect("runs statements while a stream is being consumed", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const table = yield* scratchTable("stream_writes", "id int4 PRIMARY KEY, seen bool NOT NULL DEFAULT false")
      yield* sql`INSERT INTO ${sql(table)} ${sql.insert([{ id: 1 }, { id: 2 }, { id: 3 }])}`
      yield* sql<{ id: number }>`SELECT id FROM ${sql(table)} ORDER BY id`.stream.pipe(
        Stream.mapEffect((row) => sql`UPDATE ${sql(table)} SET seen = true WHERE id = ${row.id}`),
        Stream.runDrain,
        // Holding the session for the whole stream would deadlock here.
        Effect.timeout("5 seconds")
      )
      assert.deepStrictEqual(yield* sql`SELECT count(*)::int4 AS n FROM ${sql(table)} WHERE seen`, [{ n: 3 }])
    }))

  it.effect("exposes the raw PGlite instance", () =>
    Effect.gen(function*() {
      const { pglite, dataDir } = yield* PgliteClient.PgliteClient
      assert.isUndefined(dataDir)
      const result = yield* Effect.promise(() => pglite.query<{ one: number }>("SELECT 1 AS one"))
      assert.deepStrictEqual(result.rows, [{ one: 1 }])
    }))
})

describe("PgliteClient (data directory)", () => {
  it.effect("keeps data across closing and reopening the database, creating the directory", () =>
    Effect.gen(function*() {
      const root = yield* Effect.acquireRelease(
        Effect.promise(() => mkdtemp(join(tmpdir(), "spendgate-pglite-"))),
        (dir) => Effect.promise(() => rm(dir, { recursive: true, force: true }))
      )
      const dataDir = join(root, "nested", "db")

      yield* Effect.scoped(Effect.gen(function*() {
        const sql = yield* PgliteClient.make({ dataDir })
        yield* sql`CREATE TABLE kept (id int8 PRIMARY KEY, note text NOT NULL)`
        yield* sql.withTransaction(sql`INSERT INTO kept ${sql.insert({ id: 2n ** 60n, note: "survives" })}`)
      }))
      assert.isTrue((yield* Effect.promise(() => stat(dataDir))).isDirectory())

      const rows = yield* Effect.scoped(Effect.gen(function*() {
        const sql = yield* PgliteClient.make({ dataDir })
        return yield* sql`SELECT id, note FROM kept`
      }))
      assert.deepStrictEqual(rows, [{ id: 2n ** 60n, note: "survives" }])
    }).pipe(Effect.provide(Reactivity.layer)), { timeout: 60_000 })

  it.effect("fails with a SqlError after its scope has closed", () =>
    Effect.gen(function*() {
      const sql = yield* Effect.scoped(PgliteClient.make({}))
      const error = expectSqlError(yield* Effect.flip(sql`SELECT 1`))
      assert.strictEqual(error.reason._tag, "ConnectionError")
    }).pipe(Effect.provide(Reactivity.layer)))
})

// -----------------------------------------------------------------------------
// Parity with @effect/sql-pg on a real PostgreSQL server
// -----------------------------------------------------------------------------

/**
 * One scenario run unchanged on both drivers. Everything it returns must be
 * identical, value for value and type for type.
 */
const scenario = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const table = yield* scratchTable(
    "parity",
    `id int8 PRIMARY KEY,
     account text NOT NULL UNIQUE,
     balance int8 NOT NULL CHECK (balance >= 0),
     qty int4 NOT NULL,
     ratio float8,
     ratio4 float4,
     price numeric(12, 2),
     active bool NOT NULL,
     created_at timestamptz NOT NULL,
     local_at timestamp,
     day date,
     at_time time,
     span interval,
     meta jsonb,
     tags text[],
     payload bytea,
     ref uuid`
  )
  const created = new Date("2026-03-04T05:06:07.089Z")
  const records: Arr.NonEmptyReadonlyArray<Record<string, unknown>> = [
    {
      id: 1n,
      account: "alpha",
      balance: 2n ** 62n + 5n,
      qty: 3,
      ratio: 0.25,
      ratio4: 0.1,
      price: "12.30",
      active: true,
      created_at: created,
      local_at: "2026-03-04 05:06:07.123456",
      day: "2026-03-04",
      at_time: "12:34:56.5",
      span: "1 year 2 mons -3 days 04:05:06.789",
      meta: JSON.stringify({ limit: 10, nested: { ok: true } }),
      tags: ["a", "b,c"],
      payload: new Uint8Array([0, 1, 254, 255]),
      ref: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
    },
    {
      id: 2n,
      account: "beta",
      balance: 0n,
      qty: 0,
      ratio: null,
      ratio4: null,
      price: null,
      active: false,
      created_at: new Date("1999-12-31T23:59:59.999Z"),
      local_at: null,
      day: null,
      at_time: null,
      span: null,
      meta: null,
      tags: [],
      payload: null,
      ref: null
    },
    {
      id: 3n,
      account: "gamma",
      balance: 9_007_199_254_740_993n,
      qty: -7,
      ratio: 1e300,
      ratio4: 3.5,
      price: "-0.01",
      active: true,
      created_at: created,
      local_at: "1969-07-20 20:17:40",
      day: "1999-01-31",
      at_time: "00:00:00",
      span: "-00:00:01.5",
      meta: JSON.stringify(["x", 1, null]),
      tags: ["z"],
      payload: new Uint8Array([]),
      ref: "00000000-0000-0000-0000-000000000000"
    }
  ]
  const inserted = yield* sql`INSERT INTO ${sql(table)} ${sql.insert(records)} RETURNING id, account, created_at`

  const all = yield* sql`SELECT * FROM ${sql(table)} ORDER BY id`
  const filtered = yield* sql`SELECT id, account, balance FROM ${sql(table)} WHERE ${
    sql.and([sql.in("id", [1n, 2n, 3n]), sql.or([sql`balance > ${2n ** 53n}`, sql`account = ${"beta"}`])])
  } ORDER BY id`
  const aggregates = yield* sql`SELECT count(*) AS n, sum(balance) AS total, sum(qty) AS qty_total,
      avg(qty) AS qty_avg, max(created_at) AS latest, min(day) AS first_day, bool_and(active) AS all_active
    FROM ${sql(table)}`
  const expressions = yield* sql`SELECT ${1} AS int_param, ${1.5} AS float_param, ${2n ** 60n} AS big_param,
      ${"text"} AS text_param, ${true} AS bool_param, ${created} AS date_param, ${null}::int4 AS null_param,
      ${[1, 2, 3]}::int4[] AS array_param, ${"42"}::int8 AS cast_param, ${2 ** 40} AS safe_int_param`
  const updated = yield* sql`UPDATE ${sql(table)} SET ${
    sql.update({ qty: 10, ratio: 0.5 })
  } WHERE id = ${1n} RETURNING id, qty, ratio`
  const values = yield* sql`SELECT id, account FROM ${sql(table)} ORDER BY id`.values
  const streamed = yield* Stream.runCollect(sql`SELECT id, tags FROM ${sql(table)} ORDER BY id`.stream)

  const uniqueError = expectSqlError(
    yield* Effect.flip(sql`INSERT INTO ${sql(table)} ${sql.insert({ ...records[1], id: 4n })}`)
  )
  const checkError = expectSqlError(
    yield* Effect.flip(sql`UPDATE ${sql(table)} SET balance = ${-1n} WHERE id = ${1n}`)
  )
  const syntaxError = expectSqlError(yield* Effect.flip(sql`SELEC 1`))
  const errors = [uniqueError, checkError, syntaxError].map((error) => ({
    tag: error.reason._tag,
    code: PgliteClient.sqlState(error),
    // Constraint names embed the per-run table name.
    constraint: (error.reason.cause as { constraint?: string }).constraint?.replace(table, "<table>")
  }))

  const rolledBack = yield* Effect.flip(sql.withTransaction(
    Effect.andThen(sql`DELETE FROM ${sql(table)} WHERE id = ${3n}`, Effect.fail("rollback" as const))
  ))
  yield* sql.withTransaction(Effect.gen(function*() {
    yield* sql`UPDATE ${sql(table)} SET qty = qty + 1 WHERE id = ${2n}`
    yield* Effect.ignore(sql.withTransaction(
      Effect.andThen(sql`UPDATE ${sql(table)} SET qty = qty + 100 WHERE id = ${2n}`, Effect.fail("inner" as const))
    ))
  }))
  const afterTransactions = yield* sql`SELECT id, qty FROM ${sql(table)} ORDER BY id`
  const abortedCommit = yield* Effect.flip(sql.withTransaction(
    Effect.ignore(sql`UPDATE ${sql(table)} SET balance = ${-1n} WHERE id = ${1n}`)
  ))

  return {
    inserted,
    all,
    filtered,
    aggregates,
    expressions,
    updated,
    values,
    streamed,
    errors,
    rolledBack,
    afterTransactions,
    abortedCommit: { isSqlError: SqlError.isSqlError(abortedCommit) }
  }
})

/** The JavaScript type of every column of every row, e.g. `bigint`, `Date`, `Uint8Array`. */
const shape = (rows: ReadonlyArray<Record<string, unknown>>) =>
  rows.map((row) =>
    Object.fromEntries(
      Object.entries(row).map(([key, value]) => [
        key,
        value === null ? "null" : typeof value === "object" ? value.constructor.name : typeof value
      ])
    )
  )

describe("PgliteClient parity with @effect/sql-pg", () => {
  it.effect("the same statements give identical rows, types and errors on PGlite and PostgreSQL", () =>
    Effect.gen(function*() {
      // Scoped inside `provide`, so the scratch table is dropped while the client is still open.
      const onPostgres = yield* Effect.provide(
        Effect.scoped(scenario),
        PgClient.layer({ url: Redacted.make(POSTGRES_URL), maxConnections: 4 })
      )
      const onPglite = yield* Effect.provide(Effect.scoped(scenario), PgliteClient.layer({}))

      assert.deepStrictEqual(shape(onPglite.all), shape(onPostgres.all))
      assert.deepStrictEqual(shape(onPglite.aggregates), shape(onPostgres.aggregates))
      assert.deepStrictEqual(shape(onPglite.expressions), shape(onPostgres.expressions))
      assert.deepStrictEqual(onPglite, onPostgres)

      // Pin the shared result, so that agreement on something unexpected fails too.
      const first = onPglite.all[0]!
      assert.deepStrictEqual(shape([first])[0], {
        id: "bigint",
        account: "string",
        balance: "bigint",
        qty: "number",
        ratio: "number",
        ratio4: "number",
        price: "string",
        active: "boolean",
        created_at: "Date",
        local_at: "Date",
        day: "string",
        at_time: "bigint",
        span: "Object",
        meta: "Object",
        tags: "Array",
        payload: "Uint8Array",
        ref: "string"
      })
      assert.strictEqual(first["balance"], 2n ** 62n + 5n)
      assert.strictEqual(first["ratio4"], Math.fround(0.1))
      assert.deepStrictEqual(first["created_at"], new Date("2026-03-04T05:06:07.089Z"))
      assert.deepStrictEqual(first["local_at"], new Date("2026-03-04T05:06:07.123Z"))
      assert.strictEqual(first["at_time"], 45_296_500_000n)
      assert.deepStrictEqual(first["span"], { months: 14, days: -3, microseconds: 14_706_789_000n })
      assert.deepStrictEqual(first["meta"], { limit: 10, nested: { ok: true } })
      assert.deepStrictEqual(onPglite.aggregates, [{
        n: 3n,
        total: String(2n ** 62n + 5n + 9_007_199_254_740_993n),
        qty_total: -4n,
        qty_avg: "-1.3333333333333333",
        latest: new Date("2026-03-04T05:06:07.089Z"),
        first_day: "1999-01-31",
        all_active: false
      }])
      assert.deepStrictEqual(onPglite.filtered.map((row) => row["id"]), [1n, 2n, 3n])
      assert.deepStrictEqual(onPglite.errors, [
        { tag: "UniqueViolation", code: "23505", constraint: "<table>_account_key" },
        { tag: "ConstraintError", code: "23514", constraint: "<table>_balance_check" },
        { tag: "SqlSyntaxError", code: "42601", constraint: undefined }
      ])
      assert.strictEqual(onPglite.rolledBack, "rollback")
      assert.deepStrictEqual(onPglite.afterTransactions, [{ id: 1n, qty: 10 }, { id: 2n, qty: 1 }, { id: 3n, qty: -7 }])
      assert.deepStrictEqual(onPglite.abortedCommit, { isSqlError: true })
    }), { timeout: 60_000 })
})
