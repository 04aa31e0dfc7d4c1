import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted, type Scope } from "effect"
import { Reactivity } from "effect/reactivity"
import type { SqlClient } from "effect/sql"

/**
 * A fresh PostgreSQL database per test file on the local server
 * (POSTGRES_URL, default postgres://postgres@127.0.0.1:5432), dropped again
 * when the layer is released. CI makes sure the server runs.
 */
export const POSTGRES_ADMIN_URL = process.env["POSTGRES_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres"

const withDatabase = (url: string, database: string) => {
  const parsed = new URL(url)
  parsed.pathname = `/${database}`
  return parsed.toString()
}

const admin = (statement: string) =>
  Effect.scoped(
    Effect.gen(function*() {
      const sql = yield* PgClient.make({ url: Redacted.make(POSTGRES_ADMIN_URL), maxConnections: 1 })
      yield* sql.unsafe(statement)
    }).pipe(Effect.provide(Reactivity.layer))
  )

export const freshDatabaseUrl: Effect.Effect<string, unknown, Scope.Scope> = Effect.gen(function*() {
  const name = `spendgate_test_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`
  yield* Effect.acquireRelease(
    admin(`CREATE DATABASE ${name}`),
    () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).pipe(Effect.ignore)
  )
  return withDatabase(POSTGRES_ADMIN_URL, name)
})

/** SqlClient over a brand-new PostgreSQL database. */
export const freshPostgresLayer = (maxConnections = 10): Layer.Layer<SqlClient.SqlClient, unknown> =>
  Layer.unwrap(
    Effect.map(freshDatabaseUrl, (url) => PgClient.layer({ url: Redacted.make(url), maxConnections }))
  )
