import { request } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, errorCode, type RunningServer, startServer, storeBackends } from "../support/server.ts"

describe.each(storeBackends)("HTTP Idempotency-Key over %s", (_name, store) => {
  let server: RunningServer
  let api: ReturnType<typeof client>

  beforeAll(async () => {
    server = await startServer(store())
    api = client(server.baseUrl)
  })
  afterAll(() => server?.close())

  let counter = 0
  const newKey = () => `key-${Date.now().toString(36)}-${counter++}-${Math.random().toString(36).slice(2)}`

  const signup = async (name = "ops") => {
    const res = await api.post("/v1/signup", { name })
    expect(res.status).toBe(201)
    return res.body as { apiKey: string; agentId: string; accountId: string }
  }

  const createAgent = (ownerKey: string, idempotencyKey: string | undefined, body: unknown = { name: "worker" }) =>
    api.call("POST", "/v1/agents", {
      key: ownerKey,
      body,
      ...(idempotencyKey === undefined ? {} : { headers: { "idempotency-key": idempotencyKey } })
    })

  const agentTotal = async (ownerKey: string) => {
    const res = await api.get("/v1/agents", ownerKey)
    expect(res.status).toBe(200)
    return res.body.total as number
  }

  it("answers a repeated POST /v1/agents with the stored response and creates one agent", async () => {
    const owner = await signup()
    const key = newKey()
    const first = await createAgent(owner.apiKey, key)
    expect(first.status).toBe(201)
    expect(first.headers.get("idempotent-replayed")).toBeNull()
    expect(first.body.apiKey).toMatch(/^sk_agt_[A-Za-z0-9]{32}$/)
    const second = await createAgent(owner.apiKey, key)
    expect(second.status).toBe(201)
    expect(second.headers.get("idempotent-replayed")).toBe("true")
    expect(second.headers.get("content-type")).toMatch(/^application\/json/)
    expect(second.text).toBe(first.text)
    expect(second.body.id).toBe(first.body.id)
    expect(second.body.apiKey).toBe(first.body.apiKey)
    expect(await agentTotal(owner.apiKey)).toBe(2)
    // The replayed key is the real one.
    expect((await api.get(`/v1/agents/${first.body.id}`, second.body.apiKey)).status).toBe(200)
  })

  it("creates a new agent for every POST without a key", async () => {
    const owner = await signup()
    const a = await createAgent(owner.apiKey, undefined)
    const b = await createAgent(owner.apiKey, undefined)
    expect(a.status).toBe(201)
    expect(b.status).toBe(201)
    expect(a.body.id).not.toBe(b.body.id)
    expect(await agentTotal(owner.apiKey)).toBe(3)
  })

  it("runs 10 concurrent identical requests once and answers all of them the same", async () => {
    const owner = await signup()
    const key = newKey()
    const responses = await Promise.all(Array.from({ length: 10 }, () => createAgent(owner.apiKey, key)))
    for (const res of responses) {
      expect(res.status, res.text).toBe(201)
      expect(res.text).toBe(responses[0]!.text)
    }
    expect(responses.filter((res) => res.headers.get("idempotent-replayed") === "true")).toHaveLength(9)
    expect(await agentTotal(owner.apiKey)).toBe(2)
  })

  it("refuses the same key with a different body with 409 IDEMPOTENCY_CONFLICT", async () => {
    const owner = await signup()
    const key = newKey()
    expect((await createAgent(owner.apiKey, key, { name: "a" })).status).toBe(201)
    for (const body of [{ name: "b" }, { name: "a", role: "agent" }]) {
      const res = await createAgent(owner.apiKey, key, body)
      expect(res.status).toBe(409)
      expect(errorCode(res)).toBe("IDEMPOTENCY_CONFLICT")
    }
    // Same JSON, different bytes: a different request.
    const spaced = await api.call("POST", "/v1/agents", {
      key: owner.apiKey,
      raw: "{ \"name\": \"a\" }",
      headers: { "content-type": "application/json", "idempotency-key": key }
    })
    expect(spaced.status).toBe(409)
    expect(errorCode(spaced)).toBe("IDEMPOTENCY_CONFLICT")
    // The same key on another endpoint is another request too.
    const signupWithKey = await api.call("POST", "/v1/signup", {
      key: owner.apiKey,
      body: { name: "a" },
      headers: { "idempotency-key": key }
    })
    expect(signupWithKey.status).toBe(201)
    expect(await agentTotal(owner.apiKey)).toBe(2)
  })

  it("does not consume the key on 400, malformed JSON, 415 or 413: the corrected retry runs", async () => {
    const owner = await signup()
    const key = newKey()
    const withKey = (options: { body?: unknown; raw?: string; headers?: Record<string, string> }) =>
      api.call("POST", "/v1/agents", {
        key: owner.apiKey,
        ...options,
        headers: { "content-type": "application/json", ...options.headers, "idempotency-key": key }
      })
    const invalid = await withKey({ body: { name: "" } })
    expect(invalid.status).toBe(400)
    expect(errorCode(invalid)).toBe("VALIDATION_ERROR")
    const unknownField = await withKey({ body: { name: "x", extra: 1 } })
    expect(unknownField.status).toBe(400)
    const malformed = await withKey({ raw: "{\"name\":" })
    expect(malformed.status).toBe(400)
    expect(errorCode(malformed)).toBe("VALIDATION_ERROR")
    const wrongType = await withKey({ raw: "name=x", headers: { "content-type": "text/plain" } })
    expect(wrongType.status).toBe(415)
    expect(errorCode(wrongType)).toBe("UNSUPPORTED_MEDIA_TYPE")
    const tooLarge = await withKey({ body: { name: "x".repeat(1024 * 1024 + 10) } })
    expect(tooLarge.status).toBe(413)
    expect(errorCode(tooLarge)).toBe("PAYLOAD_TOO_LARGE")
    expect(await agentTotal(owner.apiKey)).toBe(1)

    const corrected = await withKey({ body: { name: "fixed" } })
    expect(corrected.status).toBe(201)
    expect(corrected.headers.get("idempotent-replayed")).toBeNull()
    const replayed = await withKey({ body: { name: "fixed" } })
    expect(replayed.text).toBe(corrected.text)
    expect(replayed.headers.get("idempotent-replayed")).toBe("true")
    expect(await agentTotal(owner.apiKey)).toBe(2)
  })

  it("does not consume the key when a chunked body crosses the limit while it is read", async () => {
    const key = newKey()
    const chunked = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const url = new URL("/v1/signup", server.baseUrl)
      const headers = { "content-type": "application/json", "idempotency-key": key }
      const req = request(url, { method: "POST", headers }, (res) => {
        let body = ""
        res.on("data", (chunk) => (body += chunk))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }))
      })
      req.on("error", reject)
      req.write("{\"name\":\"")
      const piece = "y".repeat(64 * 1024)
      for (let i = 0; i < 20; i++) req.write(piece)
      req.end("\"}")
    })
    expect(chunked.status).toBe(413)
    expect(JSON.parse(chunked.body).error.code).toBe("PAYLOAD_TOO_LARGE")
    const retry = await api.call("POST", "/v1/signup", { body: { name: "ops" }, headers: { "idempotency-key": key } })
    expect(retry.status).toBe(201)
    expect(retry.headers.get("idempotent-replayed")).toBeNull()
  })

  it("stores and replays a 403: a refused request is an answer", async () => {
    const owner = await signup()
    const worker = (await createAgent(owner.apiKey, undefined)).body as { apiKey: string }
    const key = newKey()
    const first = await createAgent(worker.apiKey, key, { name: "sneaky" })
    expect(first.status).toBe(403)
    expect(errorCode(first)).toBe("FORBIDDEN")
    expect(first.headers.get("idempotent-replayed")).toBeNull()
    const second = await createAgent(worker.apiKey, key, { name: "sneaky" })
    expect(second.status).toBe(403)
    expect(second.text).toBe(first.text)
    expect(second.headers.get("idempotent-replayed")).toBe("true")
    expect(await agentTotal(owner.apiKey)).toBe(2)
  })

  it("scopes keys per account: two accounts use the same key independently", async () => {
    const a = await signup("a")
    const b = await signup("b")
    const key = newKey()
    const fromA = await createAgent(a.apiKey, key)
    const fromB = await createAgent(b.apiKey, key)
    expect(fromA.status).toBe(201)
    expect(fromB.status).toBe(201)
    expect(fromB.headers.get("idempotent-replayed")).toBeNull()
    expect(fromA.body.id).not.toBe(fromB.body.id)
    // Different bodies under the same key in two accounts are no conflict either.
    const otherKey = newKey()
    expect((await createAgent(a.apiKey, otherKey, { name: "x" })).status).toBe(201)
    expect((await createAgent(b.apiKey, otherKey, { name: "y" })).status).toBe(201)
    expect(await agentTotal(a.apiKey)).toBe(3)
    expect(await agentTotal(b.apiKey)).toBe(3)
  })

  it("replays a signup with the same key: one account", async () => {
    const key = newKey()
    const signupWith = (name: string) =>
      api.call("POST", "/v1/signup", { body: { name }, headers: { "idempotency-key": key } })
    const first = await signupWith("ops")
    expect(first.status).toBe(201)
    const second = await signupWith("ops")
    expect(second.status).toBe(201)
    expect(second.headers.get("idempotent-replayed")).toBe("true")
    expect(second.body).toEqual(first.body)
    expect(await agentTotal(first.body.apiKey)).toBe(1)
    const different = await signupWith("other")
    expect(different.status).toBe(409)
    expect(errorCode(different)).toBe("IDEMPOTENCY_CONFLICT")
    // The public scope and an account's scope are apart.
    const asAccount = await createAgent(first.body.apiKey, key, { name: "ops" })
    expect(asAccount.status).toBe(201)
    expect(asAccount.headers.get("idempotent-replayed")).toBeNull()
  })

  it("refuses a malformed key with 400 VALIDATION_ERROR and does nothing", async () => {
    const owner = await signup()
    for (const bad of ["", "k".repeat(256), "x".repeat(300), "café", "naïve-key"]) {
      const res = await createAgent(owner.apiKey, bad)
      expect(res.status, JSON.stringify(bad)).toBe(400)
      expect(errorCode(res)).toBe("VALIDATION_ERROR")
      expect(res.body.error.details.issues[0].path).toBe("Idempotency-Key")
      const viaSignup = await api.call("POST", "/v1/signup", { body: { name: "x" }, headers: { "idempotency-key": bad } })
      expect(viaSignup.status).toBe(400)
      expect(viaSignup.body.error.details.issues[0].path).toBe("Idempotency-Key")
    }
    expect(await agentTotal(owner.apiKey)).toBe(1)
    // The longest allowed key, with spaces and punctuation, is fine.
    const longest = `${newKey()} ${"~".repeat(255)}`.slice(0, 255)
    expect((await createAgent(owner.apiKey, longest)).status).toBe(201)
    expect((await createAgent(owner.apiKey, longest)).headers.get("idempotent-replayed")).toBe("true")
  })

  it("authenticates before looking at the key: a 401 is not stored", async () => {
    const owner = await signup()
    const key = newKey()
    const unauthorized = await createAgent("sk_agt_" + "A".repeat(32), key)
    expect(unauthorized.status).toBe(401)
    // A malformed key behind a missing credential is still 401, not 400.
    expect((await createAgent("nope", "")).status).toBe(401)
    const created = await createAgent(owner.apiKey, key)
    expect(created.status).toBe(201)
    expect(created.headers.get("idempotent-replayed")).toBeNull()
  })
})
