import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { Effect, Layer } from "effect"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import * as Espeak from "../../adapters/providers/speak/espeak.ts"
import { MCP_PATH } from "../../adapters/http/mcpRoute.ts"
import { routesOutsideApi } from "../../src/access/matrix.ts"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { client, type RunningServer, startServer } from "../support/server.ts"

/**
 * The MCP server, proven with the official MCP client over both transports
 * against a real server whose `speak` capability is the built-in eSpeak NG
 * provider (run for real, no network): the tools listed, a paid call charged
 * to the wallet, and policy refusals read as tool errors.
 */

const STDIO_ENTRY = fileURLToPath(new URL("../../adapters/mcp/stdio.ts", import.meta.url))
const ADMIN = "admin-token-for-the-mcp-tests-0123456789"
const PER_1K_CHARS = { per: "1k_chars", priceMicroUsd: 15_000n } as const

let server: RunningServer
let api: ReturnType<typeof client>

beforeAll(async () => {
  const espeak = await Effect.runPromise(Espeak.make({ unitPrice: PER_1K_CHARS }))
  server = await startServer(MemoryStore.layer, { providers: Layer.succeed(Providers, { all: [espeak] }), adminToken: ADMIN })
  api = client(server.baseUrl)
}, 30_000)

afterAll(async () => {
  await server?.close()
})

/** A signed-up owner whose wallet holds `cents`, and a second agent of the same account. */
const account = async (cents: bigint) => {
  const signup = await api.post("/v1/signup", { name: "ops" })
  expect(signup.status).toBe(201)
  if (cents > 0n) await server.run(Effect.gen(function*() {
    yield* (yield* Wallets).credit({
      accountId: signup.body.accountId as AccountId,
      key: "seed",
      pocket: "usd",
      amount: cents * 10_000n,
      description: "seed"
    })
  }))
  const worker = await api.post("/v1/agents", { name: "worker" }, signup.body.apiKey)
  expect(worker.status).toBe(201)
  return {
    owner: signup.body as { apiKey: string; accountId: string },
    worker: worker.body as { apiKey: string; id: string }
  }
}

const policy = (workerId: string, ownerKey: string, body: Record<string, unknown>) =>
  api.put(`/v1/agents/${workerId}/policy`, { maxPerCallUsdCents: null, maxPerDayUsdCents: null, allowedCapabilities: null, ...body }, ownerKey)

const httpClient = async (key: string) => {
  const mcp = new Client({ name: "test", version: "1.0.0" })
  await mcp.connect(new StreamableHTTPClientTransport(new URL("/mcp", server.baseUrl), {
    requestInit: { headers: { authorization: `Bearer ${key}` } }
  }))
  return mcp
}

const stdioClient = async (key: string) => {
  const mcp = new Client({ name: "test", version: "1.0.0" })
  await mcp.connect(new StdioClientTransport({
    command: process.execPath,
    args: [STDIO_ENTRY],
    env: { SPENDGATE_API_KEY: key, SPENDGATE_URL: server.baseUrl, PATH: process.env["PATH"] ?? "" },
    stderr: "ignore"
  }))
  return mcp
}

const errorOf = (result: Awaited<ReturnType<Client["callTool"]>>) => {
  expect(result.isError).toBe(true)
  const content = result.content as ReadonlyArray<{ type: string; text: string }>
  return JSON.parse(content[0]!.text) as { error: { code: string; message: string; details?: Record<string, unknown> }; status: number }
}

const spendable = async (key: string) => (await api.get("/v1/wallet", key)).body.balanceUsdCents as number

