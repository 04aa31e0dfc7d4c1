import { Effect, Layer, Result } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import type { Provider } from "../../src/capabilities/Provider.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { client, errorCode, type RunningServer, startServer, storeBackends } from "../support/server.ts"

/**
 * Agent control over HTTP on every storage back-end: key rotation with a
 * grace period, deleting an agent, and the monthly cap in the policy API.
 */

/** An in-process search provider at 5 cents a query. */
const searchProvider: Provider<"search"> = {
  name: "flat",
  capability: "search",
  unitPrice: { per: "query", priceMicroUsd: 50_000n },
  quote: () => Result.succeed({ microUsd: 50_000n }),
  run: (input) =>
    Effect.succeed({ output: { results: [], query: input.query, totalResults: 0 }, actualMicroUsd: 50_000n })
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe.each(storeBackends)("HTTP agent control over %s", (_name, store) => {
  let server: RunningServer
  let api: ReturnType<typeof client>

  beforeAll(async () => {
    server = await startServer(store(), { providers: Layer.succeed(Providers, { all: [searchProvider] }) })
    api = client(server.baseUrl)
  })
  afterAll(() => server?.close())

  const account = async (cents = 0n) => {
    const signup = await api.post("/v1/signup", { name: "ops" })
    expect(signup.status).toBe(201)
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
      ownerId: signup.body.agentId as string,
      ownerKey: signup.body.apiKey as string,
      workerId: worker.body.id as string,
      workerKey: worker.body.apiKey as string
    }
  }

  const status = async (key: string) => (await api.get("/v1/agents/me", key)).status

  const rotate = (id: string, body: unknown, key: string, idempotencyKey?: string) =>
    api.call("POST", `/v1/agents/${id}/rotate-key`, {
      key,
      body,
      ...(idempotencyKey === undefined ? {} : { headers: { "idempotency-key": idempotencyKey } })
    })

  describe("POST /v1/agents/{id}/rotate-key", () => {
    it("shows a new key once; without a grace the old key is refused 401 at once", async () => {
      const a = await account()
      const res = await rotate(a.workerId, {}, a.ownerKey)
      expect(res.status).toBe(200)
      expect(res.body).toEqual({ id: a.workerId, apiKey: expect.stringMatching(/^sk_agt_[A-Za-z0-9]{32}$/), previousKeyExpiresAt: null })
      expect(res.body.apiKey).not.toBe(a.workerKey)
      const me = await api.get("/v1/agents/me", res.body.apiKey)
      expect(me.status).toBe(200)
      expect(me.body.id).toBe(a.workerId)
      const old = await api.get("/v1/agents/me", a.workerKey)
      expect(old.status).toBe(401)
      expect(errorCode(old)).toBe("UNAUTHORIZED")
      // The key is never shown again.
      expect((await api.get(`/v1/agents/${a.workerId}`, a.ownerKey)).text).not.toContain("sk_agt_")
    })

    it("keeps the old key working until the grace ends, then refuses it like an unknown key", async () => {
      const a = await account()
      const before = Date.now()
      const res = await rotate(a.workerId, { graceSeconds: 2 }, a.ownerKey)
      expect(res.status).toBe(200)
      const expiresAt = Date.parse(res.body.previousKeyExpiresAt)
      expect(expiresAt).toBeGreaterThanOrEqual(before + 2000)
      expect(expiresAt).toBeLessThanOrEqual(Date.now() + 2000)
      expect(await status(a.workerKey)).toBe(200)
      expect(await status(res.body.apiKey)).toBe(200)
      await sleep(Math.max(0, expiresAt - Date.now()) + 50)
      const old = await api.get("/v1/agents/me", a.workerKey)
      expect(old.status).toBe(401)
      expect(errorCode(old)).toBe("UNAUTHORIZED")
      expect(await status(res.body.apiKey)).toBe(200)
    })

    it("rotating again during a grace revokes the oldest key at once; two keys at most", async () => {
      const a = await account()
      const first = await rotate(a.workerId, { graceSeconds: 3600 }, a.ownerKey)
      const second = await rotate(a.workerId, { graceSeconds: 3600 }, a.ownerKey)
      expect(first.status).toBe(200)
      expect(second.status).toBe(200)
      expect(await status(a.workerKey)).toBe(401)
      expect(await status(first.body.apiKey)).toBe(200)
      expect(await status(second.body.apiKey)).toBe(200)
    })

    it("an agent may rotate its own key, not another agent's; another account's agent is 404", async () => {
      const a = await account()
      const other = await account()
      const own = await rotate(a.workerId, { graceSeconds: 60 }, a.workerKey)
      expect(own.status).toBe(200)
      expect(await status(own.body.apiKey)).toBe(200)
      const refused = await rotate(a.ownerId, {}, own.body.apiKey)
      expect(refused.status).toBe(403)
      expect(errorCode(refused)).toBe("FORBIDDEN")
      expect(await status(a.ownerKey)).toBe(200)
      const foreign = await rotate(other.workerId, {}, a.ownerKey)
      expect(foreign.status).toBe(404)
      expect(errorCode(foreign)).toBe("NOT_FOUND")
      expect(await status(other.workerKey)).toBe(200)
    })

    it("rejects a bad grace with 400 VALIDATION_ERROR and changes nothing", async () => {
      const a = await account()
      for (const graceSeconds of [-1, 604_801, 1.5, "60", true]) {
        const res = await rotate(a.workerId, { graceSeconds }, a.ownerKey)
        expect(res.status, JSON.stringify(graceSeconds)).toBe(400)
        expect(errorCode(res)).toBe("VALIDATION_ERROR")
      }
      expect((await rotate(a.workerId, { graceSeconds: 1, extra: true }, a.ownerKey)).status).toBe(400)
      expect(await status(a.workerKey)).toBe(200)
      const max = await rotate(a.workerId, { graceSeconds: 604_800 }, a.ownerKey)
      expect(max.status).toBe(200)
    })

    it("honours Idempotency-Key: a retry answers the same new key and does not rotate again", async () => {
      const a = await account()
      const first = await rotate(a.workerId, { graceSeconds: 600 }, a.ownerKey, "rotate-1")
      const again = await rotate(a.workerId, { graceSeconds: 600 }, a.ownerKey, "rotate-1")
      expect(first.status).toBe(200)
      expect(again.status).toBe(200)
      expect(again.body).toEqual(first.body)
      // Had the retry rotated, the original key would now be revoked.
      expect(await status(a.workerKey)).toBe(200)
      expect(await status(first.body.apiKey)).toBe(200)
    })
  })

  describe("DELETE /v1/agents/{id}", () => {
    it("revokes the agent's keys at once, hides it from the list and keeps it readable", async () => {
      const a = await account()
      const graced = await rotate(a.workerId, { graceSeconds: 3600 }, a.ownerKey)
      const res = await api.call("DELETE", `/v1/agents/${a.workerId}`, { key: a.ownerKey })
      expect(res.status).toBe(200)
      expect(res.body).toMatchObject({ id: a.workerId, name: "worker", role: "agent" })
      expect(new Date(res.body.deletedAt).toISOString()).toBe(res.body.deletedAt)
      for (const key of [a.workerKey, graced.body.apiKey]) {
        const refused = await api.get("/v1/agents/me", key)
        expect(refused.status).toBe(401)
        expect(errorCode(refused)).toBe("UNAUTHORIZED")
      }
      const list = await api.get("/v1/agents", a.ownerKey)
      expect(list.body.agents.map((x: { id: string }) => x.id)).toEqual([a.ownerId])
      expect(list.body.total).toBe(1)
      const read = await api.get(`/v1/agents/${a.workerId}`, a.ownerKey)
      expect(read.status).toBe(200)
      expect(read.body).toMatchObject({ id: a.workerId, name: "worker", deletedAt: res.body.deletedAt })
      const live = await api.get(`/v1/agents/${a.ownerId}`, a.ownerKey)
      expect(live.body.deletedAt).toBeNull()
    })

    it("a deleted agent cannot be changed, rotated, or deleted again (404)", async () => {
      const a = await account()
      expect((await api.call("DELETE", `/v1/agents/${a.workerId}`, { key: a.ownerKey })).status).toBe(200)
      const attempts = [
        api.call("DELETE", `/v1/agents/${a.workerId}`, { key: a.ownerKey }),
        api.patch(`/v1/agents/${a.workerId}`, { killed: false }, a.ownerKey),
        api.patch(`/v1/agents/${a.workerId}/policy`, { maxPerDayUsdCents: 5 }, a.ownerKey),
        rotate(a.workerId, {}, a.ownerKey)
      ]
      for (const res of await Promise.all(attempts)) {
        expect(res.status).toBe(404)
        expect(errorCode(res)).toBe("NOT_FOUND")
      }
    })

    it("is for owners only; the last live owner cannot be deleted (409), another owner can", async () => {
      const a = await account()
      const byAgent = await api.call("DELETE", `/v1/agents/${a.ownerId}`, { key: a.workerKey })
      expect(byAgent.status).toBe(403)
      expect(errorCode(byAgent)).toBe("FORBIDDEN")
      const self = await api.call("DELETE", `/v1/agents/${a.workerId}`, { key: a.workerKey })
      expect(self.status).toBe(403)
      const last = await api.call("DELETE", `/v1/agents/${a.ownerId}`, { key: a.ownerKey })
      expect(last.status).toBe(409)
      expect(errorCode(last)).toBe("CONFLICT")
      expect(await status(a.ownerKey)).toBe(200)
      const second = await api.post("/v1/agents", { name: "second", role: "owner" }, a.ownerKey)
      const deleted = await api.call("DELETE", `/v1/agents/${a.ownerId}`, { key: second.body.apiKey })
      expect(deleted.status).toBe(200)
      expect(await status(a.ownerKey)).toBe(401)
      const foreign = await account()
      const cross = await api.call("DELETE", `/v1/agents/${foreign.workerId}`, { key: second.body.apiKey })
      expect(cross.status).toBe(404)
    })

    it("keeps the agent's transactions and audit records readable, naming it", async () => {
      const a = await account(100n)
      const call = await api.post("/v1/capabilities/search", { query: "q" }, a.workerKey)
      expect(call.status).toBe(200)
      expect((await api.call("DELETE", `/v1/agents/${a.workerId}`, { key: a.ownerKey })).status).toBe(200)
      const txns = await api.get(`/v1/wallet/transactions?agentId=${a.workerId}`, a.ownerKey)
      expect(txns.status).toBe(200)
      expect(txns.body.total).toBe(1)
      const [txn] = txns.body.transactions
      expect(txn).toMatchObject({ type: "charge", agentId: a.workerId })
      const audit = await api.get(`/v1/audit/${call.body.metadata.auditId}`, a.ownerKey)
      expect(audit.status).toBe(200)
      expect(audit.body.agentId).toBe(a.workerId)
    })
  })

  describe("the monthly cap", () => {
    const policyPath = (a: { workerId: string }) => `/v1/agents/${a.workerId}/policy`

    it("PUT sets it, keeps it when left out, and lifts it with null; PATCH changes it alone", async () => {
      const a = await account()
      const set = await api.put(policyPath(a), {
        maxPerCallUsdCents: null,
        maxPerDayUsdCents: 50,
        maxPerMonthUsdCents: 300,
        allowedCapabilities: null
      }, a.ownerKey)
      expect(set.status).toBe(200)
      expect(set.body).toMatchObject({ maxPerDayUsdCents: 50, maxPerMonthUsdCents: 300, monthlySpentUsdCents: 0 })
      // A client that does not know the monthly cap replaces the policy: the monthly cap stays.
      const old = await api.put(policyPath(a), { maxPerCallUsdCents: 5, maxPerDayUsdCents: 40, allowedCapabilities: null }, a.ownerKey)
      expect(old.body).toMatchObject({ maxPerCallUsdCents: 5, maxPerDayUsdCents: 40, maxPerMonthUsdCents: 300 })
      const patched = await api.patch(policyPath(a), { maxPerMonthUsdCents: 200 }, a.ownerKey)
      expect(patched.body).toMatchObject({ maxPerCallUsdCents: 5, maxPerDayUsdCents: 40, maxPerMonthUsdCents: 200 })
      const lifted = await api.put(policyPath(a), {
        maxPerCallUsdCents: 5,
        maxPerDayUsdCents: 40,
        maxPerMonthUsdCents: null,
        allowedCapabilities: null
      }, a.ownerKey)
      expect(lifted.body.maxPerMonthUsdCents).toBe(0)
      for (const bad of [-1, "10", 0.00001]) {
        const res = await api.patch(policyPath(a), { maxPerMonthUsdCents: bad }, a.ownerKey)
        expect(res.status, JSON.stringify(bad)).toBe(400)
        expect(errorCode(res)).toBe("VALIDATION_ERROR")
      }
      expect((await api.get(policyPath(a), a.ownerKey)).body.maxPerMonthUsdCents).toBe(0)
    })

    it("refuses a call past it with 402 BUDGET_EXCEEDED naming the month; /me and the estimate report what remains", async () => {
      const a = await account(100n)
      await api.patch(policyPath(a), { maxPerMonthUsdCents: 12 }, a.ownerKey)
      expect((await api.post("/v1/capabilities/search", { query: "q" }, a.workerKey)).status).toBe(200)
      expect((await api.post("/v1/capabilities/search", { query: "q" }, a.workerKey)).status).toBe(200)
      const me = await api.get("/v1/agents/me", a.workerKey)
      expect(me.body).toMatchObject({ spentThisMonthUsdCents: 10, remainingThisMonthUsdCents: 2, remainingTodayUsdCents: null })
      expect(me.body.policy).toMatchObject({ maxPerMonthUsdCents: 12, monthlySpentUsdCents: 10 })
      const estimate = await api.post("/v1/capabilities/search/estimate", { query: "q" }, a.workerKey)
      expect(estimate.body).toMatchObject({ allowed: false, remainingThisMonthUsdCents: 2 })
      expect(estimate.body.refusal).toMatchObject({ code: "BUDGET_EXCEEDED", details: { period: "month" } })
      const refused = await api.post("/v1/capabilities/search", { query: "q" }, a.workerKey)
      expect(refused.status).toBe(402)
      expect(errorCode(refused)).toBe("BUDGET_EXCEEDED")
      expect(refused.body.error.details).toEqual({ period: "month", monthlySpent: 10, monthlyCap: 12, quotedCost: 5 })
      expect((await api.get("/v1/wallet", a.ownerKey)).body.balanceUsdCents).toBe(90)
    })
  })

  describe("the velocity guard", () => {
    const policyPath = (a: { workerId: string }) => `/v1/agents/${a.workerId}/policy`
    const search = (key: string) => api.post("/v1/capabilities/search", { query: "q" }, key)

    it("PUT and PATCH set the velocity fields; a PUT that leaves them out keeps them; bad values are 400", async () => {
      const a = await account()
      const set = await api.patch(policyPath(a), { maxPerHourUsdCents: 50, maxCallsPerMinute: 10, autoKill: true }, a.ownerKey)
      expect(set.status).toBe(200)
      expect(set.body).toMatchObject({ maxPerHourUsdCents: 50, maxCallsPerMinute: 10, autoKill: true })
      const old = await api.put(policyPath(a), { maxPerCallUsdCents: null, maxPerDayUsdCents: null, allowedCapabilities: null }, a.ownerKey)
      expect(old.body).toMatchObject({ maxPerHourUsdCents: 50, maxCallsPerMinute: 10, autoKill: true })
      const lifted = await api.patch(policyPath(a), { maxPerHourUsdCents: null, maxCallsPerMinute: 0, autoKill: false }, a.ownerKey)
      expect(lifted.body).toMatchObject({ maxPerHourUsdCents: 0, maxCallsPerMinute: 0, autoKill: false })
      for (const bad of [{ maxCallsPerMinute: -1 }, { maxCallsPerMinute: 1.5 }, { autoKill: "yes" }, { maxPerHourUsdCents: -3 }]) {
        const res = await api.patch(policyPath(a), bad, a.ownerKey)
        expect(res.status, JSON.stringify(bad)).toBe(400)
        expect(errorCode(res)).toBe("VALIDATION_ERROR")
      }
      expect((await api.get(policyPath(a), a.ownerKey)).body).toMatchObject({ maxCallsPerMinute: 0, autoKill: false })
    })

    it("a loop of calls is stopped at maxCallsPerMinute with 429 RATE_LIMITED and Retry-After", async () => {
      const a = await account(100n)
      await api.patch(policyPath(a), { maxCallsPerMinute: 3 }, a.ownerKey)
      const statuses: Array<number> = []
      let refused: Awaited<ReturnType<typeof search>> | undefined
      for (let i = 0; i < 6; i++) {
        const res = await search(a.workerKey)
        statuses.push(res.status)
        if (res.status !== 200 && refused === undefined) refused = res
      }
      expect(statuses).toEqual([200, 200, 200, 429, 429, 429])
      expect(errorCode(refused!)).toBe("RATE_LIMITED")
      expect(refused!.body.error.details).toMatchObject({ scope: "policy", limit: 3, agentKilled: false })
      const retryAfter = Number(refused!.headers.get("retry-after"))
      expect(retryAfter).toBeGreaterThanOrEqual(1)
      expect(retryAfter).toBeLessThanOrEqual(60)
      expect((await api.get("/v1/wallet", a.ownerKey)).body.balanceUsdCents).toBe(85)
      const me = await api.get("/v1/agents/me", a.workerKey)
      expect(me.status).toBe(200)
      expect(me.body).toMatchObject({ callsLastMinute: 3, callsLeftThisMinute: 0, spentLastHourUsdCents: 15, remainingThisHourUsdCents: null })
      expect(me.body.policy).toMatchObject({ maxCallsPerMinute: 3, autoKill: false })
    })

    it("with autoKill the refused call kills the agent: the next call is 403 AGENT_KILLED and the owner sees why", async () => {
      const a = await account(100n)
      await api.patch(policyPath(a), { maxPerHourUsdCents: 10, autoKill: true }, a.ownerKey)
      expect((await search(a.workerKey)).status).toBe(200)
      const me = await api.get("/v1/agents/me", a.workerKey)
      expect(me.body).toMatchObject({ spentLastHourUsdCents: 5, remainingThisHourUsdCents: 5, callsLastMinute: 1, callsLeftThisMinute: null })
      const estimate = await api.post("/v1/capabilities/search/estimate", { query: "q" }, a.workerKey)
      expect(estimate.body).toMatchObject({ allowed: true, remainingThisHourUsdCents: 5 })
      expect((await search(a.workerKey)).status).toBe(200)
      const refused = await search(a.workerKey)
      expect(refused.status).toBe(402)
      expect(errorCode(refused)).toBe("VELOCITY_EXCEEDED")
      expect(refused.body.error.details).toEqual({ period: "hour", spentLastHour: 10, hourlyCap: 10, quotedCost: 5, agentKilled: true })
      const next = await search(a.workerKey)
      expect(next.status).toBe(403)
      expect(errorCode(next)).toBe("AGENT_KILLED")
      const seen = await api.get(`/v1/agents/${a.workerId}`, a.ownerKey)
      expect(seen.body).toMatchObject({ killed: true, killReason: "velocity" })
      const revived = await api.patch(`/v1/agents/${a.workerId}`, { killed: false }, a.ownerKey)
      expect(revived.body).toMatchObject({ killed: false, killReason: null })
      const byOwner = await api.patch(`/v1/agents/${a.workerId}`, { killed: true }, a.ownerKey)
      expect(byOwner.body).toMatchObject({ killed: true, killReason: "owner" })
    })
  })
})
