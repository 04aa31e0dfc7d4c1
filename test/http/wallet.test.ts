import { Effect, Result } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Agents } from "../../src/agents/Agents.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { parseBtcUsdRate } from "../../src/domain/Money.ts"
import { Spend } from "../../src/wallet/Spend.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { client, errorCode, type RunningServer, startServer, storeBackends } from "../support/server.ts"

const RATE = Result.getOrThrow(parseBtcUsdRate("50000"))

describe.each(storeBackends)("HTTP wallet, transactions and audit over %s", (_name, store) => {
  let server: RunningServer
  let api: ReturnType<typeof client>

  beforeAll(async () => {
    server = await startServer(store(), { rate: RATE })
    api = client(server.baseUrl)
  })
  afterAll(() => server?.close())

  /** An account with 10 USD and 2000 sats, a worker, and three calls made through the core. */
  const setup = async () => {
    const signup = await api.post("/v1/signup", { name: "ops" })
    const ownerKey: string = signup.body.apiKey
    const accountId: AccountId = signup.body.accountId
    const worker = await api.post("/v1/agents", { name: "worker" }, ownerKey)
    const receipts = await server.run(Effect.gen(function*() {
      const agents = yield* Agents
      const wallets = yield* Wallets
      const spend = yield* Spend
      yield* wallets.credit({ accountId, key: "card-1", pocket: "usd", amount: 10_000_000n, description: "card funding" })
      yield* wallets.credit({ accountId, key: "ln-1", pocket: "sats", amount: 2_000_000n, description: "lightning funding" })
      const owner = yield* agents.authenticate(ownerKey)
      const asWorker = yield* agents.authenticate(worker.body.apiKey)
      const run = (principal: typeof owner, actualMicroUsd: bigint) =>
        spend.spend(principal, {
          capability: "search",
          provider: "brave",
          quotedMicroUsd: 100_000n,
          description: "search call",
          run: Effect.succeed({ value: null, actualMicroUsd })
        })
      const a = yield* run(owner, 37_500n)
      const b = yield* run(asWorker, 50_000n)
      const c = yield* run(asWorker, 100_000n)
      return [a.receipt, b.receipt, c.receipt]
    }))
    return { ownerKey, accountId, workerId: worker.body.id as string, workerKey: worker.body.apiKey as string, receipts }
  }

  it("GET /v1/wallet shows both pockets to any agent of the account", async () => {
    const { ownerKey, workerKey, accountId } = await setup()
    for (const key of [ownerKey, workerKey]) {
      const res = await api.get("/v1/wallet", key)
      expect(res.status).toBe(200)
      // 1000 cents − (3.75 + 5 + 10) cents; 2000 sats untouched; 2000 sats = 100 cents at 50,000 USD/BTC
      expect(res.body).toEqual({ accountId, balanceUsdCents: 981.25, balanceSats: 2000, spendableUsdCents: 1081.25 })
    }
  })

  it("GET /v1/agents/{id}/wallet adds the agent's daily and lifetime spend, for owners only", async () => {
    const { ownerKey, workerId, workerKey } = await setup()
    const res = await api.get(`/v1/agents/${workerId}/wallet`, ownerKey)
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ agentId: workerId, dailySpentUsdCents: 15, lifetimeSpentUsdCents: 15, balanceUsdCents: 981.25 })
    const forbidden = await api.get(`/v1/agents/${workerId}/wallet`, workerKey)
    expect(errorCode(forbidden)).toBe("FORBIDDEN")
    const other = await setup()
    const notFound = await api.get(`/v1/agents/${workerId}/wallet`, other.ownerKey)
    expect(notFound.status).toBe(404)
    const policy = await api.get(`/v1/agents/${workerId}/policy`, ownerKey)
    expect(policy.body.dailySpentUsdCents).toBe(15)
  })

  it("lists transactions newest first with the spec's fields and filters", async () => {
    const { ownerKey, workerId, receipts } = await setup()
    const all = await api.get("/v1/wallet/transactions", ownerKey)
    expect(all.status).toBe(200)
    expect(all.body).toMatchObject({ total: 5, limit: 50, offset: 0 })
    expect(all.body.transactions.map((t: { type: string }) => t.type)).toEqual(["charge", "charge", "charge", "credit", "credit"])
    const newest = all.body.transactions[0]
    expect(newest).toMatchObject({
      type: "charge",
      amountUsdCents: 10,
      amountSats: 200,
      description: "search call",
      agentId: workerId,
      capability: "search",
      provider: "brave",
      auditId: receipts[2]!.auditId,
      pockets: { usdCents: 10, sats: 0 },
      btcUsdRate: 50000
    })
    expect(new Date(newest.createdAt).toISOString()).toBe(newest.createdAt)
    const sats = all.body.transactions[3]
    expect(sats).toMatchObject({ type: "credit", amountSats: 2000, amountUsdCents: 100, pockets: { usdCents: 0, sats: 2000 } })

    const charges = await api.get("/v1/wallet/transactions?type=charge&limit=2", ownerKey)
    expect(charges.body.total).toBe(3)
    expect(charges.body.transactions).toHaveLength(2)
    const page2 = await api.get("/v1/wallet/transactions?type=charge&limit=2&offset=2", ownerKey)
    expect(page2.body.transactions.map((t: { auditId: string }) => t.auditId)).toEqual([receipts[0]!.auditId])
    const byAgent = await api.get(`/v1/wallet/transactions?agentId=${workerId}`, ownerKey)
    expect(byAgent.body.total).toBe(2)
    const today = new Date().toISOString().slice(0, 10)
    const inclusive = await api.get(`/v1/wallet/transactions?startDate=${today}&endDate=${today}`, ownerKey)
    expect(inclusive.body.total).toBe(5)
    const past = await api.get("/v1/wallet/transactions?startDate=2020-01-01&endDate=2020-12-31", ownerKey)
    expect(past.body.total).toBe(0)
    const future = await api.get("/v1/wallet/transactions?startDate=2999-01-01", ownerKey)
    expect(future.body.total).toBe(0)
  })

  it("shows an agent-role key only its own transactions", async () => {
    const { ownerKey, workerKey, workerId } = await setup()
    const mine = await api.get("/v1/wallet/transactions", workerKey)
    expect(mine.body.total).toBe(2)
    expect(mine.body.transactions.every((t: { agentId: string }) => t.agentId === workerId)).toBe(true)
    const owners = await api.get("/v1/agents", ownerKey)
    const ownerId = owners.body.agents.find((a: { role: string }) => a.role === "owner").id
    const refused = await api.get(`/v1/wallet/transactions?agentId=${ownerId}`, workerKey)
    expect(errorCode(refused)).toBe("FORBIDDEN")
  })

  it("rejects bad transaction filters with 400 VALIDATION_ERROR", async () => {
    const { ownerKey } = await setup()
    for (
      const query of [
        "type=debit",
        "startDate=2026-02-30",
        "startDate=yesterday",
        "endDate=2026-1-1",
        "startDate=2026-05-02&endDate=2026-05-01",
        "limit=0",
        "limit=101",
        "offset=-5"
      ]
    ) {
      const res = await api.get(`/v1/wallet/transactions?${query}`, ownerKey)
      expect(res.status, query).toBe(400)
      expect(errorCode(res)).toBe("VALIDATION_ERROR")
    }
  })

  it("serves audit receipts to their account only, verified against the chain", async () => {
    const { ownerKey, workerKey, workerId, receipts } = await setup()
    // A worker reads the receipts of its own calls, not the owner's (docs/access.md).
    const own = await api.get(`/v1/audit/${receipts[1]!.auditId}`, workerKey)
    expect(own.status).toBe(200)
    expect(own.body).toMatchObject({ id: receipts[1]!.auditId, agentId: workerId, verified: true })
    const owners = await api.get(`/v1/audit/${receipts[0]!.auditId}`, workerKey)
    expect(owners.status).toBe(403)
    expect(errorCode(owners)).toBe("FORBIDDEN")
    for (const key of [ownerKey]) {
      const res = await api.get(`/v1/audit/${receipts[0]!.auditId}`, key)
      expect(res.status).toBe(200)
      expect(res.body).toMatchObject({
        id: receipts[0]!.auditId,
        kind: "settle",
        amountUsdCents: 3.75,
        pocketChange: { usdCents: 6.25, sats: 0 },
        details: { capability: "search", provider: "brave" },
        verified: true
      })
      expect(res.body.hash).toMatch(/^[0-9a-f]{64}$/)
      expect(res.body.prevHash).toMatch(/^[0-9a-f]{64}$/)
    }
    const other = await setup()
    const foreign = await api.get(`/v1/audit/${receipts[0]!.auditId}`, other.ownerKey)
    expect(foreign.status).toBe(404)
    expect(errorCode(foreign)).toBe("NOT_FOUND")
    const missing = await api.get("/v1/audit/aud_nothing", ownerKey)
    expect(missing.status).toBe(404)
  })

  it("requires a key on every wallet route", async () => {
    for (const path of ["/v1/wallet", "/v1/wallet/transactions", "/v1/audit/aud_x", "/v1/agents/agt_x/wallet"]) {
      const res = await api.get(path)
      expect(res.status, path).toBe(401)
    }
  })
})