describe.each([
  ["Streamable HTTP at /mcp", httpClient],
  ["stdio", stdioClient]
] as const)("MCP over %s", (_name, connect) => {
  it("lists the capability tools with their JSON Schemas and the wallet tools", async () => {
    const { worker } = await account(100n)
    const mcp = await connect(worker.apiKey)
    try {
      const { tools } = await mcp.listTools()
      const names = tools.map((t) => t.name).sort()
      // Only capabilities with a configured provider: here speak.
      expect(names).toEqual(["estimate_cost", "list_transactions", "speak", "wallet_balance"])
      const speak = tools.find((t) => t.name === "speak")!
      expect(speak.inputSchema).toMatchObject({
        type: "object",
        properties: { text: { type: "string", minLength: 1, maxLength: 4096 } },
        required: ["text"]
      })
      // An optional key is just its type: the API takes it absent, not null.
      const voice = (speak.inputSchema.properties as Record<string, unknown>)["voice"]
      expect(voice).toEqual({ type: "string", minLength: 1, maxLength: 64 })
    } finally {
      await mcp.close()
    }
  }, 30_000)

  it("lists only the capabilities the agent's policy allows", async () => {
    const { owner, worker } = await account(0n)
    expect((await policy(worker.id, owner.apiKey, { allowedCapabilities: ["reason"] })).status).toBe(200)
    const mcp = await connect(worker.apiKey)
    try {
      expect((await mcp.listTools()).tools.map((t) => t.name).sort()).toEqual(["estimate_cost", "list_transactions", "wallet_balance"])
      expect((await policy(worker.id, owner.apiKey, { allowedCapabilities: ["reason", "speak"] })).status).toBe(200)
      expect((await mcp.listTools()).tools.map((t) => t.name).sort()).toEqual(["estimate_cost", "list_transactions", "speak", "wallet_balance"])
      // Asking charged nothing.
      const listed = await mcp.callTool({ name: "list_transactions", arguments: {} })
      expect((listed.structuredContent as { transactions: ReadonlyArray<unknown> }).transactions).toEqual([])
    } finally {
      await mcp.close()
    }
  }, 30_000)

  it("charges a tool call to the wallet, once, and lists it", async () => {
    const { worker } = await account(100n)
    const mcp = await connect(worker.apiKey)
    try {
      const before = await spendable(worker.apiKey)
      // A model that sends null for an optional argument is not refused for it.
      const result = await mcp.callTool({ name: "speak", arguments: { text: "Hello from the gateway", voice: null } })
      expect(result.isError).toBeFalsy()
      const body = result.structuredContent as { data: { mimeType: string; audio: string }; metadata: { chargedUsdCents: number } }
      expect(body.data.mimeType).toBe("audio/wav")
      expect(body.data.audio.length).toBeGreaterThan(100)
      const after = await spendable(worker.apiKey)
      expect(after).toBeLessThan(before)
      expect(before - after).toBeCloseTo(body.metadata.chargedUsdCents, 6)

      const balance = await mcp.callTool({ name: "wallet_balance", arguments: {} })
      expect(balance.isError).toBeFalsy()
      expect((balance.structuredContent as { balanceUsdCents: number }).balanceUsdCents).toBeCloseTo(after, 6)

      const listed = await mcp.callTool({ name: "list_transactions", arguments: { type: "charge" } })
      expect(listed.isError).toBeFalsy()
      const { transactions } = listed.structuredContent as { transactions: ReadonlyArray<{ capability: string; agentId: string }> }
      expect(transactions).toHaveLength(1)
      expect(transactions[0]).toMatchObject({ capability: "speak", agentId: worker.id })
    } finally {
      await mcp.close()
    }
  }, 30_000)

  it("estimates a call with estimate_cost, charging nothing, and the call that follows agrees", async () => {
    const { owner, worker } = await account(100n)
    const mcp = await connect(worker.apiKey)
    try {
      const listed = (await mcp.listTools()).tools.find((t) => t.name === "estimate_cost")!
      expect(listed.inputSchema).toMatchObject({ required: ["capability", "input"], properties: { capability: { enum: ["speak"] } } })
      const before = await spendable(worker.apiKey)
      const estimate = await mcp.callTool({ name: "estimate_cost", arguments: { capability: "speak", input: { text: "Hello", voice: null } } })
      expect(estimate.isError).toBeFalsy()
      const body = estimate.structuredContent as { provider: string; quotedUsdCents: number; allowed: boolean; remainingTodayUsdCents: number | null }
      expect(body).toMatchObject({ capability: "speak", provider: "espeak", allowed: true, remainingTodayUsdCents: null })
      expect(await spendable(worker.apiKey)).toBe(before)
      const called = await mcp.callTool({ name: "speak", arguments: { text: "Hello" } })
      expect(called.isError).toBeFalsy()
      expect((called.structuredContent as { metadata: { provider: string; quotedUsdCents: number } }).metadata)
        .toMatchObject({ provider: body.provider, quotedUsdCents: body.quotedUsdCents })

      // A refusal is the estimate's answer, not a tool error; the call then meets the same code.
      expect((await policy(worker.id, owner.apiKey, { allowedCapabilities: ["reason"] })).status).toBe(200)
      const refused = await mcp.callTool({ name: "estimate_cost", arguments: { capability: "speak", input: { text: "Hello" } } })
      expect(refused.isError).toBeFalsy()
      expect(refused.structuredContent).toMatchObject({ allowed: false, refusal: { code: "CAPABILITY_NOT_ALLOWED" } })
      expect(errorOf(await mcp.callTool({ name: "speak", arguments: { text: "Hello" } })).error.code).toBe("CAPABILITY_NOT_ALLOWED")

      expect(errorOf(await mcp.callTool({ name: "estimate_cost", arguments: { capability: "nope", input: {} } })).error.code)
        .toBe("VALIDATION_ERROR")
      expect(errorOf(await mcp.callTool({ name: "estimate_cost", arguments: { capability: "speak", input: { text: "" } } })).error.code)
        .toBe("VALIDATION_ERROR")
    } finally {
      await mcp.close()
    }
  }, 30_000)

  it("returns a policy refusal as a tool error the model can read, and charges nothing", async () => {
    const { owner, worker } = await account(100n)
    const mcp = await connect(worker.apiKey)
    try {
      const before = await spendable(worker.apiKey)

      expect((await policy(worker.id, owner.apiKey, { allowedCapabilities: ["reason"] })).status).toBe(200)
      const notAllowed = errorOf(await mcp.callTool({ name: "speak", arguments: { text: "Hello" } }))
      expect(notAllowed.status).toBe(403)
      expect(notAllowed.error.code).toBe("CAPABILITY_NOT_ALLOWED")

      expect((await policy(worker.id, owner.apiKey, { maxPerCallUsdCents: 0.0001 })).status).toBe(200)
      const overCap = errorOf(await mcp.callTool({ name: "speak", arguments: { text: "Hello" } }))
      expect(overCap.status).toBe(402)
      expect(overCap.error.code).toBe("PER_CALL_LIMIT_EXCEEDED")
      expect(overCap.error.details).toMatchObject({ perCallCap: 0.0001, quotedCost: expect.any(Number) })

      expect((await policy(worker.id, owner.apiKey, { maxPerDayUsdCents: 0.0001 })).status).toBe(200)
      const overDaily = errorOf(await mcp.callTool({ name: "speak", arguments: { text: "Hello" } }))
      expect(overDaily.status).toBe(402)
      expect(overDaily.error.code).toBe("BUDGET_EXCEEDED")
      expect(overDaily.error.details).toMatchObject({ dailySpent: 0, dailyCap: 0.0001 })
      expect((await policy(worker.id, owner.apiKey, {})).status).toBe(200)

      const invalid = errorOf(await mcp.callTool({ name: "speak", arguments: { text: "" } }))
      expect(invalid.status).toBe(400)
      expect(invalid.error.code).toBe("VALIDATION_ERROR")

      expect(await spendable(worker.apiKey)).toBe(before)
    } finally {
      await mcp.close()
    }
  }, 30_000)
})

