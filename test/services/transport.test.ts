import { upstreamLayers } from "../support/upstreamLayers.ts"
import { Effect, Exit, Layer } from "effect"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Transport from "../../adapters/services/transport.ts"
import { ProviderFailure } from "../../src/capabilities/Provider.ts"
import { ServiceTransport } from "../../src/ports/ServiceTransport.ts"
import type { Service } from "../../src/services/Service.ts"

/**
 * The proxy's transport reads an answer whose Content-Length is within its
 * bound at once, and any other answer chunk by chunk: both give the same
 * body, an answer over the bound is refused either way (a declared one
 * before its body is read), and an answer cut short of its declared length
 * is a network failure, never a short body.
 */

const LIMIT = 1_000
const json = (size: number) => JSON.stringify({ pad: "x".repeat(Math.max(0, size - 10)) })

let server: Server
let base = ""
const received: Array<string> = []

beforeAll(async () => {
  server = createServer((request, response) => {
    received.push(`${request.method} ${request.url}`)
    request.resume()
    request.on("end", () => {
      const answer = json(300)
      switch (request.url) {
        case "/declared":
          response.writeHead(200, { "content-type": "application/json", "content-length": String(Buffer.byteLength(answer)) })
          response.end(answer)
          return
        case "/declared-at-limit": {
          const exact = json(LIMIT)
          response.writeHead(200, { "content-type": "application/json", "content-length": String(Buffer.byteLength(exact)) })
          response.end(exact)
          return
        }
        case "/chunked":
          response.writeHead(200, { "content-type": "application/json" })
          response.write(answer.slice(0, 100))
          response.write(answer.slice(100, 200))
          response.end(answer.slice(200))
          return
        case "/declared-too-large": {
          const big = json(5 * LIMIT)
          response.writeHead(200, { "content-type": "application/json", "content-length": String(Buffer.byteLength(big)) })
          response.end(big)
          return
        }
        case "/chunked-too-large":
          response.writeHead(200, { "content-type": "application/json" })
          for (let i = 0; i < 5; i++) response.write("x".repeat(LIMIT))
          response.end()
          return
        case "/cut-short":
          response.writeHead(200, { "content-type": "application/json", "content-length": "500" })
          response.write("{\"partial\":")
          setTimeout(() => response.socket?.destroy(), 20)
          return
        default:
          response.writeHead(404).end()
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

const service = (): Service => ({
  slug: "upstream",
  name: "Upstream",
  description: "a local upstream",
  baseUrl: base,
  capabilities: ["search"],
  endpoints: [],
  origin: "operator"
})

const send = (path: string) =>
  Effect.runPromiseExit(
    Effect.gen(function*() {
      const transport = yield* ServiceTransport
      return yield* transport.send(service(), { method: "POST", path, query: {}, headers: {}, body: { q: 1 } })
    }).pipe(
      Effect.provide(
        Transport.layer({ operatorServices: [{ service: service(), credentials: {} }], maxResponseBytes: LIMIT }).pipe(
          Layer.provide(upstreamLayers)
        )
      )
    )
  )

const failureOf = (exit: Exit.Exit<unknown, unknown>) => {
  expect(Exit.isFailure(exit)).toBe(true)
  const error = Exit.isFailure(exit) ? exit.cause.reasons.find((reason) => reason._tag === "Fail") : undefined
  expect(error?._tag).toBe("Fail")
  const failure = (error as { readonly error: unknown }).error
  expect(failure).toBeInstanceOf(ProviderFailure)
  return failure as ProviderFailure
}

describe("the proxy transport's answers", () => {
  it("a declared length within the bound and a chunked answer give the same body", async () => {
    const declared = await send("/declared")
    const chunked = await send("/chunked")
    expect(Exit.isSuccess(declared) && Exit.isSuccess(chunked)).toBe(true)
    if (Exit.isSuccess(declared) && Exit.isSuccess(chunked)) {
      expect(declared.value.status).toBe(200)
      expect(declared.value.body).toEqual(JSON.parse(json(300)))
      expect(chunked.value.body).toEqual(declared.value.body)
      // The length header is the transport's business, not the caller's.
      expect(declared.value.headers["content-length"]).toBeUndefined()
    }
    const atLimit = await send("/declared-at-limit")
    expect(Exit.isSuccess(atLimit) && atLimit.value.body).toEqual(JSON.parse(json(LIMIT)))
  })

  it("an answer over the bound is refused, declared or not", async () => {
    for (const path of ["/declared-too-large", "/chunked-too-large"]) {
      const failure = failureOf(await send(path))
      expect(failure.reason, path).toBe("too_large")
      expect(failure.message).toContain(`larger than ${LIMIT} bytes`)
    }
  })

  it("an answer cut short of its declared length is a network failure, not a short body", async () => {
    const failure = failureOf(await send("/cut-short"))
    expect(failure.reason).toBe("network")
    // The transport still serves the next call.
    expect(Exit.isSuccess(await send("/declared"))).toBe(true)
  })
})
