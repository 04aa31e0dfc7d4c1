import { spawn, spawnSync } from "node:child_process"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { Effect, Exit, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { chatCompletion } from "../providers/fakeLlm.ts"
import { freshDatabaseUrl } from "../support/postgres.ts"
import { startServerProcess } from "../support/server-process.ts"
import { client, fundByDevCard } from "../support/server.ts"
import * as bundle from "../../scripts/server-bundle.mjs"
import type { BundleManifest as Manifest } from "../../scripts/server-bundle.mjs"

/**
 * The server's bundle (scripts/server-bundle.mjs): what `npm start` runs in a
 * clone while the bundle was made from exactly the files checked out. Built
 * here into a folder of this test's own (inside the project, so the packages
 * it leaves out resolve), then: the bundled server serves every path whose
 * modules load on first use, on PostgreSQL and on PGlite; and a bundle that
 * no longer matches the sources is set aside for them.
 */

const root = join(import.meta.dirname, "..", "..")
const recorder = pathToFileURL(join(import.meta.dirname, "..", "support", "module-recorder.mjs")).href
const bundleDir = join(root, "node_modules", ".cache", "spendgate", `bundle-test-${process.pid}`)

const dirs: Array<string> = []
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  dirs.push(dir)
  return dir
}

/** A local OpenAI-format upstream that also serves one HTML page (for `read`). */
const startUpstream = () =>
  new Promise<{ origin: string; host: string; requests: Array<string>; close: () => Promise<void> }>((resolve) => {
    const requests: Array<string> = []
    const server = Http.createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        requests.push(`${req.method} ${req.url}`)
        if (req.url === "/page") {
          res.writeHead(200, { "content-type": "text/html; charset=utf-8" })
          res.end("<html><head><title>Bundled</title></head><body><article><h1>Bundled</h1><p>Read through the bundle's server, a paragraph long enough to count as the article's text.</p></article></body></html>")
          return
        }
        let body: Record<string, unknown> = {}
        try {
          body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
        } catch {
          body = {}
        }
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify(chatCompletion(body, { promptTokens: 10, completionTokens: 20 })))
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resolve({
        origin: `http://127.0.0.1:${port}`,
        host: `127.0.0.1:${port}`,
        requests,
        close: () => new Promise((done) => {
          server.closeAllConnections()
          server.close(() => done())
        })
      })
    })
  })

let scope: Scope.Closeable
let databaseUrl: string
let manifest: Manifest
let upstream: Awaited<ReturnType<typeof startUpstream>>

