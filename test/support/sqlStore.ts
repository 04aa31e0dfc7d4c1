import { Layer, ManagedRuntime } from "effect"
import type { SqlClient } from "effect/sql"
import { storeOverClientWith, type StoreOptions } from "../../adapters/sql/Database.ts"
import { testLayer } from "../wallet/ledger.contract.ts"

/**
 * The ledger's test layer (`testLayer`) over a migrated SQL store with these options, on a
 * backend's client layer (PGlite or a fresh PostgreSQL database). The caller disposes of it.
 */
export const sqlStoreRuntime = (options: StoreOptions, client: () => unknown) =>
  ManagedRuntime.make(
    Layer.provideMerge(testLayer(storeOverClientWith(options)), client() as Layer.Layer<SqlClient.SqlClient, unknown>)
  )
