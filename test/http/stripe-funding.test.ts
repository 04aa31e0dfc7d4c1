import { Redacted } from "effect"
import Stripe from "stripe"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as StripeRail from "../../adapters/rails/Stripe.ts"
import { client, errorCode, type RunningServer, startServer, storeBackends } from "../support/server.ts"
import { type FakeStripe, startFakeStripe } from "../rails/fakeStripe.ts"

/**
 * Card funding through Stripe end to end: the official SDK talks to a local
 * server speaking Stripe's wire format; signed webhooks credit the wallet once.
 */
const WEBHOOK_SECRET = "whsec_test_secret_for_spendgate"

describe.each(storeBackends)("card funding with the Stripe rail over %s", (_name, store) => {
  let fake: FakeStripe
  let server: RunningServer
  let api: ReturnType<typeof client>

  beforeAll(async () => {
    fake = await startFakeStripe()
    const config: StripeRail.StripeConfig = {
      secretKey: Redacted.make("sk_test_spendgate_0123456789"),
      webhookSecret: Redacted.make(WEBHOOK_SECRET),
      successUrl: "https://app.example/funded",
      cancelUrl: "https://app.example/cancelled",
      apiHost: "127.0.0.1",
      apiPort: fake.port,
      apiProtocol: "http"
    }
    server = await startServer(store(), { card: { rail: StripeRail.layer(config), routes: StripeRail.routes(config) } })
    api = client(server.baseUrl)
  })
  afterAll(async () => {
    await server?.close()
    await fake?.close()
  })

  const deliver = (event: object) => {
    const payload = JSON.stringify(event)
    const signature = Stripe.webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET })
    return fetch(`${server.baseUrl}/v1/webhooks/stripe`, {
      method: "POST",
      headers: { "content-type": "application/json", "stripe-signature": signature },
      body: payload
    })
  }

  const completed = (sessionId: string, paymentStatus: string, id: string) => ({
    id,
    object: "event",
    type: "checkout.session.completed",
    created: Math.floor(Date.now() / 1000),
    data: {
      object: { id: sessionId, object: "checkout.session", amount_total: 2500, currency: "usd", payment_status: paymentStatus }
    }
  })

  it("creates a Checkout Session and credits the usd pocket once for repeated webhooks", async () => {
    const signup = await api.post("/v1/signup", { name: "ops" })
    const key = signup.body.apiKey
    const fund = await api.post("/v1/wallet/fund-card", { amountUsdCents: 2500 }, key)
    expect(fund.status).toBe(200)
    expect(fund.body.sessionId).toMatch(/^cs_test_/)
    const request = fake.requests.at(-1)!
    expect(request.path).toBe("/v1/checkout/sessions")
    expect(request.form.get("line_items[0][price_data][unit_amount]")).toBe("2500")
    expect(request.form.get("client_reference_id")).toBe(fund.body.invoiceId)
    // The invoice expires when Stripe's session does: 30 minutes plus the margin Stripe needs.
    const pending = (await api.get("/v1/wallet/invoices?status=pending", key)).body.invoices[0]
    expect(new Date(pending.expiresAt).getTime()).toBe(Number(request.form.get("expires_at")) * 1000)
    const lifetime = new Date(pending.expiresAt).getTime() - new Date(pending.createdAt).getTime()
    expect(lifetime).toBeGreaterThanOrEqual(30 * 60 * 1000 + 120 * 1000)
    expect(lifetime).toBeLessThan(30 * 60 * 1000 + 122 * 1000)

    for (let i = 0; i < 3; i++) {
      const res = await deliver(completed(fund.body.sessionId, "paid", `evt_${i}`))
      expect(res.status).toBe(200)
    }
    const wallet = await api.get("/v1/wallet", key)
    expect(wallet.body.balanceUsdCents).toBe(2500)
    expect((await api.get("/v1/wallet/transactions?type=credit", key)).body.total).toBe(1)
    expect((await api.get("/v1/wallet/invoices?status=paid", key)).body.total).toBe(1)
  })

  it("waits for async_payment_succeeded when the session completed unpaid", async () => {
    const signup = await api.post("/v1/signup", { name: "ops" })
    const key = signup.body.apiKey
    const fund = await api.post("/v1/wallet/fund-card", { amountUsdCents: 2500 }, key)
    await deliver(completed(fund.body.sessionId, "unpaid", "evt_unpaid"))
    expect((await api.get("/v1/wallet", key)).body.balanceUsdCents).toBe(0)
    await deliver({ ...completed(fund.body.sessionId, "paid", "evt_async"), type: "checkout.session.async_payment_succeeded" })
    expect((await api.get("/v1/wallet", key)).body.balanceUsdCents).toBe(2500)
  })

  it("refuses a badly signed webhook and credits nothing", async () => {
    const signup = await api.post("/v1/signup", { name: "ops" })
    const key = signup.body.apiKey
    const fund = await api.post("/v1/wallet/fund-card", { amountUsdCents: 2500 }, key)
    const payload = JSON.stringify(completed(fund.body.sessionId, "paid", "evt_forged"))
    const signature = Stripe.webhooks.generateTestHeaderString({ payload, secret: "whsec_wrong" })
    const res = await fetch(`${server.baseUrl}/v1/webhooks/stripe`, {
      method: "POST",
      headers: { "content-type": "application/json", "stripe-signature": signature },
      body: payload
    })
    expect(res.status).toBe(400)
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("VALIDATION_ERROR")
    expect((await api.get("/v1/wallet", key)).body.balanceUsdCents).toBe(0)
    // The dev checkout page is not mounted while Stripe is the card rail.
    expect(errorCode(await api.get(`/dev/checkout/${fund.body.sessionId}`))).toBe("NOT_FOUND")
  })
})
