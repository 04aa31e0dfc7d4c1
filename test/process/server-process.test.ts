import { spawn } from "node:child_process"
import { createHash } from "node:crypto"
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { client } from "../support/server.ts"
import { type ServerProcess, startServerProcess } from "../support/server-process.ts"

/**
 * The real `npm start` entry point as a process: configuration errors,
 * embedded storage that survives a restart, and API keys that never reach
 * the logs or the data directory in plaintext.
 */

const root = join(import.meta.dirname, "..", "..")
const nodeBin = process.execPath

const start = (env: Record<string, string>): Promise<ServerProcess> => startServerProcess(env, 60_000)

const runToExit = (env: Record<string, string>) =>
  new Promise<{ code: number | null; output: string }>((resolve) => {
    const child = spawn(nodeBin, [join(root, "adapters/http/main.ts")], {
      cwd: root,
      env: { PATH: process.env["PATH"] ?? "", ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (c) => (output += c))
    child.stderr.on("data", (c) => (output += c))
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000)
    child.on("exit", (code) => {
      clearTimeout(timer)
      resolve({ code, output })
    })
  })

const filesUnder = (dir: string): Array<string> =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? filesUnder(path) : [path]
  })

describe("the server process", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "spendgate-data-"))
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }))

  it("refuses bad configuration with one clear message", async () => {
    const badPort = await runToExit({ PORT: "not-a-port", DATA_DIR: dataDir })
    expect(badPort.code).toBe(1)
    expect(badPort.output).toMatch(/PORT/)
    const badUrl = await runToExit({ DATABASE_URL: "mysql://x", PORT: "0" })
    expect(badUrl.code).toBe(1)
    expect(badUrl.output).toContain("DATABASE_URL must be a postgres:// or postgresql:// URL")
    const badLevel = await runToExit({ LOG_LEVEL: "loud", PORT: "0", DATA_DIR: dataDir })
    expect(badLevel.code).toBe(1)
    expect(badLevel.output).toMatch(/LOG_LEVEL/)
    const lnd = await runToExit({ LIGHTNING_RAIL: "lnd", PORT: "0", DATA_DIR: dataDir })
    expect(lnd.code).toBe(1)
    expect(lnd.output).toContain("LND_REST_URL is required when LIGHTNING_RAIL=lnd")
    const stripe = await runToExit({ CARD_RAIL: "stripe", STRIPE_SECRET_KEY: "sk_test_x", PORT: "0", DATA_DIR: dataDir })
    expect(stripe.code).toBe(1)
    expect(stripe.output).toContain("STRIPE_WEBHOOK_SECRET is required when CARD_RAIL=stripe")
    const rates = await runToExit({ RATE_SOURCES: "coinbase,mtgox", PORT: "0", DATA_DIR: dataDir })
    expect(rates.code).toBe(1)
    expect(rates.output).toContain("RATE_SOURCES must list some of coinbase, kraken, bitstamp")
  }, 60_000)

  it("walks the README's funding path: signup, fund by Lightning, pay with npm run dev:pay, see the sats", async () => {
    const dir = mkdtempSync(join(tmpdir(), "spendgate-fund-"))
    const server = await start({ DATA_DIR: dir })
    try {
      const api = client(server.baseUrl)
      const signup = await api.post("/v1/signup", { name: "ops" })
      const fund = await api.post("/v1/wallet/fund", { amountSats: 5000 }, signup.body.apiKey)
      expect(fund.status).toBe(200)
      expect(fund.body.paymentRequest).toMatch(/^lnbcrt50u1/)
      const paid = await new Promise<{ code: number | null; output: string }>((resolve) => {
        const child = spawn(nodeBin, [join(root, "adapters/cli/dev-pay.ts"), fund.body.paymentRequest, "--url", server.baseUrl], {
          cwd: root,
          env: { PATH: process.env["PATH"] ?? "" }
        })
        let output = ""
        child.stdout.on("data", (c) => (output += c))
        child.stderr.on("data", (c) => (output += c))
        child.on("exit", (code) => resolve({ code, output }))
      })
      expect(paid.output).toContain(`${fund.body.invoiceId}: credited`)
      expect(paid.code).toBe(0)
      const wallet = await api.get("/v1/wallet", signup.body.apiKey)
      expect(wallet.body).toMatchObject({ balanceSats: 5000, balanceUsdCents: 0 })
      const card = await api.post("/v1/wallet/fund-card", { amountUsdCents: 1500 }, signup.body.apiKey)
      const path = new URL(card.body.checkoutUrl).pathname
      expect((await fetch(`${server.baseUrl}${path}/pay`, { method: "POST" })).status).toBe(200)
      expect((await api.get("/v1/wallet", signup.body.apiKey)).body.balanceUsdCents).toBe(1500)
      // The dev node key is kept in DATA_DIR, with owner-only permissions.
      expect(statSync(join(dir, "dev-lightning-node.key")).mode & 0o777).toBe(0o600)
    } finally {
      await server.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  }, 90_000)

  it("keeps its data across a restart and never writes a key in plaintext", async () => {
    const first = await start({ DATA_DIR: dataDir, LOG_LEVEL: "Debug" })
    const api = client(first.baseUrl)
    const signup = await api.post("/v1/signup", { name: "ops" })
    expect(signup.status).toBe(201)
    const ownerKey: string = signup.body.apiKey
    const worker = await api.post("/v1/agents", { name: "worker" }, ownerKey)
    const workerKey: string = worker.body.apiKey
    await api.put(`/v1/agents/${worker.body.id}/policy`, { maxPerCallUsdCents: null, maxPerDayUsdCents: 250, allowedCapabilities: null }, ownerKey)
    await api.patch(`/v1/agents/${worker.body.id}`, { killed: true }, ownerKey)
    expect((await api.get(`/v1/agents/${worker.body.id}`, workerKey)).status).toBe(403)
    await first.stop()

    const second = await start({ DATA_DIR: dataDir, LOG_LEVEL: "Debug" })
    const api2 = client(second.baseUrl)
    const list = await api2.get("/v1/agents", ownerKey)
    expect(list.status).toBe(200)
    expect(list.body.total).toBe(2)
    const policy = await api2.get(`/v1/agents/${worker.body.id}/policy`, ownerKey)
    expect(policy.body.maxPerDayUsdCents).toBe(250)
    const killed = await api2.get(`/v1/agents/${worker.body.id}`, workerKey)
    expect(killed.status).toBe(403)
    expect(killed.body.error.code).toBe("AGENT_KILLED")
    await second.stop()

    // Request logging was on (Debug): still no key in any log line.
    for (const key of [ownerKey, workerKey]) {
      expect(first.output()).not.toContain(key)
      expect(second.output()).not.toContain(key)
      expect(first.output()).not.toContain(key.slice(7))
    }
    expect(first.output()).toMatch(/\/v1\/agents/)

    // The data directory holds each key's SHA-256, never the key.
    const files = filesUnder(dataDir)
    expect(files.length).toBeGreaterThan(0)
    const hashes = [ownerKey, workerKey].map((key) => createHash("sha256").update(key).digest("hex"))
    let hashesFound = 0
    for (const file of files) {
      const bytes = readFileSync(file)
      for (const key of [ownerKey, workerKey]) {
        expect(bytes.includes(Buffer.from(key.slice(7))), file).toBe(false)
      }
      for (const hash of hashes) if (bytes.includes(Buffer.from(hash))) hashesFound++
    }
    expect(hashesFound).toBeGreaterThanOrEqual(2)
  }, 90_000)
})
