import { request } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import { type ApiResponse, client, errorCode, type RunningServer, startServer, storeBackends } from "../support/server.ts"

/** Framework-level failures answered in the error envelope. */
describe("HTTP error envelope for failures outside the endpoints", () => {
  let server: RunningServer
  let api: ReturnType<typeof client>
  let key: string
  let agentId: string

  beforeAll(async () => {
    server = await startServer(MemoryStore.layer)
    api = client(server.baseUrl)
    const res = await api.post("/v1/signup", { name: "ops" })
    key = res.body.apiKey
    agentId = res.body.agentId
  })
  afterAll(() => server?.close())

  it("answers unknown routes and methods with 404 NOT_FOUND", async () => {
    for (
      const [method, path] of [
        ["GET", "/v1/nope"],
        // GET / is the dashboard; any other unknown path is 404.
        ["GET", "/nope"],
        ["DELETE", "/v1/wallet"],
        ["PUT", `/v1/agents/${agentId}`],
        ["POST", "/health"],
        ["GET", "/v2/agents"]
      ] as const
    ) {
      const res = await api.call(method, path, { key })
      expect(res.status, `${method} ${path}`).toBe(404)
      expect(errorCode(res)).toBe("NOT_FOUND")
    }
  })

  it("answers malformed JSON with 400 VALIDATION_ERROR", async () => {
    for (const raw of ["{", "{\"name\":", "not json", "[1,2", "\u0000"]) {
      const res = await api.call("POST", "/v1/agents", { key, raw, headers: { "content-type": "application/json" } })
      expect(res.status, raw).toBe(400)
      expect(errorCode(res)).toBe("VALIDATION_ERROR")
      expect(Array.isArray(res.body.error.details.issues)).toBe(true)
    }
  })

  it("answers JSON that is not an object with 400 VALIDATION_ERROR", async () => {
    for (const raw of ["null", "[]", "42", "\"name\"", "true", ""]) {
      const res = await api.call("POST", "/v1/signup", { raw, headers: { "content-type": "application/json" } })
      expect(res.status, raw).toBe(400)
      expect(errorCode(res)).toBe("VALIDATION_ERROR")
    }
  })

  it("answers a non-JSON content type with 415 UNSUPPORTED_MEDIA_TYPE", async () => {
    for (const contentType of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]) {
      const res = await api.call("POST", "/v1/signup", { raw: "name=x", headers: { "content-type": contentType } })
      expect(res.status, contentType).toBe(415)
      expect(errorCode(res)).toBe("UNSUPPORTED_MEDIA_TYPE")
    }
  })

  it("answers a body over 1 MiB with 413 PAYLOAD_TOO_LARGE, with or without Content-Length", async () => {
    const big = JSON.stringify({ name: "x".repeat(1024 * 1024 + 10) })
    const res = await api.call("POST", "/v1/signup", { raw: big, headers: { "content-type": "application/json" } })
    expect(res.status).toBe(413)
    expect(errorCode(res)).toBe("PAYLOAD_TOO_LARGE")
    expect(res.body.error.details).toEqual({ limitBytes: 1024 * 1024 })

    // Chunked transfer: no Content-Length, the limit is enforced while reading.
    const chunked = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const url = new URL("/v1/signup", server.baseUrl)
      const req = request(url, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
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
  })

  it("keeps answering after bad requests", async () => {
    const res = await api.get(`/v1/agents/${agentId}`, key)
    expect(res.status).toBe(200)
  })

  it("validates path and query parameters in the envelope", async () => {
    const long = await api.get(`/v1/agents/${"a".repeat(65)}`, key)
    expect(long.status).toBe(400)
    expect(errorCode(long)).toBe("VALIDATION_ERROR")
    const weird = await api.get(`/v1/agents/${encodeURIComponent("'; DROP TABLE agents; --")}`, key)
    expect(weird.status).toBe(404)
  })
})

