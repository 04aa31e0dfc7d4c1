import * as Net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import { answerClientError } from "../../adapters/http/clientError.ts"
import { type RunningServer, startServer } from "../support/server.ts"

/**
 * What Node's parser refuses before any route runs (431 headers too large,
 * 400 malformed, 408 request timeout) is answered in the envelope with a
 * request id, in `X-Request-Id` and `error.requestId`, like every answer.
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** The raw answer to `request` sent on a fresh connection. */
const raw = (port: number, request: string) =>
  new Promise<string>((resolve, reject) => {
    const socket = Net.connect({ port, host: "127.0.0.1" }, () => socket.write(request))
    let text = ""
    socket.on("data", (chunk) => (text += chunk.toString()))
    socket.on("end", () => resolve(text))
    socket.on("error", reject)
  })

const parse = (answer: string) => {
  const [head, body] = answer.split("\r\n\r\n")
  const headers = Object.fromEntries(
    head!.split("\r\n").slice(1).map((line) => {
      const at = line.indexOf(":")
      return [line.slice(0, at).toLowerCase(), line.slice(at + 1).trim()]
    })
  )
  return { status: Number(head!.split(" ")[1]), headers, body: JSON.parse(body!) as { error: Record<string, unknown> } }
}

describe("parser-level refusals carry a request id", () => {
  let server: RunningServer
  let port: number
  beforeAll(async () => {
    server = await startServer(MemoryStore.layer)
    port = Number(new URL(server.baseUrl).port)
  })
  afterAll(() => server.close())

  it("431: headers over the limit", async () => {
    const res = await fetch(`${server.baseUrl}/v1/agents?x=${"y".repeat(20_000)}`)
    expect(res.status).toBe(431)
    const id = res.headers.get("x-request-id")
    expect(id).toMatch(UUID)
    expect(await res.json()).toEqual({
      error: { code: "HEADERS_TOO_LARGE", message: expect.any(String), requestId: id }
    })
  })

  it("400: a malformed request; each answer its own id", async () => {
    const first = parse(await raw(port, "NOT A REQUEST\r\n\r\n"))
    const second = parse(await raw(port, "GET / HTTP/1.1\r\nBad Header\r\n\r\n"))
    for (const answer of [first, second]) {
      expect(answer.status).toBe(400)
      expect(answer.headers["x-request-id"]).toMatch(UUID)
      expect(answer.body.error).toMatchObject({ code: "VALIDATION_ERROR", requestId: answer.headers["x-request-id"] })
    }
    expect(first.headers["x-request-id"]).not.toBe(second.headers["x-request-id"])
  })

  it("408: the request did not arrive in time (the answer written on a real socket)", async () => {
    const listener = Net.createServer((socket) => {
      // What the client sent is read and dropped, as Node's parser would have.
      socket.resume()
      answerClientError(Object.assign(new Error("timeout"), { code: "ERR_HTTP_REQUEST_TIMEOUT" }), socket)
    })
    await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve))
    try {
      const answer = parse(await raw((listener.address() as Net.AddressInfo).port, "GET / HTTP/1.1\r\n"))
      expect(answer.status).toBe(408)
      expect(answer.headers["x-request-id"]).toMatch(UUID)
      expect(answer.body.error).toMatchObject({ code: "REQUEST_TIMEOUT", requestId: answer.headers["x-request-id"] })
    } finally {
      await new Promise((resolve) => listener.close(resolve))
    }
  })
})
