import { Effect, Exit, Fiber, ManagedRuntime } from "effect"
import { createServer, type IncomingMessage, type Server } from "node:http"
import type { AddressInfo, Socket } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type UpstreamAnswer, UpstreamClient, type UpstreamRequest } from "../../adapters/net/upstreamClient.ts"

/**
 * The upstream client of metered calls, against a local HTTP server that
 * records what it receives: the request arrives as given (method, path,
 * query, headers, body, multipart forms), the answer is read whole or up to
 * the bound its status allows, and every way an exchange ends early — the
 * deadline, an interruption, an answer over the bound — closes the
 * connection, so nothing is left running upstream.
 */

interface Received {
  readonly method: string
  readonly url: string
  readonly headers: IncomingMessage["headers"]
  readonly body: Buffer
}

let server: Server
let base = ""
const received: Array<Received> = []
const sockets = new Set<Socket>()
/** Whether the connection that carried the request with this `x-test-id` has closed. */
const closedById = new Map<string, boolean>()
/** One client for the whole file, alive throughout: a connection it drops is closed by the client, not by its end. */
const client = ManagedRuntime.make(UpstreamClient.layer)

beforeAll(async () => {
  server = createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    const id = request.headers["x-test-id"]
    if (typeof id === "string") {
      closedById.set(id, false)
      request.socket.once("close", () => closedById.set(id, true))
    }
    request.on("end", () => {
      received.push({ method: request.method!, url: request.url!, headers: request.headers, body: Buffer.concat(chunks) })
      const path = new URL(request.url!, "http://x").pathname
      switch (path) {
        case "/json":
          response.writeHead(200, { "content-type": "application/json", "x-upstream": "one", "set-cookie": ["a=1", "b=2"] })
          response.end(JSON.stringify({ ok: true }))
          return
        case "/chunked":
          response.writeHead(200, { "content-type": "text/plain" })
          response.write("abc")
          response.write("def")
          response.end("ghi")
          return
        case "/declared-large":
          response.writeHead(200, { "content-length": "5000" })
          response.end("x".repeat(5000))
          return
        case "/endless": {
          // Writes until the client goes away.
          response.writeHead(200, { "content-type": "text/plain" })
          const timer = setInterval(() => response.write("y".repeat(1000)), 2)
          response.on("close", () => clearInterval(timer))
          return
        }
        case "/error":
          response.writeHead(503, { "content-type": "application/json" })
          response.end(JSON.stringify({ error: { message: "z".repeat(3000) } }))
          return
        case "/head-then-break":
          response.writeHead(502, { "content-type": "application/json", "content-length": "100" })
          response.write("{\"err")
          setTimeout(() => response.socket?.destroy(), 10)
          return
        case "/hang":
          // Never answers; the client's deadline must end it.
          return
        case "/slow":
          setTimeout(() => response.writeHead(200).end("late"), 300)
          return
        default:
          response.writeHead(404).end()
      }
    })
  })
  server.on("connection", (socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})

afterAll(async () => {
  await client.dispose()
  for (const socket of sockets) socket.destroy()
  return new Promise<void>((resolve) => server.close(() => resolve()))
})

const request = (path: string, overrides: Partial<UpstreamRequest> = {}): UpstreamRequest => ({
  url: new URL(base + path),
  method: "GET",
  headers: {},
  timeoutMs: 2_000,
  maxBytes: () => 1_000,
  ...overrides
})

const run = <A, E>(effect: Effect.Effect<A, E, UpstreamClient>) => client.runPromiseExit(effect)

const send = (r: UpstreamRequest) => run(Effect.flatMap(UpstreamClient, (client) => client.send(r)))

const answerOf = (exit: Exit.Exit<UpstreamAnswer, unknown>): UpstreamAnswer => {
  if (Exit.isFailure(exit)) throw new Error(`expected an answer, got ${String(exit.cause)}`)
  return exit.value
}

const failureTag = (exit: Exit.Exit<unknown, { readonly _tag: string }>) => {
  expect(Exit.isFailure(exit)).toBe(true)
  const reason = Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail") : undefined
  return (reason as { readonly error: { readonly _tag: string; readonly status?: number } } | undefined)?.error
}

