import { createHash } from "node:crypto"
import { upstreamLayers } from "../support/upstreamLayers.ts"
import { Effect, Layer, Option, Redacted, Result } from "effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import * as SafeHttp from "../../adapters/net/SafeHttp.ts"
import * as Lnd from "../../adapters/rails/Lnd.ts"
import * as Transport from "../../adapters/services/transport.ts"
import type { AgentId } from "../../src/domain/ids.ts"
import { RegistryStore } from "../../src/ports/RegistryStore.ts"
import { newSubmissionId } from "../../src/services/Service.ts"
import { storeOverClient } from "../../adapters/sql/Database.ts"
import * as PgliteClient from "../../adapters/sql/PgliteClient.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { parseBtcUsdRate } from "../../src/domain/Money.ts"
import { L402PaymentStore, type OutboundPayment } from "../../src/ports/L402PaymentStore.ts"
import { Store } from "../../src/ports/Store.ts"
import { L402Payments } from "../../src/l402/Pay.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { type FakeLnd, MACAROON_HEX, startFakeLnd } from "../rails/fakeLnd.ts"
import { client, errorCode, type RunningServer, startServer } from "../support/server.ts"
import { type Paywall, startPaywall } from "./paywall.ts"

/**
 * Outbound L402 end to end: a local paywall speaking the real challenge
 * format (a V2 macaroon with caveats, a BOLT11 invoice asked from the fake
 * LND over its REST interface, the preimage checked on the retry), the
 * gateway on PGlite paying through the LND rail against that same fake
 * node, at $100,000 per BTC (1 sat = 0.1 US cent).
 */

let fake: FakeLnd
let paywall: Paywall
let server: RunningServer
let api: ReturnType<typeof client>

beforeAll(async () => {
  fake = await startFakeLnd()
  paywall = await startPaywall({ lndUrl: fake.url, lndMacaroonHex: MACAROON_HEX, priceSats: 50 })
  server = await startServer(storeOverClient.pipe(Layer.provide(PgliteClient.layer({ dataDir: undefined }))), {
    rate: Result.getOrThrow(parseBtcUsdRate("100000")),
    lightning: Lnd.layer({ restUrl: fake.url, macaroonHex: Redacted.make(MACAROON_HEX), requestTimeoutMs: 5_000 }),
    outbound: SafeHttp.layer({ allowHosts: [paywall.host] }),
    // Registry services may be reached at the local paywall (registry URLs are https in production).
    transport: Transport.layer({ operatorServices: [], registry: { allowHosts: [paywall.host] } })
      .pipe(Layer.provide(upstreamLayers))
  })
  api = client(server.baseUrl)
}, 60_000)

afterAll(async () => {
  await server?.close()
  await paywall?.close()
  await fake?.close()
})

beforeEach(() => {
  paywall.options = { ...paywall.options, priceSats: 50, scheme: "L402", paramName: "macaroon" }
  fake.payBehaviour = undefined
})

/** An owner with $1 in the wallet, the paywall's host allowed, and an agent limited to `pay`. */
const account = async (policy: Record<string, unknown> = {}) => {
  const signup = await api.post("/v1/signup", { name: "ops" })
  const accountId = signup.body.accountId as AccountId
  await server.run(Effect.gen(function*() {
    yield* (yield* Wallets).credit({ accountId, key: "seed", pocket: "usd", amount: 1_000_000n, description: "seed" })
  }))
  const owner = signup.body.apiKey as string
  const hosts = await api.put("/v1/l402/payee-hosts", { hosts: [paywall.host] }, owner)
  expect(hosts.status).toBe(200)
  expect(hosts.body).toEqual({ hosts: [paywall.host] })
  const agent = await api.post("/v1/agents", { name: "buyer" }, owner)
  const set = await api.put(`/v1/agents/${agent.body.id}/policy`, {
    maxPerCallUsdCents: 10,
    maxPerDayUsdCents: 100,
    allowedCapabilities: ["pay"],
    ...policy
  }, owner)
  expect(set.status).toBe(200)
  return { accountId, owner, ownerId: signup.body.agentId as AgentId, agent: agent.body.apiKey as string }
}

const balanceCents = async (key: string) => (await api.get("/v1/wallet", key)).body.balanceUsdCents as number

