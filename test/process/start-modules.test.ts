import { Effect, Exit, Scope } from "effect"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freshDatabaseUrl } from "../support/postgres.ts"
import { startServerProcess } from "../support/server-process.ts"

/**
 * What `npm start` (bin/spendgate.js serve) loads to serve on PostgreSQL:
 * the server, not what it does not use. Each of the modules below costs
 * resident memory for the life of the process (docs/performance.md, "What it
 * loads"); each is loaded on use, so a start that loads one is a regression.
 * The start is run twice with its own compile cache (a private TMPDIR), as a
 * restart runs: the second start has every module's stripped JavaScript in
 * the cache, so Node's TypeScript stripper is not loaded at all. These are
 * the sources' starts (SPENDGATE_BUNDLE=off); the bundle's start is held to
 * the same list in test/process/server-bundle.test.ts.
 */

const root = join(import.meta.dirname, "..", "..")
const recorder = pathToFileURL(join(import.meta.dirname, "..", "support", "module-recorder.mjs")).href

interface ModuleRecord {
  readonly loaded: ReadonlyArray<string>
  readonly internal: ReadonlyArray<string>
}

let scope: Scope.Closeable
let databaseUrl: string
const dirs: Array<string> = []
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  dirs.push(dir)
  return dir
}

beforeAll(async () => {
  scope = Effect.runSync(Scope.make())
  databaseUrl = await Effect.runPromise(Scope.provide(scope)(freshDatabaseUrl))
})
afterAll(async () => {
  await Effect.runPromise(Scope.close(scope, Exit.void))
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

/** `npm start`'s command with the recorder preloaded; the record of its modules once it has served and stopped. */
const startAndStop = async (cacheHome: string): Promise<ModuleRecord> => {
  const record = join(tempDir("spendgate-modules-"), "record.json")
  const server = await startServerProcess(
    { DATABASE_URL: databaseUrl, HOST: "127.0.0.1", TMPDIR: cacheHome, MODULE_RECORD: record, OPENAI_API_KEY: "sk-test", SPENDGATE_BUNDLE: "off" },
    60_000,
    ["--import", recorder, join(root, "bin/spendgate.js"), "serve"]
  )
  try {
    expect((await fetch(`${server.baseUrl}/health`)).status).toBe(200)
  } finally {
    await server.stop()
  }
  return JSON.parse(readFileSync(record, "utf8")) as ModuleRecord
}

const loadedFrom = (record: ModuleRecord, part: string) => record.loaded.filter((url) => url.includes(part))

describe("npm start on PostgreSQL loads what it serves with, and nothing it does not use", () => {
  it("no PGlite, no Scalar bundle, no command-line parser, no optional SDK; no TypeScript stripper on a restart", async () => {
    const cacheHome = tempDir("spendgate-cache-")
    const first = await startAndStop(cacheHome)
    const restart = await startAndStop(cacheHome)
    for (const record of [first, restart]) {
      // The recorder saw the server's modules (it would be blind if the hook were not registered).
      expect(loadedFrom(record, "/adapters/http/serve.ts")).toHaveLength(1)
      expect(loadedFrom(record, "/node_modules/effect/")).not.toEqual([])
      // Embedded storage, on a server given DATABASE_URL.
      expect(loadedFrom(record, "/node_modules/@electric-sql/pglite/")).toEqual([])
      expect(loadedFrom(record, "/adapters/sql/PgliteClient.ts")).toEqual([])
      // Scalar's 3 MB bundle: loaded by the first GET /docs only.
      expect(loadedFrom(record, "/http-api/internal/httpApiScalar.js")).toEqual([])
      // `serve` alone has nothing to parse: the command line is not loaded.
      expect(loadedFrom(record, "/node_modules/effect/dist/cli/")).toEqual([])
      expect(loadedFrom(record, "/adapters/cli/")).toEqual([])
      // SDKs and clients of what is not configured (or loaded on first use).
      for (const sdk of ["/node_modules/stripe/", "/node_modules/nodemailer/", "/node_modules/@modelcontextprotocol/", "/node_modules/redis/", "/node_modules/@redis/", "/node_modules/linkedom/"]) {
        expect(loadedFrom(record, sdk)).toEqual([])
      }
    }
    // The first start strips the TypeScript sources (and caches the result); the restart reads them from the cache.
    expect(first.internal.some((name) => name.includes("/amaro/"))).toBe(true)
    expect(restart.internal.some((name) => name.includes("/amaro/"))).toBe(false)
  }, 180_000)
})
