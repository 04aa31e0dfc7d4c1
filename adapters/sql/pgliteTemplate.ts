import { existsSync, readFileSync } from "node:fs"
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { migrations } from "./migrations.ts"

/**
 * A template for new PGlite databases: a data directory as `initdb` and the
 * project's migrations leave it, packed by PGlite (`dumpDataDir`). Opening a
 * new database from it takes about a third of the time `initdb` alone takes
 * inside WebAssembly (0.8 s against 2.3 s on the development machine), and
 * the migrations are already applied: most of a first start on the embedded
 * database.
 *
 * It is made once, outside the server (`npm install` runs
 * `scripts/pglite-template.mjs` through the `prepare` script), and kept in the
 * nearest `node_modules/.cache/spendgate/`, named after the PGlite version
 * (a data directory belongs to the PGlite build that wrote it) and the latest
 * migration (a checkout with other migrations makes and uses its own).
 * Without it a new database is made by `initdb` and migrated as before; the
 * template is only ever used for a directory that holds no database yet, and
 * the migrator still runs over it (finding nothing left to apply).
 */

const PGLITE_PACKAGE = "@electric-sql/pglite"

/** The installed PGlite's version, read from its package.json (its exports do not include that file). */
const pgliteVersion = (): string | undefined => {
  try {
    let dir = dirname(fileURLToPath(import.meta.resolve(`${PGLITE_PACKAGE}/pglite.wasm`)))
    for (let i = 0; i < 6; i++) {
      const candidate = join(dir, "package.json")
      if (existsSync(candidate)) {
        const parsed = JSON.parse(readFileSync(candidate, "utf8")) as { name?: unknown; version?: unknown }
        if (parsed.name === PGLITE_PACKAGE && typeof parsed.version === "string") return parsed.version
      }
      dir = dirname(dir)
    }
  } catch {
    // Not resolvable: no template.
  }
  return undefined
}

/** The nearest `node_modules` above this module, where caches conventionally live. */
const nearestNodeModules = (): string | undefined => {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (;;) {
    const candidate = join(dir, "node_modules")
    if (existsSync(candidate)) return candidate
    const parent = dirname(dir)
    if (parent === dir) return undefined
    dir = parent
  }
}

/** Where the template of the installed PGlite lives (SPENDGATE_CACHE_DIR overrides the folder); undefined when there is no place. */
export const templateFile = (): string | undefined => {
  const version = pgliteVersion()
  if (version === undefined) return undefined
  const folder = process.env["SPENDGATE_CACHE_DIR"] ?? (() => {
    const modules = nearestNodeModules()
    return modules === undefined ? undefined : join(modules, ".cache", "spendgate")
  })()
  const latest = Object.keys(migrations).sort().at(-1) ?? "none"
  return folder === undefined ? undefined : join(folder, `pglite-${version}-${latest}.tar.gz`)
}

/** Whether `dataDir` holds no database yet (PostgreSQL's PG_VERSION marks one). */
export const isNewDataDir = (dataDir: string): boolean => !existsSync(join(dataDir, "PG_VERSION"))

/** The template, when one was made for the installed PGlite. */
export const loadTemplate = async (): Promise<Blob | undefined> => {
  const file = templateFile()
  if (file === undefined || !existsSync(file)) return undefined
  try {
    return new Blob([await readFile(file)])
  } catch {
    return undefined
  }
}

/** Makes the template (a fresh in-memory database, migrated, packed); answers where it was written. */
export const makeTemplate = async (): Promise<string> => {
  const file = templateFile()
  if (file === undefined) throw new Error("no place for the PGlite template (no node_modules folder, no SPENDGATE_CACHE_DIR)")
  const { Effect } = await import("effect")
  const { Migrator } = await import("effect/sql")
  const PgliteClient = await import("./PgliteClient.ts")
  const packed = await Effect.runPromise(
    Effect.gen(function*() {
      const { pglite } = yield* PgliteClient.PgliteClient
      yield* Migrator.make({})({ loader: Migrator.fromRecord(migrations), table: "spendgate_migrations" })
      return yield* Effect.promise(async () => Buffer.from(await (await pglite.dumpDataDir("gzip")).arrayBuffer()))
    }).pipe(Effect.provide(PgliteClient.layer({ dataDir: undefined })), Effect.scoped)
  )
  await mkdir(dirname(file), { recursive: true })
  // Written aside, then renamed: a reader never sees half a file.
  const partial = `${file}.${process.pid}.partial`
  await writeFile(partial, packed)
  await rename(partial, file).catch(async (error) => {
    await rm(partial, { force: true })
    throw error
  })
  return file
}
