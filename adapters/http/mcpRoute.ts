import { ByteSize, Effect, Layer } from "effect"
import { HttpIncomingMessage, HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "effect/http"
import { DEFAULT_BODY_LIMIT_BYTES, fromCause } from "./envelope.ts"
import { envelopeResponse } from "./errors.ts"
import { loadOnceUnlessFailed } from "../lazyLoad.ts"
import { type Backend, httpBackend } from "../mcp/backend.ts"

/**
 * `/mcp`: the MCP server over Streamable HTTP, stateless (no session: each
 * POST carries one JSON-RPC message and gets its JSON answer). The caller
 * authenticates as on the rest of the API, `Authorization: Bearer sk_agt_…`;
 * the key is checked by the API itself (one GET /v1/capabilities per /mcp
 * request, which also counts against the agent's rate limit) and every tool
 * call is a request of the API with the same key (backend.ts), so a missing
 * or unknown key gets the API's own 401, a killed key and a spent rate limit
 * its 403 or 429 (on a tool call: a tool error with the same code, which the
 * model can read), and the spend pipeline is the one every call takes.
 * GET and DELETE (server-sent streams, sessions) are 405: there are none.
 */

export const MCP_PATH = "/mcp"

const bearerOf = (header: string | undefined): string | undefined => {
  const match = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header)
  return match?.[1]
}

/** The API answering refusals (401, 403, 429) for /mcp exactly as it does elsewhere. */
const passThrough = (status: number, body: unknown, retryAfter: string | null) =>
  HttpServerResponse.jsonUnsafe(body, { status, headers: retryAfter === null ? {} : { "retry-after": retryAfter } })

/** Whether the body is one `tools/call` request, or a batch of nothing else. */
const onlyToolCalls = (body: Uint8Array): boolean => {
  let parsed: unknown
  try {
    parsed = JSON.parse(new TextDecoder().decode(body))
  } catch {
    return false
  }
  const messages = Array.isArray(parsed) ? parsed : [parsed]
  return messages.length > 0 &&
    messages.every((m) => typeof m === "object" && m !== null && (m as { readonly method?: unknown }).method === "tools/call")
}

/** What /mcp needs of the MCP SDK. */
export interface McpSdk {
  readonly Transport: typeof import("@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js").WebStandardStreamableHTTPServerTransport
  readonly makeMcpServer: typeof import("../mcp/server.ts").makeMcpServer
}

/** The MCP SDK's import. */
export const importMcpSdk = (): Promise<McpSdk> =>
  Promise.all([
    import("@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"),
    import("../mcp/server.ts")
  ]).then(([transport, server]) => ({
    Transport: transport.WebStandardStreamableHTTPServerTransport,
    makeMcpServer: server.makeMcpServer
  }))

const handle = (
  selfUrl: string,
  limitBytes: number,
  backendFor: (key: string) => Backend,
  sdk: () => Promise<McpSdk>
) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const key = bearerOf(request.headers["authorization"])
    if (key === undefined) {
      return envelopeResponse("UNAUTHORIZED", "Missing API key: send Authorization: Bearer sk_agt_…", undefined, {
        "www-authenticate": "Bearer"
      })
    }
    const declared = request.headers["content-length"]
    if (declared !== undefined && Number(declared) > limitBytes) {
      return envelopeResponse("PAYLOAD_TOO_LARGE", "Request body is too large", { limitBytes }, { connection: "close" })
    }
    const body = new Uint8Array(
      yield* request.arrayBuffer.pipe(Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(limitBytes)))
    )
    const backend = backendFor(key)
    const probe = yield* Effect.promise(() => backend.get("/v1/capabilities"))
    // An unknown key never gets in. A killed or rate-limited agent is refused here too, except on
    // tool calls: there the tool's own call of the API is refused the same way, and the model
    // reads that refusal as a tool error instead of a failed connection.
    if (probe.status === 401 || ((probe.status === 403 || probe.status === 429) && !onlyToolCalls(body))) {
      return passThrough(probe.status, probe.body, probe.retryAfter)
    }
    const headers = new Headers()
    for (const [name, value] of Object.entries(request.headers)) if (typeof value === "string") headers.set(name, value)
    const webRequest = new Request(`${selfUrl}${MCP_PATH}`, { method: "POST", headers, body })
    const response = yield* Effect.promise(async () => {
      const { Transport, makeMcpServer } = await sdk()
      const transport = new Transport({ enableJsonResponse: true })
      const server = makeMcpServer(backend)
      await server.connect(transport)
      try {
        const answer = await transport.handleRequest(webRequest)
        // The answer is complete (JSON, not a stream): read it before the server is closed.
        const bytes = new Uint8Array(await answer.arrayBuffer())
        return new Response(answer.status === 204 || answer.status === 202 ? null : bytes, {
          status: answer.status,
          headers: answer.headers
        })
      } finally {
        await server.close()
      }
    })
    return HttpServerResponse.fromWeb(response)
  }).pipe(Effect.catchCause((cause) => Effect.orDie(fromCause(cause, limitBytes))))

const notAllowed = HttpServerResponse.jsonUnsafe(
  { error: { code: "METHOD_NOT_ALLOWED", message: "The MCP endpoint is stateless: POST only" } },
  { status: 405, headers: { allow: "POST" } }
)

/** Where this server answers, for the MCP adapter's calls to its own API (a wildcard address is reached on loopback). */
const selfUrlOf = (address: Parameters<typeof HttpServer.formatAddress>[0]): string => {
  if (address._tag === "UnixPathAddress") throw new Error("The MCP endpoint needs a TCP address")
  return HttpServer.formatAddress(address).replace("//0.0.0.0:", "//127.0.0.1:").replace("//[::]:", "//[::1]:").replace(/\/+$/, "")
}

/**
 * Mounts /mcp on the server's router. The MCP SDK (and its schema libraries)
 * is loaded by the first /mcp request, so a server nobody reaches over MCP
 * never loads it; a failed load is not kept: that request answers 500 and
 * the next one loads again. `importSdk` (for tests) stands for the import.
 */
export const mountMcp = (
  options: { readonly bodyLimitBytes?: number; readonly importSdk?: () => Promise<McpSdk> } = {}
): Layer.Layer<never, never, HttpRouter.HttpRouter | HttpServer.HttpServer> =>
  HttpRouter.use((router) =>
    Effect.gen(function*() {
      const server = yield* HttpServer.HttpServer
      const selfUrl = selfUrlOf(server.address)
      const limitBytes = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES
      const loadSdk = loadOnceUnlessFailed(options.importSdk ?? importMcpSdk)
      yield* router.add("POST", MCP_PATH, handle(selfUrl, limitBytes, (key) => httpBackend(selfUrl, key), loadSdk))
      yield* router.add("GET", MCP_PATH, Effect.succeed(notAllowed))
      yield* router.add("DELETE", MCP_PATH, Effect.succeed(notAllowed))
    })
  )
