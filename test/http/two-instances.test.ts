import { PgClient } from "@effect/sql-pg"
import { Effect, Exit, Layer, Option, Redacted, Result, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { storeOverClient, storeOverClientWith } from "../../adapters/sql/Database.ts"
import { ReadCache } from "../../adapters/sql/ReadCache.ts"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import type { Provider } from "../../src/capabilities/Provider.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { freshDatabaseUrl } from "../support/postgres.ts"
import { client, errorCode, type RunningServer, startServer } from "../support/server.ts"

/**
 * Two server instances on one PostgreSQL database, each with its own read
 * cache: a change made through one is honoured by that one's very next
 * request and by the other within a bounded wait (PostgreSQL notifications);
 * and a third instance that hears no notifications at all, whose cache is
 * therefore stale, still cannot let a killed or over-cap agent spend,
 * because the reserve reads the agent again under the wallet lock.
 *
 * Latencies are printed, never asserted.
 */

const ADMIN = "admin-token-two-instances"

let runs = 0
/** An in-process search provider at 5 cents a query, counting its runs. */
const searchProvider: Provider<"search"> = {
  name: "flat",
  capability: "search",
  unitPrice: { per: "query", priceMicroUsd: 50_000n },
  quote: () => Result.succeed({ microUsd: 50_000n }),
  run: (input) =>
    Effect.sync(() => {
      runs++
      return { output: { results: [], query: input.query, totalResults: 0 }, actualMicroUsd: 50_000n }
    })
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Polls until `check` holds; returns how long it took. Bounded (2 s by default), so it never hangs. */
const within = async (what: string, check: () => Promise<boolean>, timeoutMs = 2_000): Promise<number> => {
  const started = performance.now()
  while (performance.now() - started < timeoutMs) {
    if (await check()) {
      const ms = performance.now() - started
      console.log(`${what}: seen by the other instance after ${ms.toFixed(1)} ms`)
      return ms
    }
    await sleep(1)
  }
  throw new Error(`${what}: not seen by the other instance within ${timeoutMs} ms`)
}

describe("two instances on one PostgreSQL database", () => {
  const scope = Effect.runSync(Scope.make())
  let a: RunningServer
  let b: RunningServer
  let deaf: RunningServer
  let apiA: ReturnType<typeof client>
  let apiB: ReturnType<typeof client>
  let apiDeaf: ReturnType<typeof client>

  const serving = (server: RunningServer) =>
    server.run(Effect.map(Effect.serviceOption(ReadCache), (cache) => Option.isSome(cache) && cache.value.stats().serving))
  const hits = (server: RunningServer) =>
    server.run(Effect.map(Effect.serviceOption(ReadCache), (cache) => Option.isSome(cache) ? cache.value.stats().hits : -1))

  beforeAll(async () => {
    const url = await Effect.runPromise(Scope.provide(freshDatabaseUrl, scope))
    const pg = () => PgClient.layer({ url: Redacted.make(url), maxConnections: 5 })
    const options = { providers: Layer.succeed(Providers, { all: [searchProvider] }), adminToken: ADMIN }
    // One after the other: each runs the migrations.
    a = await startServer(storeOverClient.pipe(Layer.provide(pg())), options)
    b = await startServer(storeOverClient.pipe(Layer.provide(pg())), options)
    // In-process invalidation only: it never hears of changes made elsewhere.
    deaf = await startServer(storeOverClientWith({ cache: "local" }).pipe(Layer.provide(pg())), options)
    apiA = client(a.baseUrl)
    apiB = client(b.baseUrl)
    apiDeaf = client(deaf.baseUrl)
    const started = performance.now()
    while (!(await serving(a)) || !(await serving(b))) {
      if (performance.now() - started > 10_000) throw new Error("the instances did not start listening")
      await sleep(10)
    }
  }, 120_000)

  afterAll(async () => {
    await Promise.all([a?.close(), b?.close(), deaf?.close()])
    await Effect.runPromise(Scope.close(scope, Exit.void))
  })

  /** An owner with 10 dollars and a worker, made on A. */
  const account = async () => {
    const signup = await apiA.post("/v1/signup", { name: "ops" })
    expect(signup.status).toBe(201)
    await a.run(Effect.gen(function*() {
      yield* (yield* Wallets).credit({
        accountId: signup.body.accountId as AccountId,
        key: "seed",
        pocket: "usd",
        amount: 10_000_000n,
        description: "seed"
      })
    }))
    const worker = await apiA.post("/v1/agents", { name: "worker" }, signup.body.apiKey)
    expect(worker.status).toBe(201)
    return {
      ownerKey: signup.body.apiKey as string,
      workerId: worker.body.id as string,
      workerKey: worker.body.apiKey as string
    }
  }

  const me = async (api: ReturnType<typeof client>, key: string) => (await api.get("/v1/agents/me", key)).status
  const search = (api: ReturnType<typeof client>, key: string) => api.post("/v1/capabilities/search", { query: "q" }, key)
  const balance = async (ownerKey: string) => (await apiA.get("/v1/wallet", ownerKey)).body.balanceUsdCents as number

  it("B serves a known key from memory", async () => {
    const x = await account()
    expect(await me(apiB, x.workerKey)).toBe(200)
    const before = await hits(b)
    expect(await me(apiB, x.workerKey)).toBe(200)
    expect(await hits(b)).toBeGreaterThan(before)
  })

  it("kill and revive: A's very next request follows; B follows within a bounded wait", async () => {
    const x = await account()
    expect(await me(apiA, x.workerKey)).toBe(200)
    expect(await me(apiB, x.workerKey)).toBe(200)
    expect((await search(apiB, x.workerKey)).status).toBe(200)

    expect((await apiA.patch(`/v1/agents/${x.workerId}`, { killed: true }, x.ownerKey)).status).toBe(200)
    const refused = await search(apiA, x.workerKey)
    expect(errorCode(refused)).toBe("AGENT_KILLED")
    await within("kill", async () => (await me(apiB, x.workerKey)) === 403)
    expect(errorCode(await search(apiB, x.workerKey))).toBe("AGENT_KILLED")

    expect((await apiA.patch(`/v1/agents/${x.workerId}`, { killed: false }, x.ownerKey)).status).toBe(200)
    expect(await me(apiA, x.workerKey)).toBe(200)
    await within("revive", async () => (await me(apiB, x.workerKey)) === 200)
    expect((await search(apiB, x.workerKey)).status).toBe(200)
  })

  it("policy change: allowed capabilities and the per-call cap", async () => {
    const x = await account()
    const policy = `/v1/agents/${x.workerId}/policy`
    expect((await apiB.get(policy, x.workerKey)).body.allowedCapabilities).toEqual([])
    expect((await search(apiB, x.workerKey)).status).toBe(200)

    expect((await apiA.patch(policy, { allowedCapabilities: ["read"] }, x.ownerKey)).status).toBe(200)
    expect(errorCode(await search(apiA, x.workerKey))).toBe("CAPABILITY_NOT_ALLOWED")
    await within("allowed capabilities", async () => errorCode(await search(apiB, x.workerKey)) === "CAPABILITY_NOT_ALLOWED")

    expect((await apiA.patch(policy, { allowedCapabilities: null, maxPerCallUsdCents: 1 }, x.ownerKey)).status).toBe(200)
    expect(errorCode(await search(apiA, x.workerKey))).toBe("PER_CALL_LIMIT_EXCEEDED")
    await within("per-call cap", async () => (await apiB.get(policy, x.workerKey)).body.maxPerCallUsdCents === 1)
    expect(errorCode(await search(apiB, x.workerKey))).toBe("PER_CALL_LIMIT_EXCEEDED")
  })

  it("key rotation and deletion", async () => {
    const x = await account()
    expect(await me(apiB, x.workerKey)).toBe(200)
    const rotated = await apiA.post(`/v1/agents/${x.workerId}/rotate-key`, {}, x.workerKey)
    expect(rotated.status).toBe(200)
    const newKey = rotated.body.apiKey as string
    expect(await me(apiA, x.workerKey)).toBe(401)
    expect(await me(apiA, newKey)).toBe(200)
    await within("key rotation", async () => (await me(apiB, x.workerKey)) === 401)
    expect(await me(apiB, newKey)).toBe(200)

    const deleted = await apiA.call("DELETE", `/v1/agents/${x.workerId}`, { key: x.ownerKey })
    expect(deleted.status).toBeLessThan(300)
    expect(await me(apiA, newKey)).toBe(401)
    await within("agent deletion", async () => (await me(apiB, newKey)) === 401)
  })

  it("a registry approval is listed on B", async () => {
    const x = await account()
    const slug = `weather-${Math.random().toString(36).slice(2, 8)}`
    const created = await apiA.post("/v1/registry/submit", {
      slug,
      name: "Weather",
      description: "Forecasts",
      baseUrl: "https://weather.example.com/api",
      capabilities: ["search"],
      endpoints: [{ path: "/forecast", method: "GET", description: "A forecast" }],
      pricing: { "/forecast": { perCallUsdCents: 0.25 } },
      contact: "ops@weather.example.com"
    }, x.ownerKey)
    expect(created.status).toBe(201)
    expect((await apiB.get(`/v1/services/${slug}`, x.ownerKey)).status).toBe(404)
    const approved = await apiA.call("POST", `/v1/admin/registry/submissions/${created.body.id}/approve`, {
      headers: { authorization: `Bearer ${ADMIN}` },
      body: {}
    })
    expect(approved.status).toBe(200)
    expect((await apiA.get(`/v1/services/${slug}`, x.ownerKey)).status).toBe(200)
    await within("registry approval", async () => (await apiB.get(`/v1/services/${slug}`, x.ownerKey)).status === 200)
  })

  describe("an instance that hears no notifications", () => {
    it("honours its own changes at its very next request: kill, revive, policy, key rotation, registry approval", async () => {
      const x = await account()
      const policy = `/v1/agents/${x.workerId}/policy`
      expect((await search(apiDeaf, x.workerKey)).status).toBe(200)
      expect((await apiDeaf.patch(`/v1/agents/${x.workerId}`, { killed: true }, x.ownerKey)).status).toBe(200)
      expect(await me(apiDeaf, x.workerKey)).toBe(403)
      expect((await apiDeaf.patch(`/v1/agents/${x.workerId}`, { killed: false }, x.ownerKey)).status).toBe(200)
      expect(await me(apiDeaf, x.workerKey)).toBe(200)
      expect((await apiDeaf.patch(policy, { allowedCapabilities: ["read"] }, x.ownerKey)).status).toBe(200)
      expect(errorCode(await search(apiDeaf, x.workerKey))).toBe("CAPABILITY_NOT_ALLOWED")
      const rotated = await apiDeaf.post(`/v1/agents/${x.workerId}/rotate-key`, {}, x.workerKey)
      expect(rotated.status).toBe(200)
      expect(await me(apiDeaf, x.workerKey)).toBe(401)
      expect(await me(apiDeaf, rotated.body.apiKey)).toBe(200)

      const slug = `news-${Math.random().toString(36).slice(2, 8)}`
      const created = await apiDeaf.post("/v1/registry/submit", {
        slug,
        name: "News",
        description: "Headlines",
        baseUrl: "https://news.example.com/api",
        capabilities: ["search"],
        endpoints: [{ path: "/headlines", method: "GET", description: "Headlines" }],
        pricing: { "/headlines": { perCallUsdCents: 0.25 } },
        contact: "ops@news.example.com"
      }, x.ownerKey)
      expect(created.status).toBe(201)
      expect((await apiDeaf.get(`/v1/services/${slug}`, x.ownerKey)).status).toBe(404)
      const approved = await apiDeaf.call("POST", `/v1/admin/registry/submissions/${created.body.id}/approve`, {
        headers: { authorization: `Bearer ${ADMIN}` },
        body: {}
      })
      expect(approved.status).toBe(200)
      expect((await apiDeaf.get(`/v1/services/${slug}`, x.ownerKey)).status).toBe(200)
    })
  })

  describe("an instance whose cache is stale (it hears no notifications)", () => {
    it("lets a killed agent authenticate, but its call is refused by the reserve: nothing runs, nothing is taken", async () => {
      const x = await account()
      expect(await me(apiDeaf, x.workerKey)).toBe(200)
      expect((await apiA.patch(`/v1/agents/${x.workerId}`, { killed: true }, x.ownerKey)).status).toBe(200)
      // Stale: the kill is not seen at authentication.
      expect(await me(apiDeaf, x.workerKey)).toBe(200)
      const before = { runs, balance: await balance(x.ownerKey) }
      const call = await search(apiDeaf, x.workerKey)
      expect(call.status).toBe(403)
      expect(errorCode(call)).toBe("AGENT_KILLED")
      expect(runs).toBe(before.runs)
      expect(await balance(x.ownerKey)).toBe(before.balance)
      // The refusal told it its copy was stale: the next request is refused at authentication.
      expect(await me(apiDeaf, x.workerKey)).toBe(403)
    })

    it("serves an old policy, but a call over the new per-call cap is refused by the reserve", async () => {
      const x = await account()
      const policy = `/v1/agents/${x.workerId}/policy`
      expect((await search(apiDeaf, x.workerKey)).status).toBe(200)
      expect((await apiA.patch(policy, { maxPerCallUsdCents: 1 }, x.ownerKey)).status).toBe(200)
      // Stale: the old policy (0: no per-call cap) is what it serves.
      expect((await apiDeaf.get(policy, x.workerKey)).body.maxPerCallUsdCents).toBe(0)
      const before = { runs, balance: await balance(x.ownerKey) }
      const call = await search(apiDeaf, x.workerKey)
      expect(errorCode(call)).toBe("PER_CALL_LIMIT_EXCEEDED")
      expect(runs).toBe(before.runs)
      expect(await balance(x.ownerKey)).toBe(before.balance)
    })
  })
})
