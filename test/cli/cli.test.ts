import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type ServerProcess, startServerProcess } from "../support/server-process.ts"

/**
 * The `spendgate` command line as a user runs it: `node bin/spendgate.js …`
 * as a child process, against a real server (embedded PGlite, dev rails)
 * started by the test helpers, and against a local proxy in front of that
 * server that alters the answers, to show that a tampered receipt is caught
 * here and not taken on the server's word.
 */

const root = join(import.meta.dirname, "..", "..")
const launcher = join(root, "bin/spendgate.js")
const ADMIN_TOKEN = "cli-test-admin-token-0123456789"

interface Run {
  readonly status: number | null
  readonly stdout: string
  readonly stderr: string
}

interface Running {
  readonly child: ChildProcess
  /** Resolves with the first stdout line that matches. */
  readonly line: (match: RegExp) => Promise<string>
  readonly done: Promise<Run>
}

/** Starts `spendgate …` with a clean environment (PATH and `env` only). */
const start = (args: ReadonlyArray<string>, env: Record<string, string> = {}): Running => {
  const child = spawn(process.execPath, [launcher, ...args], {
    cwd: root,
    env: { PATH: process.env["PATH"] ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let stdout = ""
  let stderr = ""
  const waiters: Array<() => void> = []
  child.stdout!.on("data", (chunk: Buffer) => {
    stdout += chunk.toString()
    for (const wake of waiters.splice(0)) wake()
  })
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
  const done = new Promise<Run>((resolve) => child.on("close", (status) => resolve({ status, stdout, stderr })))
  const line = (match: RegExp): Promise<string> =>
    new Promise((resolve, reject) => {
      const look = () => {
        const found = stdout.split("\n").find((l) => match.test(l))
        if (found !== undefined) return resolve(found)
        if (child.exitCode !== null) return reject(new Error(`exited without ${match}: ${stdout}${stderr}`))
        waiters.push(look)
      }
      look()
      void done.then(() => look())
    })
  return { child, line, done }
}

const run = (args: ReadonlyArray<string>, env: Record<string, string> = {}): Promise<Run> => start(args, env).done

const json = (result: Run): any => {
  expect(result.stderr).toBe("")
  expect(result.status).toBe(0)
  return JSON.parse(result.stdout)
}

let server: ServerProcess
let dataDir: string
let env: Record<string, string>
let ownerKey = ""
let workerId = ""
let workerKey = ""
const auditIds: Array<string> = []

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "spendgate-cli-"))
  server = await startServerProcess({ DATA_DIR: dataDir, HOST: "127.0.0.1", ADMIN_TOKEN }, 60_000)
  env = { SPENDGATE_URL: server.baseUrl }
}, 90_000)

afterAll(async () => {
  await server?.stop()
  rmSync(dataDir, { recursive: true, force: true })
})

