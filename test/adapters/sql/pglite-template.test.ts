import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as PgliteClient from "../../../adapters/sql/PgliteClient.ts"
import { isNewDataDir, makeTemplate, templateFile } from "../../../adapters/sql/pgliteTemplate.ts"
import { migrations } from "../../../adapters/sql/migrations.ts"

/**
 * The template new embedded databases start from (adapters/sql/pgliteTemplate.ts):
 * made once (here into a folder of the test's own), it gives a new data
 * directory the migrated database before the migrator runs, and is never
 * used for a directory that already holds a database.
 */
describe("the PGlite template", () => {
  const root = mkdtempSync(join(tmpdir(), "spendgate-template-"))
  const saved = process.env["SPENDGATE_CACHE_DIR"]

  beforeAll(() => {
    process.env["SPENDGATE_CACHE_DIR"] = join(root, "cache")
  })
  afterAll(() => {
    if (saved === undefined) delete process.env["SPENDGATE_CACHE_DIR"]
    else process.env["SPENDGATE_CACHE_DIR"] = saved
    rmSync(root, { recursive: true, force: true })
  })

  /** Opens `dataDir` with PgliteClient alone (no migrator) and runs `query`. */
  const open = <A>(dataDir: string, query: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
    Effect.runPromise(Effect.gen(function*() {
      return yield* query(yield* SqlClient.SqlClient)
    }).pipe(Effect.provide(PgliteClient.layer({ dataDir }) as Layer.Layer<SqlClient.SqlClient, unknown>), Effect.scoped))

  const latestApplied = (sql: SqlClient.SqlClient) =>
    sql<{ name: string }>`SELECT name FROM spendgate_migrations ORDER BY migration_id DESC LIMIT 1`.pipe(
      Effect.map((rows) => rows[0]?.name ?? null),
      Effect.catch(() => Effect.succeed(null))
    )

  it("is named after the PGlite version and the latest migration, and made where SPENDGATE_CACHE_DIR says", async () => {
    const file = templateFile()!
    const latest = Object.keys(migrations).sort().at(-1)!
    expect(file.startsWith(join(root, "cache"))).toBe(true)
    expect(file).toMatch(new RegExp(`pglite-\\d+\\.\\d+\\.\\d+-${latest}-[0-9a-f]{12}\\.tar\\.gz$`))
    expect(existsSync(file)).toBe(false)
    const fresh = join(root, "before")
    // Without a template a new directory is made by initdb: no migration is applied yet, and
    // initdb's template databases are there.
    expect(await open(fresh, latestApplied)).toBeNull()
    const databases = await open(fresh, (sql) => sql<{ datname: string }>`SELECT datname FROM pg_database ORDER BY datname`)
    expect(databases.map((row) => row.datname)).toEqual(["postgres", "template0", "template1"])
    expect(await makeTemplate()).toBe(file)
    expect(existsSync(file)).toBe(true)
  }, 60_000)

  it("a new data directory starts as the migrated database; one that holds a database is left as it is", async () => {
    const dataDir = join(root, "new")
    expect(isNewDataDir(dataDir)).toBe(true)
    const latest = Object.keys(migrations).sort().at(-1)!
    expect(await open(dataDir, latestApplied)).toBe(latest.slice(5))
    expect(isNewDataDir(dataDir)).toBe(false)
    // The one database PGlite opens: initdb's template0 and template1 were dropped from the template.
    const databases = await open(dataDir, (sql) => sql<{ datname: string }>`SELECT datname FROM pg_database ORDER BY datname`)
    expect(databases.map((row) => row.datname)).toEqual(["postgres"])
    expect(readdirSync(join(dataDir, "base"))).toHaveLength(1)
    await open(dataDir, (sql) => sql`CREATE TABLE kept_row (note text)`.pipe(Effect.andThen(sql`INSERT INTO kept_row VALUES ('mine')`)))
    const notes = await open(dataDir, (sql) => sql<{ note: string }>`SELECT note FROM kept_row`)
    expect(notes.map((row) => row.note)).toEqual(["mine"])
  }, 60_000)

  it("a damaged template: a new directory is made by initdb as before, and the template can be made again", async () => {
    const file = templateFile()!
    await writeFile(file, Buffer.from("not a PGlite data directory"))
    const dataDir = join(root, "damaged")
    expect(await open(dataDir, latestApplied)).toBeNull()
    expect(isNewDataDir(dataDir)).toBe(false)
    // Made again without opening the damaged one; new directories are migrated again.
    expect(await makeTemplate()).toBe(file)
    const latest = Object.keys(migrations).sort().at(-1)!
    expect(await open(join(root, "after"), latestApplied)).toBe(latest.slice(5))
  }, 90_000)
})
