import { Effect, Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as WebhookHttp from "../../adapters/net/webhookTransport.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { Store } from "../../src/ports/Store.ts"
import { WebhookEvent } from "../../src/webhooks/events.ts"
import { signOne } from "../../src/webhooks/signing.ts"
import { Webhooks } from "../../src/webhooks/Webhooks.ts"
import { Agents } from "../../src/agents/Agents.ts"
import { Spend } from "../../src/wallet/Spend.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { client, errorCode, type RunningServer, startServer, storeBackends } from "../support/server.ts"
import { type Receiver, startReceiver, verifyWith } from "../support/webhookReceiver.ts"

/**
 * Webhooks end to end over every storage back-end: endpoints over HTTP,
 * events written by the changes they describe, deliveries posted signed to a
 * receiver on 127.0.0.1 that verifies them with the `standardwebhooks`
 * library. The worker is driven by hand (`deliverDue`), so every step is
 * deterministic.
 */

const decodeEvent = Schema.decodeUnknownSync(WebhookEvent)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe.each(storeBackends)("webhooks over %s", (_name, store) => {
  let server: RunningServer
  let receiver: Receiver
  let other: Receiver
  let api: ReturnType<typeof client>
  let owner: string
  let accountId: AccountId

  const deliver = () => server.run(Effect.gen(function*() {
    return yield* (yield* Webhooks).deliverDue
  }))
  const events = (type: string) =>
    server.run(Effect.gen(function*() {
      return yield* (yield* Store).listWebhookEvents(accountId, { limit: 100, offset: 0 })
    }))
      .then((page) => page.items.filter((e) => e.type === type))
  const create = async (url: string, body: Record<string, unknown> = {}) => {
    const res = await api.call("POST", "/v1/webhooks", { key: owner, body: { url, ...body } })
    expect(res.status, res.text).toBe(201)
    return res.body as { id: string; secret: string }
  }

  beforeAll(async () => {
    receiver = await startReceiver()
    other = await startReceiver()
    server = await startServer(store(), {
      webhooks: WebhookHttp.layer({ allowHosts: [`127.0.0.1:${receiver.port}`, `127.0.0.1:${other.port}`] }),
      webhookSettings: {
        disableAfter: 3,
        retry: { baseDelayMs: 400, maxDelayMs: 800, windowMs: 3 * 24 * 60 * 60_000 },
        requestTimeoutMs: 2_000
      }
    })
    api = client(server.baseUrl)
    const signup = await api.post("/v1/signup", { name: "owner" })
    owner = signup.body.apiKey
    accountId = signup.body.accountId
  }, 60_000)
  afterAll(async () => {
    await server?.close()
    await receiver?.close()
    await other?.close()
  })

  it("lets owners manage endpoints, shows the secret once, and refuses unsafe URLs, agents and other accounts", async () => {
    const created = await create(receiver.url, { events: ["agent.created"], description: "ops" })
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
    const read = await api.get(`/v1/webhooks/${created.id}`, owner)
    expect(read.status).toBe(200)
    expect(read.body).toMatchObject({ id: created.id, url: receiver.url, events: ["agent.created"], enabled: true })
    expect(read.text).not.toContain(created.secret)
    expect(read.body.secret).toBeUndefined()
    const listed = await api.get("/v1/webhooks", owner)
    expect(listed.body.webhooks.map((w: any) => w.id)).toContain(created.id)
    expect(listed.text).not.toContain(created.secret)

    for (const url of ["http://127.0.0.1:1/x", "http://localhost/x", "http://10.0.0.1/x", "http://169.254.169.254/", "ftp://example.com/", "http://user:pw@example.com/", "not a url"]) {
      const res = await api.call("POST", "/v1/webhooks", { key: owner, body: { url } })
      expect(res.status, url).toBe(400)
      expect(errorCode(res)).toBe("VALIDATION_ERROR")
    }
    const badUpdate = await api.patch(`/v1/webhooks/${created.id}`, { url: "http://192.168.1.1/" }, owner)
    expect(errorCode(badUpdate)).toBe("VALIDATION_ERROR")
    expect((await api.get(`/v1/webhooks/${created.id}`, owner)).body.url).toBe(receiver.url)
    expect(errorCode(await api.call("POST", "/v1/webhooks", { key: owner, body: { url: receiver.url, events: ["nope"] } })))
      .toBe("VALIDATION_ERROR")

    const agent = await api.post("/v1/agents", { name: "worker" }, owner)
    expect(errorCode(await api.get("/v1/webhooks", agent.body.apiKey))).toBe("FORBIDDEN")
    expect(errorCode(await api.call("POST", "/v1/webhooks", { key: agent.body.apiKey, body: { url: receiver.url } })))
      .toBe("FORBIDDEN")
    const stranger = (await api.post("/v1/signup", { name: "stranger" })).body.apiKey
    expect(errorCode(await api.get(`/v1/webhooks/${created.id}`, stranger))).toBe("NOT_FOUND")
    expect(errorCode(await api.call("DELETE", `/v1/webhooks/${created.id}`, { key: stranger }))).toBe("NOT_FOUND")
    expect(errorCode(await api.get(`/v1/webhooks/${created.id}/deliveries`, stranger))).toBe("NOT_FOUND")

    const deleted = await api.call("DELETE", `/v1/webhooks/${created.id}`, { key: owner })
    expect(deleted.status).toBe(200)
    expect(errorCode(await api.get(`/v1/webhooks/${created.id}`, owner))).toBe("NOT_FOUND")
    await deliver()
    receiver.received.length = 0
  })

  it("delivers agent and invoice events, signed the Standard Webhooks way, once each", async () => {
    const endpoint = await create(receiver.url)
    receiver.secrets = [endpoint.secret]
    receiver.respond = () => 204
    const agent = await api.post("/v1/agents", { name: "bot" }, owner)
    expect((await api.patch(`/v1/agents/${agent.body.id}`, { killed: true }, owner)).status).toBe(200)
    expect((await api.patch(`/v1/agents/${agent.body.id}`, { killed: false }, owner)).status).toBe(200)
    const invoice = await api.post("/v1/wallet/fund", { amountSats: 1000 }, owner)
    expect((await api.post("/v1/dev/lightning/pay", { paymentRequest: invoice.body.paymentRequest })).status).toBe(200)
    // A second notice of the same payment credits nothing and writes no event.
    await api.post("/v1/dev/lightning/pay", { paymentRequest: invoice.body.paymentRequest })

    expect(await deliver()).toBe(4)
    expect(await deliver()).toBe(0)
    // Deliveries run in parallel: no order is promised (event ids sort by creation).
    const got = receiver.received.map((r) => decodeEvent(r.event)).sort((a, b) => (a.id < b.id ? -1 : 1))
    expect(got.map((e) => e.type)).toEqual(["agent.created", "agent.killed", "agent.revived", "invoice.paid"])
    for (const r of receiver.received) {
      expect(r.verifiedWith).toEqual([0])
      expect(r.id).toBe(r.event.id)
      expect(r.id).toMatch(/^evt_/)
      expect(r.headers["content-type"]).toBe("application/json")
      expect(Math.abs(Number(r.timestamp) - Date.now() / 1000)).toBeLessThan(60)
    }
    expect(got[0]!.data).toEqual({ agentId: agent.body.id, name: "bot", role: "agent" })
    expect(got[1]!.data).toEqual({ agentId: agent.body.id, reason: "owner" })
    const tx = await api.get("/v1/wallet/transactions?type=credit", owner)
    expect(got[3]!.data).toMatchObject({
      invoiceId: invoice.body.invoiceId,
      invoiceType: "lightning",
      amountSats: 1000,
      transactionId: tx.body.transactions[0].id
    })
    expect(await events("invoice.paid")).toHaveLength(1)

    const log = await api.get(`/v1/webhooks/${endpoint.id}/deliveries`, owner)
    expect(log.body.total).toBe(4)
    expect(log.body.deliveries.every((d: any) => d.status === "succeeded" && d.attempts === 1 && d.lastStatusCode === 204))
      .toBe(true)
    await api.call("DELETE", `/v1/webhooks/${endpoint.id}`, { key: owner })
    receiver.received.length = 0
  })

  it("a forged, tampered or stale signature is rejected by the receiver's library", async () => {
    const endpoint = await create(receiver.url)
    receiver.secrets = [endpoint.secret]
    await api.post("/v1/agents", { name: "signed" }, owner)
    await deliver()
    const message = receiver.received.at(-1)!
    const headers = {
      "webhook-id": message.id,
      "webhook-timestamp": message.timestamp,
      "webhook-signature": message.signature
    }
    expect(verifyWith(endpoint.secret, message.body, headers)).toMatchObject({ type: "agent.created" })
    const forger = await create(receiver.url)
    expect(() => verifyWith(forger.secret, message.body, headers)).toThrow()
    expect(() => verifyWith(endpoint.secret, message.body.replace("signed", "sIgned"), headers)).toThrow()
    expect(() => verifyWith(endpoint.secret, message.body, { ...headers, "webhook-id": "evt_other" })).toThrow()
    const staleTs = Math.floor(Date.now() / 1000) - 600
    const stale = await Effect.runPromise(signOne(endpoint.secret, message.id, staleTs, message.body))
    expect(() =>
      verifyWith(endpoint.secret, message.body, { ...headers, "webhook-timestamp": String(staleTs), "webhook-signature": stale })
    ).toThrow(/timestamp/i)
    const freshTs = Math.floor(Date.now() / 1000)
    const fresh = await Effect.runPromise(signOne(endpoint.secret, message.id, freshTs, message.body))
    expect(verifyWith(endpoint.secret, message.body, { ...headers, "webhook-timestamp": String(freshTs), "webhook-signature": fresh }))
      .toBeTruthy()
    await api.call("DELETE", `/v1/webhooks/${endpoint.id}`, { key: owner })
    await api.call("DELETE", `/v1/webhooks/${forger.id}`, { key: owner })
    receiver.received.length = 0
  })

  it("retries a failed delivery with backoff until the receiver is back, and disables an endpoint after a run of failures", async () => {
    const endpoint = await create(receiver.url, { events: ["agent.created"] })
    const watcher = await create(other.url, { events: ["webhook_endpoint.disabled"] })
    receiver.secrets = [endpoint.secret]
    other.secrets = [watcher.secret]
    receiver.respond = () => 503
    await api.post("/v1/agents", { name: "flaky" }, owner)
    expect(await deliver()).toBe(1)
    let log = (await api.get(`/v1/webhooks/${endpoint.id}/deliveries`, owner)).body.deliveries
    expect(log[0]).toMatchObject({ status: "pending", attempts: 1, lastStatusCode: 503, lastError: "HTTP 503" })
    expect(Date.parse(log[0].nextAttemptAt)).toBeGreaterThan(Date.parse(log[0].lastAttemptAt))
    // Not due yet right away (backoff), due after it.
    expect(await deliver()).toBe(0)
    receiver.respond = () => 200
    await sleep(850)
    expect(await deliver()).toBe(1)
    log = (await api.get(`/v1/webhooks/${endpoint.id}/deliveries`, owner)).body.deliveries
    expect(log[0]).toMatchObject({ status: "succeeded", attempts: 2, lastStatusCode: 200 })
    expect(receiver.received.map((r) => r.id)).toEqual([log[0].eventId, log[0].eventId])
    expect(receiver.received.every((r) => r.verifiedWith.length === 1)).toBe(true)

    // Three failures in a row disable the endpoint and say so to the other endpoint.
    receiver.respond = () => 500
    await api.post("/v1/agents", { name: "down" }, owner)
    for (let i = 0; i < 3; i++) {
      await deliver()
      await sleep(850)
    }
    const disabled = (await api.get(`/v1/webhooks/${endpoint.id}`, owner)).body
    expect(disabled).toMatchObject({ enabled: false, consecutiveFailures: 3 })
    expect(disabled.disabledAt).not.toBeNull()
    await deliver()
    expect(other.received.map((r) => r.event.type)).toEqual(["webhook_endpoint.disabled"])
    expect(other.received[0]!.event.data).toEqual({ endpointId: endpoint.id, url: receiver.url, consecutiveFailures: 3 })
    expect(other.received[0]!.verifiedWith).toEqual([0])
    // Nothing goes to a disabled endpoint.
    const before = receiver.received.length
    await sleep(850)
    expect(await deliver()).toBe(0)
    expect(receiver.received.length).toBe(before)

    // Re-enabled, a manual retry of the failed delivery goes through.
    receiver.respond = () => 204
    expect((await api.patch(`/v1/webhooks/${endpoint.id}`, { enabled: true }, owner)).body).toMatchObject({
      enabled: true,
      consecutiveFailures: 0
    })
    log = (await api.get(`/v1/webhooks/${endpoint.id}/deliveries`, owner)).body.deliveries
    const pending = log.find((d: any) => d.status !== "succeeded")
    const retried = await api.call("POST", `/v1/webhooks/${endpoint.id}/deliveries/${pending.id}/retry`, { key: owner })
    expect(retried.status, retried.text).toBe(200)
    expect(retried.body.status).toBe("pending")
    expect(await deliver()).toBe(1)
    const done = (await api.get(`/v1/webhooks/${endpoint.id}/deliveries`, owner)).body.deliveries.find((d: any) => d.id === pending.id)
    expect(done.status).toBe("succeeded")
    expect(errorCode(await api.call("POST", `/v1/webhooks/${endpoint.id}/deliveries/dlv_nope/retry`, { key: owner })))
      .toBe("NOT_FOUND")
    await api.call("DELETE", `/v1/webhooks/${endpoint.id}`, { key: owner })
    await api.call("DELETE", `/v1/webhooks/${watcher.id}`, { key: owner })
    receiver.received.length = 0
    other.received.length = 0
  })

  it("money events: budget threshold, daily cap, refusals (one a minute), low balance, and the velocity auto-kill", async () => {
    const endpoint = await create(receiver.url, {
      events: ["agent.budget_threshold", "agent.daily_cap_reached", "spend.refused", "wallet.low_balance", "agent.killed"]
    })
    receiver.secrets = [endpoint.secret]
    receiver.respond = () => 204
    const worker = await api.post("/v1/agents", { name: "spender" }, owner)
    // Daily cap 10 cents; the wallet alert at 990 cents, over a wallet of 1000 cents.
    expect((await api.patch(`/v1/agents/${worker.body.id}/policy`, { maxPerDayUsdCents: 10 }, owner)).status).toBe(200)
    const alert = await api.call("PUT", "/v1/webhooks/alerts/low-balance", { key: owner, body: { thresholdUsdCents: 995 } })
    expect(alert.status, alert.text).toBe(200)
    expect(alert.body).toEqual({ thresholdUsdCents: 995 })
    expect(errorCode(await api.call("PUT", "/v1/webhooks/alerts/low-balance", { key: worker.body.apiKey, body: { thresholdUsdCents: 1 } })))
      .toBe("FORBIDDEN")
    const outcomes = await server.run(Effect.gen(function*() {
      const wallets = yield* Wallets
      yield* wallets.credit({ accountId, key: "fund-money-events", pocket: "usd", amount: 10_000_000n, description: "funding" })
      const principal = yield* (yield* Agents).authenticate(worker.body.apiKey)
      const spend = yield* Spend
      const call = (quotedMicroUsd: bigint) =>
        spend.spend(principal, {
          capability: "search",
          provider: "brave",
          quotedMicroUsd,
          description: "search call",
          run: Effect.succeed({ value: null, actualMicroUsd: quotedMicroUsd })
        }).pipe(Effect.map(() => "ok"), Effect.catch((e) => Effect.succeed((e as { code: string }).code)))
      // 5 + 3.5 = 8.5 cents crosses 80 % of 10; then 10 reached; then three refusals.
      return [yield* call(50_000n), yield* call(35_000n), yield* call(15_000n), yield* call(1n), yield* call(1n), yield* call(1n)]
    }))
    expect(outcomes).toEqual(["ok", "ok", "ok", "BUDGET_EXCEEDED", "BUDGET_EXCEEDED", "BUDGET_EXCEEDED"])
    await deliver()
    const got = receiver.received.map((r) => decodeEvent(r.event))
    const byType = (type: string) => got.filter((e) => e.type === type)
    expect(byType("agent.budget_threshold").map((e) => e.data)).toEqual([
      { agentId: worker.body.id, dailySpentUsdCents: 8.5, dailyCapUsdCents: 10, thresholdPercent: 80, day: expect.any(String) }
    ])
    // Reached by the third call's hold; the refusals after it do not send it again.
    expect(byType("agent.daily_cap_reached").map((e) => e.data)).toEqual([
      { agentId: worker.body.id, dailySpentUsdCents: 10, dailyCapUsdCents: 10, day: expect.any(String) }
    ])
    // Three refusals in the same minute: one event.
    expect(byType("spend.refused").map((e) => e.data)).toEqual([
      { agentId: worker.body.id, code: "BUDGET_EXCEEDED", capability: "search", quotedUsdCents: 0.0001 }
    ])
    // 1000 → 995 (not below) → 991.5 (crossed) → 990: one event.
    expect(byType("wallet.low_balance").map((e) => e.data)).toEqual([{ balanceUsdCents: 991.5, thresholdUsdCents: 995 }])
    expect(receiver.received.every((r) => r.verifiedWith.length === 1)).toBe(true)

    // The velocity guard's auto-kill writes agent.killed (reason velocity) with the kill.
    const fast = await api.post("/v1/agents", { name: "fast" }, owner)
    await api.patch(`/v1/agents/${fast.body.id}/policy`, { maxCallsPerMinute: 1, autoKill: true }, owner)
    const velocity = await server.run(Effect.gen(function*() {
      const principal = yield* (yield* Agents).authenticate(fast.body.apiKey)
      const spend = yield* Spend
      const call = spend.spend(principal, {
        capability: "search",
        provider: "brave",
        quotedMicroUsd: 1n,
        description: "search call",
        run: Effect.succeed({ value: null, actualMicroUsd: 1n })
      }).pipe(Effect.map(() => "ok"), Effect.catch((e) => Effect.succeed((e as { code: string }).code)))
      return [yield* call, yield* call]
    }))
    expect(velocity).toEqual(["ok", "RATE_LIMITED"])
    expect((await api.get(`/v1/agents/${fast.body.id}`, owner)).body).toMatchObject({ killed: true, killReason: "velocity" })
    receiver.received.length = 0
    await deliver()
    // The refusal that killed it is a spend.refused too.
    expect(receiver.received.map((r) => r.event.type).sort()).toEqual(["agent.killed", "spend.refused"])
    expect(receiver.received.find((r) => r.event.type === "agent.killed")!.event.data)
      .toEqual({ agentId: fast.body.id, reason: "velocity" })
    await api.call("PUT", "/v1/webhooks/alerts/low-balance", { key: owner, body: { thresholdUsdCents: null } })
    await api.call("DELETE", `/v1/webhooks/${endpoint.id}`, { key: owner })
    receiver.received.length = 0
  })

  it("a rotated secret signs alongside the new one during the overlap, and not after", async () => {
    const endpoint = await create(receiver.url, { events: ["agent.created"] })
    const rotated = await api.post(`/v1/webhooks/${endpoint.id}/rotate-secret`, { overlapSeconds: 3600 }, owner)
    expect(rotated.status, rotated.text).toBe(200)
    expect(rotated.body.secret).not.toBe(endpoint.secret)
    expect(Date.parse(rotated.body.previousSecretExpiresAt)).toBeGreaterThan(Date.now() + 3_500_000)
    receiver.secrets = [endpoint.secret, rotated.body.secret]
    receiver.respond = () => 204
    await api.post("/v1/agents", { name: "rotating" }, owner)
    await deliver()
    const during = receiver.received.at(-1)!
    expect(during.signature.split(" ")).toHaveLength(2)
    expect(during.verifiedWith).toEqual([0, 1])

    const cut = await api.post(`/v1/webhooks/${endpoint.id}/rotate-secret`, { overlapSeconds: 0 }, owner)
    receiver.secrets = [endpoint.secret, rotated.body.secret, cut.body.secret]
    await api.post("/v1/agents", { name: "rotated" }, owner)
    await deliver()
    const after = receiver.received.at(-1)!
    expect(after.signature.split(" ")).toHaveLength(1)
    expect(after.verifiedWith).toEqual([2])
    await api.call("DELETE", `/v1/webhooks/${endpoint.id}`, { key: owner })
    receiver.received.length = 0
  })
})
