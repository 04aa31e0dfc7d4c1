import { spawn } from "node:child_process"
import { createHash } from "node:crypto"
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs"
import { createServer, type Server } from "node:net"
import { tmpdir } from "node:os"
import { join, relative } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { client } from "../support/server.ts"
import { type ServerProcess, startServerProcess } from "../support/server-process.ts"

/**
 * The server process as a careless operator runs it: twice on one DATA_DIR,
 * on a port that is taken, after a kill -9, on every interface with the dev
 * rails on.
 */

const root = join(import.meta.dirname, "..", "..")
const nodeBin = process.execPath

const start = (env: Record<string, string>): Promise<ServerProcess> =>
  startServerProcess({ BUILTIN_EXECUTE: "off", BUILTIN_SPEAK: "off", ...env }, 40_000)

/** Runs the server expecting it to exit; stops it (code null) if it is still up after `timeoutMs`. */
const runToExit = (env: Record<string, string>, timeoutMs = 20_000) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(nodeBin, [join(root, "adapters/http/main.ts")], {
      cwd: root,
      env: { PATH: process.env["PATH"] ?? "", BUILTIN_EXECUTE: "off", BUILTIN_SPEAK: "off", ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (c) => (stdout += c))
    child.stderr.on("data", (c) => (stderr += c))
    const timer = setTimeout(() => child.kill("SIGTERM"), timeoutMs)
    child.on("exit", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })

/** Every file under `dir` with its size and SHA-256, to tell whether anything was touched. */
const snapshot = (dir: string): Record<string, string> => {
  const out: Record<string, string> = {}
  const walk = (at: string) => {
    for (const name of readdirSync(at)) {
      const path = join(at, name)
      const stat = statSync(path)
      if (stat.isDirectory()) walk(path)
      else {
        out[relative(dir, path)] = `${stat.size}:${stat.mtimeMs}:${
          createHash("sha256").update(readFileSync(path)).digest("hex")
        }`
      }
    }
  }
  walk(dir)
  return out
}

const listenOn = (port: number, host: string) =>
  new Promise<Server>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen({ port, host }, () => resolve(server))
  })

const freePort = async (): Promise<number> => {
  const server = await listenOn(0, "127.0.0.1")
  const address = server.address()
  await new Promise((done) => server.close(done))
  if (address === null || typeof address === "string") throw new Error("no port")
  return address.port
}

const lines = (text: string) => text.split("\n").filter((line) => line.trim() !== "")

describe("one DATA_DIR, one server", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "spendgate-lock-"))
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }))
  let ownerKey = ""
  let laterKey = ""

  it("a second server on the same DATA_DIR refuses with one line naming the dir and the holder's pid; the first keeps working", async () => {
    const first = await start({ DATA_DIR: dataDir })
    try {
      const api = client(first.baseUrl)
      const signup = await api.post("/v1/signup", { name: "first" })
      expect(signup.status).toBe(201)
      ownerKey = signup.body.apiKey

      const second = await runToExit({ DATA_DIR: dataDir, PORT: "0" })
      expect(second.code).toBe(1)
      const errorLines = lines(second.stderr)
      expect(errorLines).toHaveLength(1)
      expect(errorLines[0]).toContain(dataDir)
      expect(errorLines[0]).toContain(`pid ${first.child.pid}`)
      expect(second.stdout).not.toMatch(/Listening on/)

      // The first is untouched: its data, and what is written after the refusal.
      expect((await api.get("/v1/agents", ownerKey)).status).toBe(200)
      const later = await api.post("/v1/signup", { name: "later" })
      expect(later.status).toBe(201)
      laterKey = later.body.apiKey
    } finally {
      await first.stop()
    }

    const again = await start({ DATA_DIR: dataDir })
    try {
      const api = client(again.baseUrl)
      expect((await api.get("/v1/agents", ownerKey)).status).toBe(200)
      expect((await api.get("/v1/agents", laterKey)).status).toBe(200)
    } finally {
      await again.stop()
    }
  }, 120_000)

  it("a start on a busy port fails with one line and leaves the data directory exactly as it was", async () => {
    const port = await freePort()
    const squatter = await listenOn(port, "127.0.0.1")
    try {
      const before = snapshot(dataDir)
      const busy = await runToExit({ DATA_DIR: dataDir, PORT: String(port) })
      expect(snapshot(dataDir)).toEqual(before)
      expect(busy.code).toBe(1)
      const errorLines = lines(busy.stderr)
      expect(errorLines).toHaveLength(1)
      expect(errorLines[0]).toContain(`127.0.0.1:${port}`)
      expect(errorLines[0]).toMatch(/in use/)
    } finally {
      await new Promise((done) => squatter.close(done))
    }

    const later = await start({ DATA_DIR: dataDir })
    try {
      expect((await client(later.baseUrl).get("/v1/agents", ownerKey)).status).toBe(200)
    } finally {
      await later.stop()
    }
  }, 120_000)

  it("the lock of a server killed with SIGKILL is taken over by the next start", async () => {
    const victim = await start({ DATA_DIR: dataDir })
    const signup = await client(victim.baseUrl).post("/v1/signup", { name: "before-kill" })
    expect(signup.status).toBe(201)
    await new Promise<void>((done) => {
      victim.child.once("exit", () => done())
      victim.child.kill("SIGKILL")
    })

    const next = await start({ DATA_DIR: dataDir })
    try {
      const api = client(next.baseUrl)
      expect((await api.get("/v1/agents", ownerKey)).status).toBe(200)
      expect((await api.get("/v1/agents", signup.body.apiKey)).status).toBe(200)
    } finally {
      await next.stop()
    }
  }, 120_000)
})