describe.each([
  ["Streamable HTTP at /mcp", httpClient],
  ["stdio", stdioClient]
] as const)("MCP over %s, wallet and kill switch", (name, connect) => {
  it("returns an empty wallet and a killed agent as tool errors", async () => {
    const { owner, worker } = await account(0n)
    const mcp = await connect(worker.apiKey)
    try {
      const empty = errorOf(await mcp.callTool({ name: "speak", arguments: { text: "Hello" } }))
      expect(empty.status).toBe(402)
      expect(empty.error.code).toBe("INSUFFICIENT_BALANCE")
      expect(empty.error.details).toMatchObject({ balance: 0, quotedCost: expect.any(Number) })

      // Killed while connected: the next call is a tool error the model reads.
      expect((await api.patch(`/v1/agents/${worker.id}`, { killed: true }, owner.apiKey)).status).toBe(200)
      const killed = errorOf(await mcp.callTool({ name: "speak", arguments: { text: "Hello" } }))
      expect(killed.status).toBe(403)
      expect(killed.error.code).toBe("AGENT_KILLED")
      // Anything else than a tool call is refused outright over HTTP (the client raises the 403).
      if (name !== "stdio") await expect(mcp.listTools()).rejects.toThrow(/AGENT_KILLED/)
    } finally {
      await mcp.close()
    }
  }, 30_000)
})

describe("npm run -s mcp", () => {
  it("starts the stdio server a desktop host configures, and lists its tools", async () => {
    const { worker } = await account(0n)
    const mcp = new Client({ name: "test", version: "1.0.0" })
    await mcp.connect(new StdioClientTransport({
      command: "npm",
      args: ["run", "-s", "mcp"],
      cwd: fileURLToPath(new URL("../..", import.meta.url)),
      env: { SPENDGATE_API_KEY: worker.apiKey, SPENDGATE_URL: server.baseUrl, PATH: process.env["PATH"] ?? "", HOME: process.env["HOME"] ?? "" },
      stderr: "ignore"
    }))
    try {
      expect((await mcp.listTools()).tools.map((t) => t.name).sort()).toEqual(["estimate_cost", "list_transactions", "speak", "wallet_balance"])
    } finally {
      await mcp.close()
    }
  }, 30_000)
})

