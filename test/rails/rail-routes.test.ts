import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { createServer } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { mountRailRoutes } from "../../adapters/http/railRoutes.ts"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import { PaymentSink, railHtml, railJson, type RailRoute, RailRouteRefused } from "../../src/ports/Rails.ts"

/**
 * The port between the rails and the HTTP adapter: a rail describes a route
 * (method, path, body limit, handler over plain bytes), the adapter mounts it
 * and answers in the API's error envelope.
 */

const routes: ReadonlyArray<RailRoute> = [
  {
    method: "POST",
    path: "/echo/:name",
    bodyLimitBytes: 16,
    handle: (request) =>
      Effect.succeed(railJson({ name: request.params.name, bytes: request.body.length, tag: request.headers["x-tag"] }, 201))
  },
  {
    method: "GET",
    path: "/page",
    handle: () => Effect.succeed(railHtml("<p>hello</p>"))
  },
  {
    method: "POST",
    path: "/refuse",
    handle: () => Effect.fail(new RailRouteRefused({ code: "NOT_FOUND", message: "No such thing" }))
  },
  {
    method: "POST",
    path: "/broken",
    handle: () => Effect.die(new Error("the sink is down"))
  }
]

const sink = Layer.succeed(PaymentSink, {
  record: () => Effect.succeed("unknown" as const),
  recordExpiry: () => Effect.void,
  loadCursor: () => Effect.succeed(null),
  saveCursor: () => Effect.void
})

describe("routes a rail owns, mounted by the HTTP adapter", () => {
  let scope: Scope.Closeable
  let baseUrl: string

  beforeAll(async () => {
    scope = Effect.runSync(Scope.make())
    const app = HttpRouter.serve(mountRailRoutes(routes, { bodyLimitBytes: 1024 }), { disableLogger: true, disableListenLog: true }).pipe(
      Layer.provide([sink, MemoryStore.layer]),
      Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
    )
    const context = await Effect.runPromise(Layer.buildWithScope(app, scope))
    const address = Context.get(context, HttpServer.HttpServer).address
    if (address._tag === "UnixPathAddress") throw new Error("expected a TCP address")
    baseUrl = `http://127.0.0.1:${address.port}`
  })
  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)))

  it("hands the rail its path parameters, headers and body bytes, and answers its JSON with its status", async () => {
    const response = await fetch(`${baseUrl}/echo/ada`, { method: "POST", headers: { "x-tag": "t1" }, body: "0123456789" })
    expect(response.status).toBe(201)
    expect(await response.json()).toEqual({ name: "ada", bytes: 10, tag: "t1" })
  })

  it("answers a body over the route's own limit 413 in the envelope, with that limit", async () => {
    const response = await fetch(`${baseUrl}/echo/ada`, { method: "POST", body: "x".repeat(17) })
    expect(response.status).toBe(413)
    expect(await response.json()).toEqual({
      error: { code: "PAYLOAD_TOO_LARGE", message: "Request body is too large", details: { limitBytes: 16 } }
    })
  })

  it("serves a rail's HTML page", async () => {
    const response = await fetch(`${baseUrl}/page`)
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("text/html; charset=utf-8")
    expect(await response.text()).toBe("<p>hello</p>")
  })

  it("answers a refusal in the error envelope with its code's status, and a failure 500 INTERNAL without internals", async () => {
    const refused = await fetch(`${baseUrl}/refuse`, { method: "POST" })
    expect(refused.status).toBe(404)
    expect(await refused.json()).toEqual({ error: { code: "NOT_FOUND", message: "No such thing" } })

    const broken = await fetch(`${baseUrl}/broken`, { method: "POST" })
    expect(broken.status).toBe(500)
    const text = await broken.text()
    expect(JSON.parse(text)).toEqual({ error: { code: "INTERNAL", message: "Internal error" } })
    expect(text).not.toContain("sink is down")
  })
})
