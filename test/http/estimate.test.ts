import { Effect, Layer, Result } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import type { Provider } from "../../src/capabilities/Provider.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { client, errorCode, type RunningServer, startServer, storeBackends } from "../support/server.ts"

/**
 * POST /v1/capabilities/{name}/estimate over HTTP: the provider, quote and
 * decision it reports are the ones the execute that follows meets (same
 * provider, same quote, same refusal code), and it holds and charges nothing.
 */

/** An in-process search provider at a flat price per query, counting its runs. */
const searchProvider = (name: string, priceMicroUsd: bigint, runs: Array<string>): Provider<"search"> => ({
  name,
  capability: "search",
  unitPrice: { per: "query", priceMicroUsd },
  quote: () => Result.succeed({ microUsd: priceMicroUsd }),
  run: (input) =>
    Effect.sync(() => {
      runs.push(name)
      return { output: { results: [], query: input.query, totalResults: 0 }, actualMicroUsd: priceMicroUsd }
    })
})

describe.each(storeBackends.slice(0, 2))("estimate over HTTP (%s)", (_name, store) => {
  let server: RunningServer
  let api: ReturnType<typeof client>
  const runs: Array<string> = []

  beforeAll(async () => {
    // 5 cents and 8 cents a query: the cheaper one is chosen unless pinned.
    const providers = Layer.succeed(Providers, {
      all: [searchProvider("pricey", 80_000n, runs), searchProvider("cheap", 50_000n, runs)]
    })
    server = await startServer(store(), { providers })
    api = client(server.baseUrl)
  })
  afterAll(() => server?.close())

  const account = async (cents: bigint) => {
    const signup = await api.post("/v1/signup", { name: "ops" })
    if (cents > 0n) {
      await server.run(Effect.gen(function*() {
        yield* (yield* Wallets).credit({
          accountId: signup.body.accountId as AccountId,
          key: "seed",
          pocket: "usd",
          amount: cents * 10_000n,
          description: "seed"
        })
      }))
    }
    const worker = await api.post("/v1/agents", { name: "worker" }, signup.body.apiKey)
    expect(worker.status).toBe(201)
    return {
      ownerKey: signup.body.apiKey as string,
      workerId: worker.body.id as string,
      workerKey: worker.body.apiKey as string
    }
  }

  const setPolicy = async (a: { ownerKey: string; workerId: string }, policy: Record<string, unknown>) => {
    const res = await api.put(`/v1/agents/${a.workerId}/policy`, {
      maxPerCallUsdCents: null,
      maxPerDayUsdCents: null,
      allowedCapabilities: null,
      ...policy
    }, a.ownerKey)
    expect(res.status).toBe(200)
  }

  /** Wallet, transactions and the worker's day's spend (holds included) as the owner sees them. */
  const ledger = async (a: { ownerKey: string; workerId: string }) => ({
    wallet: (await api.get("/v1/wallet", a.ownerKey)).body,
    transactions: (await api.get("/v1/wallet/transactions", a.ownerKey)).body.total,
    dailySpent: (await api.get(`/v1/agents/${a.workerId}/policy`, a.ownerKey)).body.dailySpentUsdCents
  })

  it("reports the cheapest provider and its quote, allowed, and the execute that follows agrees", async () => {
    const a = await account(100n)
    await setPolicy(a, { maxPerDayUsdCents: 20 })
    const estimate = await api.post("/v1/capabilities/search/estimate", { query: "q" }, a.workerKey)
    expect(estimate.status).toBe(200)
    expect(estimate.body).toEqual({
      capability: "search",
      provider: "cheap",
      quotedUsdCents: 5,
      allowed: true,
      remainingTodayUsdCents: 20,
      remainingThisMonthUsdCents: null,
      remainingThisHourUsdCents: null
    })
    const executed = await api.post("/v1/capabilities/search", { query: "q" }, a.workerKey)
    expect(executed.status).toBe(200)
    expect(executed.body.metadata).toMatchObject({ provider: "cheap", quotedUsdCents: 5 })
    const after = await api.post("/v1/capabilities/search/estimate", { query: "q" }, a.workerKey)
    expect(after.body).toMatchObject({ allowed: true, remainingTodayUsdCents: 15 })
  })

  it("reports the pinned provider's quote", async () => {
    const a = await account(100n)
    const estimate = await api.post("/v1/capabilities/search/estimate", { query: "q", provider: "pricey" }, a.workerKey)
    expect(estimate.body).toMatchObject({ provider: "pricey", quotedUsdCents: 8, allowed: true, remainingTodayUsdCents: null })
    const executed = await api.post("/v1/capabilities/search", { query: "q", provider: "pricey" }, a.workerKey)
    expect(executed.body.metadata).toMatchObject({ provider: "pricey", quotedUsdCents: 8 })
  })

  it("holds and charges nothing and calls no provider", async () => {
    const a = await account(100n)
    await setPolicy(a, { maxPerDayUsdCents: 50 })
    const before = await ledger(a)
    const runsBefore = runs.length
    for (let i = 0; i < 5; i++) {
      expect((await api.post("/v1/capabilities/search/estimate", { query: "q" }, a.workerKey)).body.allowed).toBe(true)
    }
    expect(await ledger(a)).toEqual(before)
    expect(before.wallet.balanceUsdCents).toBe(100)
    expect(runs.length).toBe(runsBefore)
    const worker = await api.get(`/v1/agents/${a.workerId}/policy`, a.ownerKey)
    expect(worker.body.dailySpentUsdCents).toBe(0)
    const reservations = await api.get("/v1/wallet/transactions?type=charge", a.ownerKey)
    expect(reservations.body.total).toBe(0)
  })

  /** The estimate refuses with `code`, and the execute that follows is refused with the same code and changes nothing. */
  const agreeOnRefusal = async (a: { ownerKey: string; workerId: string; workerKey: string }, body: object, code: string) => {
    const estimate = await api.post("/v1/capabilities/search/estimate", body, a.workerKey)
    expect(estimate.status).toBe(200)
    expect(estimate.body.allowed).toBe(false)
    expect(estimate.body.refusal.code).toBe(code)
    const before = await ledger(a)
    const executed = await api.post("/v1/capabilities/search", body, a.workerKey)
    expect(errorCode(executed)).toBe(code)
    expect(executed.body.error).toEqual({ ...estimate.body.refusal, requestId: executed.headers.get("x-request-id") })
    expect(await ledger(a)).toEqual(before)
    return estimate.body
  }

  it("agrees with execute on the per-call cap", async () => {
    const a = await account(100n)
    await setPolicy(a, { maxPerCallUsdCents: 4 })
    const body = await agreeOnRefusal(a, { query: "q" }, "PER_CALL_LIMIT_EXCEEDED")
    expect(body).toMatchObject({ provider: "cheap", quotedUsdCents: 5, remainingTodayUsdCents: null })
  })

  it("agrees with execute on the daily cap and reports what is left of it", async () => {
    const a = await account(100n)
    await setPolicy(a, { maxPerDayUsdCents: 12 })
    expect((await api.post("/v1/capabilities/search", { query: "q" }, a.workerKey)).status).toBe(200)
    expect((await api.post("/v1/capabilities/search/estimate", { query: "q" }, a.workerKey)).body)
      .toMatchObject({ allowed: true, remainingTodayUsdCents: 7 })
    expect((await api.post("/v1/capabilities/search", { query: "q" }, a.workerKey)).status).toBe(200)
    const body = await agreeOnRefusal(a, { query: "q" }, "BUDGET_EXCEEDED")
    expect(body.remainingTodayUsdCents).toBe(2)
    expect(body.refusal.details).toMatchObject({ dailySpent: 10, dailyCap: 12, quotedCost: 5 })
  })

  it("agrees with execute on an empty wallet", async () => {
    const a = await account(0n)
    await agreeOnRefusal(a, { query: "q" }, "INSUFFICIENT_BALANCE")
    const short = await account(7n)
    await agreeOnRefusal(short, { query: "q", provider: "pricey" }, "INSUFFICIENT_BALANCE")
  })

  it("agrees with execute on a capability the policy does not allow", async () => {
    const a = await account(100n)
    await setPolicy(a, { allowedCapabilities: ["reason"] })
    await agreeOnRefusal(a, { query: "q" }, "CAPABILITY_NOT_ALLOWED")
  })

  it("agrees with execute on a killed agent", async () => {
    const a = await account(100n)
    expect((await api.patch(`/v1/agents/${a.workerId}`, { killed: true }, a.ownerKey)).status).toBe(200)
    const estimate = await api.post("/v1/capabilities/search/estimate", { query: "q" }, a.workerKey)
    const executed = await api.post("/v1/capabilities/search", { query: "q" }, a.workerKey)
    expect(errorCode(executed)).toBe("AGENT_KILLED")
    // A killed key makes no call at all, an estimate included: the same 403 as execute.
    expect(estimate.status).toBe(403)
    expect(errorCode(estimate)).toBe("AGENT_KILLED")
  })

  it("answers an unknown capability or provider 404, bad input 400, no configured provider 503, like execute", async () => {
    const a = await account(100n)
    for (const [path, body, code] of [
      ["/v1/capabilities/nope", { query: "q" }, "NOT_FOUND"],
      ["/v1/capabilities/search", { query: "q", provider: "nobody" }, "NOT_FOUND"],
      ["/v1/capabilities/search", { query: "" }, "VALIDATION_ERROR"],
      ["/v1/capabilities/search", { query: "q", extra: 1 }, "VALIDATION_ERROR"],
      ["/v1/capabilities/imagine", { prompt: "a cat" }, "PROVIDER_UNAVAILABLE"]
    ] as const) {
      const executed = await api.post(path, body, a.workerKey)
      const estimate = await api.post(`${path}/estimate`, body, a.workerKey)
      expect(errorCode(executed)).toBe(code)
      expect(errorCode(estimate)).toBe(code)
      expect(estimate.status).toBe(executed.status)
    }
  })

  it("requires a key and is rate-limited like any call", async () => {
    const res = await api.post("/v1/capabilities/search/estimate", { query: "q" })
    expect(res.status).toBe(401)
    const a = await account(100n)
    const estimate = await api.post("/v1/capabilities/search/estimate", { query: "q" }, a.workerKey)
    expect(estimate.headers.get("x-ratelimit-limit")).not.toBeNull()
  })

  it("GET /v1/agents/me: the worker sees itself, its policy, today's spend and what is left", async () => {
    const a = await account(100n)
    await setPolicy(a, { maxPerDayUsdCents: 12, maxPerCallUsdCents: 9, allowedCapabilities: ["search", "reason"] })
    expect((await api.post("/v1/capabilities/search", { query: "q" }, a.workerKey)).status).toBe(200)
    const me = await api.get("/v1/agents/me", a.workerKey)
    expect(me.status).toBe(200)
    const byId = await api.get(`/v1/agents/${a.workerId}`, a.workerKey)
    expect(me.body).toMatchObject(byId.body)
    expect(me.body).toMatchObject({
      id: a.workerId,
      role: "agent",
      policy: { maxPerCallUsdCents: 9, maxPerDayUsdCents: 12, allowedCapabilities: ["reason", "search"], dailySpentUsdCents: 5 },
      spentTodayUsdCents: 5,
      remainingTodayUsdCents: 7,
      allowedCapabilities: ["reason", "search"]
    })
    // The estimate and /me agree on what is left today.
    expect((await api.post("/v1/capabilities/search/estimate", { query: "q" }, a.workerKey)).body.remainingTodayUsdCents).toBe(7)
  })

  it("GET /v1/agents/me: the owner sees itself, never the worker; no cap is null and all capabilities listed", async () => {
    const a = await account(100n)
    const me = await api.get("/v1/agents/me", a.ownerKey)
    expect(me.status).toBe(200)
    expect(me.body.id).not.toBe(a.workerId)
    expect(me.body).toMatchObject({
      role: "owner",
      killed: false,
      spentTodayUsdCents: 0,
      remainingTodayUsdCents: null,
      policy: { maxPerCallUsdCents: 0, maxPerDayUsdCents: 0, allowedCapabilities: [] }
    })
    expect(me.body.allowedCapabilities).toHaveLength(11)
    // Nothing in the request names another agent: it is always the caller.
    const withQuery = await api.get(`/v1/agents/me?id=${a.workerId}`, a.ownerKey)
    expect(withQuery.status === 400 || withQuery.body.id === me.body.id).toBe(true)
    expect((await api.get("/v1/agents/me", a.workerKey)).body.id).toBe(a.workerId)
    expect((await api.get("/v1/agents/me")).status).toBe(401)
  })

  it("documents both routes in the OpenAPI document", async () => {
    const paths = (await api.get("/v1/openapi.json")).body.paths as Record<string, Record<string, unknown>>
    expect(paths["/v1/agents/me"]?.["get"]).toBeDefined()
    for (const name of ["reason", "search", "read", "scrape", "execute", "imagine", "speak", "transcribe", "email", "sms"]) {
      expect(paths[`/v1/capabilities/${name}/estimate`]?.["post"], name).toBeDefined()
    }
  })
})
