import { upstreamLayers } from "../support/upstreamLayers.ts"
import { Effect, Exit, Layer, Redacted, Scope } from "effect"
import { request } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as OpenAiCompatible from "../../adapters/providers/reason/openaiCompatible.ts"
import * as Transport from "../../adapters/services/transport.ts"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { type Fake, startFake } from "../providers/fakeLlm.ts"
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

  it("does not store a refusal of the access matrix: it is checked before the key", async () => {
    const owner = await signup()
    const worker = (await createAgent(owner.apiKey, undefined)).body as { apiKey: string }
    const key = newKey()
    for (let i = 0; i < 2; i++) {
      const refused = await createAgent(worker.apiKey, key, { name: "sneaky" })
      expect(refused.status).toBe(403)
      expect(errorCode(refused)).toBe("FORBIDDEN")
      expect(refused.headers.get("idempotent-replayed")).toBeNull()
    }
    expect(await agentTotal(owner.apiKey)).toBe(2)
    // The key was never claimed: the worker may use it elsewhere.
    const wallet = await api.call("GET", "/v1/wallet", { key: worker.apiKey, headers: { "idempotency-key": key } })
    expect(wallet.status).toBe(200)
  })

  it("scopes keys per agent: two accounts use the same key independently", async () => {
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

  it("replays a signup only to the client address that made it: the answer holds the owner's key", async () => {
    const key = newKey()
    const from = (localAddress: string) =>
      new Promise<{ status: number; replayed: string | undefined; body: any }>((resolve, reject) => {
        const payload = JSON.stringify({ name: "ops" })
        const req = request(new URL("/v1/signup", server.baseUrl), {
          method: "POST",
          localAddress,
          headers: { "content-type": "application/json", "idempotency-key": key }
        }, (res) => {
          let text = ""
          res.on("data", (chunk) => (text += chunk))
          res.on("end", () =>
            resolve({
              status: res.statusCode ?? 0,
              replayed: res.headers["idempotent-replayed"] as string | undefined,
              body: JSON.parse(text)
            }))
        })
        req.on("error", reject)
        req.end(payload)
      })
    const first = await from("127.0.0.1")
    expect(first.status).toBe(201)
    const elsewhere = await from("127.0.0.2")
    expect(elsewhere.status).toBe(201)
    expect(elsewhere.replayed).toBeUndefined()
    expect(elsewhere.body.apiKey).not.toBe(first.body.apiKey)
    const again = await from("127.0.0.1")
    expect(again.replayed).toBe("true")
    expect(again.body).toEqual(first.body)
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

/**
 * An Idempotency-Key belongs to the agent that used it, and a replay is an
 * answer to the caller: authentication, role and policy are checked first.
 * Each case below handed one agent's stored answer to another (or to an agent
 * that may no longer make the call) before keys were bound to agents.
 */
describe.each(storeBackends)("Idempotency-Key across agents over %s", (_name, store) => {
  const scope = Effect.runSync(Scope.make())
  let fake: Fake
  let server: RunningServer
  let api: ReturnType<typeof client>

  beforeAll(async () => {
    fake = await Effect.runPromise(Scope.provide(startFake({ apiKey: "sk-upstream" }), scope))
    fake.behaviour = { _tag: "reply", reply: { content: "the owner's answer", promptTokens: 10, completionTokens: 10 } }
    const providers = Layer.effect(
      Providers,
      OpenAiCompatible.make({
        name: "alpha",
        baseUrl: `${fake.origin}/v1`,
        apiKey: Redacted.make("sk-upstream"),
        models: [{ id: "m-1", inputPer1kMicroUsd: 1_000n, outputPer1kMicroUsd: 1_000n, maxTokens: 4096, defaultMaxTokens: 100 }]
      }).pipe(Effect.map((provider) => ({ all: [provider] })))
    ).pipe(Layer.provide(upstreamLayers))
    const m1 = { id: "m-1", inputPer1kMicroUsd: 1_000n, outputPer1kMicroUsd: 1_000n, maxTokens: 4096, defaultMaxTokens: 100 }
    const transport = Transport.layer({
      operatorServices: [{
        service: {
          slug: "alpha",
          name: "Alpha",
          description: "test upstream",
          baseUrl: `${fake.origin}/v1`,
          capabilities: ["reason"],
          origin: "operator",
          endpoints: [{
            path: "/chat/completions",
            method: "POST",
            description: "chat",
            price: { kind: "tokens", format: "openai-chat", models: [m1] }
          }]
        },
        credentials: { authorization: Redacted.make("Bearer sk-upstream") }
      }]
    }).pipe(Layer.provide(upstreamLayers))
    server = await startServer(store(), { providers, transport })
    api = client(server.baseUrl)
  })
  afterAll(async () => {
    await server?.close()
    await Effect.runPromise(Scope.close(scope, Exit.void))
  })

  const withKey = (method: string, path: string, key: string, idempotencyKey: string, body?: unknown) =>
    api.call(method, path, { key, ...(body === undefined ? {} : { body }), headers: { "idempotency-key": idempotencyKey } })

  /** A funded account: its owner and a worker allowed `allowed` (all when empty). */
  const account = async (allowed: ReadonlyArray<string> = []) => {
    const owner = (await api.post("/v1/signup", { name: "ops" })).body as { apiKey: string; agentId: string; accountId: string }
    await server.run(Effect.gen(function*() {
      yield* (yield* Wallets).credit({
        accountId: owner.accountId as AccountId,
        key: "seed",
        pocket: "usd",
        amount: 100_000_000n,
        description: "seed"
      })
    }))
    const worker = (await api.post("/v1/agents", { name: "worker" }, owner.apiKey)).body as { apiKey: string; id: string }
    if (allowed.length > 0) {
      const set = await api.patch(`/v1/agents/${worker.id}/policy`, { allowedCapabilities: allowed }, owner.apiKey)
      expect(set.status).toBe(200)
    }
    return { owner, worker }
  }

  it("a worker replaying the owner's POST /v1/agents (role owner) gets 403, not the new owner's key", async () => {
    const { owner, worker } = await account()
    const body = { name: "second-owner", role: "owner" }
    const first = await withKey("POST", "/v1/agents", owner.apiKey, "create-second-owner", body)
    expect(first.status).toBe(201)
    expect(first.body.role).toBe("owner")
    const replay = await withKey("POST", "/v1/agents", worker.apiKey, "create-second-owner", body)
    expect(replay.status, replay.text).toBe(403)
    expect(errorCode(replay)).toBe("FORBIDDEN")
    expect(replay.headers.get("idempotent-replayed")).toBeNull()
    expect(replay.text).not.toContain(first.body.apiKey)
    // The worker still cannot list agents, and the owner still sees three agents.
    expect((await api.get("/v1/agents", worker.apiKey)).status).toBe(403)
    expect((await api.get("/v1/agents", owner.apiKey)).body.total).toBe(3)
    // The owner's own retry is still a replay.
    const again = await withKey("POST", "/v1/agents", owner.apiKey, "create-second-owner", body)
    expect(again.headers.get("idempotent-replayed")).toBe("true")
    expect(again.text).toBe(first.text)
  })

  it("a worker replaying the owner's POST /v1/wallet/fund-card gets 403, not the checkout session", async () => {
    const { owner, worker } = await account()
    const body = { amountUsdCents: 2500 }
    const first = await withKey("POST", "/v1/wallet/fund-card", owner.apiKey, "fund-card-1", body)
    expect(first.status, first.text).toBe(200)
    const replay = await withKey("POST", "/v1/wallet/fund-card", worker.apiKey, "fund-card-1", body)
    expect(replay.status, replay.text).toBe(403)
    expect(errorCode(replay)).toBe("FORBIDDEN")
    expect(replay.text).not.toContain(first.body.sessionId)
  })

  it("a speak-only worker replaying the owner's reason call gets 403 CAPABILITY_NOT_ALLOWED", async () => {
    const { owner, worker } = await account(["speak"])
    const body = { prompt: "secret plans" }
    const first = await withKey("POST", "/v1/capabilities/reason", owner.apiKey, "reason-1", body)
    expect(first.status, first.text).toBe(200)
    expect(first.body.data.content).toBe("the owner's answer")
    const calls = fake.requests.length
    const replay = await withKey("POST", "/v1/capabilities/reason", worker.apiKey, "reason-1", body)
    expect(replay.status, replay.text).toBe(403)
    expect(errorCode(replay)).toBe("CAPABILITY_NOT_ALLOWED")
    expect(replay.text).not.toContain("the owner's answer")
    expect(fake.requests.length).toBe(calls)
  })

  it("a speak-only worker replaying the owner's proxy call gets 403 CAPABILITY_NOT_ALLOWED", async () => {
    const { owner, worker } = await account(["speak"])
    const body = { method: "POST", path: "/chat/completions", body: { model: "m-1", messages: [{ role: "user", content: "hi" }] } }
    const first = await withKey("POST", "/v1/proxy/alpha", owner.apiKey, "proxy-1", body)
    expect(first.status, first.text).toBe(200)
    const calls = fake.requests.length
    const replay = await withKey("POST", "/v1/proxy/alpha", worker.apiKey, "proxy-1", body)
    expect(replay.status, replay.text).toBe(403)
    expect(errorCode(replay)).toBe("CAPABILITY_NOT_ALLOWED")
    expect(replay.text).not.toContain("the owner's answer")
    expect(fake.requests.length).toBe(calls)
    // Its own proxy call, replayed after its policy was narrowed: refused too.
    await api.patch(`/v1/agents/${worker.id}/policy`, { allowedCapabilities: [] }, owner.apiKey)
    const own = await withKey("POST", "/v1/proxy/alpha", worker.apiKey, "proxy-2", body)
    expect(own.status, own.text).toBe(200)
    await api.patch(`/v1/agents/${worker.id}/policy`, { allowedCapabilities: ["speak"] }, owner.apiKey)
    const narrowed = await withKey("POST", "/v1/proxy/alpha", worker.apiKey, "proxy-2", body)
    expect(narrowed.status, narrowed.text).toBe(403)
    expect(errorCode(narrowed)).toBe("CAPABILITY_NOT_ALLOWED")
  })

  it("an agent whose policy was narrowed after the call gets 403, not its own stored answer", async () => {
    const { owner, worker } = await account()
    const body = { prompt: "once" }
    const first = await withKey("POST", "/v1/capabilities/reason", worker.apiKey, "reason-2", body)
    expect(first.status, first.text).toBe(200)
    const narrowed = await api.patch(`/v1/agents/${worker.id}/policy`, { allowedCapabilities: ["speak"] }, owner.apiKey)
    expect(narrowed.status).toBe(200)
    const replay = await withKey("POST", "/v1/capabilities/reason", worker.apiKey, "reason-2", body)
    expect(replay.status, replay.text).toBe(403)
    expect(errorCode(replay)).toBe("CAPABILITY_NOT_ALLOWED")
    // Allowed again: the stored answer is replayed, nothing runs twice.
    await api.patch(`/v1/agents/${worker.id}/policy`, { allowedCapabilities: [] }, owner.apiKey)
    const calls = fake.requests.length
    const allowed = await withKey("POST", "/v1/capabilities/reason", worker.apiKey, "reason-2", body)
    expect(allowed.headers.get("idempotent-replayed")).toBe("true")
    expect(allowed.text).toBe(first.text)
    expect(fake.requests.length).toBe(calls)
  })

  it("stores and replays a final refusal (402) to the agent that got it", async () => {
    const owner = (await api.post("/v1/signup", { name: "unfunded" })).body as { apiKey: string }
    const body = { prompt: "no money" }
    const first = await withKey("POST", "/v1/capabilities/reason", owner.apiKey, "broke-1", body)
    expect(first.status).toBe(402)
    expect(errorCode(first)).toBe("INSUFFICIENT_BALANCE")
    const second = await withKey("POST", "/v1/capabilities/reason", owner.apiKey, "broke-1", body)
    expect(second.status).toBe(402)
    // The stored answer, marked with the id of the request that replays it.
    expect(second.body.error.requestId).toBe(second.headers.get("x-request-id"))
    expect(second.body.error.requestId).not.toBe(first.body.error.requestId)
    expect({ ...second.body.error, requestId: undefined }).toEqual({ ...first.body.error, requestId: undefined })
    expect(second.headers.get("idempotent-replayed")).toBe("true")
  })

  it("two agents of one account use the same key independently", async () => {
    const { owner, worker } = await account()
    const body = { prompt: "same words" }
    const fromOwner = await withKey("POST", "/v1/capabilities/reason", owner.apiKey, "shared", body)
    const fromWorker = await withKey("POST", "/v1/capabilities/reason", worker.apiKey, "shared", body)
    expect(fromOwner.status).toBe(200)
    expect(fromWorker.status).toBe(200)
    expect(fromWorker.headers.get("idempotent-replayed")).toBeNull()
    expect(fromWorker.body.metadata.auditId).not.toBe(fromOwner.body.metadata.auditId)
  })

  it("a worker reads only its own audit records and not the registry submissions", async () => {
    const { owner, worker } = await account()
    const mine = await api.post("/v1/capabilities/reason", { prompt: "mine" }, worker.apiKey)
    const theirs = await api.post("/v1/capabilities/reason", { prompt: "theirs" }, owner.apiKey)
    expect(mine.status).toBe(200)
    expect(theirs.status).toBe(200)
    expect((await api.get(`/v1/audit/${mine.body.metadata.auditId}`, worker.apiKey)).status).toBe(200)
    const other = await api.get(`/v1/audit/${theirs.body.metadata.auditId}`, worker.apiKey)
    expect(other.status, other.text).toBe(403)
    expect(errorCode(other)).toBe("FORBIDDEN")
    expect((await api.get(`/v1/audit/${theirs.body.metadata.auditId}`, owner.apiKey)).status).toBe(200)
    expect((await api.get(`/v1/wallet/transactions?agentId=${owner.agentId}`, worker.apiKey)).status).toBe(403)
    const submissions = await api.get("/v1/registry/submissions", worker.apiKey)
    expect(submissions.status, submissions.text).toBe(403)
    expect(errorCode(submissions)).toBe("FORBIDDEN")
    expect((await api.get("/v1/registry/submissions", owner.apiKey)).status).toBe(200)
  })
})
