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

  it("refuses agent keys with 403, other tokens with 401, and is absent without a token", async () => {
    const signup = await api.post("/v1/signup", { name: "ops" })
    for (const path of ["/v1/admin/rate", "/v1/admin/late-payments"]) {
      expect(errorCode(await admin(path, signup.body.apiKey))).toBe("FORBIDDEN")
      expect(errorCode(await admin(path, "wrong-token"))).toBe("UNAUTHORIZED")
      expect((await api.get(path)).status).toBe(401)
      const absent = await client(off.baseUrl).call("GET", path, { headers: { authorization: `Bearer ${TOKEN}` } })
      expect(absent.status).toBe(404)
      expect(errorCode(absent)).toBe("NOT_FOUND")
    }
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
