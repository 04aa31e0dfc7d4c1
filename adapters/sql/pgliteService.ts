import type { PGlite } from "@electric-sql/pglite"
import { Context } from "effect"

/**
 * The raw PGlite instance behind the layer's `SqlClient`.
 *
 * Work done directly on `pglite` bypasses the client's serialisation: it can
 * land inside another fiber's open transaction. Use it for things `SqlClient`
 * cannot do (dumping the data directory, extensions, diagnostics), while no
 * transaction is running, or after `yield* sql.reserve` in a scope, which
 * holds the session for that scope.
 *
 * In a module of its own, which loads nothing of PGlite, so that code that
 * only asks whether it runs on PGlite (poolStats.ts) does not load PGlite on
 * PostgreSQL; PgliteClient.ts exports it too.
 *
 * @since 0.1.0
 */
export class PgliteClient extends Context.Service<PgliteClient, {
  readonly pglite: PGlite
  readonly dataDir: string | undefined
}>()("spendgate/adapters/sql/PgliteClient") {}
