import { upstreamLayers } from "../support/upstreamLayers.ts"
import { Effect, Exit, Layer, Redacted, Result, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as OpenAiCompatible from "../../adapters/providers/reason/openaiCompatible.ts"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import type { ModelInfo, Provider } from "../../src/capabilities/Provider.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { type Fake, startFake } from "../providers/fakeLlm.ts"
import { type ApiResponse, client, errorCode, type RunningServer, startServer, storeBackends } from "../support/server.ts"

/**
 * Binding quotes over HTTP, on every store: `POST /v1/quotes` agrees with
 * the estimate, the call made with the quote (header X-Spendgate-Quote) runs
 * on the quoted provider at the quoted price and is charged at most that, and
 * a quote pays for exactly one call — also when ten calls race for it. The
 * reason providers are real OpenAI-compatible adapters talking to local
 * servers that speak OpenAI's wire format.
 */

const KEY = "sk-operator-test-key"
const TTL_MS = 3_000
const QUOTE = "x-spendgate-quote"
const model = (id: string, inPer1k: bigint, outPer1k: bigint): ModelInfo => ({
  id,
  inputPer1kMicroUsd: inPer1k,
  outputPer1kMicroUsd: outPer1k,
  maxTokens: 4096,
  defaultMaxTokens: 1000
})
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe.each(storeBackends)("binding quotes over HTTP (%s)", (_name, store) => {
  const scope = Effect.runSync(Scope.make())
  let alpha: Fake
  let beta: Fake
  let server: RunningServer
  let api: ReturnType<typeof client>

  beforeAll(async () => {
    alpha = await Effect.runPromise(Scope.provide(startFake({ apiKey: KEY }), scope))
    beta = await Effect.runPromise(Scope.provide(startFake({ apiKey: KEY }), scope))
    alpha.behaviour = { _tag: "reply", reply: { content: "ok", promptTokens: 12, completionTokens: 7 } }
    beta.behaviour = { _tag: "reply", reply: { content: "ok", promptTokens: 12, completionTokens: 7 } }
    const providers = Layer.effect(
      Providers,
      Effect.all([
        OpenAiCompatible.make({ name: "alpha", baseUrl: `${alpha.origin}/v1`, apiKey: Redacted.make(KEY), models: [model("m-1", 1_500n, 6_000n)] }),
        OpenAiCompatible.make({ name: "beta", baseUrl: `${beta.origin}/v1`, apiKey: Redacted.make(KEY), models: [model("m-1", 3_000n, 12_000n)] })
      ]).pipe(Effect.map((all) => ({ all })))
    ).pipe(Layer.provide(upstreamLayers))
    server = await startServer(store(), { providers, quoteTtlMs: TTL_MS })
    api = client(server.baseUrl)
  })
  afterAll(async () => {
    await server?.close()
    await Effect.runPromise(Scope.close(scope, Exit.void))
  })

  /** An account with `cents` in the usd pocket, its owner and a worker agent. */
  const account = async (cents = 100n) => {
    const signup = await api.post("/v1/signup", { name: "ops" })
    await server.run(Effect.gen(function*() {
      yield* (yield* Wallets).credit({
        accountId: signup.body.accountId as AccountId,
        key: "seed",
        pocket: "usd",
        amount: cents * 10_000n,
        description: "seed"
      })
    }))
    const worker = await api.post("/v1/agents", { name: "worker" }, signup.body.apiKey)
    expect(worker.status).toBe(201)
    return { ownerKey: signup.body.apiKey as string, workerId: worker.body.id as string, workerKey: worker.body.apiKey as string }
  }
  type Account = Awaited<ReturnType<typeof account>>

  const quote = (key: string, capability: string, input: unknown) => api.post("/v1/quotes", { capability, input }, key)
  const call = (key: string, capability: string, input: unknown, quoteId: string, headers: Record<string, string> = {}) =>
    api.call("POST", `/v1/capabilities/${capability}`, { key, body: input, headers: { [QUOTE]: quoteId, ...headers } })

  /** The wallet, the charges and the worker's spend (holds included) as the owner sees them. */
  const ledger = async (a: Account) => ({
    balance: (await api.get("/v1/wallet", a.ownerKey)).body.balanceUsdCents as number,
    charges: (await api.get("/v1/wallet/transactions?type=charge", a.ownerKey)).body.transactions as Array<any>,
    dailySpent: (await api.get(`/v1/agents/${a.workerId}/policy`, a.ownerKey)).body.dailySpentUsdCents as number
  })
  const refused = (res: ApiResponse, status: number, code: string) => {
    expect(res.status).toBe(status)
    expect(errorCode(res)).toBe(code)
  }

  const input = { prompt: "What colour is the sky?", maxTokens: 100 }

  it("quotes what the estimate reports; the call made with it is held at that price, charged at most that, on that provider", async () => {
    const a = await account()
    const estimate = await api.post("/v1/capabilities/reason/estimate", input, a.workerKey)
    expect(estimate.status).toBe(200)
    const issued = await quote(a.workerKey, "reason", input)
    expect(issued.status).toBe(201)
    expect(issued.body).toMatchObject({
      capability: "reason",
      provider: estimate.body.provider,
      model: estimate.body.model,
      quotedUsdCents: estimate.body.quotedUsdCents,
      remainingTodayUsdCents: estimate.body.remainingTodayUsdCents,
      remainingThisMonthUsdCents: null,
      remainingThisHourUsdCents: null
    })
    expect(issued.body.provider).toBe("alpha")
    expect(issued.body.quoteId).toMatch(/^quo_[A-Za-z0-9]{24}$/)
    expect(Date.parse(issued.body.expiresAt) - Date.parse(issued.body.createdAt)).toBe(TTL_MS)
    // Issuing holds and charges nothing.
    expect(await ledger(a)).toEqual({ balance: 100, charges: [], dailySpent: 0 })

    const sent = alpha.requests.length
    const res = await call(a.workerKey, "reason", input, issued.body.quoteId)
    expect(res.status).toBe(200)
    expect(res.body.metadata).toMatchObject({
      provider: "alpha",
      quotedUsdCents: issued.body.quotedUsdCents,
      quoteId: issued.body.quoteId
    })
    // 12 prompt tokens × 1500 + 7 completion tokens × 6000, per 1000: 18 + 42 = 60 µUSD.
    expect(res.body.metadata.chargedUsdCents).toBe(0.006)
    expect(res.body.metadata.chargedUsdCents).toBeLessThanOrEqual(issued.body.quotedUsdCents)
    expect(alpha.requests.length).toBe(sent + 1)
    expect((alpha.requests[sent]!.json as Record<string, unknown>)["max_tokens"]).toBe(100)
    const after = await ledger(a)
    expect(after.balance).toBe(99.994)
    expect(after.charges).toHaveLength(1)
    expect(after.charges[0]).toMatchObject({ amountUsdCents: 0.006, provider: "alpha", auditId: res.body.metadata.auditId })
    expect(after.dailySpent).toBe(0.006)
  })

  it("a quote pays for one call: the second is 409 QUOTE_USED and reaches no provider", async () => {
    const a = await account()
    const issued = await quote(a.workerKey, "reason", input)
    expect((await call(a.workerKey, "reason", input, issued.body.quoteId)).status).toBe(200)
    const before = await ledger(a)
    const sent = alpha.requests.length
    const again = await call(a.workerKey, "reason", input, issued.body.quoteId)
    refused(again, 409, "QUOTE_USED")
    expect(again.body.error.details).toMatchObject({ quoteId: issued.body.quoteId })
    expect(alpha.requests.length).toBe(sent)
    expect(await ledger(a)).toEqual(before)
  })

  it("ten concurrent calls with one quote: exactly one runs and is charged", async () => {
    const a = await account()
    const issued = await quote(a.workerKey, "reason", input)
    const sent = alpha.requests.length
    const results = await Promise.all(
      Array.from({ length: 10 }, () => call(a.workerKey, "reason", input, issued.body.quoteId))
    )
    const ok = results.filter((r) => r.status === 200)
    expect(ok).toHaveLength(1)
    for (const r of results.filter((r) => r.status !== 200)) refused(r, 409, "QUOTE_USED")
    expect(alpha.requests.length).toBe(sent + 1)
    const after = await ledger(a)
    expect(after.charges).toHaveLength(1)
    expect(after.charges[0].auditId).toBe(ok[0]!.body.metadata.auditId)
    expect(after.balance).toBe(100 - ok[0]!.body.metadata.chargedUsdCents)
  })

  it("an expired quote is 409 QUOTE_EXPIRED and changes nothing", async () => {
    const a = await account()
    const issued = await quote(a.workerKey, "reason", input)
    await sleep(TTL_MS + 200)
    const sent = alpha.requests.length
    const res = await call(a.workerKey, "reason", input, issued.body.quoteId)
    refused(res, 409, "QUOTE_EXPIRED")
    expect(res.body.error.details).toEqual({ quoteId: issued.body.quoteId, expiresAt: issued.body.expiresAt })
    expect(alpha.requests.length).toBe(sent)
    expect(await ledger(a)).toEqual({ balance: 100, charges: [], dailySpent: 0 })
  })

  it("a different input or capability is 409 QUOTE_MISMATCH, and leaves the quote usable", async () => {
    const a = await account()
    const issued = await quote(a.workerKey, "reason", input)
    const id = issued.body.quoteId
    for (const other of [
      { ...input, prompt: "What colour is the sea?" },
      { ...input, maxTokens: 101 },
      { ...input, provider: "alpha" },
      { prompt: input.prompt }
    ]) {
      const res = await call(a.workerKey, "reason", other, id)
      refused(res, 409, "QUOTE_MISMATCH")
      expect(res.body.error.details).toEqual({ quoteId: id, field: "input" })
    }
    const search = await call(a.workerKey, "search", { query: "sky" }, id)
    refused(search, 409, "QUOTE_MISMATCH")
    expect(search.body.error.details).toEqual({ quoteId: id, field: "capability" })
    expect(await ledger(a)).toEqual({ balance: 100, charges: [], dailySpent: 0 })
    // The same input with its keys in another order is the same input.
    const res = await call(a.workerKey, "reason", { maxTokens: 100, prompt: input.prompt }, id)
    expect(res.status).toBe(200)
  })

  it("another agent's or another account's quote is 404, and stays usable by its own agent", async () => {
    const a = await account()
    const b = await account()
    const issued = await quote(a.workerKey, "reason", input)
    const id = issued.body.quoteId
    refused(await call(a.ownerKey, "reason", input, id), 404, "NOT_FOUND")
    refused(await call(b.workerKey, "reason", input, id), 404, "NOT_FOUND")
    refused(await call(a.workerKey, "reason", input, "quo_000000000000000000000000"), 404, "NOT_FOUND")
    expect((await call(a.workerKey, "reason", input, id)).status).toBe(200)
  })

  it("every policy check still applies at the call; a refused call leaves the quote unused", async () => {
    const a = await account()
    const issued = await quote(a.workerKey, "reason", input)
    const id = issued.body.quoteId
    // Killed after the quote: 403, nothing held.
    expect((await api.patch(`/v1/agents/${a.workerId}`, { killed: true }, a.ownerKey)).status).toBe(200)
    refused(await call(a.workerKey, "reason", input, id), 403, "AGENT_KILLED")
    expect((await api.patch(`/v1/agents/${a.workerId}`, { killed: false }, a.ownerKey)).status).toBe(200)
    // A per-call cap below the quoted price: 402, quote not used.
    const cap = await api.patch(`/v1/agents/${a.workerId}/policy`, { maxPerCallUsdCents: 0.0001 }, a.ownerKey)
    expect(cap.status).toBe(200)
    refused(await call(a.workerKey, "reason", input, id), 402, "PER_CALL_LIMIT_EXCEEDED")
    // The capability taken off the list: 403.
    await api.patch(`/v1/agents/${a.workerId}/policy`, { maxPerCallUsdCents: null, allowedCapabilities: ["search"] }, a.ownerKey)
    refused(await call(a.workerKey, "reason", input, id), 403, "CAPABILITY_NOT_ALLOWED")
    expect(await ledger(a)).toEqual({ balance: 100, charges: [], dailySpent: 0 })
    // Lifted again: the same quote now pays for the call.
    await api.patch(`/v1/agents/${a.workerId}/policy`, { allowedCapabilities: null }, a.ownerKey)
    const res = await call(a.workerKey, "reason", input, id)
    expect(res.status).toBe(200)
    expect(res.body.metadata.quotedUsdCents).toBe(issued.body.quotedUsdCents)
  })

  it("an empty wallet at the call is 402 INSUFFICIENT_BALANCE and the quote stays unused", async () => {
    const a = await account(1n)
    const issued = await quote(a.workerKey, "reason", { prompt: "p", maxTokens: 1000 })
    expect(issued.status).toBe(201)
    // Spend most of the cent with another call, then the quoted one cannot be held.
    alpha.behaviour = { _tag: "reply", reply: { content: "long", promptTokens: 1, completionTokens: 1500 } }
    try {
      const spent = await api.post("/v1/capabilities/reason", { prompt: "p", maxTokens: 1500 }, a.workerKey)
      expect(spent.status).toBe(200)
    } finally {
      alpha.behaviour = { _tag: "reply", reply: { content: "ok", promptTokens: 12, completionTokens: 7 } }
    }
    expect((await ledger(a)).balance).toBeLessThan(0.2)
    const res = await call(a.workerKey, "reason", { prompt: "p", maxTokens: 1000 }, issued.body.quoteId)
    refused(res, 402, "INSUFFICIENT_BALANCE")
    expect((await ledger(a)).charges).toHaveLength(1)
  })

  it("a pinned quote runs on the pinned provider at its price", async () => {
    const a = await account()
    const pinned = { ...input, provider: "beta" }
    const issued = await quote(a.workerKey, "reason", pinned)
    expect(issued.body).toMatchObject({ provider: "beta" })
    const cheap = await quote(a.workerKey, "reason", input)
    expect(issued.body.quotedUsdCents).toBeGreaterThan(cheap.body.quotedUsdCents)
    const sent = beta.requests.length
    const res = await call(a.workerKey, "reason", pinned, issued.body.quoteId)
    expect(res.status).toBe(200)
    expect(res.body.metadata).toMatchObject({ provider: "beta", quotedUsdCents: issued.body.quotedUsdCents })
    expect(beta.requests.length).toBe(sent + 1)
  })

  it("a call the policy would refuse now gets that refusal, as the estimate gives it, and no quote", async () => {
    const a = await account()
    await api.patch(`/v1/agents/${a.workerId}/policy`, { maxPerCallUsdCents: 0.0001 }, a.ownerKey)
    const estimate = await api.post("/v1/capabilities/reason/estimate", input, a.workerKey)
    expect(estimate.body.allowed).toBe(false)
    const res = await quote(a.workerKey, "reason", input)
    refused(res, 402, "PER_CALL_LIMIT_EXCEEDED")
    expect(res.body.error).toEqual({ ...estimate.body.refusal, requestId: res.headers.get("x-request-id") })
    const poor = await account(0n)
    const broke = await quote(poor.workerKey, "reason", input)
    refused(broke, 402, "INSUFFICIENT_BALANCE")
  })

  it("bad requests are 400 in the envelope; a capability with no provider is 503", async () => {
    const a = await account()
    for (const body of [
      { capability: "reason", input: { prompt: "" } },
      { capability: "reason", input: { prompt: "x", extra: 1 } },
      { capability: "nope", input: { prompt: "x" } },
      { capability: "reason" },
      { capability: "reason", input: { prompt: "x" }, extra: true },
      []
    ]) {
      refused(await api.post("/v1/quotes", body, a.workerKey), 400, "VALIDATION_ERROR")
    }
    // The input is checked by the capability's own schema, issues named by their path.
    const empty = await quote(a.workerKey, "reason", { prompt: "" })
    expect(empty.body.error.details.issues).toEqual([{ path: "input.prompt", message: expect.any(String) }])
    refused(await quote(a.workerKey, "imagine", { prompt: "a cat" }), 503, "PROVIDER_UNAVAILABLE")
    refused(await call(a.workerKey, "reason", input, "not-a-quote"), 400, "VALIDATION_ERROR")
    expect((await api.post("/v1/quotes", { capability: "reason", input })).status).toBe(401)
    const ok = await quote(a.workerKey, "reason", input)
    expect(ok.headers.get("x-ratelimit-limit")).not.toBeNull()
    expect(await ledger(a)).toEqual({ balance: 100, charges: [], dailySpent: 0 })
  })

  it("an Idempotency-Key reused with another quote is a conflict, not a replay", async () => {
    const a = await account()
    const first = await quote(a.workerKey, "reason", input)
    const second = await quote(a.workerKey, "reason", input)
    const headers = { "idempotency-key": "quoted-call-1" }
    expect((await call(a.workerKey, "reason", input, first.body.quoteId, headers)).status).toBe(200)
    const replay = await call(a.workerKey, "reason", input, first.body.quoteId, headers)
    expect(replay.status).toBe(200)
    refused(await call(a.workerKey, "reason", input, second.body.quoteId, headers), 409, "IDEMPOTENCY_CONFLICT")
    expect((await ledger(a)).charges).toHaveLength(1)
  })
})

/** An in-process search provider whose price and status a test may change after a quote was given. */
const adjustable = (name: string) => {
  const state = { priceMicroUsd: 50_000n, actualMicroUsd: 50_000n, runs: 0 }
  const provider: Provider<"search"> & { status: Provider["status"] } = {
    name,
    capability: "search",
    unitPrice: { per: "query", priceMicroUsd: 50_000n },
    status: undefined,
    quote: () => Result.succeed({ microUsd: state.priceMicroUsd }),
    run: (input) =>
      Effect.sync(() => {
        state.runs++
        return { output: { results: [], query: input.query, totalResults: 0 }, actualMicroUsd: state.actualMicroUsd }
      })
  }
  return { provider, state }
}

describe("binding quotes when the provider changes after the quote (memory)", () => {
  const only = adjustable("only")
  let server: RunningServer
  let api: ReturnType<typeof client>

  beforeAll(async () => {
    server = await startServer(storeBackends[0]![1](), { providers: Layer.succeed(Providers, { all: [only.provider] }) })
    api = client(server.baseUrl)
  })
  afterAll(() => server?.close())

  const fundedKey = async () => {
    const signup = await api.post("/v1/signup", { name: "ops" })
    await server.run(Effect.gen(function*() {
      yield* (yield* Wallets).credit({
        accountId: signup.body.accountId as AccountId,
        key: "seed",
        pocket: "usd",
        amount: 1_000_000n,
        description: "seed"
      })
    }))
    return signup.body.apiKey as string
  }
  const call = (key: string, quoteId: string) =>
    api.call("POST", "/v1/capabilities/search", { key, body: { query: "q" }, headers: { [QUOTE]: quoteId } })

  it("lives 60 s by default", async () => {
    const key = await fundedKey()
    const issued = await api.post("/v1/quotes", { capability: "search", input: { query: "q" } }, key)
    expect(issued.status).toBe(201)
    expect(Date.parse(issued.body.expiresAt) - Date.parse(issued.body.createdAt)).toBe(60_000)
  })

  it("a price risen since the quote: held and charged at the quoted price", async () => {
    const key = await fundedKey()
    const issued = await api.post("/v1/quotes", { capability: "search", input: { query: "q" } }, key)
    expect(issued.body.quotedUsdCents).toBe(5)
    only.state.priceMicroUsd = 90_000n
    only.state.actualMicroUsd = 90_000n
    try {
      const res = await call(key, issued.body.quoteId)
      expect(res.status).toBe(200)
      expect(res.body.metadata).toMatchObject({ quotedUsdCents: 5, chargedUsdCents: 5 })
      expect((await api.get("/v1/wallet", key)).body.balanceUsdCents).toBe(95)
      // Without the quote, the new price.
      const fresh = await api.post("/v1/capabilities/search", { query: "q" }, key)
      expect(fresh.body.metadata).toMatchObject({ quotedUsdCents: 9, chargedUsdCents: 9 })
    } finally {
      only.state.priceMicroUsd = 50_000n
      only.state.actualMicroUsd = 50_000n
    }
  })

  it("the quoted provider unusable at the call: 503, the quote unused, and usable once the provider is back", async () => {
    const key = await fundedKey()
    const issued = await api.post("/v1/quotes", { capability: "search", input: { query: "q" } }, key)
    const runs = only.state.runs
    only.provider.status = { ok: false, reason: "taken out of service" }
    try {
      const res = await call(key, issued.body.quoteId)
      expect(res.status).toBe(503)
      expect(errorCode(res)).toBe("PROVIDER_UNAVAILABLE")
      expect(only.state.runs).toBe(runs)
    } finally {
      only.provider.status = undefined
    }
    const res = await call(key, issued.body.quoteId)
    expect(res.status).toBe(200)
    expect(only.state.runs).toBe(runs + 1)
  })
})
