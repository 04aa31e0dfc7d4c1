import { Cause, Config, Effect, Option } from "effect"
import { Migrator } from "effect/sql"
import { describeStorage, sqlClientLayer } from "../sql/Database.ts"
import { migrations } from "../sql/migrations.ts"
import { CliFailure, EXIT_REFUSED, EXIT_USAGE } from "./client.ts"

/**
 * `spendgate migrate`: opens the storage the server would open (DATABASE_URL,
 * else embedded PGlite in DATA_DIR, default ./data), brings its schema up to
 * date with the same migrations, and closes it. With PGlite it takes the data
 * directory's lock, so it refuses to run beside a server using it.
 */
export interface MigrateResult {
  readonly storage: string
  readonly applied: ReadonlyArray<{ readonly id: number; readonly name: string }>
  readonly latest: number
}

const storageConfig = Config.all({
  databaseUrl: Config.option(Config.Redacted("DATABASE_URL")),
  dataDir: Config.NonEmptyString("DATA_DIR").pipe(Config.withDefault("./data"))
})

export const migrate: Effect.Effect<MigrateResult, CliFailure> = Effect.gen(function*() {
  const options = yield* storageConfig.pipe(
    Effect.mapError((error) => new CliFailure({ message: `bad storage settings: ${error.message}`, exitCode: EXIT_USAGE }))
  )
  const storage = describeStorage(options)
  const applied = yield* Migrator.make({})({ loader: Migrator.fromRecord(migrations), table: "spendgate_migrations" }).pipe(
    // Without the PGlite template: a new directory gets every migration from here, listed.
    Effect.provide(sqlClientLayer({ ...options, pgliteTemplate: false })),
    Effect.catchCause((cause) => {
      const error = Cause.squash(cause)
      const message = typeof error === "object" && error !== null && "message" in error && typeof error.message === "string" && error.message !== ""
        ? error.message
        : String(error)
      return Effect.fail(new CliFailure({ message: `migrating ${storage} failed: ${message}`, exitCode: EXIT_REFUSED }))
    })
  )
  const ids = Object.keys(migrations).map((key) => Number(key.split("_")[0]))
  return {
    storage: Option.isSome(options.databaseUrl) ? "postgresql" : storage,
    applied: applied.map(([id, name]) => ({ id, name })),
    latest: Math.max(0, ...ids)
  }
})