describe("spendgate against a running server", () => {
  it("signup prints the owner's key once, as text and as JSON", async () => {
    const text = await run(["signup", "--name", "ops-text"], env)
    expect(text.status).toBe(0)
    expect(text.stdout).toMatch(/^key\s+sk_agt_[A-Za-z0-9]{32}$/m)
    const body = json(await run(["signup", "--name", "ops", "--json"], env))
    expect(body.apiKey).toMatch(/^sk_agt_/)
    expect(body.accountId).toMatch(/^acc_/)
    ownerKey = body.apiKey
    env = { ...env, SPENDGATE_API_KEY: ownerKey }
  }, 60_000)

  it("agents create and ls (the key from SPENDGATE_API_KEY or --key)", async () => {
    const created = json(await run(["agents", "create", "--name", "research-bot", "--json"], env))
    expect(created).toMatchObject({ name: "research-bot", role: "agent", killed: false })
    workerId = created.id
    workerKey = created.apiKey
    const listed = json(await run(["agents", "ls", "--json", "--key", ownerKey], { SPENDGATE_URL: server.baseUrl }))
    expect(listed.total).toBe(2)
    expect(listed.agents.map((a: { name: string }) => a.name).sort()).toEqual(["ops", "research-bot"])
    const table = await run(["agents", "ls"], env)
    expect(table.status).toBe(0)
    expect(table.stdout).toMatch(new RegExp(`^${workerId}\\s+research-bot\\s+agent\\s+no`, "m"))
    expect(table.stdout).toContain("2 of 2")
    const paged = json(await run(["agents", "ls", "--json", "--limit", "1", "--offset", "1"], env))
    expect(paged).toMatchObject({ total: 2, limit: 1, offset: 1 })
    expect(paged.agents).toHaveLength(1)
  }, 60_000)

  it("agents policy: shows, patches the flags given, lifts with none, replaces only with every field", async () => {
    const shown = json(await run(["agents", "policy", workerId, "--json"], env))
    expect(shown).toMatchObject({ maxPerCallUsdCents: 0, maxPerDayUsdCents: 0, allowedCapabilities: [] })

    const patched = json(
      await run(["agents", "policy", workerId, "--max-per-call", "5", "--max-per-day", "200", "--allow", "search,read", "--json"], env)
    )
    expect(patched).toMatchObject({ maxPerCallUsdCents: 5, maxPerDayUsdCents: 200 })
    expect([...patched.allowedCapabilities].sort()).toEqual(["read", "search"])

    // Only the flag given changes; "none" is sent as null, "no limit".
    const lifted = json(await run(["agents", "policy", workerId, "--max-per-day", "none", "--json"], env))
    expect(lifted).toMatchObject({ maxPerCallUsdCents: 5, maxPerDayUsdCents: 0 })
    expect(lifted.allowedCapabilities).toHaveLength(2)

    // --replace is a PUT: every field of it must be said, checked before anything is sent.
    const partial = await run(["agents", "policy", workerId, "--replace", "--max-per-call", "7"], env)
    expect(partial.status).toBe(2)
    expect(partial.stdout).toBe("")
    expect(partial.stderr).toContain("--max-per-day")
    expect(partial.stderr).toContain("--allow")
    expect(json(await run(["agents", "policy", workerId, "--json"], env)).maxPerCallUsdCents).toBe(5)

    const replaced = json(
      await run(["agents", "policy", workerId, "--replace", "--max-per-call", "7", "--max-per-day", "none", "--allow", "all", "--json"], env)
    )
    expect(replaced).toMatchObject({ maxPerCallUsdCents: 7, maxPerDayUsdCents: 0, allowedCapabilities: [] })

    const text = await run(["agents", "policy", workerId], env)
    expect(text.stdout).toMatch(/^per call\s+7 cents$/m)
    expect(text.stdout).toMatch(/^per day\s+no limit/m)
    expect(text.stdout).toMatch(/^capabilities\s+all$/m)

    // A bad value is a usage error; the server's own refusal (more than 4 decimals) is exit 1 with its code.
    const noCaps = await run(["agents", "policy", workerId, "--allow", " , "], env)
    expect(noCaps.status).toBe(2)
    expect(noCaps.stderr).toContain("--allow")
    const bad = await run(["agents", "policy", workerId, "--max-per-call", "lots"], env)
    expect(bad.status).toBe(2)
    expect(bad.stderr).toContain("--max-per-call")
    const refused = await run(["agents", "policy", workerId, "--max-per-call", "0.00001"], env)
    expect(refused.status).toBe(1)
    expect(refused.stderr).toContain("VALIDATION_ERROR")
  }, 120_000)

  it("agents kill: the worker's calls are refused (exit 1, the API's code on stderr) until agents revive", async () => {
    const killed = json(await run(["agents", "kill", workerId, "--json"], env))
    expect(killed).toMatchObject({ id: workerId, killed: true })
    const refused = await run(["wallet", "--key", workerKey], { SPENDGATE_URL: server.baseUrl })
    expect(refused.status).toBe(1)
    expect(refused.stdout).toBe("")
    expect(refused.stderr).toContain("AGENT_KILLED")
    expect(json(await run(["agents", "revive", workerId, "--json"], env))).toMatchObject({ killed: false })
    const wallet = json(await run(["wallet", "--json", "--key", workerKey], { SPENDGATE_URL: server.baseUrl }))
    expect(wallet).toMatchObject({ balanceSats: 0, balanceUsdCents: 0 })
    // An agent key may not kill: the API's 403, exit 1.
    const forbidden = await run(["agents", "kill", workerId, "--key", workerKey], { SPENDGATE_URL: server.baseUrl })
    expect(forbidden.status).toBe(1)
    expect(forbidden.stderr).toContain("FORBIDDEN")
  }, 90_000)

  it("fund lightning waits until dev pay (run beside it) pays; the wallet shows the sats", async () => {
    // --json: the invoice, then (once paid) the invoice as listed, one document per line.
    const funding = start(["fund", "lightning", "--sats", "5000", "--json", "--interval-ms", "200"], env)
    const first = JSON.parse(await funding.line(/^\{/))
    expect(first.paymentRequest).toMatch(/^lnbcrt50u1/)
    // Still waiting: nothing paid yet.
    await new Promise((resolve) => setTimeout(resolve, 700))
    expect(funding.child.exitCode).toBeNull()
    const paid = await run(["dev", "pay", first.paymentRequest], { SPENDGATE_URL: server.baseUrl })
    expect(paid.status).toBe(0)
    expect(paid.stdout.trim()).toBe(`${first.invoiceId}: credited`)
    const done = await funding.done
    expect(done.status).toBe(0)
    const lines = done.stdout.trim().split("\n").map((l) => JSON.parse(l))
    expect(lines).toHaveLength(2)
    expect(lines[1]).toMatchObject({ id: first.invoiceId, status: "paid", amountSats: 5000 })

    // Text: a terminal QR code and the payment request; dev pay by invoice id (looked up with the key).
    const second = start(["fund", "lightning", "--sats", "700", "--interval-ms", "200"], env)
    const pay = (await second.line(/^pay\s+lnbcrt/)).split(/\s+/)[1]!
    const invoiceId = (await second.line(/^invoice\s+inv_/)).split(/\s+/)[1]!
    const byId = json(await run(["dev", "pay", invoiceId, "--json"], env))
    // The dev node answers the payment's preimage too (what an L402 client needs to present).
    expect(byId).toEqual({ invoiceId, outcome: "credited", preimage: expect.stringMatching(/^[0-9a-f]{64}$/) })
    const secondDone = await second.done
    expect(secondDone.status).toBe(0)
    expect(secondDone.stdout).toContain("▄")
    expect(secondDone.stdout).toContain(`${invoiceId}: paid`)
    expect(pay).toMatch(/^lnbcrt7u1/)
    expect(secondDone.stderr).toContain(`waiting for ${invoiceId}`)

    // Paying again is a duplicate, still exit 0; a made-up request is refused.
    expect((await run(["dev", "pay", pay], env)).stdout.trim()).toBe(`${invoiceId}: duplicate`)
    const unknown = await run(["dev", "pay", "lnbcrt1nope"], env)
    expect(unknown.status).toBe(1)
    expect(unknown.stderr).toContain("NOT_FOUND")

    const wallet = json(await run(["wallet", "--json"], env))
    expect(wallet).toMatchObject({ balanceSats: 5700, balanceUsdCents: 0 })
    const text = await run(["wallet"], env)
    expect(text.stdout).toMatch(/^sats\s+5700 sats$/m)
  }, 120_000)

  it("fund card prints the checkout URL, fund lightning --no-wait only the invoice; below the minimum is the API's INVALID_AMOUNT", async () => {
    const card = json(await run(["fund", "card", "--usd-cents", "2500", "--json"], env))
    expect(card.checkoutUrl).toContain("/dev/checkout/")
    const text = await run(["fund", "card", "--usd-cents", "1500"], env)
    expect(text.stdout).toMatch(/^checkout\s+http:\/\/.*\/dev\/checkout\/cs_dev_/m)
    // fund lightning --no-wait: the invoice alone, exit 0 while it is still pending.
    const noWait = await run(["fund", "lightning", "--sats", "10", "--no-wait", "--json"], env)
    expect(noWait.status).toBe(0)
    expect(noWait.stdout.trim().split("\n")).toHaveLength(1)
    expect(JSON.parse(noWait.stdout)).toMatchObject({ amountSats: 10, paymentRequest: expect.stringMatching(/^lnbcrt/) })
    const low = await run(["fund", "card", "--usd-cents", "25"], env)
    expect(low.status).toBe(1)
    expect(low.stderr).toContain("INVALID_AMOUNT")
  }, 60_000)

  it("tx ls with the API's filters and paging", async () => {
    const all = json(await run(["tx", "ls", "--json"], env))
    expect(all.total).toBe(2)
    expect(all.transactions.map((t: { amountSats: number }) => t.amountSats)).toEqual([700, 5000])
    auditIds.push(...all.transactions.map((t: { auditId: string }) => t.auditId).reverse())
    expect(json(await run(["tx", "ls", "--json", "--type", "charge"], env)).total).toBe(0)
    const page = json(await run(["tx", "ls", "--json", "--type", "credit", "--limit", "1", "--offset", "1"], env))
    expect(page.transactions).toHaveLength(1)
    expect(page.transactions[0].amountSats).toBe(5000)
    const text = await run(["tx", "ls"], env)
    expect(text.stdout).toMatch(/credit\s+0\s+700\s+agt_/)
    expect(text.stdout).toContain("2 of 2")
    const bad = await run(["tx", "ls", "--limit", "0"], env)
    expect(bad.status).toBe(1)
    expect(bad.stderr).toContain("VALIDATION_ERROR")
  }, 60_000)

  it("receipt verify recomputes the hash and checks the chain link", async () => {
    const [firstId, secondId] = auditIds
    const first = json(await run(["receipt", "verify", firstId!, "--json"], env))
    expect(first).toMatchObject({ hash: "ok", link: "ok", verified: true })
    expect(first.linkDetail).toContain("genesis")
    // Without the admin token the previous record is out of reach: the link is the server's word, and it says so.
    const second = json(await run(["receipt", "verify", secondId!, "--json"], env))
    expect(second).toMatchObject({ hash: "ok", link: "server-verified", verified: true })
    // With it, the previous record is fetched, its own hash checked, and the link compared here.
    const linked = json(await run(["receipt", "verify", secondId!, "--json"], { ...env, ADMIN_TOKEN }))
    expect(linked).toMatchObject({ hash: "ok", link: "ok", verified: true })
    expect(linked.linkDetail).toContain(firstId)
    const text = await run(["receipt", "verify", secondId!], env)
    expect(text.status).toBe(0)
    expect(text.stdout.trim().split("\n").at(-1)).toBe("verified")

    const missing = await run(["receipt", "verify", "aud_doesnotexist"], env)
    expect(missing.status).toBe(1)
    expect(missing.stderr).toContain("NOT_FOUND")
  }, 90_000)

  it("admin stats with the token; a wrong token is the API's 401, none a usage error", async () => {
    const stats = json(await run(["admin", "stats", "--json", "--days", "7"], { ...env, ADMIN_TOKEN }))
    expect(stats.accounts).toBe(2)
    expect(stats.agents).toMatchObject({ total: 3, owners: 2, killed: 0 })
    expect(stats.balances.sats).toBe(5700)
    const text = await run(["admin", "stats", "--admin-token", ADMIN_TOKEN], env)
    expect(text.stdout).toMatch(/^accounts\s+2$/m)
    const wrong = await run(["admin", "stats", "--admin-token", "not-the-admin-token-at-all"], env)
    expect(wrong.status).toBe(1)
    expect(wrong.stderr).toContain("UNAUTHORIZED")
    const none = await run(["admin", "stats"], env)
    expect(none.status).toBe(2)
    expect(none.stderr).toContain("ADMIN_TOKEN")
  }, 60_000)

  it("migrate brings a fresh data directory up to date, and refuses one a server holds", async () => {
    const fresh = mkdtempSync(join(tmpdir(), "spendgate-cli-migrate-"))
    try {
      const first = json(await run(["migrate", "--json"], { DATA_DIR: fresh }))
      expect(first.applied.length).toBeGreaterThan(0)
      expect(first.applied[0]).toEqual({ id: 1, name: "accounts_agents" })
      expect(first.latest).toBe(first.applied.at(-1).id)
      const again = json(await run(["migrate", "--json"], { DATA_DIR: fresh }))
      expect(again.applied).toEqual([])
      const text = await run(["migrate"], { DATA_DIR: fresh })
      expect(text.stdout).toContain("up to date")
    } finally {
      rmSync(fresh, { recursive: true, force: true })
    }
    const held = await run(["migrate"], { DATA_DIR: dataDir })
    expect(held.status).toBe(1)
    expect(held.stderr).toContain("in use by another Spendgate process")
  }, 90_000)
})

describe("spendgate usage errors and unreachable servers", () => {
  it("a bad flag is a usage error naming it, exit 2", async () => {
    const result = await run(["agents", "ls", "--bogus", "--json"], env)
    expect(result.status).toBe(2)
    // The help and the error go to stderr: stdout stays empty (only JSON with --json).
    expect(result.stdout).toBe("")
    expect(result.stderr).toContain("spendgate agents ls [flags]")
    expect(result.stderr).toContain("Unrecognized flag: --bogus")
    const notANumber = await run(["fund", "lightning", "--sats", "many"], env)
    expect(notANumber.status).toBe(2)
    expect(notANumber.stderr).toContain("--sats")
  }, 30_000)

  it("no key is a usage error naming --key and SPENDGATE_API_KEY; nothing listening is exit 3", async () => {
    const noKey = await run(["wallet"], { SPENDGATE_URL: server.baseUrl })
    expect(noKey.status).toBe(2)
    expect(noKey.stdout).toBe("")
    expect(noKey.stderr).toContain("SPENDGATE_API_KEY")
    const probe = createServer()
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve))
    const port = (probe.address() as AddressInfo).port
    await new Promise((resolve) => probe.close(resolve))
    const away = await run(["wallet", "--url", `http://127.0.0.1:${port}`, "--key", "sk_agt_x"])
    expect(away.status).toBe(3)
    expect(away.stderr).toContain("could not reach")
    const badUrl = await run(["wallet", "--url", "ftp://example", "--key", "sk_agt_x"])
    expect(badUrl.status).toBe(2)
  }, 30_000)
})