describe("dev rails on a public interface", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "spendgate-public-"))
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }))

  it("are refused on HOST=0.0.0.0 without DEV_RAILS_PUBLIC=on, with one line, before storage is touched", async () => {
    const emptyDir = join(dataDir, "never-created")
    const refused = await runToExit({ HOST: "0.0.0.0", PORT: "0", DATA_DIR: emptyDir })
    expect(refused.code).toBe(1)
    const errorLines = lines(refused.stderr)
    expect(errorLines).toHaveLength(1)
    expect(errorLines[0]).toContain("HOST")
    expect(errorLines[0]).toContain("DEV_RAILS_PUBLIC=on")
    expect(() => statSync(emptyDir)).toThrow()

    // Loopback behind a reverse proxy is public too.
    const proxied = await runToExit({ PORT: "0", DATA_DIR: emptyDir, TRUST_PROXY: "1" })
    expect(proxied.code).toBe(1)
    expect(lines(proxied.stderr)).toHaveLength(1)
    expect(proxied.stderr).toContain("TRUST_PROXY=1")
    expect(proxied.stderr).toContain("DEV_RAILS_PUBLIC=on")

    const bad = await runToExit({ HOST: "0.0.0.0", PORT: "0", DATA_DIR: emptyDir, DEV_RAILS_PUBLIC: "yes" })
    expect(bad.code).toBe(1)
    expect(lines(bad.stderr)).toHaveLength(1)
    expect(bad.stderr).toContain("DEV_RAILS_PUBLIC")
  }, 60_000)

  it("start with a loud warning when DEV_RAILS_PUBLIC=on; SIGNUP_RATE_PER_HOUR limits signups per address", async () => {
    const server = await start({ HOST: "0.0.0.0", DATA_DIR: dataDir, DEV_RAILS_PUBLIC: "on", SIGNUP_RATE_PER_HOUR: "2" })
    try {
      expect(server.output()).toMatch(/WARN.*dev payment rails.*0\.0\.0\.0/i)
      const api = client(server.baseUrl)
      expect((await api.post("/v1/signup", { name: "a" })).status).toBe(201)
      expect((await api.post("/v1/signup", { name: "b" })).status).toBe(201)
      const third = await api.post("/v1/signup", { name: "c" })
      expect(third.status).toBe(429)
      expect(third.body.error.code).toBe("RATE_LIMITED")
      expect(Number(third.headers.get("retry-after"))).toBeGreaterThan(0)
    } finally {
      await server.stop()
    }
  }, 60_000)
})

describe("the new settings", () => {
  it("refuse a bad value with one line naming the variable, before anything is opened", async () => {
    const dataDir = join(tmpdir(), `spendgate-never-${process.pid}`)
    // Each setting's every refusal is checked in process (test/adapters/config.test.ts,
    // test/http/otlp-config.test.ts); here, that a start refused by either loader prints
    // one line, exits 1 and opens nothing.
    const cases: ReadonlyArray<readonly [Record<string, string>, string]> = [
      [{ SIGNUP: "token" }, "SIGNUP_TOKEN is required when SIGNUP=token"],
      [{ SIGNUP_RATE_PER_HOUR: "ten" }, "SIGNUP_RATE_PER_HOUR must be a whole number"],
      [
        { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", OTEL_EXPORTER_OTLP_HEADERS: "api-key=abc%0D%0AX-Injected: 1" },
        "OTEL_EXPORTER_OTLP_HEADERS has a control character (such as CR, LF or NUL) in the value of api-key"
      ]
    ]
    // One at a time: the machine running the tests may be small.
    for (const [env, message] of cases) {
      const result = await runToExit({ PORT: "0", DATA_DIR: dataDir, ...env })
      expect(result.code, message).toBe(1)
      const errorLines = lines(result.stderr)
      expect(errorLines, message).toHaveLength(1)
      expect(errorLines[0], message).toMatch(/^Invalid configuration: /)
      expect(errorLines[0], message).toContain(message)
    }
    expect(() => statSync(dataDir)).toThrow()
  }, 120_000)
})