const pay = (key: string, path: string, extra: Record<string, unknown> = {}) =>
  api.post("/v1/capabilities/pay", { url: `${paywall.url}${path}`, method: "GET", maxSats: 100, ...extra }, key)

describe("paying L402 paywalls (POST /v1/capabilities/pay)", () => {
  it("a policy-limited agent pays once, is charged amount plus routing fee, and reuses the token", async () => {
    const { accountId, agent, owner } = await account()
    const before = await balanceCents(owner)
    const paymentsBefore = fake.payments.length

    const first = await pay(agent, "/api/data/1")
    expect(first.status).toBe(200)
    expect(first.body).toMatchObject({ status: 200, l402: "paid", bodyEncoding: "utf8" })
    expect(JSON.parse(first.body.body)).toMatchObject({ data: "the paid answer" })
    // Only the safe subset of the upstream's headers comes back.
    expect(first.body.headers["content-type"]).toBe("application/json")
    expect(first.body.headers["set-cookie"]).toBeUndefined()
    const { payment, metadata } = first.body
    expect(createHash("sha256").update(Buffer.from(payment.preimage, "hex")).digest("hex")).toBe(payment.paymentHash)
    expect(payment).toMatchObject({ amountSats: 50, routingFeeSats: 1 })
    // 51 sats at $100,000/BTC = 5.1 cents; quoted: 50 sats + the 1-sat fee limit.
    expect(metadata).toMatchObject({ chargedUsdCents: 5.1, quotedUsdCents: 5.1, provider: "l402", chargedSats: 51 })
    expect(fake.payments.length).toBe(paymentsBefore + 1)
    const sent = fake.sendCalls.at(-1)!
    expect(sent).toMatchObject({ fee_limit_msat: "1000", timeout_seconds: 60 })
    expect(paywall.seen.at(-1)!.authorization).toBe(`L402 ${paywall.seen.at(-1)!.authorization!.slice(5).split(":")[0]}:${payment.preimage}`)
    expect(await balanceCents(owner)).toBeCloseTo(before - 5.1, 6)

    // The charge records the payment hash; the store keeps hash, preimage, fee and the transaction.
    const transactions = await api.get("/v1/wallet/transactions", owner)
    const charge = transactions.body.transactions.find((t: { id: string }) => t.id === metadata.transactionId)
    expect(charge.description).toContain(payment.paymentHash)
    // The SQL stores provide L402PaymentStore beside Store (server.run's type lists only the core's services).
    const record = await server.run(Effect.gen(function*() {
      return yield* (yield* L402PaymentStore).findPayment(payment.paymentHash)
    }) as unknown as Effect.Effect<Option.Option<OutboundPayment>>)
    expect(Option.getOrThrow(record)).toMatchObject({
      status: "succeeded",
      preimage: payment.preimage,
      feeMsat: 1000n,
      transactionId: metadata.transactionId
    })

    // The webhook outbox has pay.succeeded, with the charge.
    const events = await server.run(Effect.gen(function*() {
      return yield* (yield* Store).listWebhookEvents(accountId, { limit: 20, offset: 0 })
    }))
    const succeeded = events.items.filter((e) => e.type === "pay.succeeded").map((e) => JSON.parse(e.payload).data)
    expect(succeeded).toEqual([{
      paymentHash: payment.paymentHash,
      agentId: expect.any(String),
      url: `${paywall.url}/api/data/1`,
      amountSats: 50,
      routingFeeSats: 1,
      transactionId: metadata.transactionId
    }])

    // Same path prefix: the token is reused, nothing is paid or charged.
    const second = await pay(agent, "/api/data/2")
    expect(second.body).toMatchObject({ status: 200, l402: "token", payment: null, metadata: null })
    expect(fake.payments.length).toBe(paymentsBefore + 1)
    expect(await balanceCents(owner)).toBeCloseTo(before - 5.1, 6)

    // The server stops accepting it: paid again, once.
    paywall.revokeAll()
    const third = await pay(agent, "/api/data/3")
    expect(third.body).toMatchObject({ status: 200, l402: "paid" })
    expect(fake.payments.length).toBe(paymentsBefore + 2)
    expect(await balanceCents(owner)).toBeCloseTo(before - 10.2, 6)
  })

  it("a token refused with a bare 402 (no new challenge) is dropped, and the call is paid again, once", async () => {
    const { owner, agent } = await account()
    const before = await balanceCents(owner)
    const paymentsBefore = fake.payments.length
    paywall.options.bareRefusal = true
    try {
      const first = await pay(agent, "/api/bare/1")
      expect(first.body).toMatchObject({ status: 200, l402: "paid" })
      paywall.revokeAll()
      const second = await pay(agent, "/api/bare/2")
      expect(second.body).toMatchObject({ status: 200, l402: "paid" })
      expect(fake.payments.length).toBe(paymentsBefore + 2)
      // The spent token went once, then a request without it got the new challenge.
      expect(paywall.seen.slice(-3).map((request) => request.authorization === undefined)).toEqual([false, true, false])
      expect(await balanceCents(owner)).toBeCloseTo(before - 10.2, 6)
    } finally {
      paywall.options.bareRefusal = false
    }
  })

  it("refuses an invoice above maxSats, above the per-call cap, or from a host not allowed, before any payment", async () => {
    const { agent, owner } = await account()
    const sends = fake.sendCalls.length
    const before = await balanceCents(owner)

    const aboveMax = await pay(agent, "/api/x", { maxSats: 49 })
    expect(aboveMax.status).toBe(402)
    expect(errorCode(aboveMax)).toBe("L402_PRICE_ABOVE_MAX")
    expect(aboveMax.body.error.details).toMatchObject({ invoiceSats: 50, maxSats: 49 })

    paywall.options = { ...paywall.options, priceSats: 200 } // 20 cents + fee, over the 10-cent per-call cap
    const aboveCap = await pay(agent, "/api/y", { maxSats: 1000 })
    expect(aboveCap.status).toBe(402)
    expect(errorCode(aboveCap)).toBe("PER_CALL_LIMIT_EXCEEDED")

    paywall.options = { ...paywall.options, priceSats: 50 }
    await api.put("/v1/l402/payee-hosts", { hosts: ["paywall.example"] }, owner)
    const notAllowed = await pay(agent, "/api/z")
    expect(notAllowed.status).toBe(403)
    expect(errorCode(notAllowed)).toBe("L402_HOST_NOT_ALLOWED")

    expect(fake.sendCalls.length).toBe(sends)
    expect(await balanceCents(owner)).toBe(before)
  })

  it("a paid request that then fails answers 502 with what was paid; the charge stands and the token serves the next call", async () => {
    const { agent, owner } = await account()
    const before = await balanceCents(owner)
    const paymentsBefore = fake.payments.length
    paywall.options.dropPaid = true
    let failed
    try {
      failed = await pay(agent, "/api/dropped/1")
    } finally {
      paywall.options.dropPaid = false
    }
    expect(failed.status).toBe(502)
    expect(errorCode(failed)).toBe("PROVIDER_ERROR")
    const paid = failed.body.error.details.paid
    expect(paid).toMatchObject({ amountSats: 50, routingFeeSats: 1, chargedUsdCents: 5.1 })
    expect(paid.paymentHash).toMatch(/^[0-9a-f]{64}$/)
    expect(fake.payments.length).toBe(paymentsBefore + 1)
    expect(await balanceCents(owner)).toBeCloseTo(before - 5.1, 6)
    const transactions = await api.get("/v1/wallet/transactions", owner)
    const charge = transactions.body.transactions.find((t: { id: string }) => t.id === paid.transactionId)
    expect(charge.description).toContain(paid.paymentHash)
    // The token was kept: the next call is served with it, with no second payment.
    const again = await pay(agent, "/api/dropped/1")
    expect(again.status).toBe(200)
    expect(again.body.l402).toBe("token")
    expect(fake.payments.length).toBe(paymentsBefore + 1)
  })

  it("a failed payment charges nothing and releases the hold", async () => {
    const { accountId, agent, owner } = await account()
    const before = await balanceCents(owner)
    fake.payBehaviour = () => "fail"
    const failed = await pay(agent, "/api/fails/1")
    expect(failed.status).toBe(502)
    expect(errorCode(failed)).toBe("L402_PAYMENT_FAILED")
    expect(fake.sendCalls.at(-1)).toBeDefined()
    expect(await balanceCents(owner)).toBe(before)
    const wallet = await api.get("/v1/wallet", owner)
    expect(wallet.body.heldUsdCents ?? 0).toBe(0)
    const transactions = await api.get("/v1/wallet/transactions", owner)
    expect(transactions.body.transactions.filter((t: { type: string }) => t.type === "charge")).toHaveLength(0)
    const events = await server.run(Effect.gen(function*() {
      return yield* (yield* Store).listWebhookEvents(accountId, { limit: 20, offset: 0 })
    }))
    expect(events.items.filter((e) => e.type === "pay.failed").map((e) => JSON.parse(e.payload).data))
      .toEqual([expect.objectContaining({ amountSats: 50, reason: "FAILURE_REASON_NO_ROUTE", url: `${paywall.url}/api/fails/1` })])
  })

  it("keeps the hold while the outcome is unknown, and charges once when the node later says it succeeded", async () => {
    const { agent, owner } = await account()
    const before = await balanceCents(owner)
    // The connection to the node breaks once the payment is in flight: the outcome is unknown.
    fake.payBehaviour = () => "destroy"
    const pending = await pay(agent, "/api/pending/1")
    expect(pending.status).toBe(502)
    expect(errorCode(pending)).toBe("L402_PAYMENT_PENDING")
    const hash = pending.body.error.details.paymentHash as string
    // Held, not charged, not released.
    expect(await balanceCents(owner)).toBeCloseTo(before - 5.1, 6)
    expect((await api.get("/v1/wallet/transactions", owner)).body.transactions
      .filter((t: { type: string }) => t.type === "charge")).toHaveLength(0)
    const sends = fake.sendCalls.length
    fake.completePayment(hash, "succeed")
    const resolved = await server.run(Effect.gen(function*() {
      return yield* (yield* L402Payments).resolvePending(0)
    }))
    expect(resolved).toBe(1)
    const charges = (await api.get("/v1/wallet/transactions", owner)).body.transactions
      .filter((t: { type: string; description: string }) => t.type === "charge" && t.description.includes(hash))
    expect(charges).toHaveLength(1)
    expect(await balanceCents(owner)).toBeCloseTo(before - 5.1, 6)
    // Asking again changes nothing, and nothing was sent again.
    expect(await server.run(Effect.gen(function*() {
      return yield* (yield* L402Payments).resolvePending(0)
    }))).toBe(0)
    expect(fake.sendCalls.length).toBe(sends)
  }, 30_000)

  it("a caller that goes away while the payment is under way leaves the hold for the resolver, never released early", async () => {
    const { agent, owner } = await account()
    const before = await balanceCents(owner)
    fake.payBehaviour = () => "hang"
    const sendsBefore = fake.sendCalls.length
    const abort = new AbortController()
    const call = fetch(`${server.baseUrl}/v1/capabilities/pay`, {
      method: "POST",
      headers: { authorization: `Bearer ${agent}`, "content-type": "application/json" },
      body: JSON.stringify({ url: `${paywall.url}/api/gone/1`, method: "GET", maxSats: 100 }),
      signal: abort.signal
    }).catch(() => undefined)
    await expect.poll(() => fake.sendCalls.length, { timeout: 15_000 }).toBe(sendsBefore + 1)
    abort.abort()
    await call
    const hash = fake.payments.at(-1)!.hash
    // The server noticed the caller left (the handler is interrupted); the hold stays.
    await new Promise((resolve) => setTimeout(resolve, 500))
    expect(await balanceCents(owner)).toBeCloseTo(before - 5.1, 6)
    fake.completePayment(hash, "succeed")
    expect(await server.run(Effect.gen(function*() {
      return yield* (yield* L402Payments).resolvePending(0)
    }))).toBe(1)
    const charges = (await api.get("/v1/wallet/transactions", owner)).body.transactions
      .filter((t: { type: string; description: string }) => t.type === "charge" && t.description.includes(hash))
    expect(charges).toHaveLength(1)
    expect(await balanceCents(owner)).toBeCloseTo(before - 5.1, 6)
  }, 30_000)

  it("pays LSAT challenges and token= challenges, answering in the server's scheme", async () => {
    const { agent } = await account()
    paywall.options = { ...paywall.options, scheme: "LSAT", paramName: "token" }
    const lsat = await pay(agent, "/lsat/a")
    expect(lsat.body).toMatchObject({ status: 200, l402: "paid" })
    expect(paywall.seen.at(-1)!.authorization).toMatch(/^LSAT [A-Za-z0-9+/=]+:[0-9a-f]{64}$/)
  })

  it("is refused to an agent whose policy does not allow pay, and passes a request with no paywall through unpaid", async () => {
    const { agent, owner } = await account({ allowedCapabilities: ["search"] })
    const refused = await pay(agent, "/api/q")
    expect(refused.status).toBe(403)
    expect(errorCode(refused)).toBe("CAPABILITY_NOT_ALLOWED")
    // Only owners manage the allow-list.
    expect((await api.put("/v1/l402/payee-hosts", { hosts: [] }, agent)).status).toBe(403)
    expect(errorCode(await api.put("/v1/l402/payee-hosts", { hosts: ["bad host/"] }, owner))).toBe("VALIDATION_ERROR")
    expect(errorCode(await pay(owner, "/api/q", { maxSats: 0 }))).toBe("VALIDATION_ERROR")
    expect(errorCode(await pay(owner, "/api/q", { method: "TRACE" }))).toBe("VALIDATION_ERROR")
    expect(errorCode(await pay(owner, "/api/q", { headers: { authorization: "x" } }))).toBe("VALIDATION_ERROR")
    expect(errorCode(await pay(owner, "/api/q", { headers: { "x-note": "line\nbreak" } }))).toBe("VALIDATION_ERROR")
    expect(errorCode(await pay(owner, "/api/q", { headers: { "x-note": "snow ☃" } }))).toBe("VALIDATION_ERROR")
    expect(errorCode(await pay(owner, "/api/q", { method: "GET", body: "x" }))).toBe("VALIDATION_ERROR")
    expect(errorCode(await api.post("/v1/capabilities/pay", { url: "not a url", method: "GET", maxSats: 1 }, owner))).toBe("VALIDATION_ERROR")
    // URL safety as for read: loopback addresses not on the allow-list are refused.
    const unsafe = await api.post("/v1/capabilities/pay", { url: "http://127.0.0.1:1/x", method: "GET", maxSats: 10 }, owner)
    expect(errorCode(unsafe)).toBe("VALIDATION_ERROR")
  })

  it("POST /v1/proxy/{slug} pays the challenges of a registry service marked l402, and reuses the token", async () => {
    const { accountId, agent, owner, ownerId } = await account({ allowedCapabilities: ["pay", "search"] })
    const slug = `paid-${Date.now().toString(36)}`
    await server.run(Effect.gen(function*() {
      const registry = yield* RegistryStore
      const id = newSubmissionId()
      yield* registry.insert({
        slug,
        name: "Paid data",
        description: "sells over L402",
        baseUrl: paywall.url,
        capabilities: ["search"],
        endpoints: [{ path: "/svc/data", method: "GET", description: "data" }],
        pricing: { "/svc/data": { perCallUsdCents: 0.1 } },
        contact: "ops@example.com",
        l402: true,
        id,
        accountId,
        agentId: ownerId,
        status: "pending",
        createdAt: new Date(),
        reviewedAt: null,
        reviewNote: null
      })
      yield* registry.review(id, { status: "approved", note: null, at: new Date() })
    }) as Effect.Effect<void, never, never>)
    const before = await balanceCents(owner)
    const payments = fake.payments.length
    const first = await api.post(`/v1/proxy/${slug}`, { method: "GET", path: "/svc/data", maxSats: 60 }, agent)
    expect(first.status, first.text).toBe(200)
    expect(first.body).toMatchObject({ status: 200, body: { data: "the paid answer" } })
    expect(fake.payments.length).toBe(payments + 1)
    // The proxy call (0.1 cent) and the L402 payment (5.1 cents), each its own charge.
    expect(await balanceCents(owner)).toBeCloseTo(before - 5.2, 6)
    const second = await api.post(`/v1/proxy/${slug}`, { method: "GET", path: "/svc/data" }, agent)
    expect(second.body).toMatchObject({ status: 200, body: { data: "the paid answer" } })
    expect(fake.payments.length).toBe(payments + 1)
    expect(await balanceCents(owner)).toBeCloseTo(before - 5.3, 6)
    // Above maxSats: refused before paying; the proxy's hold is released.
    paywall.revokeAll()
    const refused = await api.post(`/v1/proxy/${slug}`, { method: "GET", path: "/svc/data", maxSats: 10 }, agent)
    expect(errorCode(refused)).toBe("L402_PRICE_ABOVE_MAX")
    expect(fake.payments.length).toBe(payments + 1)
    expect(await balanceCents(owner)).toBeCloseTo(before - 5.3, 6)
  })
})
