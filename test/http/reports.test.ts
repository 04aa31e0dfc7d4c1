import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Agents } from "../../src/agents/Agents.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { Store } from "../../src/ports/Store.ts"
import { Spend } from "../../src/wallet/Spend.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { EXPORT_PAGE_ROWS } from "../../src/wallet/reports.ts"
import { client, errorCode, type RunningServer, startServer, storeBackends } from "../support/server.ts"

const ADMIN_TOKEN = "admin-token-for-reports-tests-0123456789"

/** RFC 4180 records: quoted fields may hold commas, doubled quotes and line breaks. */
const parseCsv = (text: string): Array<Array<string>> => {
  const records: Array<Array<string>> = []
  let record: Array<string> = []
  let field = ""
  let i = 0
  let quoted = false
  while (i < text.length) {
    const c = text[i]!
    if (quoted) {
      if (c === "\"" && text[i + 1] === "\"") (field += "\"", i += 2)
      else if (c === "\"") (quoted = false, i++)
      else (field += c, i++)
    } else if (c === "\"" && field === "") (quoted = true, i++)
    else if (c === ",") (record.push(field), field = "", i++)
    else if (c === "\r" && text[i + 1] === "\n") (record.push(field), records.push(record), record = [], field = "", i += 2)
    else if (c === "\r" || c === "\n") throw new Error(`bare line break at ${i}`)
    else (field += c, i++)
  }
  if (field !== "" || record.length > 0) throw new Error("the last record has no CRLF")
  return records
}

