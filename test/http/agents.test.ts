import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, errorCode, type RunningServer, startServer, storeBackends } from "../support/server.ts"

/** A whole policy with no limits: what a PUT must say to lift every cap. */
const NO_LIMITS = { maxPerCallUsdCents: null, maxPerDayUsdCents: null, allowedCapabilities: null }

describe.each(storeBackends)("HTTP /v1 agents and policies over %s", (_name, store) => {
  let server: RunningServer
  let api: ReturnType<typeof client>

  beforeAll(async () => {
    server = await startServer(store())
    api = client(server.baseUrl)
  })
  afterAll(() => server?.close())

  const signup = async (name = "ops") => {
    const res = await api.post("/v1/signup", { name })
    expect(res.status).toBe(201)
    return res.body as { apiKey: string; agentId: string; accountId: string }
  }

  const createAgent = async (ownerKey: string, body: Record<string, unknown> = { name: "worker" }) => {
    const res = await api.post("/v1/agents", body, ownerKey)
    expect(res.status).toBe(201)
    return res.body as { id: string; apiKey: string; role: string }
  }

  it("signs up an account with an owner agent and a key in the documented format", async () => {
    const res = await api.post("/v1/signup", { name: "  research bot  " })
    expect(res.status).toBe(201)
    expect(res.body.apiKey).toMatch(/^sk_agt_[A-Za-z0-9]{32}$/)
    expect(res.body.agentId).toMatch(/^agt_/)
    expect(res.body.accountId).toMatch(/^acc_/)
    const me = await api.get(`/v1/agents/${res.body.agentId}`, res.body.apiKey)
    expect(me.status).toBe(200)
    expect(me.body).toMatchObject({ id: res.body.agentId, name: "research bot", role: "owner", killed: false })
    expect(me.body).not.toHaveProperty("apiKey")
    expect(new Date(me.body.createdAt).toISOString()).toBe(me.body.createdAt)
    expect(typeof me.body.lastActiveAt).toBe("string")
  })

  it("answers 401 UNAUTHORIZED for a missing, malformed or unknown key", async () => {
    const { apiKey } = await signup()
    const cases: Array<Record<string, string>> = [
      {},
      { authorization: "" },
      { authorization: "Bearer" },
      { authorization: `Basic ${apiKey}` },
      { authorization: `Bearer ${apiKey}x` },
      { authorization: `Bearer ${apiKey.slice(0, -1)}` },
      { authorization: `Bearer sk_agt_${"A".repeat(32)}` },
      { authorization: `Bearer ${"x".repeat(10_000)}` }
    ]
    for (const headers of cases) {
      const res = await api.call("GET", "/v1/agents", { headers })
      expect(res.status, JSON.stringify(headers).slice(0, 80)).toBe(401)
      expect(errorCode(res)).toBe("UNAUTHORIZED")
    }
  })

  it("creates agents for owners only and shows each key once", async () => {
    const owner = await signup()
    const res = await api.post("/v1/agents", { name: "worker" }, owner.apiKey)
    expect(res.status).toBe(201)
    expect(res.body).toMatchObject({ name: "worker", role: "agent", killed: false })
    expect(res.body.apiKey).toMatch(/^sk_agt_[A-Za-z0-9]{32}$/)
    expect(res.body.apiKey).not.toBe(owner.apiKey)
    const list = await api.get("/v1/agents", owner.apiKey)
    expect(list.status).toBe(200)
    expect(list.body.total).toBe(2)
    expect(list.body.limit).toBe(50)
    expect(list.body.offset).toBe(0)
    expect(list.body.agents.map((a: { id: string }) => a.id)).toEqual([res.body.id, owner.agentId])
    expect(list.text).not.toContain("sk_agt_")
    const worker = await api.get("/v1/agents/" + res.body.id, res.body.apiKey)
    expect(worker.status).toBe(200)
    expect(worker.text).not.toContain("sk_agt_")
  })

  it("pages the agent list with limit and offset and rejects bad values", async () => {
    const owner = await signup()
    for (let i = 0; i < 3; i++) await createAgent(owner.apiKey, { name: `w${i}` })
    const page = await api.get("/v1/agents?limit=2&offset=1", owner.apiKey)
    expect(page.status).toBe(200)
    expect(page.body).toMatchObject({ total: 4, limit: 2, offset: 1 })
    expect(page.body.agents).toHaveLength(2)
    for (const bad of ["limit=0", "limit=101", "limit=abc", "offset=-1", "limit=1.5"]) {
      const res = await api.get(`/v1/agents?${bad}`, owner.apiKey)
      expect(res.status, bad).toBe(400)
      expect(errorCode(res)).toBe("VALIDATION_ERROR")
      expect(res.body.error.details.issues[0].path).toBe(bad.split("=")[0])
    }
  })

  it("refuses an agent-role key on owner routes with 403 FORBIDDEN", async () => {
    const owner = await signup()
    const worker = await createAgent(owner.apiKey)
    const other = await createAgent(owner.apiKey, { name: "other" })
    const forbidden = [
      await api.get("/v1/agents", worker.apiKey),
      await api.post("/v1/agents", { name: "x" }, worker.apiKey),
      await api.patch(`/v1/agents/${other.id}`, { killed: true }, worker.apiKey),
      await api.patch(`/v1/agents/${worker.id}`, { name: "me" }, worker.apiKey),
      await api.patch(`/v1/agents/${owner.agentId}`, { killed: true }, worker.apiKey),
      await api.put(`/v1/agents/${worker.id}/policy`, NO_LIMITS, worker.apiKey),
      await api.patch(`/v1/agents/${worker.id}/policy`, { maxPerDayUsdCents: 0 }, worker.apiKey),
      await api.get(`/v1/agents/${other.id}`, worker.apiKey),
      await api.get(`/v1/agents/${other.id}/policy`, worker.apiKey)
    ]
    for (const res of forbidden) {
      expect(res.status).toBe(403)
      expect(errorCode(res)).toBe("FORBIDDEN")
    }
    // Nothing changed.
    const otherNow = await api.get(`/v1/agents/${other.id}`, owner.apiKey)
    expect(otherNow.body.killed).toBe(false)
    // What an agent may do: read itself and its own policy.
    expect((await api.get(`/v1/agents/${worker.id}`, worker.apiKey)).status).toBe(200)
    expect((await api.get(`/v1/agents/${worker.id}/policy`, worker.apiKey)).status).toBe(200)
  })

  it("lets an owner create another owner", async () => {
    const owner = await signup()
    const second = await createAgent(owner.apiKey, { name: "co-owner", role: "owner" })
    expect(second.role).toBe("owner")
    expect((await api.get("/v1/agents", second.apiKey)).status).toBe(200)
  })

  it("answers 404 NOT_FOUND for another account's agent, never 403", async () => {
    const a = await signup("a")
    const b = await signup("b")
    const bWorker = await createAgent(b.apiKey)
    const probes = [
      await api.get(`/v1/agents/${b.agentId}`, a.apiKey),
      await api.patch(`/v1/agents/${b.agentId}`, { killed: true }, a.apiKey),
      await api.get(`/v1/agents/${b.agentId}/policy`, a.apiKey),
      await api.put(`/v1/agents/${b.agentId}/policy`, NO_LIMITS, a.apiKey),
      await api.patch(`/v1/agents/${b.agentId}/policy`, { maxPerCallUsdCents: 1 }, a.apiKey),
      // an agent-role key probing another account also gets 404, not 403
      await api.get(`/v1/agents/${a.agentId}`, bWorker.apiKey),
      await api.get(`/v1/agents/agt_doesnotexist`, a.apiKey)
    ]
    for (const res of probes) {
      expect(res.status).toBe(404)
      expect(errorCode(res)).toBe("NOT_FOUND")
    }
    expect((await api.get(`/v1/agents/${b.agentId}`, b.apiKey)).body.killed).toBe(false)
  })

  it("kills an agent: every call is refused with 403 AGENT_KILLED right after the PATCH, until revived", async () => {
    const owner = await signup()
    const worker = await createAgent(owner.apiKey)
    expect((await api.get(`/v1/agents/${worker.id}`, worker.apiKey)).status).toBe(200)
    const killed = await api.patch(`/v1/agents/${worker.id}`, { killed: true }, owner.apiKey)
    expect(killed.status).toBe(200)
    expect(killed.body).toMatchObject({ id: worker.id, killed: true })
    expect(killed.body).toHaveProperty("lastActiveAt")
    for (
      const res of [
        await api.get(`/v1/agents/${worker.id}`, worker.apiKey),
        await api.get(`/v1/agents/${worker.id}/policy`, worker.apiKey),
        await api.get("/v1/agents", worker.apiKey),
        await api.post("/v1/agents", { name: "x" }, worker.apiKey)
      ]
    ) {
      expect(res.status).toBe(403)
      expect(errorCode(res)).toBe("AGENT_KILLED")
    }
    const revived = await api.patch(`/v1/agents/${worker.id}`, { killed: false }, owner.apiKey)
    expect(revived.body.killed).toBe(false)
    expect((await api.get(`/v1/agents/${worker.id}`, worker.apiKey)).status).toBe(200)
  })

  it("answers 409 CONFLICT when the last live owner would be killed", async () => {
    const owner = await signup()
    const res = await api.patch(`/v1/agents/${owner.agentId}`, { killed: true }, owner.apiKey)
    expect(res.status).toBe(409)
    expect(errorCode(res)).toBe("CONFLICT")
    expect((await api.get(`/v1/agents/${owner.agentId}`, owner.apiKey)).body.killed).toBe(false)
    const second = await createAgent(owner.apiKey, { name: "second owner", role: "owner" })
    const ok = await api.patch(`/v1/agents/${owner.agentId}`, { killed: true }, second.apiKey)
    expect(ok.status).toBe(200)
    expect(errorCode(await api.get("/v1/agents", owner.apiKey))).toBe("AGENT_KILLED")
    const last = await api.patch(`/v1/agents/${second.id}`, { killed: true }, second.apiKey)
    expect(last.status).toBe(409)
  })

  it("renames an agent and changes only the given fields", async () => {
    const owner = await signup()
    const worker = await createAgent(owner.apiKey)
    const renamed = await api.patch(`/v1/agents/${worker.id}`, { name: "renamed" }, owner.apiKey)
    expect(renamed.body).toMatchObject({ name: "renamed", killed: false })
    const killed = await api.patch(`/v1/agents/${worker.id}`, { killed: true }, owner.apiKey)
    expect(killed.body).toMatchObject({ name: "renamed", killed: true })
    const empty = await api.patch(`/v1/agents/${worker.id}`, {}, owner.apiKey)
    expect(empty.body).toMatchObject({ name: "renamed", killed: true })
  })

  it("starts with an unlimited policy", async () => {
    const owner = await signup()
    const res = await api.get(`/v1/agents/${owner.agentId}/policy`, owner.apiKey)
    expect(res.status).toBe(200)
    expect(res.body).toEqual({
      maxPerCallUsdCents: 0,
      maxPerDayUsdCents: 0,
      maxPerMonthUsdCents: 0,
      maxPerHourUsdCents: 0,
      maxCallsPerMinute: 0,
      autoKill: false,
      allowedCapabilities: [],
      dailySpentUsdCents: 0,
      monthlySpentUsdCents: 0
    })
  })

  it("PUT replaces the whole policy; null and 0 mean no limit", async () => {
    const owner = await signup()
    const path = `/v1/agents/${owner.agentId}/policy`
    const full = await api.put(path, {
      maxPerCallUsdCents: 0.0375,
      maxPerDayUsdCents: 1999.99,
      allowedCapabilities: ["search", "reason", "search"]
    }, owner.apiKey)
    expect(full.status).toBe(200)
    expect(full.body).toEqual({
      maxPerCallUsdCents: 0.0375,
      maxPerDayUsdCents: 1999.99,
      maxPerMonthUsdCents: 0,
      maxPerHourUsdCents: 0,
      maxCallsPerMinute: 0,
      autoKill: false,
      allowedCapabilities: ["reason", "search"],
      dailySpentUsdCents: 0,
      monthlySpentUsdCents: 0
    })
    const replaced = await api.put(path, { maxPerCallUsdCents: null, maxPerDayUsdCents: 500, allowedCapabilities: null }, owner.apiKey)
    expect(replaced.status).toBe(200)
    expect(replaced.body).toEqual({
      maxPerCallUsdCents: 0,
      maxPerDayUsdCents: 500,
      maxPerMonthUsdCents: 0,
      maxPerHourUsdCents: 0,
      maxCallsPerMinute: 0,
      autoKill: false,
      allowedCapabilities: [],
      dailySpentUsdCents: 0,
      monthlySpentUsdCents: 0
    })
    expect((await api.get(path, owner.apiKey)).body).toEqual(replaced.body)
    const zeros = await api.put(path, { maxPerCallUsdCents: 0, maxPerDayUsdCents: 0, allowedCapabilities: [] }, owner.apiKey)
    expect(zeros.body).toMatchObject({ maxPerCallUsdCents: 0, maxPerDayUsdCents: 0, allowedCapabilities: [] })
  })

  it("PUT with a field left out is 400 VALIDATION_ERROR naming every missing field, and changes nothing", async () => {
    const owner = await signup()
    const path = `/v1/agents/${owner.agentId}/policy`
    const set = await api.put(path, { maxPerCallUsdCents: 10, maxPerDayUsdCents: 100, allowedCapabilities: ["read"] }, owner.apiKey)
    expect(set.status).toBe(200)
    const cases: Array<[Record<string, unknown>, Array<string>]> = [
      [{ maxPerCallUsdCents: 25, allowedCapabilities: ["read"] }, ["maxPerDayUsdCents"]],
      [{ maxPerDayUsdCents: 500 }, ["maxPerCallUsdCents", "allowedCapabilities"]],
      [{}, ["maxPerCallUsdCents", "maxPerDayUsdCents", "allowedCapabilities"]]
    ]
    for (const [body, missing] of cases) {
      const res = await api.put(path, body, owner.apiKey)
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(errorCode(res)).toBe("VALIDATION_ERROR")
      const paths = res.body.error.details.issues.map((i: { path: string }) => i.path)
      expect([...paths].sort()).toEqual([...missing].sort())
    }
    expect((await api.get(path, owner.apiKey)).body).toEqual(set.body)
  })

  it("PATCH changes only the given fields; 0, null and [] mean no limit / all", async () => {
    const owner = await signup()
    const path = `/v1/agents/${owner.agentId}/policy`
    await api.put(path, { maxPerCallUsdCents: 10, maxPerDayUsdCents: 100, allowedCapabilities: ["read"] }, owner.apiKey)
    const p1 = await api.patch(path, { maxPerCallUsdCents: 25 }, owner.apiKey)
    expect(p1.body).toEqual({
      maxPerCallUsdCents: 25,
      maxPerDayUsdCents: 100,
      maxPerMonthUsdCents: 0,
      maxPerHourUsdCents: 0,
      maxCallsPerMinute: 0,
      autoKill: false,
      allowedCapabilities: ["read"],
      dailySpentUsdCents: 0,
      monthlySpentUsdCents: 0
    })
    const p2 = await api.patch(path, { maxPerDayUsdCents: null, allowedCapabilities: null }, owner.apiKey)
    expect(p2.body).toMatchObject({ maxPerCallUsdCents: 25, maxPerDayUsdCents: 0, allowedCapabilities: [] })
    await api.patch(path, { allowedCapabilities: ["sms"] }, owner.apiKey)
    const p3 = await api.patch(path, { maxPerCallUsdCents: 0, allowedCapabilities: [] }, owner.apiKey)
    expect(p3.body).toMatchObject({ maxPerCallUsdCents: 0, maxPerDayUsdCents: 0, allowedCapabilities: [] })
  })

  it("rejects invalid policy values with 400 VALIDATION_ERROR and changes nothing", async () => {
    const owner = await signup()
    const path = `/v1/agents/${owner.agentId}/policy`
    await api.patch(path, { maxPerCallUsdCents: 7 }, owner.apiKey)
    const bad: Array<[Record<string, unknown>, string]> = [
      [{ maxPerCallUsdCents: -1 }, "maxPerCallUsdCents"],
      [{ maxPerCallUsdCents: 0.00001 }, "maxPerCallUsdCents"],
      [{ maxPerCallUsdCents: "10" }, "maxPerCallUsdCents"],
      [{ maxPerDayUsdCents: 1e300 }, "maxPerDayUsdCents"],
      [{ allowedCapabilities: ["teleport"] }, "allowedCapabilities.0"],
      [{ allowedCapabilities: "reason" }, "allowedCapabilities"],
      [{ maxPerCallUsdCent: 5 }, "maxPerCallUsdCent"]
    ]
    for (const [body, path_] of bad) {
      for (const method of ["PUT", "PATCH"] as const) {
        const res = await api.call(method, path, { key: owner.apiKey, body })
        expect(res.status, `${method} ${JSON.stringify(body)}`).toBe(400)
        expect(errorCode(res)).toBe("VALIDATION_ERROR")
        expect(res.body.error.details.issues.map((i: { path: string }) => i.path)).toContain(path_)
      }
    }
    expect((await api.get(path, owner.apiKey)).body.maxPerCallUsdCents).toBe(7)
  })

  it("validates names on signup and agent creation", async () => {
    const owner = await signup()
    for (const body of [{}, { name: "" }, { name: "   " }, { name: "x".repeat(101) }, { name: 42 }, { name: "a\u0000b" }]) {
      const res = await api.post("/v1/signup", body)
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(errorCode(res)).toBe("VALIDATION_ERROR")
      const res2 = await api.post("/v1/agents", body, owner.apiKey)
      expect(res2.status).toBe(400)
    }
    const role = await api.post("/v1/agents", { name: "x", role: "admin" }, owner.apiKey)
    expect(errorCode(role)).toBe("VALIDATION_ERROR")
    expect((await api.get("/v1/agents", owner.apiKey)).body.total).toBe(1)
  })

  it("serves health, the OpenAPI document and the docs page", async () => {
    const health = await api.get("/health")
    expect(health.status).toBe(200)
    expect(health.body).toMatchObject({ status: "ok", storage: "ok", version: expect.any(String) })
    expect(typeof health.body.uptimeSeconds).toBe("number")
    const openapi = await api.get("/v1/openapi.json")
    expect(openapi.status).toBe(200)
    expect(openapi.body.openapi).toMatch(/^3\./)
    expect(Object.keys(openapi.body.paths)).toEqual(
      expect.arrayContaining(["/health", "/v1/signup", "/v1/agents", "/v1/agents/{id}", "/v1/agents/{id}/policy"])
    )
    const docs = await fetch(`${server.baseUrl}/docs`)
    expect(docs.status).toBe(200)
    expect(docs.headers.get("content-type")).toContain("text/html")
  })
})
