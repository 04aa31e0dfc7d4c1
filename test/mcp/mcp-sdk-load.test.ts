import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { HttpRouter, HttpServer, HttpServerResponse } from "effect/http"
import { createServer } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { importMcpSdk, MCP_PATH, mountMcp } from "../../adapters/http/mcpRoute.ts"

/**
 * /mcp loads the MCP SDK with its first request. A load that fails (here the
 * first import, as a package missing for a moment would) answers that
 * request 500 in the error envelope, and is not kept: the next request loads
 * again and is served.
 */

const importSdk = {
  calls: 0,
  load: (): ReturnType<typeof importMcpSdk> => {
    importSdk.calls += 1
    return importSdk.calls === 1
      ? Promise.reject(Object.assign(new Error("Cannot find package '@modelcontextprotocol/sdk'"), { code: "ERR_MODULE_NOT_FOUND" }))
      : importMcpSdk()
  }
}

let scope: Scope.Closeable
let baseUrl: string

beforeAll(async () => {
  scope = Effect.runSync(Scope.make())
  // /mcp checks the caller's key with GET /v1/capabilities on its own server: here any key passes.
  const capabilities = HttpRouter.use((router) =>
    router.add("GET", "/v1/capabilities", Effect.succeed(HttpServerResponse.jsonUnsafe({ capabilities: [] })))
  )
  const app = HttpRouter.serve(Layer.mergeAll(mountMcp({ importSdk: importSdk.load }), capabilities), {
    disableLogger: true,
    disableListenLog: true
  }).pipe(Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })))
  const context = await Effect.runPromise(Layer.buildWithScope(app, scope))
  const address = Context.get(context, HttpServer.HttpServer).address
  if (address._tag === "UnixPathAddress") throw new Error("expected a TCP address")
  baseUrl = `http://127.0.0.1:${address.port}`
})
afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)))

const initialize = async () => {
  const response = await fetch(`${baseUrl}${MCP_PATH}`, {
    method: "POST",
    headers: {
      authorization: "Bearer sk_agt_any",
      "content-type": "application/json",
      accept: "application/json, text/event-stream"
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "test", version: "1.0.0" } }
    })
  })
  return { status: response.status, body: await response.json() as any }
}

describe("/mcp: the lazy load of the MCP SDK", () => {
  it("a failed load answers 500 in the envelope and is not kept: the next request loads again and is served", async () => {
    const failed = await initialize()
    expect(failed).toEqual({ status: 500, body: { error: { code: "INTERNAL", message: "Internal error" } } })
    const served = await initialize()
    expect(served.status).toBe(200)
    expect(served.body).toMatchObject({ jsonrpc: "2.0", id: 1, result: { serverInfo: expect.any(Object) } })
    expect(importSdk.calls).toBe(2)
    // Loaded, it is kept.
    expect((await initialize()).status).toBe(200)
    expect(importSdk.calls).toBe(2)
  })
})