describe.each(storeBackends)("owner reports over %s: spend summary and transactions CSV", (_name, store) => {
  let server: RunningServer
  let api: ReturnType<typeof client>

  beforeAll(async () => {
    server = await startServer(store(), { adminToken: ADMIN_TOKEN })
    api = client(server.baseUrl)
  })
  afterAll(() => server?.close())

  /** An account with 10 USD, a worker, three charges over two capabilities and providers, and a refund. */
  const setup = async (description = "search call") => {
    const signup = await api.post("/v1/signup", { name: "ops" })
    const ownerKey: string = signup.body.apiKey
    const ownerId: string = signup.body.agentId
    const accountId: AccountId = signup.body.accountId
    const worker = await api.post("/v1/agents", { name: "worker" }, ownerKey)
    const receipts = await server.run(Effect.gen(function*() {
      const agents = yield* Agents
      const wallets = yield* Wallets
      const spend = yield* Spend
      yield* wallets.credit({ accountId, key: "card-1", pocket: "usd", amount: 10_000_000n, description: "card funding" })
      const owner = yield* agents.authenticate(ownerKey)
      const asWorker = yield* agents.authenticate(worker.body.apiKey)
      const run = (principal: typeof owner, capability: "search" | "reason", provider: string, actualMicroUsd: bigint) =>
        spend.spend(principal, {
          capability,
          provider,
          quotedMicroUsd: 200_000n,
          description,
          run: Effect.succeed({ value: null, actualMicroUsd })
        })
      const a = yield* run(owner, "search", "brave", 37_500n)
      const b = yield* run(asWorker, "search", "brave", 50_000n)
      const c = yield* run(asWorker, "reason", "openai", 100_000n)
      return [a.receipt, b.receipt, c.receipt]
    }))
    const charges = await api.get("/v1/wallet/transactions?type=charge", ownerKey)
    const openaiCharge = charges.body.transactions.find((t: { provider: string }) => t.provider === "openai")
    const refund = await api.call("POST", `/v1/admin/transactions/${openaiCharge.id}/refund`, {
      key: ADMIN_TOKEN,
      body: { amountUsdCents: 4, reason: "slow answer" }
    })
    expect(refund.status).toBe(201)
    return { ownerKey, ownerId, accountId, workerId: worker.body.id as string, workerKey: worker.body.apiKey as string, receipts }
  }

  it("sums an owner's charges and refunds by day, agent, capability and provider", async () => {
    const { ownerKey, ownerId, workerId } = await setup()
    const res = await api.get("/v1/wallet/spend?days=7", ownerKey)
    expect(res.status).toBe(200)
    const today = new Date().toISOString().slice(0, 10)
    expect(res.body.days).toBe(7)
    expect(res.body.agentId).toBeNull()
    expect(res.body.total).toEqual({ calls: 3, chargedUsdCents: 18.75, refundedUsdCents: 4 })
    expect(res.body.byDay).toHaveLength(7)
    expect(res.body.byDay[6]).toEqual({ day: today, calls: 3, chargedUsdCents: 18.75, refundedUsdCents: 4 })
    expect(res.body.byDay.slice(0, 6).every((d: { calls: number }) => d.calls === 0)).toBe(true)
    const days = res.body.byDay.map((d: { day: string }) => d.day)
    expect([...days].sort()).toEqual(days)
    expect(res.body.until).toBe(new Date(Date.parse(`${today}T00:00:00.000Z`) + 86_400_000).toISOString())
    expect(res.body.from).toBe(new Date(Date.parse(`${today}T00:00:00.000Z`) - 6 * 86_400_000).toISOString())
    expect(res.body.byAgent).toEqual([
      { agentId: workerId, name: "worker", calls: 2, chargedUsdCents: 15, refundedUsdCents: 4 },
      { agentId: ownerId, name: "ops", calls: 1, chargedUsdCents: 3.75, refundedUsdCents: 0 }
    ])
    expect(res.body.byCapability).toEqual([
      { capability: "reason", calls: 1, chargedUsdCents: 10, refundedUsdCents: 4 },
      { capability: "search", calls: 2, chargedUsdCents: 8.75, refundedUsdCents: 0 }
    ])
    expect(res.body.byProvider).toEqual([
      { provider: "openai", calls: 1, chargedUsdCents: 10, refundedUsdCents: 4 },
      { provider: "brave", calls: 2, chargedUsdCents: 8.75, refundedUsdCents: 0 }
    ])
    const standard = await api.get("/v1/wallet/spend", ownerKey)
    expect(standard.body.days).toBe(30)
    expect(standard.body.byDay).toHaveLength(30)
    const todayOnly = await api.get("/v1/wallet/spend?days=1", ownerKey)
    expect(todayOnly.body.byDay).toEqual([{ day: today, calls: 3, chargedUsdCents: 18.75, refundedUsdCents: 4 }])
  })

  it("limits the summary to one agent: an owner by filter, an agent-role key always to itself", async () => {
    const { ownerKey, ownerId, workerId, workerKey } = await setup()
    const filtered = await api.get(`/v1/wallet/spend?agentId=${workerId}`, ownerKey)
    expect(filtered.status).toBe(200)
    expect(filtered.body.agentId).toBe(workerId)
    expect(filtered.body.total).toEqual({ calls: 2, chargedUsdCents: 15, refundedUsdCents: 4 })
    expect(filtered.body.byAgent.map((a: { agentId: string }) => a.agentId)).toEqual([workerId])
    const own = await api.get("/v1/wallet/spend", workerKey)
    expect(own.status).toBe(200)
    expect(own.body).toEqual(filtered.body)
    const refused = await api.get(`/v1/wallet/spend?agentId=${ownerId}`, workerKey)
    expect(refused.status).toBe(403)
    expect(errorCode(refused)).toBe("FORBIDDEN")
    // Another account sees none of it.
    const other = await setup()
    const foreign = await api.get(`/v1/wallet/spend?agentId=${workerId}`, other.ownerKey)
    expect(foreign.status).toBe(200)
    expect(foreign.body.total.calls).toBe(0)
    expect(foreign.body.byAgent).toEqual([])
  })

  it("groups only the rows inside the window", async () => {
    const { accountId } = await setup()
    const today = Date.parse(`${new Date().toISOString().slice(0, 10)}T00:00:00.000Z`)
    const groups = (from: number, until: number) =>
      server.run(Effect.gen(function*() {
        return yield* (yield* Store).spendGroups(accountId, { from: new Date(from), until: new Date(until) })
      }))
    const yesterday = await groups(today - 86_400_000, today)
    expect(yesterday).toEqual({ byDay: [], byAgent: [], byCapability: [], byProvider: [] })
    const tomorrow = await groups(today + 86_400_000, today + 2 * 86_400_000)
    expect(tomorrow.byDay).toEqual([])
    const now = await groups(today, today + 86_400_000)
    expect(now.byDay).toHaveLength(1)
    expect(now.byDay[0]).toMatchObject({ calls: 3, chargedMicroUsd: 187_500n, refundedMicroUsd: 40_000n })
  })

  it("rejects bad summary parameters with 400 VALIDATION_ERROR", async () => {
    const { ownerKey } = await setup()
    for (const query of ["days=0", "days=367", "days=abc", "days=1.5", "days=-1", `agentId=${"a".repeat(65)}`]) {
      const res = await api.get(`/v1/wallet/spend?${query}`, ownerKey)
      expect(res.status, query).toBe(400)
      expect(errorCode(res)).toBe("VALIDATION_ERROR")
    }
  })

  it("exports every matching transaction as RFC 4180 CSV, newest first, as an attachment", async () => {
    const { ownerKey } = await setup("call, with \"quotes\"\nand a line break")
    const res = await api.get("/v1/wallet/transactions.csv", ownerKey)
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toMatch(/^text\/csv/)
    expect(res.headers.get("content-disposition")).toMatch(/^attachment; filename="spendgate-transactions-\d{4}-\d{2}-\d{2}\.csv"$/)
    const records = parseCsv(res.text)
    expect(records[0]).toEqual([
      "id", "createdAt", "type", "amountUsdCents", "amountSats", "pocketUsdCents", "pocketSats",
      "btcUsdRate", "agentId", "capability", "provider", "description", "auditId", "refundOf"
    ])
    const json = await api.get("/v1/wallet/transactions", ownerKey)
    expect(records).toHaveLength(1 + json.body.total)
    const rows = records.slice(1)
    expect(rows.map((r) => r[0])).toEqual(json.body.transactions.map((t: { id: string }) => t.id))
    for (const [index, t] of json.body.transactions.entries()) {
      const row = rows[index]!
      expect(row[1]).toBe(t.createdAt)
      expect(row[2]).toBe(t.type)
      expect(Number(row[3])).toBe(t.amountUsdCents)
      expect(row[4]).toBe(String(t.amountSats))
      expect(row[7]).toBe(t.btcUsdRate === null ? "" : String(t.btcUsdRate))
      expect(row[8]).toBe(t.agentId ?? "")
      expect(row[11]).toBe(t.description)
      expect(row[12]).toBe(t.auditId)
      expect(row[13]).toBe(t.refundOf ?? "")
    }
    const charge = rows.find((r) => r[2] === "charge" && r[10] === "brave")!
    expect(charge[11]).toBe("call, with \"quotes\"\nand a line break")
    const refund = rows.find((r) => r[2] === "refund")!
    expect(refund[13]).toMatch(/^txn_/)
  })

  it("escapes cells a spreadsheet would run as a formula", async () => {
    for (const start of ["=", "+", "-", "@"]) {
      const description = `${start}HYPERLINK("http://evil.example","x")`
      const { ownerKey } = await setup(description)
      const res = await api.get("/v1/wallet/transactions.csv?type=charge", ownerKey)
      const rows = parseCsv(res.text).slice(1)
      expect(rows).toHaveLength(3)
      for (const row of rows) expect(row[11]).toBe(`'${description}`)
    }
  })

  it("applies the list's filters and access to the export", async () => {
    const { ownerKey, ownerId, workerId, workerKey } = await setup()
    const charges = parseCsv((await api.get("/v1/wallet/transactions.csv?type=charge", ownerKey)).text).slice(1)
    expect(charges.map((r) => r[2])).toEqual(["charge", "charge", "charge"])
    const worker = parseCsv((await api.get(`/v1/wallet/transactions.csv?agentId=${workerId}`, ownerKey)).text).slice(1)
    expect(worker).toHaveLength(3)
    expect(worker.every((r) => r[8] === workerId)).toBe(true)
    const today = new Date().toISOString().slice(0, 10)
    const dated = parseCsv((await api.get(`/v1/wallet/transactions.csv?startDate=${today}&endDate=${today}`, ownerKey)).text)
    expect(dated).toHaveLength(1 + 5)
    const past = parseCsv((await api.get("/v1/wallet/transactions.csv?endDate=2020-01-01", ownerKey)).text)
    expect(past).toHaveLength(1)
    const own = parseCsv((await api.get("/v1/wallet/transactions.csv", workerKey)).text).slice(1)
    expect(own).toEqual(worker)
    const refused = await api.get(`/v1/wallet/transactions.csv?agentId=${ownerId}`, workerKey)
    expect(refused.status).toBe(403)
    expect(errorCode(refused)).toBe("FORBIDDEN")
    const anonymous = await api.get("/v1/wallet/transactions.csv")
    expect(anonymous.status).toBe(401)
    for (const query of ["type=debit", "startDate=2026-02-30", "endDate=tomorrow", "startDate=2026-05-02&endDate=2026-05-01"]) {
      const bad = await api.get(`/v1/wallet/transactions.csv?${query}`, ownerKey)
      expect(bad.status, query).toBe(400)
      expect(errorCode(bad)).toBe("VALIDATION_ERROR")
    }
  })

  it("reads one transaction by id: the account's only, an agent-role key its own only", async () => {
    const { ownerKey, workerKey, workerId } = await setup()
    const list = (await api.get("/v1/wallet/transactions", ownerKey)).body.transactions
    for (const t of list) {
      const one = await api.get(`/v1/wallet/transactions/${t.id}`, ownerKey)
      expect(one.status).toBe(200)
      expect(one.body).toEqual(t)
    }
    const workers = list.filter((t: { agentId: string }) => t.agentId === workerId)
    const others = list.filter((t: { agentId: string }) => t.agentId !== workerId)
    expect((await api.get(`/v1/wallet/transactions/${workers[0].id}`, workerKey)).status).toBe(200)
    const refused = await api.get(`/v1/wallet/transactions/${others[0].id}`, workerKey)
    expect(refused.status).toBe(403)
    expect(errorCode(refused)).toBe("FORBIDDEN")
    const other = await setup()
    const foreign = await api.get(`/v1/wallet/transactions/${list[0].id}`, other.ownerKey)
    expect(foreign.status).toBe(404)
    expect(errorCode(foreign)).toBe("NOT_FOUND")
    expect((await api.get("/v1/wallet/transactions/txn_nothing", ownerKey)).status).toBe(404)
    expect(errorCode(await api.get(`/v1/wallet/transactions/${"x".repeat(65)}`, ownerKey))).toBe("VALIDATION_ERROR")
    expect((await api.get(`/v1/wallet/transactions/${list[0].id}`)).status).toBe(401)
  })

  it("walks every page of a long export once, in order", async () => {
    const signup = await api.post("/v1/signup", { name: "bulk" })
    const accountId: AccountId = signup.body.accountId
    const count = EXPORT_PAGE_ROWS * 2 + 37
    await server.run(Effect.gen(function*() {
      const wallets = yield* Wallets
      for (let i = 0; i < count; i++) {
        yield* wallets.credit({ accountId, key: `bulk-${i}`, pocket: "usd", amount: 10_000n, description: `credit ${i}` })
      }
    }))
    const res = await api.get("/v1/wallet/transactions.csv", signup.body.apiKey)
    expect(res.status).toBe(200)
    expect(res.headers.get("x-total-count")).toBe(String(count))
    const rows = parseCsv(res.text).slice(1)
    expect(rows).toHaveLength(count)
    expect(new Set(rows.map((r) => r[0])).size).toBe(count)
    expect(rows[0]![11]).toBe(`credit ${count - 1}`)
    expect(rows[count - 1]![11]).toBe("credit 0")
    const ids = rows.map((r) => `${r[1]} ${r[0]}`)
    expect([...ids].sort().reverse()).toEqual(ids)
  }, 60_000)
})
