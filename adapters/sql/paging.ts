import { Effect } from "effect"
import type { SqlClient, SqlError, Statement } from "effect/sql"
import type { Page } from "../../src/ports/Store.ts"

/**
 * The listings' order: newest first; ids are time-sortable and compared as
 * bytes (`COLLATE "C"`), so rows created in the same millisecond keep their
 * creation order whatever the database's collation.
 */
export const NEWEST_FIRST = `created_at DESC, id COLLATE "C" DESC`

/** The window column carrying the filter's row count on every row of the page; not a column of any table. */
const TOTAL_COLUMN = "spendgate_paging_total"

type Counted = { readonly [TOTAL_COLUMN]?: bigint | string | number }

/**
 * One page of `table` filtered by `where`, in `order`, with the number of
 * rows the filter matches. `table` and `order` come from the code, never
 * from input.
 *
 * The page and its total come from ONE statement (`count(*) OVER ()` is
 * computed over the filtered rows before LIMIT/OFFSET), so they describe the
 * same snapshot even while rows are written concurrently. Only an empty page
 * past the first has no row to carry the total; then it is counted on its own
 * (an empty first page means the total is 0).
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
    const rows = yield* sql<Row & Counted>`
      SELECT *, count(*) OVER () AS ${sql(TOTAL_COLUMN)} FROM ${sql(table)} WHERE ${where}
      ORDER BY ${sql.literal(order)} LIMIT ${page.limit} OFFSET ${page.offset}`
    const first = rows[0]
    if (first !== undefined) {
      return {
        items: rows.map((row) => {
          const { [TOTAL_COLUMN]: _total, ...rest } = row
          return map(rest as unknown as Row)
        }),
        total: Number(first[TOTAL_COLUMN] ?? 0)
      }
    }
    if (page.offset === 0) return { items: [], total: 0 }
    const [count] = yield* sql<{ n: bigint | string | number }>`SELECT count(*) AS n FROM ${sql(table)} WHERE ${where}`
    return { items: [], total: Number(count?.n ?? 0) }
  })
