import { Result } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import { parseBtcUsdRate } from "../../src/domain/Money.ts"
import { PaymentSink } from "../../src/ports/Rails.ts"
import { Effect } from "effect"
import { client, errorCode, type RunningServer, startServer } from "../support/server.ts"

const TOKEN = "admin-token-for-tests-0123456789"

describe("the operator's admin API", () => {
  let server: RunningServer
  let off: RunningServer
  let api: ReturnType<typeof client>

  beforeAll(async () => {
    server = await startServer(MemoryStore.layer, {
      adminToken: TOKEN,
      rate: Result.getOrThrow(parseBtcUsdRate("65000.12"))
    })
    off = await startServer(MemoryStore.layer)
    api = client(server.baseUrl)
  })
  afterAll(async () => {
    await server?.close()
    await off?.close()
  })

  const admin = (path: string, token = TOKEN) => api.call("GET", path, { headers: { authorization: `Bearer ${token}` } })

  it("serves the BTC/USD rate with the admin token", async () => {
    const res = await admin("/v1/admin/rate")
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ rate: 65000.12, stale: false })
    expect(typeof res.body.asOf).toBe("string")
  })

  const ADMIN_GETS = [
    "/v1/admin/rate",
    "/v1/admin/late-payments",
    "/v1/admin/stats",
    "/v1/admin/agents",
    "/v1/admin/transactions",
    "/v1/admin/audit-logs",
    "/v1/admin/service-health",
    "/v1/admin/registry/submissions"
  ]

  it("refuses agent keys with 403, other tokens with 401, and is absent without a token", async () => {
    const signup = await api.post("/v1/signup", { name: "ops" })
    for (const path of ADMIN_GETS) {
      expect(errorCode(await admin(path, signup.body.apiKey))).toBe("FORBIDDEN")
      expect(errorCode(await admin(path, "wrong-token"))).toBe("UNAUTHORIZED")
      expect((await api.get(path)).status).toBe(401)
      const absent = await client(off.baseUrl).call("GET", path, { headers: { authorization: `Bearer ${TOKEN}` } })
      expect(absent.status).toBe(404)
      expect(errorCode(absent)).toBe("NOT_FOUND")
    }
  })

  it("refuses agent keys on the admin POST routes too", async () => {
    const signup = await api.post("/v1/signup", { name: "ops" })
    for (const path of ["/v1/admin/registry/submissions/sub_x/approve", "/v1/admin/registry/submissions/sub_x/reject"]) {
      const res = await api.call("POST", path, { key: signup.body.apiKey, body: {} })
      expect(errorCode(res), path).toBe("FORBIDDEN")
    }
  })

  it("serves stats, agents, transactions, audit logs and service health with the admin token", async () => {
    const signup = await api.post("/v1/signup", { name: "stats" })
    const fund = await api.post("/v1/wallet/fund-card", { amountUsdCents: 1500 }, signup.body.apiKey)
    await fetch(`${server.baseUrl}${new URL(fund.body.checkoutUrl).pathname}/pay`, { method: "POST" })
    const stats = await admin("/v1/admin/stats?days=7")
    expect(stats.status).toBe(200)
    expect(stats.body.accounts).toBeGreaterThanOrEqual(1)
    expect(stats.body.funding.some((f: { pocket: string; usdCents: number }) => f.pocket === "usd" && f.usdCents >= 1500)).toBe(true)
    expect(stats.body.balances.usdCents).toBeGreaterThanOrEqual(1500)
    const agents = await admin(`/v1/admin/agents?accountId=${signup.body.accountId}`)
    expect(agents.body).toMatchObject({ total: 1, limit: 50, offset: 0 })
    expect(agents.body.agents[0]).toMatchObject({ id: signup.body.agentId, accountId: signup.body.accountId, role: "owner" })
    const txns = await admin(`/v1/admin/transactions?accountId=${signup.body.accountId}&type=credit`)
    expect(txns.body.transactions).toHaveLength(1)
    expect(txns.body.transactions[0]).toMatchObject({ type: "credit", amountUsdCents: 1500, accountId: signup.body.accountId })
    const audit = await admin(`/v1/admin/audit-logs?accountId=${signup.body.accountId}&kind=credit`)
    expect(audit.body.auditLogs[0]).toMatchObject({ kind: "credit", seq: 1, accountId: signup.body.accountId })
    const health = await admin("/v1/admin/service-health")
    expect(health.status).toBe(200)
    expect(Array.isArray(health.body.providers)).toBe(true)
    expect(errorCode(await admin("/v1/admin/stats?days=0"))).toBe("VALIDATION_ERROR")
    expect(errorCode(await admin("/v1/admin/agents?killed=maybe"))).toBe("VALIDATION_ERROR")
  })

  it("shows payments that arrived after expiry", async () => {
    const signup = await api.post("/v1/signup", { name: "late" })
    const fund = await api.post("/v1/wallet/fund", { amountSats: 777 }, signup.body.apiKey)
    const outcome = await server.run(Effect.gen(function*() {
      const sink = yield* PaymentSink
      return yield* sink.record({
        type: "lightning",
        externalId: fund.body.paymentHash,
        paidAt: new Date(Date.parse(fund.body.expiresAt) + 1000),
        source: "test"
      })
    }))
    expect(outcome).toBe("late")
    const res = await admin("/v1/admin/late-payments")
    expect(res.status).toBe(200)
    expect(res.body.invoices[0]).toMatchObject({
      id: fund.body.invoiceId,
      accountId: signup.body.accountId,
      status: "expired",
      latePaymentAmountSats: 777
    })
    const owner = await api.get("/v1/wallet/invoices", signup.body.apiKey)
    expect(owner.body.invoices[0].latePaymentAt).toBeDefined()
    expect((await api.get("/v1/wallet", signup.body.apiKey)).body.balanceSats).toBe(0)
  })
})
