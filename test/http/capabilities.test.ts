import { upstreamLayers } from "../support/upstreamLayers.ts"
import { Effect, Exit, Layer, Redacted, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as SafeHttp from "../../adapters/net/SafeHttp.ts"
import * as OpenAiCompatible from "../../adapters/providers/reason/openaiCompatible.ts"
import * as Transport from "../../adapters/services/transport.ts"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import type { ModelInfo } from "../../src/capabilities/Provider.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { type Fake, startFake } from "../providers/fakeLlm.ts"
import { client, errorCode, type RunningServer, startServer, storeBackends } from "../support/server.ts"

/**
 * Capabilities and the proxy end to end over HTTP: real adapters talking to
 * local servers that speak OpenAI's wire format, a funded wallet, and the
 * ledger checked afterwards.
 */

const ADMIN = "admin-token-for-capability-tests-0123"
const KEY = "sk-operator-test-key"
const model = (id: string, inPer1k: bigint, outPer1k: bigint): ModelInfo => ({
  id,
  inputPer1kMicroUsd: inPer1k,
  outputPer1kMicroUsd: outPer1k,
  maxTokens: 4096,
  defaultMaxTokens: 1000
})

describe.each(storeBackends)("capabilities and proxy over HTTP (%s)", (_name, store) => {
  const scope = Effect.runSync(Scope.make())
  let alpha: Fake
  let beta: Fake
  let server: RunningServer
  let api: ReturnType<typeof client>

  beforeAll(async () => {
    alpha = await Effect.runPromise(Scope.provide(startFake({ apiKey: KEY }), scope))
    beta = await Effect.runPromise(Scope.provide(startFake({ apiKey: KEY }), scope))
    const providers = Layer.effect(
      Providers,
      Effect.all([
        OpenAiCompatible.make({ name: "alpha", baseUrl: `${alpha.origin}/v1`, apiKey: Redacted.make(KEY), models: [model("m-1", 1_500n, 6_000n)] }),
        OpenAiCompatible.make({ name: "beta", baseUrl: `${beta.origin}/v1`, apiKey: Redacted.make(KEY), models: [model("m-1", 3_000n, 12_000n)] })
      ]).pipe(Effect.map((all) => ({ all })))
    ).pipe(Layer.provide(upstreamLayers))
    const transport = Transport.layer({
      operatorServices: [{
        service: {
          slug: "alpha",
          name: "Alpha",
          description: "test upstream",
          baseUrl: `${alpha.origin}/v1`,
          capabilities: ["reason"],
          origin: "operator",
          endpoints: [
            {
              path: "/chat/completions",
              method: "POST",
              description: "chat",
              price: { kind: "tokens", format: "openai-chat", models: [model("m-1", 1_500n, 6_000n)] }
            },
            { path: "/models", method: "GET", description: "unpriced", price: null }
          ]
        },
        credentials: { authorization: Redacted.make(`Bearer ${KEY}`) }
      }]
    }).pipe(Layer.provide(upstreamLayers))
    // Names resolve to a documentation address: nothing is ever connected to.
    const outbound = SafeHttp.layer({ lookup: async () => [{ address: "93.184.216.34", family: 4 }] })
    server = await startServer(store(), { providers, transport, outbound, adminToken: ADMIN })
    api = client(server.baseUrl)
  })
  afterAll(async () => {
    await server?.close()
    await Effect.runPromise(Scope.close(scope, Exit.void))
  })

  const fundedOwner = async (cents = 100n) => {
    const signup = await api.post("/v1/signup", { name: "ops" })
    if (cents > 0n) await server.run(Effect.gen(function*() {
      yield* (yield* Wallets).credit({
        accountId: signup.body.accountId as AccountId,
        key: "seed",
        pocket: "usd",
        amount: cents * 10_000n,
        description: "seed"
      })
    }))
    return signup.body as { apiKey: string; agentId: string; accountId: string }
  }

  it("meters a reason call from the upstream's usage to the exact micro-dollar", async () => {
    alpha.behaviour = { _tag: "reply", reply: { content: "Hello!", promptTokens: 1234, completionTokens: 567 } }
    const owner = await fundedOwner()
    const before = alpha.requests.length
    const res = await api.post("/v1/capabilities/reason", { prompt: "Say hello", temperature: 0.2 }, owner.apiKey)
    expect(res.status).toBe(200)
    expect(res.body.data).toEqual({
      content: "Hello!",
      finishReason: "stop",
      usage: { promptTokens: 1234, completionTokens: 567, totalTokens: 1801 }
    })
    // 1234 × 1500 / 1000 = 1851 (up) + 567 × 6000 / 1000 = 3402 → 5253 µUSD = 0.5253 cents
    expect(res.body.metadata).toMatchObject({ chargedUsdCents: 0.5253, provider: "alpha", balanceAfter: 99.4747 })
    // The model as the upstream names it (a dated alias of the one asked for).
    expect(res.body.metadata.model).toMatch(/^m-1/)
    expect(res.body.metadata.quotedUsdCents).toBeGreaterThanOrEqual(0.5253)
    const sent = alpha.requests[before]!.json as Record<string, unknown>
    expect(sent["max_tokens"]).toBe(1000)
    expect(sent["model"]).toBe("m-1")
    expect(alpha.requests[before]!.headers["authorization"]).toBe(`Bearer ${KEY}`)
    const wallet = await api.get("/v1/wallet", owner.apiKey)
    expect(wallet.body.balanceUsdCents).toBe(99.4747)
    const charges = await api.get("/v1/wallet/transactions?type=charge", owner.apiKey)
    expect(charges.body.transactions).toHaveLength(1)
    expect(charges.body.transactions[0]).toMatchObject({ amountUsdCents: 0.5253, provider: "alpha", capability: "reason", auditId: res.body.metadata.auditId })
    const audit = await api.get(`/v1/audit/${res.body.metadata.auditId}`, owner.apiKey)
    expect(audit.body).toMatchObject({ kind: "settle", amountUsdCents: 0.5253, verified: true })
  })

  it("falls back to the next provider when the first fails; the caller pays only the second", async () => {
    alpha.behaviour = { _tag: "json", status: 500, body: { error: { message: "boom", type: "server_error", code: null } } }
    beta.behaviour = { _tag: "reply", reply: { content: "from beta", promptTokens: 100, completionTokens: 100 } }
    const owner = await fundedOwner()
    const res = await api.post("/v1/capabilities/reason", { prompt: "x" }, owner.apiKey)
    expect(res.status).toBe(200)
    expect(res.body.metadata.provider).toBe("beta")
    // beta: 100 × 3000 / 1000 + 100 × 12000 / 1000 = 300 + 1200 = 1500 µUSD
    expect(res.body.metadata.chargedUsdCents).toBe(0.15)
    const charges = await api.get("/v1/wallet/transactions?type=charge", owner.apiKey)
    expect(charges.body.transactions.map((t: { provider: string }) => t.provider)).toEqual(["beta"])
    expect((await api.get("/v1/wallet", owner.apiKey)).body.balanceUsdCents).toBe(99.85)
    alpha.behaviour = { _tag: "reply" }
  })

  it("answers PROVIDER_ERROR when every provider fails, and charges nothing", async () => {
    alpha.behaviour = { _tag: "json", status: 503, body: { error: { message: "down", type: "server_error", code: null } } }
    beta.behaviour = { _tag: "json", status: 429, body: { error: { message: "slow down", type: "rate_limit", code: null } } }
    const owner = await fundedOwner()
    const res = await api.post("/v1/capabilities/reason", { prompt: "x" }, owner.apiKey)
    expect(res.status).toBe(502)
    expect(errorCode(res)).toBe("PROVIDER_ERROR")
    expect((await api.get("/v1/wallet", owner.apiKey)).body.balanceUsdCents).toBe(100)
    alpha.behaviour = { _tag: "reply" }
    beta.behaviour = { _tag: "reply" }
  })

  it("refuses by policy without reaching any upstream", async () => {
    const owner = await fundedOwner()
    const worker = await api.post("/v1/agents", { name: "w" }, owner.apiKey)
    await api.put(`/v1/agents/${worker.body.id}/policy`, { maxPerCallUsdCents: 0.0001, maxPerDayUsdCents: null, allowedCapabilities: null }, owner.apiKey)
    const seen = alpha.requests.length + beta.requests.length
    const capped = await api.post("/v1/capabilities/reason", { prompt: "x" }, worker.body.apiKey)
    expect(capped.status).toBe(402)
    expect(errorCode(capped)).toBe("PER_CALL_LIMIT_EXCEEDED")
    await api.put(`/v1/agents/${worker.body.id}/policy`, { maxPerCallUsdCents: null, maxPerDayUsdCents: null, allowedCapabilities: ["search"] }, owner.apiKey)
    expect(errorCode(await api.post("/v1/capabilities/reason", { prompt: "x" }, worker.body.apiKey))).toBe("CAPABILITY_NOT_ALLOWED")
    await api.patch(`/v1/agents/${worker.body.id}`, { killed: true }, owner.apiKey)
    expect(errorCode(await api.post("/v1/capabilities/reason", { prompt: "x" }, worker.body.apiKey))).toBe("AGENT_KILLED")
    const poor = await fundedOwner(0n)
    expect(errorCode(await api.post("/v1/capabilities/reason", { prompt: "x" }, poor.apiKey))).toBe("INSUFFICIENT_BALANCE")
    expect(alpha.requests.length + beta.requests.length).toBe(seen)
  })

  it("validates bodies per capability and answers 404 / 503 for what cannot be served", async () => {
    const owner = await fundedOwner()
    for (
      const body of [{}, { prompt: "" }, { prompt: "x", temperature: 2.5 }, { prompt: "x", maxTokens: 0 }, { prompt: 5 }, { prompt: "x", extra: 1 }]
    ) {
      const res = await api.post("/v1/capabilities/reason", body, owner.apiKey)
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(errorCode(res)).toBe("VALIDATION_ERROR")
    }
    expect(errorCode(await api.post("/v1/capabilities/search", { query: "q", numResults: 51 }, owner.apiKey))).toBe("VALIDATION_ERROR")
    expect(errorCode(await api.post("/v1/capabilities/teleport", {}, owner.apiKey))).toBe("NOT_FOUND")
    expect(errorCode(await api.post("/v1/capabilities/reason", { prompt: "x", provider: "nope" }, owner.apiKey))).toBe("NOT_FOUND")
    expect(errorCode(await api.post("/v1/capabilities/reason", { prompt: "x", model: "m-9" }, owner.apiKey))).toBe("MODEL_NOT_PRICED")
    const none = await api.post("/v1/capabilities/search", { query: "q" }, owner.apiKey)
    expect(none.status).toBe(503)
    expect(errorCode(none)).toBe("PROVIDER_UNAVAILABLE")
    expect(none.body.error.details).toEqual({ capability: "search" })
  })

  it("lists the capabilities (the ten of the specification, then pay) with prices, and describes one", async () => {
    const owner = await fundedOwner()
    const list = await api.get("/v1/capabilities", owner.apiKey)
    expect(list.status).toBe(200)
    expect(list.body.map((c: { name: string }) => c.name)).toEqual(
      ["reason", "search", "read", "scrape", "execute", "imagine", "speak", "transcribe", "email", "sms", "pay"]
    )
    const reason = list.body[0]
    expect(reason.providers).toEqual(["alpha", "beta"])
    expect(reason.pricing.alpha["m-1"]).toEqual({ inputPer1k: 0.15, outputPer1k: 0.6, unit: "usd_cents", per: "1k_tokens" })
    const detail = await api.get("/v1/capabilities/reason", owner.apiKey)
    expect(detail.body.defaultProvider).toBe("alpha")
    expect(detail.body.providers[1]).toEqual({
      name: "beta",
      models: [{ id: "m-1", inputPricePer1kTokens: 0.3, outputPricePer1kTokens: 1.2, maxTokens: 4096 }]
    })
    expect(errorCode(await api.get("/v1/capabilities/teleport", owner.apiKey))).toBe("NOT_FOUND")
  })

  it("proxies a listed, priced endpoint with the operator's credentials and charges from the usage", async () => {
    alpha.behaviour = { _tag: "reply", reply: { content: "proxied", promptTokens: 10, completionTokens: 20 } }
    const owner = await fundedOwner()
    const before = alpha.requests.length
    const res = await api.post("/v1/proxy/alpha", {
      method: "POST",
      path: "/chat/completions",
      headers: { authorization: "Bearer caller-secret", cookie: "a=b", "x-trace": "t1" },
      body: { model: "m-1", messages: [{ role: "user", content: "hi" }] }
    }, owner.apiKey)
    expect(res.status).toBe(200)
    expect(res.body.status).toBe(200)
    expect(res.body.body.choices[0].message.content).toBe("proxied")
    // 10 × 1500 / 1000 = 15 + 20 × 6000 / 1000 = 120 → 135 µUSD
    expect(res.body.metadata).toMatchObject({ chargedUsdCents: 0.0135, provider: "alpha", model: "m-1" })
    const sent = alpha.requests[before]!
    expect(sent.headers["authorization"]).toBe(`Bearer ${KEY}`)
    expect(sent.headers["cookie"]).toBeUndefined()
    expect(sent.headers["x-trace"]).toBe("t1")
    expect((sent.json as Record<string, unknown>)["max_tokens"]).toBe(1000)
    expect(JSON.stringify(res.body)).not.toContain(KEY)
    for (const name of Object.keys(res.body.headers)) expect(name).not.toMatch(/set-cookie|authorization|connection/)
    const services = await api.get("/v1/services", owner.apiKey)
    expect(services.body.map((s: { slug: string }) => s.slug)).toContain("alpha")
    const detail = await api.get("/v1/services/alpha", owner.apiKey)
    expect(detail.body.pricing["/chat/completions"]["m-1"]).toMatchObject({ inputPer1kTokens: 0.15, outputPer1kTokens: 0.6 })
    expect(detail.body.endpoints).toContainEqual({ path: "/models", method: "GET", description: "unpriced" })
  })

  it("refuses unlisted or unpriced endpoints, killed agents and exhausted caps before the upstream", async () => {
    const owner = await fundedOwner()
    const seen = alpha.requests.length
    const chat = { method: "POST", path: "/chat/completions", body: { model: "m-1", messages: [] } }
    expect(errorCode(await api.post("/v1/proxy/alpha", { method: "POST", path: "/embeddings", body: {} }, owner.apiKey))).toBe("NOT_FOUND")
    expect(errorCode(await api.post("/v1/proxy/alpha", { method: "GET", path: "/models" }, owner.apiKey))).toBe("VALIDATION_ERROR")
    expect(errorCode(await api.post("/v1/proxy/nope", chat, owner.apiKey))).toBe("NOT_FOUND")
    expect(errorCode(await api.post("/v1/proxy/alpha", { ...chat, body: { model: "m-9", messages: [] } }, owner.apiKey))).toBe("MODEL_NOT_PRICED")
    expect(errorCode(await api.post("/v1/proxy/alpha", { ...chat, body: { model: "m-1", messages: [], max_tokens: 99999 } }, owner.apiKey))).toBe("VALIDATION_ERROR")
    const worker = await api.post("/v1/agents", { name: "w" }, owner.apiKey)
    await api.put(`/v1/agents/${worker.body.id}/policy`, { maxPerCallUsdCents: null, maxPerDayUsdCents: 0.0001, allowedCapabilities: null }, owner.apiKey)
    expect(errorCode(await api.post("/v1/proxy/alpha", chat, worker.body.apiKey))).toBe("BUDGET_EXCEEDED")
    await api.patch(`/v1/agents/${worker.body.id}`, { killed: true }, owner.apiKey)
    expect(errorCode(await api.post("/v1/proxy/alpha", chat, worker.body.apiKey))).toBe("AGENT_KILLED")
    expect(alpha.requests.length).toBe(seen)
  })

  it("registers a community service: validated, reviewed by the operator, then listed", async () => {
    const owner = await fundedOwner()
    const submission = {
      slug: `weather-${Math.random().toString(36).slice(2, 8)}`,
      name: "Weather",
      description: "Forecasts",
      baseUrl: "https://weather.example.com/api",
      capabilities: ["search"],
      endpoints: [{ path: "/forecast", method: "GET", description: "A forecast" }],
      pricing: { "/forecast": { perCallUsdCents: 0.25 } },
      contact: "ops@weather.example.com"
    }
    const created = await api.post("/v1/registry/submit", submission, owner.apiKey)
    expect(created.status).toBe(201)
    expect(created.body).toMatchObject({ status: "pending", slug: submission.slug })
    expect((await api.post("/v1/registry/submit", submission, owner.apiKey)).status).toBe(409)
    for (
      const bad of [
        { ...submission, slug: "other-1", baseUrl: "http://weather.example.com" },
        { ...submission, slug: "other-2", baseUrl: "https://10.0.0.1" },
        { ...submission, slug: "other-3", pricing: {} },
        { ...submission, slug: "Bad Slug" }
      ]
    ) {
      const res = await api.post("/v1/registry/submit", bad, owner.apiKey)
      expect(res.status, bad.slug).toBe(400)
    }
    const worker = await api.post("/v1/agents", { name: "w" }, owner.apiKey)
    expect(errorCode(await api.post("/v1/registry/submit", { ...submission, slug: "other-4" }, worker.body.apiKey))).toBe("FORBIDDEN")
    const mine = await api.get("/v1/registry/submissions", owner.apiKey)
    expect(mine.body.submissions.map((s: { slug: string }) => s.slug)).toEqual([submission.slug])
    expect((await api.get("/v1/services", owner.apiKey)).body.map((s: { slug: string }) => s.slug)).not.toContain(submission.slug)

    const admin = (method: string, path: string, body?: unknown) =>
      api.call(method, path, { headers: { authorization: `Bearer ${ADMIN}` }, ...(body === undefined ? {} : { body }) })
    const pending = await admin("GET", "/v1/admin/registry/submissions?status=pending")
    expect(pending.body.submissions.some((s: { id: string }) => s.id === created.body.id)).toBe(true)
    const approved = await admin("POST", `/v1/admin/registry/submissions/${created.body.id}/approve`, { note: "ok" })
    expect(approved.body).toMatchObject({ status: "approved", reviewNote: "ok" })
    expect((await admin("POST", `/v1/admin/registry/submissions/${created.body.id}/reject`, {})).status).toBe(409)
    const listed = await api.get(`/v1/services/${submission.slug}`, owner.apiKey)
    expect(listed.body).toMatchObject({ slug: submission.slug, pricing: { "/forecast": { perCall: 0.25, unit: "usd_cents", per: "call" } } })
    expect(errorCode(await admin("POST", "/v1/admin/registry/submissions/sub_nope/approve", {}))).toBe("NOT_FOUND")
    expect(errorCode(await api.call("GET", "/v1/admin/registry/submissions", { key: owner.apiKey }))).toBe("FORBIDDEN")
  })
})
