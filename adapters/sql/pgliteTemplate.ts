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

/**
 * A digest of the migrations' source (migrations.ts, or migrations.js in a
 * build): a migration edited under the same id names another template.
 */
const migrationsDigest = (): string => {
  try {
    const own = fileURLToPath(import.meta.url)
    const source = readFileSync(join(dirname(own), `migrations${extname(own)}`))
    return createHash("sha256").update(source).digest("hex").slice(0, 12)
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
