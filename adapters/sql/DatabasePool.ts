import { Context, type Effect } from "effect"

/**
 * What GET /metrics reads of the database connections (the reader is
 * adapters/sql/poolStats.ts, provided with the SQL store). A module of its
 * own, free of any driver, so the HTTP adapter can read it without loading one.
 */

export type Driver = "postgresql" | "pglite"

export interface PoolReading {
  readonly driver: Driver
  /** The most connections the pool opens. */
  readonly max: number
  /** Open connections by state (`active`, `idle`, `idle_in_transaction`, …; PGlite: `open`). */
  readonly connections: Readonly<Record<string, number>>
}

export interface PoolStatsReader {
  readonly read: Effect.Effect<PoolReading | undefined>
}

/** How the metrics route reads the pool; absent (undefined) over a store without a database. */
export const DatabasePool = Context.Reference<PoolStatsReader | undefined>("spendgate/sql/DatabasePool", {
  defaultValue: () => undefined
})

