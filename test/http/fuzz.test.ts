import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, errorCode, type RunningServer, startServer, storeBackends } from "../support/server.ts"

/**
 * Every endpoint, random bodies: wrong types, missing and unknown fields,
 * huge strings, negative and fractional numbers, deep nesting. No shape may
 * produce a 500, every error is in the envelope, and nothing changes on a
 * refused request. Bounded: a fixed number of runs per endpoint.
 */

const RUNS = 60

const scalar = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.double(),
  fc.constantFrom(-1, 0, 0.5, 1e-9, 1e21, -0, Number.MAX_SAFE_INTEGER, 2 ** 64),
  fc.string({ maxLength: 20 }),
  fc.constantFrom("", " ", "x".repeat(5000), "\u0000", "😀", "reason", "owner", "agent", "true")
)
const value = fc.letrec((tie) => ({
  node: fc.oneof({ depthSize: "small" }, scalar, fc.array(tie("node"), { maxLength: 4 }), fc.dictionary(fc.string({ maxLength: 8 }), tie("node"), { maxKeys: 4 }))
})).node
const fieldNames = [
  "name", "role", "killed", "maxPerCallUsdCents", "maxPerDayUsdCents", "allowedCapabilities", "extra", "__proto__", "constructor",
  "amountSats", "amountUsdCents", "prompt", "model", "maxTokens", "temperature", "query", "numResults", "url", "selectors",
  "code", "language", "timeout", "text", "voice", "format", "audio", "to", "subject", "body", "size", "n",
  "method", "path", "headers", "slug", "baseUrl", "endpoints", "pricing", "capabilities", "contact", "description"
]
const body = fc.oneof(
  value,
  fc.dictionary(fc.constantFrom(...fieldNames), value, { maxKeys: 5 })
)

describe.each(storeBackends.slice(0, 2))("fuzzing every endpoint over %s", (_name, store) => {
  let server: RunningServer
  let api: ReturnType<typeof client>
  let ownerKey: string
  let ownerId: string
  let workerId: string

  beforeAll(async () => {
    // Hundreds of requests a minute from one key: the limits are lifted here (tested in test/ratelimit/).
    server = await startServer(store(), { rateLimits: { agentPerMinute: 100_000, accountPerMinute: 100_000 } })
    api = client(server.baseUrl)
    const res = await api.post("/v1/signup", { name: "fuzz" })
    ownerKey = res.body.apiKey
    ownerId = res.body.agentId
    const worker = await api.post("/v1/agents", { name: "worker", role: "agent" }, ownerKey)
    workerId = worker.body.id
    // Another owner, so that kills of the first one can succeed and be undone.
    await api.post("/v1/agents", { name: "second", role: "owner" }, ownerKey)
  })
  afterAll(() => server?.close())

  const allowed = new Set([200, 201, 400, 401, 402, 403, 404, 409, 413, 415, 503])

  const check = async (method: string, path: string, payload: unknown, raw?: string) => {
    const res = await api.call(method, path, raw === undefined ? { key: ownerKey, body: payload } : {
      key: ownerKey,
      raw,
      headers: { "content-type": "application/json" }
    })
    expect(allowed.has(res.status), `${method} ${path} ${JSON.stringify(payload)?.slice(0, 200)} -> ${res.status} ${res.text.slice(0, 200)}`).toBe(true)
    if (res.status >= 400) errorCode(res)
    return res
  }

  const restore = async () => {
    await api.patch(`/v1/agents/${workerId}`, { killed: false, name: "worker" }, ownerKey)
    await api.patch(`/v1/agents/${ownerId}`, { killed: false }, ownerKey)
  }

  it("POST /v1/signup", async () => {
    await fc.assert(fc.asyncProperty(body, async (payload) => void (await check("POST", "/v1/signup", payload))), { numRuns: RUNS })
  })

  it("POST /v1/agents", async () => {
    await fc.assert(fc.asyncProperty(body, async (payload) => void (await check("POST", "/v1/agents", payload))), { numRuns: RUNS })
  })

  it("PATCH /v1/agents/{id}", async () => {
    await fc.assert(
      fc.asyncProperty(body, async (payload) => {
        await check("PATCH", `/v1/agents/${workerId}`, payload)
        await restore()
      }),
      { numRuns: RUNS }
    )
  })

  it("PUT and PATCH /v1/agents/{id}/policy", async () => {
    await fc.assert(
      fc.asyncProperty(body, fc.constantFrom("PUT", "PATCH"), async (payload, method) => {
        const before = await api.get(`/v1/agents/${workerId}/policy`, ownerKey)
        const res = await check(method, `/v1/agents/${workerId}/policy`, payload)
        if (res.status === 400) {
          const after = await api.get(`/v1/agents/${workerId}/policy`, ownerKey)
          expect(after.body).toEqual(before.body)
        }
      }),
      { numRuns: RUNS }
    )
  })

  it("GET endpoints with random ids and query strings", async () => {
    const segment = fc.oneof(fc.string({ maxLength: 80 }), fc.constantFrom(workerId, ownerId, "%00", "..", "%2e%2e", "agt_"))
    const query = fc.dictionary(fc.constantFrom("limit", "offset", "x"), fc.string({ maxLength: 12 }), { maxKeys: 3 })
    await fc.assert(
      fc.asyncProperty(segment, query, async (id, q) => {
        const qs = new URLSearchParams(q).toString()
        await check("GET", `/v1/agents/${encodeURIComponent(id)}`, undefined)
        await check("GET", `/v1/agents/${encodeURIComponent(id)}/policy`, undefined)
        await check("GET", `/v1/agents?${qs}`, undefined)
      }),
      { numRuns: RUNS }
    )
  })

  it("every POST that moves money or creates something", async () => {
    const paths = [
      "/v1/wallet/fund",
      "/v1/wallet/fund-card",
      "/v1/registry/submit",
      "/v1/proxy/openai",
      ...["reason", "search", "read", "scrape", "execute", "imagine", "speak", "transcribe", "email", "sms", "teleport"]
        .map((c) => `/v1/capabilities/${c}`)
    ]
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...paths), body, async (path, payload) => void (await check("POST", path, payload))),
      { numRuns: RUNS * 3 }
    )
  })

  it("GET lists with random query strings", async () => {
    const query = fc.dictionary(
      fc.constantFrom("limit", "offset", "type", "agentId", "startDate", "endDate", "status", "x"),
      fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom("2026-02-30", "2026-01-01", "-1", "1e3", "charge", "paid")),
      { maxKeys: 4 }
    )
    const paths = ["/v1/wallet/transactions", "/v1/wallet/invoices", "/v1/registry/submissions", "/v1/services", "/v1/capabilities"]
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...paths), query, async (path, q) =>
        void (await check("GET", `${path}?${new URLSearchParams(q).toString()}`, undefined))),
      { numRuns: RUNS }
    )
  })

  it("raw bodies that are not valid JSON", async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ maxLength: 200 }), async (raw) => {
        await check("POST", "/v1/agents", undefined, raw)
        await check("PUT", `/v1/agents/${workerId}/policy`, undefined, raw)
      }),
      { numRuns: RUNS }
    )
  })
})