describe("/mcp authentication", () => {
  const initialize = {
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } }
  }
  const post = (headers: Record<string, string>) =>
    api.call("POST", "/mcp", { body: initialize, headers: { accept: "application/json, text/event-stream", ...headers } })

  it("is the route the access matrix lists beside the API", () => {
    expect(`${routesOutsideApi.mcp.method} ${routesOutsideApi.mcp.path}`).toBe(`POST ${MCP_PATH}`)
    expect(routesOutsideApi.mcp.rule.access).toBe("agent")
  })

  it("refuses a missing or unknown key, and the admin token, with the API's 401 envelope", async () => {
    for (const headers of [{}, { authorization: "Bearer sk_agt_" + "x".repeat(32) }, { authorization: `Bearer ${ADMIN}` }]) {
      const refused = await post(headers)
      expect(refused.status).toBe(401)
      expect(refused.body.error.code).toBe("UNAUTHORIZED")
    }
  })

  it("lets an owner key and an agent key in", async () => {
    const { owner, worker } = await account(0n)
    for (const key of [owner.apiKey, worker.apiKey]) {
      const answer = await post({ authorization: `Bearer ${key}` })
      expect(answer.status).toBe(200)
      expect(answer.body).toMatchObject({ jsonrpc: "2.0", id: 1, result: { serverInfo: { name: "spendgate" } } })
    }
  })

  it("refuses a spent rate limit with the API's 429 and Retry-After (a tool call: as a tool error)", async () => {
    const limited = await startServer(MemoryStore.layer, { rateLimits: { agentPerMinute: 2 } })
    try {
      const signup = await client(limited.baseUrl).post("/v1/signup", { name: "ops" })
      const send = () =>
        client(limited.baseUrl).call("POST", "/mcp", {
          body: initialize,
          headers: { accept: "application/json, text/event-stream", authorization: `Bearer ${signup.body.apiKey}` }
        })
      expect((await send()).status).toBe(200)
      // A tool call: /mcp's own check takes the second request of the minute, the tool's call
      // of the API the third, which is refused: a tool error the model reads, with its wait.
      const toolCall = await client(limited.baseUrl).call("POST", "/mcp", {
        body: { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "wallet_balance", arguments: {} } },
        headers: { accept: "application/json, text/event-stream", authorization: `Bearer ${signup.body.apiKey}` }
      })
      expect(toolCall.status).toBe(200)
      expect(toolCall.body.result.isError).toBe(true)
      const toolError = JSON.parse(toolCall.body.result.content[0].text)
      expect(toolError).toMatchObject({ status: 429, error: { code: "RATE_LIMITED" } })
      expect(toolError.retryAfterSeconds).toBeGreaterThan(0)
      const refused = await send()
      expect(refused.status).toBe(429)
      expect(refused.body.error.code).toBe("RATE_LIMITED")
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0)
    } finally {
      await limited.close()
    }
  })

  it("refuses a killed agent with 403 AGENT_KILLED", async () => {
    const { owner, worker } = await account(100n)
    expect((await post({ authorization: `Bearer ${worker.apiKey}` })).status).toBe(200)
    expect((await api.patch(`/v1/agents/${worker.id}`, { killed: true }, owner.apiKey)).status).toBe(200)
    const killed = await post({ authorization: `Bearer ${worker.apiKey}` })
    expect(killed.status).toBe(403)
    expect(killed.body.error.code).toBe("AGENT_KILLED")
  })

  it("answers bad input with a 4xx, never a 500", async () => {
    const { worker } = await account(0n)
    const auth = { authorization: `Bearer ${worker.apiKey}`, accept: "application/json, text/event-stream" }
    const garbled = await api.call("POST", "/mcp", { raw: "{not json", headers: { ...auth, "content-type": "application/json" } })
    expect(garbled.status).toBeGreaterThanOrEqual(400)
    expect(garbled.status).toBeLessThan(500)
    const tooLarge = await api.call("POST", "/mcp", {
      raw: JSON.stringify({ ...initialize, padding: "x".repeat(1024 * 1024 + 1) }),
      headers: { ...auth, "content-type": "application/json" }
    })
    expect(tooLarge.status).toBe(413)
    expect(tooLarge.body.error.code).toBe("PAYLOAD_TOO_LARGE")
    const unknownTool = await api.call("POST", "/mcp", {
      body: { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "mine_bitcoin", arguments: {} } },
      headers: auth
    })
    expect(unknownTool.status).toBe(200)
    expect(unknownTool.body.result.isError).toBe(true)
  })

  it("answers GET and DELETE with 405 (stateless: no streams, no sessions)", async () => {
    const res = await api.call("GET", "/mcp", { headers: { accept: "text/event-stream" } })
    expect(res.status).toBe(405)
    expect((await api.call("DELETE", "/mcp")).status).toBe(405)
  })
})
