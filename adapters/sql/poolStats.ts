import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { DatabasePool, type PoolReading } from "./DatabasePool.ts"
import { PgliteClient } from "./pgliteService.ts"

/**
 * The database connections of this process, for GET /metrics.
 *
 * - PostgreSQL: the pool's upper bound (its `maxConnections`), and the
 *   connections it holds open by state, read at each scrape from
 *   `pg_stat_activity`: the sessions of this database whose
 *   `application_name` is this pool's (the server names its pool
 *   `spendgate-<random>` unless DATABASE_URL sets `application_name`; with a
 *   name shared by several processes the count covers them all). The
 *   connection that reads it counts as one `active`. The driver does not
 *   expose its queue, so requests waiting for a connection are not counted.
 * - PGlite: one connection, in process, always open.
 */

/** The states of `pg_stat_activity`, as label values. */
const stateLabel = (state: string | null): string =>
  state === null ? "unknown" : state.replace(/[^a-z]+/gi, "_").replace(/^_+|_+$/g, "").toLowerCase()

/** A scrape never waits longer than this for a connection to read the states. */
const READ_TIMEOUT_MS = 2_000

/** {@link DatabasePool} over the SqlClient in context: PostgreSQL's pool, or PGlite's one connection. */
export const layer: Layer.Layer<never, never, SqlClient.SqlClient> = Layer.effect(
  DatabasePool,
  Effect.gen(function*() {
    const pglite = yield* Effect.serviceOption(PgliteClient)
    if (Option.isSome(pglite)) {
      return {
        read: Effect.succeed<PoolReading>({ driver: "pglite", max: 1, connections: { open: 1 } })
      }
    }
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    if (Option.isNone(pg)) return undefined
    const max = (pg.value.config as { readonly maxConnections?: number }).maxConnections ?? 10
    const sql = yield* SqlClient.SqlClient
    const read = sql<{ readonly state: string | null; readonly n: number }>`
      SELECT state, count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database()
        AND application_name = current_setting('application_name')
        AND backend_type = 'client backend'
      GROUP BY state`.pipe(
      Effect.map((rows): PoolReading => {
        const connections: Record<string, number> = { active: 0, idle: 0, idle_in_transaction: 0 }
        for (const row of rows) {
          const label = stateLabel(row.state)
          connections[label] = (connections[label] ?? 0) + Number(row.n)
        }
        return { driver: "postgresql", max, connections }
      }),
      Effect.timeoutOption(READ_TIMEOUT_MS),
      Effect.map(Option.getOrUndefined),
      Effect.catchCause(() => Effect.succeed(undefined))
    )
    return { read }
  })
)
