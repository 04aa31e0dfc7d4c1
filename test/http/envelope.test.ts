import { request } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import { client, errorCode, type RunningServer, startServer } from "../support/server.ts"

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
        ["GET", "/"],
        ["DELETE", `/v1/agents/${agentId}`],
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
