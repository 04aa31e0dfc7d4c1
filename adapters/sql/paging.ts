import { Effect } from "effect"
import type { SqlClient, SqlError, Statement } from "effect/sql"
import type { Page } from "../../src/ports/Store.ts"

/**
 * The listings' order: newest first; ids are time-sortable and compared as
 * bytes (`COLLATE "C"`), so rows created in the same millisecond keep their
 * creation order whatever the database's collation.
 */
export const NEWEST_FIRST = `created_at DESC, id COLLATE "C" DESC`

/**
 * One page of `table` filtered by `where`, in `order`, with the number of
 * rows the filter matches. `table` and `order` come from the code, never
 * from input.
 */
export const paged = <Row extends object, A>(
  sql: SqlClient.SqlClient,
  table: string,
  where: Statement.Fragment,
  map: (row: Row) => A,
  page: { readonly limit: number; readonly offset: number },
  order: string = NEWEST_FIRST
): Effect.Effect<Page<A>, SqlError.SqlError> =>
  Effect.gen(function*() {
    const rows = yield* sql<Row>`
      SELECT * FROM ${sql(table)} WHERE ${where}
      ORDER BY ${sql.literal(order)} LIMIT ${page.limit} OFFSET ${page.offset}`
    const [count] = yield* sql<{ n: bigint | string | number }>`SELECT count(*) AS n FROM ${sql(table)} WHERE ${where}`
    return { items: rows.map(map), total: Number(count?.n ?? 0) }
  })
