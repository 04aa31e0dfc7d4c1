import { Command } from "effect/cli"
import { Effect } from "effect"
import { emit, jsonFlag, lazy } from "../client.ts"

/** `spendgate migrate`: bring the database's schema up to date and exit. */
export const migrate = Command.make("migrate", { json: jsonFlag }, ({ json }) =>
  lazy(() => import("../migrate.ts"), (module) =>
    Effect.flatMap(module.migrate, (result) =>
      emit(json, result, () =>
        result.applied.length === 0
          ? `${result.storage}: up to date (schema ${result.latest})`
          : `${result.storage}: applied ${result.applied.map((m) => `${m.id}_${m.name}`).join(", ")} (schema ${result.latest})`)))
).pipe(
  Command.withDescription(
    "Run the database migrations on DATABASE_URL, else the embedded database in DATA_DIR (default ./data), and exit"
  )
)
