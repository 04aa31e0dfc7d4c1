import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import { sessionRoutes } from "../../adapters/http/sessions.ts"
import { routesOutsideApi } from "../../src/access/matrix.ts"
import { renderAccessDoc } from "../../src/access/doc.ts"
import { client, errorCode, type RunningServer, startServer } from "../support/server.ts"

/**
 * Dashboard sessions over HTTP (adapters/http/sessions.ts): sign-in with an
 * owner key, an agent key or the admin token; the cookie authenticates the
 * /v1 and /v1/admin APIs as its key would, with CSRF checks on every change.
 */

const ADMIN = "admin-token-for-session-tests-0123456789"

interface Signed {
  readonly cookie: string
  readonly csrf: string
  readonly setCookie: string
  readonly body: any
}

describe("dashboard sessions", () => {
  let server: RunningServer
  let api: ReturnType<typeof client>
  let origin: string

  beforeAll(async () => {
    server = await startServer(MemoryStore.layer, {
      adminToken: ADMIN,
      sessions: { signinPer15Minutes: 1000 },
      rateLimits: { agentPerMinute: 100_000, accountPerMinute: 100_000 }
    })
    api = client(server.baseUrl)
    origin = server.baseUrl
  })
  afterAll(() => server?.close())

  const signIn = async (credentials: Record<string, string>): Promise<Signed> => {
    const res = await api.call("POST", "/session", { body: credentials, headers: { origin } })
    expect(res.status, res.text).toBe(200)
    const setCookie = res.headers.get("set-cookie") ?? ""
    const match = /^spendgate_session=([^;]+)/.exec(setCookie)
    expect(match).not.toBeNull()
    return { cookie: `spendgate_session=${match![1]}`, csrf: res.body.csrfToken, setCookie, body: res.body }
  }

  /** A request the way the dashboard makes it: the cookie, the CSRF token on changes, this origin. */
  const withSession = (session: Signed, method: string, path: string, body?: unknown, extra: Record<string, string> = {}) =>
    api.call(method, path, {
      ...(body === undefined ? {} : { body }),
      headers: {
        cookie: session.cookie,
        ...(method === "GET" ? {} : { "x-csrf-token": session.csrf, origin }),
        ...extra
      }
    })

  const account = async () => {
    const owner = (await api.post("/v1/signup", { name: "Dana" })).body as { apiKey: string; agentId: string; accountId: string }
    const worker = (await api.post("/v1/agents", { name: "worker" }, owner.apiKey)).body as { apiKey: string; id: string }
    return { owner, worker }
  }

  it("signs in with an owner key: the session JSON and a HttpOnly, SameSite=Strict cookie, never the key", async () => {
    const { owner } = await account()
    const session = await signIn({ key: owner.apiKey })
    expect(session.body).toMatchObject({ role: "owner", label: "Dana", accountId: owner.accountId, agentId: owner.agentId })
    expect(session.body.csrfToken).toMatch(/^[A-Za-z0-9_-]{40,}$/)
    expect(JSON.stringify(session.body)).not.toContain(owner.apiKey)
    const attributes = session.setCookie.split(";").map((part) => part.trim())
    expect(attributes).toContain("HttpOnly")
    expect(attributes).toContain("SameSite=Strict")
    expect(attributes).toContain("Path=/")
    expect(attributes).not.toContain("Secure")
    expect(session.setCookie).not.toContain(owner.apiKey)

    // GET works with the cookie alone.
    const agents = await withSession(session, "GET", "/v1/agents")
    expect(agents.status, agents.text).toBe(200)
    expect(agents.body.agents.length).toBe(2)
    const me = await withSession(session, "GET", "/session")
    expect(me.status).toBe(200)
    expect(me.body.csrfToken).toBe(session.csrf)
    expect(me.headers.get("cache-control")).toBe("no-store")
  })

  it("sets Secure when the request came over TLS (a proxy's X-Forwarded-Proto: https)", async () => {
    const { owner } = await account()
    const res = await api.call("POST", "/session", {
      body: { key: owner.apiKey },
      headers: { "x-forwarded-proto": "https", origin: origin.replace("http:", "https:") }
    })
    expect(res.status, res.text).toBe(200)
    expect((res.headers.get("set-cookie") ?? "").split(";").map((p) => p.trim())).toContain("Secure")
  })

  it("refuses wrong keys and tokens alike with 401 in the envelope, and an empty body with 400", async () => {
    const { owner } = await account()
    const unknown = `sk_agt_${"A".repeat(32)}`
    const answers = await Promise.all([
      api.post("/session", { key: unknown }),
      api.post("/session", { key: "not-a-key" }),
      api.post("/session", { key: owner.apiKey.slice(0, -1) + (owner.apiKey.endsWith("a") ? "b" : "a") }),
      api.post("/session", { adminToken: "wrong-token" })
    ])
    for (const res of answers) {
      expect(res.status, res.text).toBe(401)
      expect(errorCode(res)).toBe("UNAUTHORIZED")
      expect(res.body.error.message).toBe("Invalid key or token")
      expect(res.headers.get("set-cookie")).toBeNull()
    }
    const empty = await api.post("/session", {})
    expect(empty.status).toBe(400)
    expect(errorCode(empty)).toBe("VALIDATION_ERROR")
    const junk = await api.call("POST", "/session", { raw: "{not json", headers: { "content-type": "application/json" } })
    expect(junk.status).toBe(400)
    expect(errorCode(await api.get("/session"))).toBe("UNAUTHORIZED")
  })

  it("needs the CSRF token and this origin on every change made with the cookie", async () => {
    const { owner, worker } = await account()
    const session = await signIn({ key: owner.apiKey })
    const path = `/v1/agents/${worker.id}`

    const noToken = await api.call("PATCH", path, { body: { name: "renamed" }, headers: { cookie: session.cookie, origin } })
    expect(noToken.status).toBe(403)
    expect(errorCode(noToken)).toBe("CSRF_FAILED")

    const wrongToken = await withSession(session, "PATCH", path, { name: "renamed" }, { "x-csrf-token": "x".repeat(43) })
    expect(wrongToken.status).toBe(403)
    expect(errorCode(wrongToken)).toBe("CSRF_FAILED")

    const wrongOrigin = await withSession(session, "PATCH", path, { name: "renamed" }, { origin: "http://evil.example" })
    expect(wrongOrigin.status).toBe(403)
    expect(errorCode(wrongOrigin)).toBe("CSRF_FAILED")

    const crossSite = await withSession(session, "PATCH", path, { name: "renamed" }, { "sec-fetch-site": "same-site" })
    expect(crossSite.status).toBe(403)
    expect(errorCode(crossSite)).toBe("CSRF_FAILED")

    // None of them changed anything.
    expect((await api.get(path, owner.apiKey)).body.name).toBe("worker")

    const ok = await withSession(session, "PATCH", path, { name: "renamed" }, { "sec-fetch-site": "same-origin" })
    expect(ok.status, ok.text).toBe(200)
    expect((await api.get(path, owner.apiKey)).body.name).toBe("renamed")

    // Without an Origin header (some clients send none) the token alone suffices.
    const noOrigin = await api.call("PATCH", path, {
      body: { name: "again" },
      headers: { cookie: session.cookie, "x-csrf-token": session.csrf }
    })
    expect(noOrigin.status, noOrigin.text).toBe(200)

    // Sign-in from another origin is refused too (login CSRF).
    const foreignSignIn = await api.call("POST", "/session", { body: { key: owner.apiKey }, headers: { origin: "http://evil.example" } })
    expect(foreignSignIn.status).toBe(403)
    expect(errorCode(foreignSignIn)).toBe("CSRF_FAILED")
  })

  it("grants no CORS: another origin can neither preflight a change nor read the CSRF token", async () => {
    const { owner } = await account()
    const session = await signIn({ key: owner.apiKey })
    const preflight = await api.call("OPTIONS", "/v1/agents", {
      headers: { origin: "http://evil.example", "access-control-request-method": "PATCH", "access-control-request-headers": "x-csrf-token" }
    })
    expect(preflight.headers.get("access-control-allow-origin")).toBeNull()
    expect(preflight.headers.get("access-control-allow-credentials")).toBeNull()
    const read = await api.call("GET", "/session", { headers: { cookie: session.cookie, origin: "http://evil.example" } })
    expect(read.headers.get("access-control-allow-origin")).toBeNull()
  })

  it("an Authorization header wins over the cookie, and needs no CSRF token", async () => {
    const a = await account()
    const b = await account()
    const session = await signIn({ key: a.owner.apiKey })
    const res = await api.call("GET", "/v1/agents", { key: b.owner.apiKey, headers: { cookie: session.cookie } })
    expect(res.body.agents.map((x: { id: string }) => x.id)).toContain(b.owner.agentId)
    const change = await api.call("PATCH", `/v1/agents/${b.worker.id}`, {
      key: b.owner.apiKey,
      body: { name: "w2" },
      headers: { cookie: session.cookie }
    })
    expect(change.status).toBe(200)
  })

  it("an agent key's session is that agent: its own agent read-only, owner routes refused", async () => {
    const { owner, worker } = await account()
    const session = await signIn({ key: worker.apiKey })
    expect(session.body).toMatchObject({ role: "agent", label: "worker", agentId: worker.id })
    expect((await withSession(session, "GET", `/v1/agents/${worker.id}`)).status).toBe(200)
    const list = await withSession(session, "GET", "/v1/agents")
    expect(list.status).toBe(403)
    expect(errorCode(list)).toBe("FORBIDDEN")
    const kill = await withSession(session, "PATCH", `/v1/agents/${owner.agentId}`, { killed: true })
    expect(kill.status).toBe(403)
    expect(errorCode(kill)).toBe("FORBIDDEN")
    const admin = await withSession(session, "GET", "/v1/admin/stats")
    expect(admin.status).toBe(403)
    expect(errorCode(admin)).toBe("FORBIDDEN")
  })

  it("a killed agent's session is refused like its key, and works again once revived", async () => {
    const { owner, worker } = await account()
    const session = await signIn({ key: worker.apiKey })
    expect((await api.patch(`/v1/agents/${worker.id}`, { killed: true }, owner.apiKey)).status).toBe(200)
    const refused = await withSession(session, "GET", `/v1/agents/${worker.id}`)
    expect(refused.status).toBe(403)
    expect(errorCode(refused)).toBe("AGENT_KILLED")
    expect(errorCode(await withSession(session, "GET", "/session"))).toBe("AGENT_KILLED")
    const signInKilled = await api.post("/session", { key: worker.apiKey })
    expect(signInKilled.status).toBe(403)
    expect(errorCode(signInKilled)).toBe("AGENT_KILLED")
    expect((await api.patch(`/v1/agents/${worker.id}`, { killed: false }, owner.apiKey)).status).toBe(200)
    expect((await withSession(session, "GET", `/v1/agents/${worker.id}`)).status).toBe(200)
  })

  it("a rotated or deleted key's session is refused, and ends", async () => {
    const { owner, worker } = await account()
    const rotated = await signIn({ key: worker.apiKey })
    const rotate = await api.post(`/v1/agents/${worker.id}/rotate-key`, {}, owner.apiKey)
    expect(rotate.status, rotate.text).toBe(200)
    const afterRotate = await withSession(rotated, "GET", `/v1/agents/${worker.id}`)
    expect(afterRotate.status).toBe(401)
    expect(errorCode(afterRotate)).toBe("UNAUTHORIZED")
    expect((await withSession(rotated, "GET", "/session")).status).toBe(401)

    const fresh = await signIn({ key: rotate.body.apiKey })
    expect((await withSession(fresh, "GET", `/v1/agents/${worker.id}`)).status).toBe(200)
    expect((await api.call("DELETE", `/v1/agents/${worker.id}`, { key: owner.apiKey })).status).toBeLessThan(300)
    const afterDelete = await withSession(fresh, "GET", `/v1/agents/${worker.id}`)
    expect(afterDelete.status).toBe(401)
    expect(errorCode(afterDelete)).toBe("UNAUTHORIZED")
  })

  it("signing out needs the CSRF token, ends the session and clears the cookie", async () => {
    const { owner } = await account()
    const session = await signIn({ key: owner.apiKey })
    const forged = await api.call("DELETE", "/session", { headers: { cookie: session.cookie, origin } })
    expect(forged.status).toBe(403)
    expect(errorCode(forged)).toBe("CSRF_FAILED")
    expect((await withSession(session, "GET", "/v1/agents")).status).toBe(200)

    const out = await withSession(session, "DELETE", "/session")
    expect(out.status).toBe(204)
    expect(out.headers.get("set-cookie")).toMatch(/^spendgate_session=; Path=\/; HttpOnly; SameSite=Strict; Max-Age=0/)
    const after = await withSession(session, "GET", "/v1/agents")
    expect(after.status).toBe(401)
    expect(errorCode(after)).toBe("UNAUTHORIZED")
    expect((await withSession(session, "GET", "/session")).status).toBe(401)
  })

  it("the operator signs in with the admin token: /v1/admin/* by cookie, not /v1", async () => {
    const { owner } = await account()
    const session = await signIn({ adminToken: ADMIN })
    expect(session.body).toMatchObject({ role: "operator", label: "Operator" })
    expect(session.body.agentId).toBeUndefined()
    const stats = await withSession(session, "GET", "/v1/admin/stats")
    expect(stats.status, stats.text).toBe(200)
    const agents = await withSession(session, "GET", "/v1/agents")
    expect(agents.status).toBe(401)

    // A change on the admin API needs the CSRF token too.
    const refund = "/v1/admin/transactions/txn_missing/refund"
    const noToken = await api.call("POST", refund, { body: { reason: "x" }, headers: { cookie: session.cookie } })
    expect(noToken.status).toBe(403)
    expect(errorCode(noToken)).toBe("CSRF_FAILED")
    const withToken = await withSession(session, "POST", refund, { reason: "x" })
    expect(withToken.status).toBe(404)

    // An owner's session on the admin API is 403, as its key would be.
    const ownerSession = await signIn({ key: owner.apiKey })
    const forbidden = await withSession(ownerSession, "GET", "/v1/admin/stats")
    expect(forbidden.status).toBe(403)
    expect(errorCode(forbidden)).toBe("FORBIDDEN")
  })

  it("the QR code image needs a session", async () => {
    const { owner } = await account()
    const anonymous = await api.get("/session/qr.svg?text=lnbc1")
    expect(anonymous.status).toBe(401)
    const session = await signIn({ key: owner.apiKey })
    const svg = await withSession(session, "GET", "/session/qr.svg?text=lnbcrt10u1example")
    expect(svg.status).toBe(200)
    expect(svg.headers.get("content-type")).toContain("image/svg+xml")
    expect(svg.text).toContain("<svg")
    expect((await withSession(session, "GET", "/session/qr.svg")).status).toBe(400)
    // Too long in characters, or in bytes (1,200 two-byte characters: 2,400 bytes, more than a QR code holds): 400, never 500.
    for (const text of ["a".repeat(2001), "é".repeat(1200)]) {
      const refused = await withSession(session, "GET", `/session/qr.svg?text=${encodeURIComponent(text)}`)
      expect(refused.status).toBe(400)
      expect(JSON.parse(refused.text).error.code).toBe("VALIDATION_ERROR")
    }
  })
})