const waitFor = async (what: string, check: () => boolean, timeoutMs = 3_000) => {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

describe("the upstream client", () => {
  it("sends the method, path, query, headers and body as given, and reads the answer whole", async () => {
    received.length = 0
    const answer = answerOf(await send(request("/json?q=a%20b&n=1", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer sk-test", "X-Custom": "yes" },
      body: JSON.stringify({ hello: "world" })
    })))
    expect(answer.status).toBe(200)
    expect(answer.overflow).toBe(false)
    expect(JSON.parse(Buffer.from(answer.bytes).toString("utf8"))).toEqual({ ok: true })
    // Lower-case names; a repeated header's values joined.
    expect(answer.headers["content-type"]).toBe("application/json")
    expect(answer.headers["x-upstream"]).toBe("one")
    expect(answer.headers["set-cookie"]).toBe("a=1, b=2")
    const [got] = received
    expect(got!.method).toBe("POST")
    expect(got!.url).toBe("/json?q=a%20b&n=1")
    expect(got!.headers["authorization"]).toBe("Bearer sk-test")
    expect(got!.headers["x-custom"]).toBe("yes")
    expect(got!.headers["host"]).toBe(new URL(base).host)
    // Nothing of a trace context goes upstream.
    expect(got!.headers["traceparent"]).toBeUndefined()
    expect(JSON.parse(got!.body.toString("utf8"))).toEqual({ hello: "world" })
  })

  it("sends a form as multipart/form-data, its file included", async () => {
    received.length = 0
    const form = new FormData()
    form.append("model", "whisper-1")
    form.append("file", new Blob([new Uint8Array([1, 2, 3, 4])], { type: "audio/wav" }), "clip.wav")
    answerOf(await send(request("/json", { method: "POST", body: form })))
    const [got] = received
    expect(got!.headers["content-type"]).toMatch(/^multipart\/form-data; boundary=/)
    const text = got!.body.toString("latin1")
    expect(text).toContain("name=\"model\"")
    expect(text).toContain("whisper-1")
    expect(text).toContain("filename=\"clip.wav\"")
    expect(text).toContain("\u0001\u0002\u0003\u0004")
  })

  it("a chunked answer is joined; one past the bound is cut there, declared or not, and its connection dropped", async () => {
    expect(Buffer.from(answerOf(await send(request("/chunked"))).bytes).toString()).toBe("abcdefghi")

    const declared = answerOf(await send(request("/declared-large")))
    expect(declared.overflow).toBe(true)
    // A declared excess is not read at all.
    expect(declared.bytes.length).toBe(0)

    const endless = answerOf(await send(request("/endless", { headers: { "x-test-id": "endless" } })))
    expect(endless.overflow).toBe(true)
    expect(endless.bytes.length).toBe(1_000)
    await waitFor("the endless answer's connection to close", () => closedById.get("endless") === true)
  })

  it("the bound follows the status: an error answer is read up to its own bound", async () => {
    const answer = answerOf(await send(request("/error", { maxBytes: (status) => (status === 200 ? 100_000 : 16) })))
    expect(answer.status).toBe(503)
    expect(answer.overflow).toBe(true)
    expect(Buffer.from(answer.bytes).toString()).toBe("{\"error\":{\"messa")
  })

  it("a connection refused is unreachable; a head followed by a broken body is broken, with the status", async () => {
    const probe = createServer()
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve))
    const port = (probe.address() as AddressInfo).port
    await new Promise<void>((resolve) => probe.close(() => resolve()))
    const refused = failureTag(await send({ ...request("/"), url: new URL(`http://127.0.0.1:${port}/`) }))
    expect(refused?._tag).toBe("UpstreamUnreachable")

    const broken = failureTag(await send(request("/head-then-break")))
    expect(broken?._tag).toBe("UpstreamBroken")
    expect(broken?.status).toBe(502)
  })

  it("the deadline covers the whole exchange: a server that never answers times out and its connection is closed", async () => {
    const started = Date.now()
    const exit = await send(request("/hang", { timeoutMs: 200, headers: { "x-test-id": "hang" } }))
    expect(failureTag(exit)?._tag).toBe("UpstreamTimeout")
    expect(Date.now() - started).toBeLessThan(1_500)
    // At once: well before undici's own backstop (the deadline plus a second).
    await waitFor("the hung request's connection to close", () => closedById.get("hang") === true, 500)
  })

  it("an interrupted exchange closes its connection; the client serves the next one", async () => {
    const exit = await run(Effect.gen(function*() {
      const upstream = yield* UpstreamClient
      const fiber = yield* Effect.forkChild(upstream.send(request("/slow", { timeoutMs: 5_000, headers: { "x-test-id": "slow" } })))
      yield* Effect.sleep("50 millis")
      yield* Fiber.interrupt(fiber)
      return yield* upstream.send(request("/json"))
    }))
    expect(answerOf(exit).status).toBe(200)
    await waitFor("the interrupted request's connection to close", () => closedById.get("slow") === true)
  })
})