/**
 * A proxy on 127.0.0.1 in front of the real server that passes everything on
 * and lets a test rewrite the JSON of chosen answers.
 */
const proxy = async (
  target: string,
  rewrite: (path: string, body: any) => any
): Promise<{ readonly url: string; readonly close: () => Promise<void> }> => {
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Array<Buffer> = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const headers: Record<string, string> = {}
    for (const name of ["authorization", "content-type", "accept"]) {
      const value = req.headers[name]
      if (typeof value === "string") headers[name] = value
    }
    const upstream = await fetch(`${target}${req.url}`, {
      method: req.method ?? "GET",
      headers,
      ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {})
    })
    const text = await upstream.text()
    const path = new URL(req.url ?? "/", "http://x").pathname
    const out = upstream.ok ? JSON.stringify(rewrite(path, JSON.parse(text))) : text
    res.writeHead(upstream.status, { "content-type": "application/json" })
    res.end(out)
  }
  const server: Server = createServer((req, res) => {
    handle(req, res).catch(() => {
      res.writeHead(502)
      res.end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve()))
  }
}

describe("spendgate receipt verify does not take a tampered record on the server's word", () => {
  it("a record whose content was changed (the server still says verified) fails, exit 1", async () => {
    const [, secondId] = auditIds
    const tampered = await proxy(server.baseUrl, (path, body) =>
      path.startsWith("/v1/audit/") ? { ...body, pocketChange: { ...body.pocketChange, sats: body.pocketChange.sats + 1 } } : body)
    try {
      const result = await run(["receipt", "verify", secondId!, "--url", tampered.url], env)
      expect(result.status).toBe(1)
      expect(result.stdout).toMatch(/^hash\s+MISMATCH/m)
      expect(result.stdout).toContain("NOT VERIFIED")
      expect(result.stderr).toContain(`receipt ${secondId} does not verify`)
      const asJson = await run(["receipt", "verify", secondId!, "--url", tampered.url, "--json"], env)
      expect(asJson.status).toBe(1)
      expect(JSON.parse(asJson.stdout)).toMatchObject({ hash: "mismatch", verified: false })
    } finally {
      await tampered.close()
    }
  }, 60_000)

  it("a changed previous record breaks the link (with the admin token)", async () => {
    const [firstId, secondId] = auditIds
    const tampered = await proxy(server.baseUrl, (path, body) =>
      path === "/v1/admin/audit-logs"
        ? {
          ...body,
          auditLogs: body.auditLogs.map((r: any) =>
            r.id === firstId ? { ...r, pocketChange: { ...r.pocketChange, sats: 50_000 } } : r)
        }
        : body)
    try {
      const result = await run(["receipt", "verify", secondId!, "--url", tampered.url, "--json"], { ...env, ADMIN_TOKEN })
      expect(result.status).toBe(1)
      expect(JSON.parse(result.stdout)).toMatchObject({ hash: "ok", link: "broken", verified: false })
      // The server's flag for its own chain is still true: only the local check caught it.
      expect(JSON.parse(result.stdout).record.verified).toBe(true)
    } finally {
      await tampered.close()
    }
  }, 60_000)

  it("a server that reports the chain broken at a record fails without the admin token", async () => {
    const [, secondId] = auditIds
    const tampered = await proxy(server.baseUrl, (path, body) =>
      path.startsWith("/v1/audit/") ? { ...body, verified: false } : body)
    try {
      const result = await run(["receipt", "verify", secondId!, "--url", tampered.url, "--json"], env)
      expect(result.status).toBe(1)
      expect(JSON.parse(result.stdout)).toMatchObject({ hash: "ok", link: "server-not-verified", verified: false })
    } finally {
      await tampered.close()
    }
  }, 60_000)

  it("fund lightning exits 1 when the invoice expires unpaid", async () => {
    // The real invoice lives an hour: the proxy reports it expired, as the listing does once it is.
    const expiring = await proxy(server.baseUrl, (path, body) =>
      path === "/v1/wallet/invoices"
        ? { ...body, invoices: body.invoices.map((i: any) => i.status === "pending" ? { ...i, status: "expired" } : i) }
        : body)
    try {
      const result = await run(["fund", "lightning", "--sats", "10", "--url", expiring.url, "--interval-ms", "200"], env)
      expect(result.status).toBe(1)
      expect(result.stdout).toMatch(/: expired$/m)
      expect(result.stderr).toContain("expired before it was paid")
    } finally {
      await expiring.close()
    }
  }, 60_000)
})