describe("the session routes in the access matrix", () => {
  it("routesOutsideApi and docs/access.md list every session route", () => {
    const listed = Object.values(routesOutsideApi).map((e) => `${e.method} ${e.path}`)
    const doc = renderAccessDoc()
    for (const route of sessionRoutes()) {
      expect(listed).toContain(`${route.method} ${route.path}`)
      expect(doc).toContain(`| \`${route.method} ${route.path}\` |`)
    }
  })
})

describe("dashboard session lifetimes and sign-in limit", () => {
  it("limits sign-in attempts per client address, right or wrong", async () => {
    const server = await startServer(MemoryStore.layer, { sessions: { signinPer15Minutes: 3 } })
    try {
      const api = client(server.baseUrl)
      const owner = (await api.post("/v1/signup", { name: "o" })).body as { apiKey: string }
      expect((await api.post("/session", { key: "bad" })).status).toBe(401)
      expect((await api.post("/session", { key: "bad" })).status).toBe(401)
      expect((await api.post("/session", { key: owner.apiKey })).status).toBe(200)
      const limited = await api.post("/session", { key: owner.apiKey })
      expect(limited.status).toBe(429)
      expect(errorCode(limited)).toBe("RATE_LIMITED")
      expect(limited.body.error.details.scope).toBe("signin")
      expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0)
    } finally {
      await server.close()
    }
  })

  it("ends a session after its idle time", async () => {
    const server = await startServer(MemoryStore.layer, { sessions: { idleMinutes: 0.01 } })
    try {
      const api = client(server.baseUrl)
      const owner = (await api.post("/v1/signup", { name: "o" })).body as { apiKey: string }
      const res = await api.post("/session", { key: owner.apiKey })
      const cookie = (res.headers.get("set-cookie") ?? "").split(";")[0]!
      expect((await api.call("GET", "/v1/agents", { headers: { cookie } })).status).toBe(200)
      await new Promise((resolve) => setTimeout(resolve, 900))
      const expired = await api.call("GET", "/v1/agents", { headers: { cookie } })
      expect(expired.status).toBe(401)
      expect(expired.body.error.message).toContain("sign in again")
    } finally {
      await server.close()
    }
  })
})
