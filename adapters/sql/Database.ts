import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { Migrator, SqlClient } from "effect/sql"
import type { IdempotencyStore } from "../../src/ports/IdempotencyStore.ts"
import type { L402PaymentStore } from "../../src/ports/L402PaymentStore.ts"
import type { AdminStore } from "../../src/ports/AdminStore.ts"
import type { RegistryStore } from "../../src/ports/RegistryStore.ts"
import type { Store } from "../../src/ports/Store.ts"
import { type CacheMode, readCacheLayer } from "./cacheFeed.ts"
import { migrations } from "./migrations.ts"
import type { ReadCache } from "./ReadCache.ts"
import * as PoolStats from "./poolStats.ts"
import type { L402Store } from "../../src/ports/L402Store.ts"
import * as SqlL402Store from "./SqlL402Store.ts"
import * as SqlIdempotencyStore from "./SqlIdempotencyStore.ts"
import * as SqlL402PaymentStore from "./SqlL402PaymentStore.ts"
import * as SqlAdminStore from "./SqlAdminStore.ts"
import * as SqlRegistryStore from "./SqlRegistryStore.ts"
import * as SqlStore from "./SqlStore.ts"

/**
 * Storage selection: a PostgreSQL server when a URL is given, embedded PGlite
 * otherwise (kept in `dataDir`, or in memory when that is undefined). The
 * same migrations and queries run on both.
 */
export interface DatabaseOptions {
  readonly databaseUrl: Option.Option<Redacted.Redacted<string>>
  readonly dataDir: string | undefined
  /** Upper bound of pooled connections to PostgreSQL. */
  readonly maxConnections?: number
  /** PGlite: whether a new database opens from the install-time template (default true; see pgliteTemplate.ts). */
  readonly pgliteTemplate?: boolean
}

const runMigrations = Layer.effectDiscard(
  Migrator.make({})({ loader: Migrator.fromRecord(migrations), table: "spendgate_migrations" })
)

const hasApplicationName = (url: string): boolean => {
  try {
    return new URL(url).searchParams.has("application_name")
  } catch {
    return false
  }
}

/**
 * This process's pool, as `pg_stat_activity` shows it (unless DATABASE_URL
 * names one): `spendgate-<8 hex>`, so the pool metrics (poolStats.ts) count
 * this process's connections and not those of others on the same database.
 */
const poolApplicationName = (): string => `spendgate-${randomUUID().slice(0, 8)}`

export const sqlClientLayer = (options: DatabaseOptions): Layer.Layer<SqlClient.SqlClient, unknown> =>
  Option.match(options.databaseUrl, {
    onSome: (url) =>
      PgClient.layer({
        url,
        maxConnections: options.maxConnections ?? 10,
        ...(hasApplicationName(Redacted.value(url)) ? {} : { applicationName: poolApplicationName() })
      }),
    // Loaded only when used: a server on PostgreSQL never loads PGlite.
    onNone: () =>
      Layer.unwrap(
        Effect.map(
          Effect.promise(() => import("./PgliteClient.ts")),
          (PgliteClient) => PgliteClient.layer({ dataDir: options.dataDir, template: options.pgliteTemplate })
        )
      )
  })

export interface StoreOptions extends SqlStore.SqlStoreOptions {
  /**
   * How the read cache (ReadCache.ts) learns of changes; default `auto`:
   * PostgreSQL notifications when the client is a PgClient, in-process
   * invalidation alone on PGlite.
   */
  readonly cache?: CacheMode | undefined
}

/**
 * A migrated SQL store (and idempotency-key store) over an already provided
 * SqlClient; its read cache is in the context too (for its statistics).
 */
export const storeOverClientWith = (options: StoreOptions = {}): Layer.Layer<
  Store | AdminStore | IdempotencyStore | RegistryStore | L402Store | L402PaymentStore | ReadCache,
  unknown,
  SqlClient.SqlClient
> =>
  Layer.mergeAll(
    SqlStore.layerWith(options),
    SqlL402Store.layer,
    SqlL402PaymentStore.layer,
    SqlRegistryStore.layer,
    SqlAdminStore.layer,
    SqlIdempotencyStore.layer,
    // What GET /metrics reports of the connections (spendgate_db_*).
    PoolStats.layer
  ).pipe(
    Layer.provideMerge(readCacheLayer(options.cache)),
    Layer.provide(runMigrations)
  )

/** `storeOverClientWith()`: the read cache as `auto` chooses. */
export const storeOverClient: Layer.Layer<
  Store | AdminStore | IdempotencyStore | RegistryStore | L402Store | L402PaymentStore | ReadCache,
  unknown,
  SqlClient.SqlClient
> = storeOverClientWith()

export const storeLayer = (
  options: DatabaseOptions,
  storeOptions: StoreOptions = {}
): Layer.Layer<Store | AdminStore | IdempotencyStore | RegistryStore | L402Store | L402PaymentStore, unknown> =>
  storeOverClientWith(storeOptions).pipe(Layer.provide(sqlClientLayer(options)))

/** Lets callers fail fast with a clear message when storage cannot be opened. */
export const describeStorage = (options: DatabaseOptions): string =>
  Option.isSome(options.databaseUrl) ? "PostgreSQL (DATABASE_URL)" : `embedded PGlite in ${options.dataDir ?? "memory"}`

