import { createHash } from "node:crypto"
import bolt11 from "bolt11"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { AccountId } from "../../src/domain/ids.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { client, errorCode, type RunningServer, startServer, storeBackends, TEST_PUBLIC_URL } from "../support/server.ts"

const ADMIN = "admin-token-for-funding-tests-0123456789"
const REGTEST = { bech32: "bcrt", pubKeyHash: 0x6f, scriptHash: 0xc4, validWitnessVersions: [0, 1] }

describe.each(storeBackends)("HTTP funding with the dev rails over %s", (_name, store) => {
  let server: RunningServer
  let api: ReturnType<typeof client>

  beforeAll(async () => {
    server = await startServer(store(), { adminToken: ADMIN })
    api = client(server.baseUrl)
  })
  afterAll(() => server?.close())

  const signup = async () => {
    const res = await api.post("/v1/signup", { name: "ops" })
    return res.body as { apiKey: string; agentId: string; accountId: string }
  }

  it("funds by Lightning: a real BOLT11 invoice, paid with the dev payer, credits the sats pocket once", async () => {
    const { apiKey } = await signup()
    const res = await api.post("/v1/wallet/fund", { amountSats: 2100 }, apiKey)
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ amountSats: 2100 })
    expect(res.body.invoiceId).toMatch(/^inv_/)
    const decoded = bolt11.decode(res.body.paymentRequest, REGTEST)
    expect(decoded.satoshis).toBe(2100)
    expect(decoded.tagsObject.payment_hash).toBe(res.body.paymentHash)
    expect((decoded.timeExpireDate ?? 0) - (decoded.timestamp ?? 0)).toBe(3600)
    expect(Date.parse(res.body.expiresAt) - (decoded.timestamp ?? 0) * 1000).toBeGreaterThanOrEqual(3_599_000)

    const pending = await api.get("/v1/wallet/invoices", apiKey)
    expect(pending.body.invoices[0]).toMatchObject({ id: res.body.invoiceId, type: "lightning", status: "pending", amountSats: 2100 })

    const paid = await api.post("/v1/dev/lightning/pay", { paymentRequest: res.body.paymentRequest })
    expect(paid.status).toBe(200)
    expect(paid.body).toEqual({ invoiceId: res.body.invoiceId, outcome: "credited", preimage: expect.stringMatching(/^[0-9a-f]{64}$/) })
    // The payer learns the preimage: its SHA-256 is the invoice's payment hash.
    expect(createHash("sha256").update(Buffer.from(paid.body.preimage, "hex")).digest("hex")).toBe(res.body.paymentHash)
    const again = await api.post("/v1/dev/lightning/pay", { paymentRequest: res.body.paymentRequest })
    expect(again.body.outcome).toBe("duplicate")
    expect(again.body.preimage).toBe(paid.body.preimage)

    const wallet = await api.get("/v1/wallet", apiKey)
    expect(wallet.body).toMatchObject({ balanceSats: 2100, balanceUsdCents: 0 })
    const invoices = await api.get("/v1/wallet/invoices?status=paid", apiKey)
    expect(invoices.body.total).toBe(1)
    expect(invoices.body.invoices[0].paidAt).toBeDefined()
    const credits = await api.get("/v1/wallet/transactions?type=credit", apiKey)
    expect(credits.body.transactions).toHaveLength(1)
    expect(credits.body.transactions[0]).toMatchObject({ type: "credit", amountSats: 2100, pockets: { usdCents: 0, sats: 2100 } })
  })

  it("funds by card: the dev checkout page's Pay button credits the usd pocket", async () => {
    const { apiKey } = await signup()
    const res = await api.post("/v1/wallet/fund-card", { amountUsdCents: 2500 }, apiKey)
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ amountUsdCents: 2500 })
    expect(res.body.checkoutUrl).toBe(`${TEST_PUBLIC_URL}/dev/checkout/${res.body.sessionId}`)
    const path = new URL(res.body.checkoutUrl).pathname
    const pageRes = await fetch(`${server.baseUrl}${path}`)
    expect(pageRes.status).toBe(200)
    expect(pageRes.headers.get("content-type")).toContain("text/html")
    const html = await pageRes.text()
    expect(html).toContain("$25.00")
    expect(html).toContain(`action="${path}/pay"`)
    const pay = await fetch(`${server.baseUrl}${path}/pay`, { method: "POST" })
    expect(pay.status).toBe(200)
    expect(await pay.text()).toContain("the wallet has been credited")
    const wallet = await api.get("/v1/wallet", apiKey)
    expect(wallet.body).toMatchObject({ balanceUsdCents: 2500, balanceSats: 0 })
    const after = await (await fetch(`${server.baseUrl}${path}`)).text()
    expect(after).toContain("paid")
  })

  it("answers INVALID_AMOUNT for amounts the rails cannot take", async () => {
    const { apiKey } = await signup()
    const card = await api.post("/v1/wallet/fund-card", { amountUsdCents: 999 }, apiKey)
    expect(card.status).toBe(400)
    expect(errorCode(card)).toBe("INVALID_AMOUNT")
    expect(card.body.error.details).toEqual({ minimum: 1000, maximum: 10_000_000 })
    for (const amountUsdCents of [1000.5, -1000, 0]) {
      expect(errorCode(await api.post("/v1/wallet/fund-card", { amountUsdCents }, apiKey))).toBe("INVALID_AMOUNT")
    }
    for (const amountSats of [0, -5, 1.5]) {
      expect(errorCode(await api.post("/v1/wallet/fund", { amountSats }, apiKey))).toBe("INVALID_AMOUNT")
    }
    for (const body of [{}, { amountSats: "100" }, { amountSats: 1, extra: true }]) {
      expect(errorCode(await api.post("/v1/wallet/fund", body, apiKey))).toBe("VALIDATION_ERROR")
    }
    expect((await api.get("/v1/wallet/invoices", apiKey)).body.total).toBe(0)
  })

  it("answers 400 INVALID_AMOUNT { minimum, maximum } above the per-invoice maximum, never 500", async () => {
    const { apiKey } = await signup()
    for (const amountUsdCents of [10_000_001, 9.2e14, 1e15, 1e300]) {
      const res = await api.post("/v1/wallet/fund-card", { amountUsdCents }, apiKey)
      expect(res.status).toBe(400)
      expect(errorCode(res)).toBe("INVALID_AMOUNT")
      expect(res.body.error.details).toEqual({ minimum: 1000, maximum: 10_000_000 })
    }
    for (const amountSats of [100_000_001, 1e15, 9_007_199_254_740_991]) {
      const res = await api.post("/v1/wallet/fund", { amountSats }, apiKey)
      expect(res.status).toBe(400)
      expect(errorCode(res)).toBe("INVALID_AMOUNT")
      expect(res.body.error.details).toEqual({ minimum: 1, maximum: 100_000_000 })
    }
    expect((await api.get("/v1/wallet/invoices", apiKey)).body.total).toBe(0)
    expect((await api.post("/v1/wallet/fund-card", { amountUsdCents: 10_000_000 }, apiKey)).status).toBe(200)
    expect((await api.post("/v1/wallet/fund", { amountSats: 100_000_000 }, apiKey)).status).toBe(200)
  })

  it("a payment that would overfill the wallet is refused, recorded for the operator, and later payments still credit", async () => {
    const { accountId, apiKey } = await signup()
    // 5,000 cents short of the usd pocket's maximum (10^15 µUSD = $1,000,000,000).
    await server.run(Effect.gen(function*() {
      const wallets = yield* Wallets
      yield* wallets.credit({ accountId: accountId as AccountId, key: "seed", pocket: "usd", amount: 10n ** 15n - 50_000_000n, description: "seed" })
    }))
    const before = await api.get("/v1/wallet", apiKey)
    const pay = async (amountUsdCents: number) => {
      const res = await api.post("/v1/wallet/fund-card", { amountUsdCents }, apiKey)
      expect(res.status).toBe(200)
      const path = new URL(res.body.checkoutUrl).pathname
      const paid = await fetch(`${server.baseUrl}${path}/pay`, { method: "POST" })
      return { invoiceId: res.body.invoiceId as string, status: paid.status, text: await paid.text() }
    }
    const refused = await pay(10_000)
    expect(refused.status).toBe(200)
    expect(refused.text).toContain("nothing was credited")
    expect((await api.get("/v1/wallet", apiKey)).body).toEqual(before.body)
    const listed = await api.get("/v1/wallet/invoices?status=refused", apiKey)
    expect(listed.body.total).toBe(1)
    expect(listed.body.invoices[0]).toMatchObject({ id: refused.invoiceId, status: "refused", amountUsdCents: 10_000 })
    expect(listed.body.invoices[0].latePaymentAt).toBeDefined()
    expect((await api.get("/v1/wallet/invoices?status=pending", apiKey)).body.total).toBe(0)
    const operator = await api.get("/v1/admin/late-payments?limit=100", ADMIN)
    expect(operator.status).toBe(200)
    expect(operator.body.invoices).toContainEqual(
      expect.objectContaining({ id: refused.invoiceId, status: "refused", accountId, latePaymentAmountUsdCents: 10_000 })
    )
    const fits = await pay(5_000)
    expect(fits.text).toContain("the wallet has been credited")
    expect((await api.get("/v1/wallet", apiKey)).body.balanceUsdCents).toBe(100_000_000_000)
    const credits = await api.get("/v1/wallet/transactions?type=credit", apiKey)
    expect(credits.body.total).toBe(2)
  })

  it("keeps funding and invoices to owners", async () => {
    const { apiKey } = await signup()
    const worker = await api.post("/v1/agents", { name: "worker" }, apiKey)
    for (
      const res of [
        await api.post("/v1/wallet/fund", { amountSats: 10 }, worker.body.apiKey),
        await api.post("/v1/wallet/fund-card", { amountUsdCents: 1000 }, worker.body.apiKey),
        await api.get("/v1/wallet/invoices", worker.body.apiKey)
      ]
    ) {
      expect(res.status).toBe(403)
      expect(errorCode(res)).toBe("FORBIDDEN")
    }
    expect((await api.post("/v1/wallet/fund", { amountSats: 10 })).status).toBe(401)
  })

  it("replays a funding request sent twice with the same Idempotency-Key", async () => {
    const { apiKey } = await signup()
    const send = () =>
      api.call("POST", "/v1/wallet/fund", { key: apiKey, body: { amountSats: 500 }, headers: { "idempotency-key": "fund-1" } })
    const [a, b] = await Promise.all([send(), send()])
    expect(a.status).toBe(200)
    expect(b.body).toEqual(a.body)
    expect((await api.get("/v1/wallet/invoices", apiKey)).body.total).toBe(1)
  })

  it("pages and filters invoices, newest first", async () => {
    const { apiKey } = await signup()
    const made = []
    for (let i = 1; i <= 3; i++) made.push((await api.post("/v1/wallet/fund", { amountSats: i }, apiKey)).body.invoiceId)
    const page = await api.get("/v1/wallet/invoices?limit=2&offset=1", apiKey)
    expect(page.body).toMatchObject({ total: 3, limit: 2, offset: 1 })
    expect(page.body.invoices.map((i: { id: string }) => i.id)).toEqual([made[1], made[0]])
    expect((await api.get("/v1/wallet/invoices?status=expired", apiKey)).body.total).toBe(0)
    expect(errorCode(await api.get("/v1/wallet/invoices?status=open", apiKey))).toBe("VALIDATION_ERROR")
    expect(errorCode(await api.get("/v1/wallet/invoices?limit=101", apiKey))).toBe("VALIDATION_ERROR")
  })

  it("refuses to dev-pay something that is not a dev invoice", async () => {
    expect(errorCode(await api.post("/v1/dev/lightning/pay", { paymentRequest: "lnbcrt1nope" }))).toBe("NOT_FOUND")
    expect(errorCode(await api.post("/v1/dev/lightning/pay", { nope: 1 }))).toBe("VALIDATION_ERROR")
    expect((await fetch(`${server.baseUrl}/dev/checkout/cs_dev_missing`)).status).toBe(404)
  })
})