beforeAll(async () => {
  scope = Effect.runSync(Scope.make())
  databaseUrl = await Effect.runPromise(Scope.provide(scope)(freshDatabaseUrl))
  upstream = await startUpstream()
  manifest = await bundle.buildServerBundle(root, bundleDir)
}, 120_000)
afterAll(async () => {
  await upstream?.close()
  await Effect.runPromise(Scope.close(scope, Exit.void))
  rmSync(bundleDir, { recursive: true, force: true })
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

interface ModuleRecord {
  readonly loaded: ReadonlyArray<string>
  readonly internal: ReadonlyArray<string>
}

/** `npm start`'s command (bin/spendgate.js serve) with the module recorder and this test's bundle. */
const startRecorded = async (env: Record<string, string>) => {
  const record = join(tempDir("spendgate-bundle-record-"), "record.json")
  const server = await startServerProcess(
    {
      HOST: "127.0.0.1",
      SPENDGATE_BUNDLE_DIR: bundleDir,
      MODULE_RECORD: record,
      TMPDIR: tempDir("spendgate-bundle-cache-"),
      ...env
    },
    60_000,
    ["--import", recorder, join(root, "bin/spendgate.js"), "serve"]
  )
  return {
    server,
    /** Stops the server; what it loaded. */
    stop: async (): Promise<ModuleRecord> => {
      await server.stop()
      return JSON.parse(readFileSync(record, "utf8")) as ModuleRecord
    }
  }
}

const fromBundle = (record: ModuleRecord) => record.loaded.filter((url) => url.startsWith(pathToFileURL(bundleDir).href))
const fromSources = (record: ModuleRecord, part: string) =>
  record.loaded.filter((url) => url.startsWith(pathToFileURL(root).href) && url.includes(part) && !url.includes("/node_modules/"))

/** The sources a set of loaded bundle files were made from (the manifest's chunks). */
const sourcesOf = (loaded: ReadonlyArray<string>) =>
  new Set(loaded.flatMap((url) => manifest.chunks[fileURLToPath(url).slice(bundleDir.length + 1)] ?? []))

describe("the server's bundle", () => {
  it("is made from the project's sources and the bundled packages; the other packages stay packages", () => {
    expect(bundle.freshBundle(root, bundleDir)).toMatchObject({ reason: "fresh" })
    expect(manifest.root).toBe(root)
    const inputs = Object.keys(manifest.inputs)
    expect(inputs).toContain("adapters/http/main.ts")
    expect(inputs).toContain("adapters/http/serve.ts")
    expect(inputs.some((file) => file.startsWith("node_modules/effect/"))).toBe(true)
    // Only the packages it is meant to hold are inside it.
    const packages = new Set(
      inputs.filter((file) => file.startsWith("node_modules/")).map((file) => {
        const parts = file.split("/")
        return parts[1]!.startsWith("@") ? `${parts[1]}/${parts[2]}` : parts[1]!
      })
    )
    expect([...packages].every((name) => bundle.BUNDLED_PACKAGES.includes(name))).toBe(true)
    for (const name of ["@electric-sql/pglite", "stripe", "nodemailer", "redis", "undici"]) {
      expect(manifest.externalPackages).toContain(name)
    }
    // A module that finds files beside itself finds them in the sources: its
    // own file URL stands where import.meta.url was.
    const staticChunk = Object.entries(manifest.chunks).find(([, sources]) => sources.includes("adapters/http/dashboard/static.ts"))
    expect(staticChunk).toBeDefined()
    const code = readFileSync(join(bundleDir, staticChunk![0]), "utf8")
    expect(code).toContain(JSON.stringify(pathToFileURL(join(root, "adapters/http/dashboard/static.ts")).href))
  })

  it("npm start runs it on PostgreSQL and serves what loads on first use: proxy, reason, speak, read, MCP, /docs, the dashboard", async () => {
    const { server, stop } = await startRecorded({
      DATABASE_URL: databaseUrl,
      OPENAI_API_KEY: "sk-bundle",
      OPENAI_BASE_URL: `${upstream.origin}/v1`,
      LLM_BASE_URL: `${upstream.origin}/v1`,
      URL_ALLOW_HOSTS: upstream.host,
      BUILTIN_EXECUTE: "off"
    })
    let record: ModuleRecord
    try {
      const api = client(server.baseUrl)
      const signup = await api.post("/v1/signup", { name: "bundle" })
      expect(signup.status).toBe(201)
      const key = signup.body.apiKey as string
      expect((await fundByDevCard(server.baseUrl, key, 5000)).status).toBe(200)

      const proxied = await api.post("/v1/proxy/openai", {
        method: "POST",
        path: "/chat/completions",
        body: { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: 16 }
      }, key)
      expect(proxied.status).toBe(200)
      expect(JSON.stringify(proxied.body)).toContain("assistant")
      const reasoned = await api.post("/v1/capabilities/reason", { prompt: "hi", maxTokens: 50 }, key)
      expect(reasoned.status).toBe(200)
      expect(reasoned.body.metadata.chargedUsdCents).toBeGreaterThan(0)
      const spoken = await api.post("/v1/capabilities/speak", { text: "Bundled" }, key)
      expect(spoken.status).toBe(200)
      expect(spoken.body.data.mimeType).toBe("audio/wav")
      // The page parser runs in a worker thread whose module is found beside its pool.
      const read = await api.post("/v1/capabilities/read", { url: `${upstream.origin}/page` }, key)
      expect(read.status).toBe(200)
      expect(JSON.stringify(read.body.data)).toContain("long enough to count")
      expect(upstream.requests).toEqual(expect.arrayContaining(["POST /v1/chat/completions", "GET /page"]))

      const mcp = await fetch(`${server.baseUrl}/mcp`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${key}` },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "bundle-test", version: "1" } }
        })
      })
      const mcpText = await mcp.text()
      expect(mcp.status).toBe(200)
      expect(mcpText).toContain("serverInfo")

      const docs = await fetch(`${server.baseUrl}/docs`)
      expect(docs.status).toBe(200)
      expect(await docs.text()).toContain("createApiReference")
      const page = await fetch(`${server.baseUrl}/`)
      expect(page.status).toBe(200)
      expect(await page.text()).toContain("/ui/")
    } finally {
      record = await stop()
    }
    // It was the bundle that ran: its entry was loaded and none of the project's TypeScript
    // but the page parser's worker (a thread of its own, started from the sources).
    expect(fromBundle(record)).toContain(pathToFileURL(join(bundleDir, manifest.entries.server)).href)
    expect(fromSources(record, "/adapters/")).toEqual([])
    expect(sourcesOf(fromBundle(record)).has("adapters/http/serve.ts")).toBe(true)
  }, 180_000)

  it("npm start on PostgreSQL loads from it what it serves with, and nothing it does not use", async () => {
    const { server, stop } = await startRecorded({ DATABASE_URL: databaseUrl, OPENAI_API_KEY: "sk-bundle" })
    let record: ModuleRecord
    try {
      expect((await fetch(`${server.baseUrl}/health`)).status).toBe(200)
    } finally {
      record = await stop()
    }
    // The same list as the sources' start (test/process/start-modules.test.ts), read through the chunks' sources.
    const sources = [...sourcesOf(fromBundle(record))]
    const packages = record.loaded.filter((url) => url.includes("/node_modules/") && !url.startsWith(pathToFileURL(bundleDir).href))
    expect(sources).toContain("adapters/http/serve.ts")
    expect(sources.some((file) => file.startsWith("node_modules/effect/"))).toBe(true)
    expect(sources.filter((file) => file.includes("PgliteClient") || file.includes("/cli/") || file.includes("httpApiScalar"))).toEqual([])
    for (const sdk of ["/@electric-sql/pglite/", "/stripe/", "/nodemailer/", "/@modelcontextprotocol/", "/redis/", "/@redis/", "/linkedom/"]) {
      expect(packages.filter((url) => url.includes(`/node_modules${sdk}`))).toEqual([])
    }
    // Plain JavaScript: Node's TypeScript stripper is never needed, not even on a first start.
    expect(record.internal.some((name) => name.includes("/amaro/"))).toBe(false)
  }, 180_000)

  it("npm start runs it on PGlite with a fresh data directory, the embedded client loaded on use", async () => {
    const { server, stop } = await startRecorded({ DATA_DIR: tempDir("spendgate-bundle-data-"), BUILTIN_EXECUTE: "off" })
    let record: ModuleRecord
    try {
      const signup = await client(server.baseUrl).post("/v1/signup", { name: "bundle-pglite" })
      expect(signup.status).toBe(201)
    } finally {
      record = await stop()
    }
    const sources = sourcesOf(fromBundle(record))
    expect(sources.has("adapters/sql/PgliteClient.ts")).toBe(true)
    expect(record.loaded.some((url) => url.includes("/node_modules/@electric-sql/pglite/"))).toBe(true)
  }, 180_000)

  it("the spendgate command runs from its second entry: --version, and MCP over stdio", async () => {
    const run = (args: ReadonlyArray<string>, env: Record<string, string>, input?: string) =>
      new Promise<{ code: number | null; stdout: string; record: ModuleRecord }>((resolve, reject) => {
        const record = join(tempDir("spendgate-bundle-record-"), "record.json")
        const child = spawn(process.execPath, ["--import", recorder, join(root, "bin/spendgate.js"), ...args], {
          cwd: root,
          env: { PATH: process.env["PATH"] ?? "", SPENDGATE_BUNDLE_DIR: bundleDir, MODULE_RECORD: record, TMPDIR: tempDir("spendgate-bundle-cache-"), ...env },
          stdio: ["pipe", "pipe", "pipe"]
        })
        let stdout = ""
        child.stdout.on("data", (chunk: Buffer) => {
          stdout += chunk.toString()
          // MCP answers one line per message: once the answer is there, end its input and it exits.
          if (input !== undefined && stdout.includes("\n")) child.stdin.end()
        })
        const timer = setTimeout(() => child.kill("SIGKILL"), 30_000)
        child.on("error", reject)
        child.on("exit", (code) => {
          clearTimeout(timer)
          resolve({ code, stdout, record: JSON.parse(readFileSync(record, "utf8")) as ModuleRecord })
        })
        if (input !== undefined) child.stdin.write(input)
        else child.stdin.end()
      })
    const cliEntry = pathToFileURL(join(bundleDir, manifest.entries.cli)).href
    const version = await run(["--version"], {})
    expect(version.code).toBe(0)
    expect(version.stdout.trim()).toMatch(/^spendgate v\d+\.\d+\.\d+/)
    expect(version.record.loaded).toContain(cliEntry)
    expect(fromSources(version.record, "/adapters/")).toEqual([])

    const initialize = JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "bundle-test", version: "1" } }
    })
    const mcp = await run(["mcp"], { SPENDGATE_API_KEY: `sk_agt_${"a1".repeat(16)}`, SPENDGATE_URL: "http://127.0.0.1:9" }, `${initialize}\n`)
    expect(JSON.parse(mcp.stdout.split("\n")[0]!)).toMatchObject({ id: 1, result: { serverInfo: { name: expect.any(String) } } })
    expect(mcp.record.loaded).toContain(cliEntry)
    expect(fromSources(mcp.record, "/adapters/")).toEqual([])
  }, 120_000)

  it("is set aside for the sources when a file it was made from changed, is gone, or it was made elsewhere", async () => {
    // A copy of the bundle whose manifest is edited, so the bundle of the other tests stays as built.
    const copy = `${bundleDir}-stale`
    cpSync(bundleDir, copy, { recursive: true })
    try {
      const write = (edit: (m: Manifest) => Manifest) => writeFileSync(join(copy, "manifest.json"), JSON.stringify(edit(manifest)))
      write((m) => ({ ...m, inputs: { ...m.inputs, "adapters/http/serve.ts": [m.inputs["adapters/http/serve.ts"]![0], 0] } }))
      expect(bundle.freshBundle(root, copy)).toEqual({ entry: undefined, reason: "adapters/http/serve.ts changed since the bundle was made" })
      write((m) => ({ ...m, inputs: { ...m.inputs, "adapters/http/gone.ts": [1, 1] } }))
      expect(bundle.freshBundle(root, copy).reason).toBe("adapters/http/gone.ts is gone")
      write((m) => ({ ...m, root: "/elsewhere" }))
      expect(bundle.freshBundle(root, copy).reason).toBe("a bundle made for another folder")
      write((m) => ({ ...m, format: m.format + 1 }))
      expect(bundle.freshBundle(root, copy).reason).toBe("a bundle of another format")
      writeFileSync(join(copy, "manifest.json"), "{")
      expect(bundle.freshBundle(root, copy).reason).toBe("no bundle")
      write((m) => ({ ...m, entries: { server: m.entries.server } as Manifest["entries"] }))
      expect(bundle.freshBundle(root, copy, "cli").reason).toBe("the bundle has no cli entry")
      expect(bundle.freshBundle(root, copy, "server").reason).toBe("fresh")
      write((m) => m)
      expect(bundle.freshBundle(root, copy).reason).toBe("fresh")

      // `npm run bundle -- --check` says so, exit 0 when both entries would run from the bundle, 1 when not.
      const check = () =>
        spawnSync(process.execPath, [join(root, "scripts/server-bundle.mjs"), "--check"], {
          cwd: root,
          env: { PATH: process.env["PATH"] ?? "", SPENDGATE_BUNDLE_DIR: copy },
          encoding: "utf8",
          timeout: 30_000
        })
      const fresh = check()
      expect(fresh.status, fresh.stdout + fresh.stderr).toBe(0)
      expect(fresh.stdout).toContain("server: bundle fresh: ")
      expect(fresh.stdout).toContain("cli: bundle fresh: ")
      write((m) => ({ ...m, inputs: { ...m.inputs, "adapters/cli/main.ts": [m.inputs["adapters/cli/main.ts"]![0], 0] } }))
      const notFresh = check()
      expect(notFresh.status).toBe(1)
      expect(notFresh.stdout).toContain("server: bundle not used: adapters/cli/main.ts changed since the bundle was made")
      write((m) => m)

      // A bundle that cannot be made (its folder would be under a file): `npm run bundle` fails,
      // the install's run (`--if-possible`) says why and does not fail the install.
      const blocker = join(tempDir("spendgate-bundle-blocked-"), "a-file")
      writeFileSync(blocker, "")
      const build = (...flags: Array<string>) =>
        spawnSync(process.execPath, [join(root, "scripts/server-bundle.mjs"), ...flags], {
          cwd: root,
          env: { PATH: process.env["PATH"] ?? "", SPENDGATE_BUNDLE_DIR: join(blocker, "bundle") },
          encoding: "utf8",
          timeout: 60_000
        })
      const failed = build()
      expect(failed.status).toBe(1)
      expect(failed.stdout).toMatch(/^Server bundle not made \([\s\S]+\); npm start runs the sources$/m)
      const tolerated = build("--if-possible")
      expect(tolerated.status).toBe(0)
      expect(tolerated.stdout).toMatch(/^Server bundle not made \([\s\S]+\); npm start runs the sources$/m)

      // npm start with a stale bundle runs the sources.
      write((m) => ({ ...m, inputs: { ...m.inputs, "adapters/http/serve.ts": [m.inputs["adapters/http/serve.ts"]![0], 0] } }))
      const stale = await startRecorded({ DATA_DIR: tempDir("spendgate-bundle-data-"), BUILTIN_EXECUTE: "off", SPENDGATE_BUNDLE_DIR: copy })
      expect((await fetch(`${stale.server.baseUrl}/health`)).status).toBe(200)
      const staleRecord = await stale.stop()
      expect(staleRecord.loaded.filter((url) => url.startsWith(pathToFileURL(copy).href))).toEqual([])
      expect(fromSources(staleRecord, "/adapters/http/serve.ts")).toHaveLength(1)

      // SPENDGATE_BUNDLE=off runs the sources even with a fresh bundle.
      write((m) => m)
      const off = await startRecorded({ DATA_DIR: tempDir("spendgate-bundle-data-"), BUILTIN_EXECUTE: "off", SPENDGATE_BUNDLE_DIR: copy, SPENDGATE_BUNDLE: "off" })
      expect((await fetch(`${off.server.baseUrl}/health`)).status).toBe(200)
      const offRecord = await off.stop()
      expect(offRecord.loaded.filter((url) => url.startsWith(pathToFileURL(copy).href))).toEqual([])
      expect(fromSources(offRecord, "/adapters/http/serve.ts")).toHaveLength(1)
    } finally {
      rmSync(copy, { recursive: true, force: true })
    }
  }, 180_000)
})