/** Text PostgreSQL cannot store (NUL) or that is not Unicode, refused before routing on every store. */
describe.each(storeBackends)("HTTP refuses NUL and invalid text before routing over %s", (_name, store) => {
  const ADMIN = "admin-token-for-envelope-tests-0123456789"
  let server: RunningServer
  let api: ReturnType<typeof client>
  let key: string
  let agentId: string

  beforeAll(async () => {
    server = await startServer(store(), { adminToken: ADMIN })
    api = client(server.baseUrl)
    const res = await api.post("/v1/signup", { name: "ops" })
    key = res.body.apiKey
    agentId = res.body.agentId
  })
  afterAll(() => server?.close())

  const expectRefused = (res: ApiResponse, what: string) => {
    expect(res.status, what).toBe(400)
    expect(errorCode(res), what).toBe("VALIDATION_ERROR")
    expect(Array.isArray(res.body.error.details.issues), what).toBe(true)
  }

  it("answers 400 VALIDATION_ERROR for a NUL in the path or the query string, on every route", async () => {
    const admin = { authorization: `Bearer ${ADMIN}` }
    for (
      const [method, path, headers] of [
        ["GET", "/v1/agents/%00", {}],
        ["GET", `/v1/agents/${agentId}%00`, {}],
        ["GET", "/v1/agents/%00/policy", {}],
        ["GET", "/v1/audit/aud_%00", {}],
        ["GET", "/v1/wallet/transactions?agentId=%00", {}],
        ["GET", "/v1/wallet/transactions?type=credit&agentId=a%00b", {}],
        ["GET", "/v1/wallet/invoices?status=%00", {}],
        ["GET", "/v1/admin/transactions?agentId=%00", admin],
        ["GET", "/v1/admin/agents?x%00=1", admin],
        ["GET", "/v1/services/%00", {}],
        ["GET", "/dev/checkout/%00", {}],
        ["POST", "/dev/checkout/%00/pay", {}],
        ["GET", "/v1/nope/%00", {}]
      ] as const
    ) {
      const res = await api.call(method, path, { key, headers })
      expectRefused(res, `${method} ${path}`)
    }
  })

  it("answers 400 for percent-encodings that are not UTF-8 (lone surrogates included)", async () => {
    for (const path of ["/v1/agents/%ED%A0%80", "/v1/agents/%E0%A4%A", "/v1/agents/%zz", "/v1/wallet/transactions?agentId=%ED%B0%80", "/v1/wallet/transactions?agentId=%"]) {
      expectRefused(await api.get(path, key), path)
    }
    // Well-formed text still reaches the endpoint.
    expect((await api.get(`/v1/agents/${encodeURIComponent("é😀")}`, key)).status).toBe(404)
    expect((await api.get("/v1/wallet/transactions?agentId=a+b%20c", key)).status).toBe(200)
  })

  it("answers 400 for JSON bodies whose strings hold NUL or lone surrogates, and stores nothing", async () => {
    const before = (await api.get("/v1/agents", key)).body.total
    const raw = (method: string, path: string, text: string) =>
      api.call(method, path, { key, raw: text, headers: { "content-type": "application/json" } })
    for (
      const [method, path, text] of [
        ["POST", "/v1/agents", "{\"name\":\"a\\u0000b\"}"],
        ["POST", "/v1/agents", "{\"name\":\"a\\\\\\u0000b\"}"],
        ["POST", "/v1/agents", "{\"name\":\"\\ud800\"}"],
        ["POST", "/v1/agents", "{\"name\":\"x\\udc00y\"}"],
        ["POST", "/v1/agents", "{\"na\\u0000me\":\"x\"}"],
        ["POST", "/v1/signup", "{\"name\":\"\\u0000\"}"],
        ["PATCH", `/v1/agents/${agentId}`, "{\"name\":\"ok\\u0000\"}"],
        ["POST", "/v1/registry/submit", JSON.stringify({ slug: "nul-svc", name: "x", description: "a\u0000b" })],
        ["POST", "/v1/proxy/some-service", JSON.stringify({ method: "POST", path: "/x", body: { deep: ["\u0000"] } })],
        ["POST", "/v1/capabilities/email", JSON.stringify({ to: "a@example.com", subject: "s", body: "b\u0000" })],
        ["POST", "/v1/dev/lightning/pay", JSON.stringify({ paymentRequest: "lnbcrt1\u0000" })],
        ["POST", "/v1/agents", "{\"name\":\"raw\u0000byte\"}"]
      ] as const
    ) {
      const res = await raw(method, path, text)
      expectRefused(res, `${method} ${path} ${text}`)
    }
    expect((await api.get("/v1/agents", key)).body.total).toBe(before)
    expect((await api.get(`/v1/agents/${agentId}`, key)).body.name).toBe("ops")
  })

  it("lets an escaped backslash followed by u0000 through: it is text, not NUL", async () => {
    const res = await api.call("PATCH", `/v1/agents/${agentId}`, {
      key,
      raw: "{\"name\":\"ops \\\\u0000 \\ud83d\\ude00\"}",
      headers: { "content-type": "application/json" }
    })
    expect(res.status).toBe(200)
    expect(res.body.name).toBe("ops \\u0000 😀")
    expect((await api.patch(`/v1/agents/${agentId}`, { name: "ops" }, key)).status).toBe(200)
  })
})

describe("NUL checks on deeply nested bodies", () => {
  let server: RunningServer
  let api: ReturnType<typeof client>
  let key: string

  beforeAll(async () => {
    server = await startServer(MemoryStore.layer)
    api = client(server.baseUrl)
    key = (await api.post("/v1/signup", { name: "ops" })).body.apiKey
  })
  afterAll(() => server?.close())

  it("answers 400, not 500, for a NUL at the bottom of a very deep body", async () => {
    const depth = 200_000
    const raw = `{"name":${"[".repeat(depth)}"\\u0000"${"]".repeat(depth)}}`
    const res = await api.call("POST", "/v1/agents", { key, raw, headers: { "content-type": "application/json" } })
    expect(res.status).toBe(400)
    expect(errorCode(res)).toBe("VALIDATION_ERROR")
    expect(res.body.error.details.issues[0].message).toContain("NUL")
  })
})
