import { createHash, randomBytes } from "node:crypto"
import { existsSync, readFileSync } from "node:fs"
import { mkdir, open, readdir, readFile, rename, rm } from "node:fs/promises"
import { dirname, extname, join } from "node:path"
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
 * (a data directory belongs to the PGlite build that wrote it), the latest
 * migration and a digest of the migrations and the template's format (a
 * checkout with other migrations makes and uses its own). It holds the one
 * database PGlite opens, `postgres`: initdb's template0 and template1 are
 * dropped before it is packed.
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

/**
 * What the template holds beyond the migrated database, as a word that goes
 * into its name's digest: a template made by an earlier version of this
 * module (which kept PostgreSQL's template0 and template1) is not used.
 */
const TEMPLATE_FORMAT = "one database: template0 and template1 dropped"

/**
 * A digest of the migrations' source (migrations.ts, or migrations.js in a
 * build) and of the template's format: a migration edited under the same id,
 * or a template of another format, names another template.
 */
const migrationsDigest = (): string => {
  try {
    const own = fileURLToPath(import.meta.url)
    const source = readFileSync(join(dirname(own), `migrations${extname(own)}`))
    return createHash("sha256").update(source).update(TEMPLATE_FORMAT).digest("hex").slice(0, 12)
  } catch {
    return "unknown"
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
  return folder === undefined ? undefined : join(folder, `pglite-${version}-${latest}-${migrationsDigest()}.tar.gz`)
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

/** One statement each: DROP DATABASE cannot run inside a transaction block. */
const DROP_TEMPLATE_DATABASES = [
  "ALTER DATABASE template0 WITH ALLOW_CONNECTIONS false IS_TEMPLATE false",
  "DROP DATABASE template0",
  "ALTER DATABASE template1 WITH IS_TEMPLATE false",
  "DROP DATABASE template1",
  "CHECKPOINT"
] as const

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
      // PGlite opens the database named "postgres" and never another: initdb's template0 and
      // template1 (two thirds of the directory's files) would only be unpacked at every new
      // directory's first start and then lie unused. Dropped here, the template holds about half
      // the files and bytes (docs/performance.md, "PGlite, one database in the template"). A directory made by
      // initdb, without the template, keeps them; either opens the same.
      yield* Effect.promise(async () => {
        for (const statement of DROP_TEMPLATE_DATABASES) await pglite.query(statement)
      })
      return yield* Effect.promise(async () => Buffer.from(await (await pglite.dumpDataDir("gzip")).arrayBuffer()))
    }).pipe(Effect.provide(PgliteClient.layer({ dataDir: undefined, template: false })), Effect.scoped)
  )
  await mkdir(dirname(file), { recursive: true })
  // Written aside under a name no other writer uses, flushed, then renamed: a reader never
  // sees half a file, even after a crash.
  const partial = `${file}.${randomBytes(8).toString("hex")}.partial`
  const handle = await open(partial, "wx")
  try {
    await handle.writeFile(packed)
    await handle.sync()
  } finally {
    await handle.close()
  }
  await rename(partial, file).catch(async (error) => {
    await rm(partial, { force: true })
    throw error
  })
  return file
}

/**
 * Empties a directory a failed open from the template left behind (it held no
 * database before), keeping the directory's lock file, so that initdb can run.
 */
export const clearFailedStart = async (dataDir: string, keep: ReadonlyArray<string>): Promise<void> => {
  for (const entry of await readdir(dataDir)) {
    if (!keep.includes(entry)) await rm(join(dataDir, entry), { recursive: true, force: true })
  }
}
