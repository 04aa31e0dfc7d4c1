import Anthropic from "@anthropic-ai/sdk"
import { upstreamLayers } from "../support/upstreamLayers.ts"
import { ConfigProvider, Effect, Layer, Redacted } from "effect"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { loadProvidersConfig } from "../../adapters/providersConfig.ts"
import * as Transport from "../../adapters/services/transport.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import type { EndpointPrice } from "../../src/services/Service.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { closedPort } from "../providers/fakeLlm.ts"
import { client, errorCode, type RunningServer, startServer, storeBackends } from "../support/server.ts"

/**
 * The Anthropic-compatible API (`POST /v1/messages`) driven by the official
 * `@anthropic-ai/sdk` client, unmodified but for `baseURL` and `apiKey`,
 * against a local upstream speaking Anthropic's Messages wire format:
 * messages, tool use, streams (message_start … message_stop), models.list,
 * refusals as the client's typed errors; every call charged once, from the
 * upstream's usage.
 */

const OPERATOR_KEY = "sk-ant-operator"
/** The version the installed SDK sends (checked by a test, so that an SDK update that changes it is seen). */
const SDK_VERSION = "2026-10-21"

interface Recorded {
  readonly path: string
  readonly apiKey: string | undefined
  readonly authorization: string | undefined
  readonly version: string | undefined
  readonly beta: string | undefined
  readonly body: Record<string, unknown>
}

interface Upstream {
  readonly url: string
  readonly requests: Array<Recorded>
  /** Status the next answers have (200 by default). */
  status: number
  close: () => Promise<void>
}

const USAGE = { input_tokens: 40, output_tokens: 10 }

type Block = { readonly type: string; readonly [k: string]: unknown }

/** Anthropic's message: a `tool_use` block when tools are offered and the last turn is not a tool result, else text. */
const message = (request: Record<string, unknown>) => {
  const tools = request["tools"] as ReadonlyArray<{ name: string }> | undefined
  const last = (request["messages"] as ReadonlyArray<{ role: string; content: unknown }>).at(-1)
  const answersTool = Array.isArray(last?.content) && (last.content as ReadonlyArray<Block>).some((b) => b.type === "tool_result")
  const callsTool = tools !== undefined && tools.length > 0 && !answersTool
  return {
    id: "msg_01",
    type: "message",
    role: "assistant",
    model: request["model"],
    content: callsTool
      ? [{ type: "text", text: "Let me look." }, { type: "tool_use", id: "toolu_01", name: tools[0]!.name, input: { city: "Paris" } }]
      : [{ type: "text", text: answersTool ? "It is sunny in Paris." : "Hello there." }],
    stop_reason: callsTool ? "tool_use" : "end_turn",
    stop_sequence: null,
    usage: USAGE
  }
}

const sse = (event: string, data: Record<string, unknown>) => `event: ${event}\ndata: ${JSON.stringify({ type: event, ...data })}\n\n`

/** A real Messages stream: message_start (with usage), a text block in two deltas, message_delta (output_tokens), message_stop. */
const streamEvents = (model: unknown) => [
  sse("message_start", {
    message: {
      id: "msg_02",
      type: "message",
      role: "assistant",
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: USAGE.input_tokens, output_tokens: 1 }
    }
  }),
  sse("content_block_start", { index: 0, content_block: { type: "text", text: "" } }),
  sse("ping", {}),
  sse("content_block_delta", { index: 0, delta: { type: "text_delta", text: "Hel" } }),
  sse("content_block_delta", { index: 0, delta: { type: "text_delta", text: "lo" } }),
  sse("content_block_stop", { index: 0 }),
  sse("message_delta", { delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: USAGE.output_tokens } }),
  sse("message_stop", {})
]

const anthropicError = (type: string, text: string) => JSON.stringify({ type: "error", error: { type, message: text }, request_id: "req_up" })

const startUpstream = (): Promise<Upstream> =>
  new Promise((resolve) => {
    const upstream: Upstream = { url: "", requests: [], status: 200, close: () => new Promise((done) => server.close(() => done())) }
    const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
      let raw = ""
      req.on("data", (c) => (raw += c))
      req.on("end", () => {
        const body = JSON.parse(raw || "{}") as Record<string, unknown>
        const header = (name: string) => req.headers[name] as string | undefined
        upstream.requests.push({
          path: req.url ?? "",
          apiKey: header("x-api-key"),
          authorization: header("authorization"),
          version: header("anthropic-version"),
          beta: header("anthropic-beta"),
          body
        })
        if (req.method !== "POST" || req.url !== "/v1/messages") {
          res.writeHead(404, { "content-type": "application/json" })
          return res.end(anthropicError("not_found_error", "no such route"))
        }
        if (header("x-api-key") !== OPERATOR_KEY) {
          res.writeHead(401, { "content-type": "application/json" })
          return res.end(anthropicError("authentication_error", "invalid x-api-key"))
        }
        if (header("anthropic-version") === undefined) {
          res.writeHead(400, { "content-type": "application/json" })
          return res.end(anthropicError("invalid_request_error", "anthropic-version: header is required"))
        }
        if (typeof body["max_tokens"] !== "number") {
          res.writeHead(400, { "content-type": "application/json" })
          return res.end(anthropicError("invalid_request_error", "max_tokens: Field required"))
        }
        if (upstream.status !== 200) {
          res.writeHead(upstream.status, { "content-type": "application/json" })
          return res.end(anthropicError("invalid_request_error", "messages: upstream refused"))
        }
        if (body["stream"] === true) {
          res.writeHead(200, { "content-type": "text/event-stream", "request-id": "req_stream" })
          for (const event of streamEvents(body["model"])) res.write(event)
          return res.end()
        }
        res.writeHead(200, { "content-type": "application/json", "request-id": "req_1" })
        res.end(JSON.stringify(message(body)))
      })
    })
    server.listen(0, "127.0.0.1", () => {
      resolve(Object.assign(upstream, { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }))
    })
  })

/** µUSD per 1000 tokens: 40 input tokens × 1000/1000 + 10 output tokens × 2000/1000 = 60 µUSD = 0.006 cents. */
const price = (format: "anthropic-messages" | "openai-chat", input: bigint, output: bigint, ids = ["claude-m"]): EndpointPrice => ({
  kind: "tokens",
  format,
  models: ids.map((id) => ({ id, inputPer1kMicroUsd: input, outputPer1kMicroUsd: output, maxTokens: 1000, defaultMaxTokens: 100 }))
})

const service = (
  slug: string,
  baseUrl: string,
  endpointPrice: EndpointPrice,
  credentials: Record<string, string> = { "x-api-key": OPERATOR_KEY }
) => ({
  service: {
    slug,
    name: slug,
    description: "test",
    baseUrl,
    capabilities: ["reason" as const],
    origin: "operator" as const,
    endpoints: [{
      path: endpointPrice.kind === "tokens" && endpointPrice.format === "openai-chat" ? "/v1/chat/completions" : "/v1/messages",
      method: "POST" as const,
      description: "messages",
      price: endpointPrice
    }]
  },
  credentials: Object.fromEntries(Object.entries(credentials).map(([k, v]) => [k, Redacted.make(v)]))
})

/** The charge of one call metered from USAGE at the cheap service's prices. */
const CHARGE_CENTS = 0.006

const hi = [{ role: "user" as const, content: "hi" }]

const seed = async (server: RunningServer, accountId: string, key: string, usdMicro: bigint) => {
  await server.run(Effect.gen(function*() {
    yield* (yield* Wallets).credit({ accountId: accountId as AccountId, key: `seed-${key}`, pocket: "usd", amount: usdMicro, description: "seed" })
  }))
}

for (const [backend, store] of storeBackends) {
  describe(`Anthropic-compatible API through the official client (${backend})`, () => {
    let upstream: Upstream
    let server: RunningServer
    let api: ReturnType<typeof client>

    beforeAll(async () => {
      upstream = await startUpstream()
      const transport = Transport.layer({
        operatorServices: [
          // Pins its API version, as the configured Anthropic service does.
          service("dear", upstream.url, price("anthropic-messages", 5_000n, 9_000n), { "x-api-key": OPERATOR_KEY, "anthropic-version": "2023-06-01" }),
          service("cheap", upstream.url, price("anthropic-messages", 1_000n, 2_000n)),
          // Prices a model in OpenAI's format only: never a Messages route.
          service("chatonly", upstream.url, price("openai-chat", 10n, 10n, ["gpt-m"]), { authorization: `Bearer ${OPERATOR_KEY}` })
        ]
      }).pipe(Layer.provide(upstreamLayers))
      server = await startServer(store(), { transport })
      api = client(server.baseUrl)
    })
    afterAll(async () => {
      await server?.close()
      await upstream?.close()
    })

    const funded = async (usdMicro = 1_000_000n) => {
      const signup = await api.post("/v1/signup", { name: "agent" })
      const { apiKey, accountId, agentId } = signup.body as { apiKey: string; accountId: string; agentId: string }
      if (usdMicro > 0n) await seed(server, accountId, apiKey, usdMicro)
      return { apiKey, accountId, agentId, anthropic: new Anthropic({ baseURL: server.baseUrl, apiKey, maxRetries: 0 }) }
    }

    const charges = async (key: string) => {
      const listed = await api.get("/v1/wallet/transactions?limit=100", key)
      return (listed.body.transactions as Array<{ type: string; amountUsdCents: number; capability: string; provider: string }>)
        .filter((t) => t.type === "charge")
    }

    /** A stream is settled just after its last event: wait for the charge to appear. */
    const settledCharges = async (key: string, count: number) => {
      for (let i = 0; i < 100; i++) {
        const found = await charges(key)
        if (found.length >= count) return found
        await new Promise((r) => setTimeout(r, 20))
      }
      return charges(key)
    }

    it("messages.create: a bare model goes to the cheapest service with the operator's key, charged once from usage", async () => {
      const agent = await funded()
      const { data, response } = await agent.anthropic.messages.create({
        model: "claude-m",
        max_tokens: 200,
        system: "Be brief.",
        messages: hi,
        metadata: { user_id: "u-1" },
        stop_sequences: ["END"]
      }).withResponse()
      expect(data.type).toBe("message")
      expect(data.content).toEqual([{ type: "text", text: "Hello there." }])
      expect(data.usage).toEqual(USAGE)
      expect(response.headers.get("x-spendgate-charged-usd-cents")).toBe(String(CHARGE_CENTS))
      expect(Number(response.headers.get("x-spendgate-quoted-usd-cents"))).toBeGreaterThan(CHARGE_CENTS)
      expect(response.headers.get("x-spendgate-audit-id")).toMatch(/.+/)
      expect(response.headers.get("x-spendgate-provider")).toBe("cheap")
      const sent = upstream.requests.at(-1)!
      expect(sent.path).toBe("/v1/messages")
      expect(sent.apiKey).toBe(OPERATOR_KEY)
      // The agent's key never reaches the upstream; the caller's API version does.
      expect(sent.authorization).toBeUndefined()
      expect(JSON.stringify(sent)).not.toContain(agent.apiKey)
      expect(sent.version).toBe(SDK_VERSION)
      expect(sent.body).toEqual({
        model: "claude-m",
        max_tokens: 200,
        system: "Be brief.",
        messages: hi,
        metadata: { user_id: "u-1" },
        stop_sequences: ["END"]
      })
      const charged = await charges(agent.apiKey)
      expect(charged).toHaveLength(1)
      expect(charged[0]).toMatchObject({ amountUsdCents: CHARGE_CENTS, capability: "reason", provider: "proxy:cheap" })
    })

    it("service/model picks that service; its pinned anthropic-version wins, anthropic-beta goes through", async () => {
      const agent = await funded()
      const { response } = await agent.anthropic.messages.create(
        { model: "dear/claude-m", max_tokens: 100, messages: hi, service_tier: "auto" },
        { headers: { "anthropic-beta": "token-efficient-tools-2025-02-19" } }
      ).withResponse()
      expect(response.headers.get("x-spendgate-provider")).toBe("dear")
      const sent = upstream.requests.at(-1)!
      expect(sent).toMatchObject({ version: "2023-06-01", beta: "token-efficient-tools-2025-02-19", apiKey: OPERATOR_KEY })
      expect(sent.body).toMatchObject({ model: "claude-m", service_tier: "auto" })
      // 40 × 5000/1000 + 10 × 9000/1000 = 290 µUSD.
      expect((await charges(agent.apiKey)).map((c) => c.amountUsdCents)).toEqual([0.029])
    })

    it("tools: a tool_use block, then the tool_result turn; each leg charged once", async () => {
      const agent = await funded()
      const tools = [{
        name: "weather",
        description: "Weather in a city",
        input_schema: { type: "object" as const, properties: { city: { type: "string" } }, required: ["city"] }
      }]
      const first = await agent.anthropic.messages.create({
        model: "claude-m",
        max_tokens: 300,
        messages: [{ role: "user", content: "Weather in Paris?" }],
        tools,
        tool_choice: { type: "auto" }
      })
      expect(first.stop_reason).toBe("tool_use")
      const use = first.content.find((b) => b.type === "tool_use")
      expect(use).toMatchObject({ type: "tool_use", id: "toolu_01", name: "weather", input: { city: "Paris" } })
      expect(upstream.requests.at(-1)!.body).toMatchObject({ tools, tool_choice: { type: "auto" } })
      const second = await agent.anthropic.messages.create({
        model: "claude-m",
        max_tokens: 300,
        messages: [
          { role: "user", content: "Weather in Paris?" },
          { role: "assistant", content: first.content },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_01", content: "sunny" }] }
        ],
        tools
      })
      expect(second.content).toEqual([{ type: "text", text: "It is sunny in Paris." }])
      expect((upstream.requests.at(-1)!.body["messages"] as Array<unknown>)[2])
        .toEqual({ role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_01", content: "sunny" }] })
      const charged = await charges(agent.apiKey)
      expect(charged.map((c) => c.amountUsdCents)).toEqual([CHARGE_CENTS, CHARGE_CENTS])
    })

    it("messages.stream: the SDK assembles the message from the events; one charge, from the streamed usage", async () => {
      const agent = await funded()
      const stream = agent.anthropic.messages.stream({ model: "claude-m", max_tokens: 100, messages: hi })
      const texts: Array<string> = []
      stream.on("text", (t) => texts.push(t))
      const final = await stream.finalMessage()
      expect(texts.join("")).toBe("Hello")
      expect(final.content).toMatchObject([{ type: "text", text: "Hello" }])
      expect(final.stop_reason).toBe("end_turn")
      expect(final.usage).toMatchObject(USAGE)
      expect(upstream.requests.at(-1)!.body).toMatchObject({ stream: true, max_tokens: 100 })
      const charged = await settledCharges(agent.apiKey, 1)
      expect(charged).toHaveLength(1)
      expect(charged[0]!.amountUsdCents).toBe(CHARGE_CENTS)
    })

    it("create with stream: true: Anthropic's events in order and nothing else; the quote in a header; one charge", async () => {
      const agent = await funded()
      const { data: stream, response } = await agent.anthropic.messages.create({
        model: "claude-m",
        max_tokens: 100,
        messages: hi,
        stream: true
      }).withResponse()
      expect(response.headers.get("content-type")).toContain("text/event-stream")
      expect(Number(response.headers.get("x-spendgate-quoted-usd-cents"))).toBeGreaterThan(0)
      expect(response.headers.get("x-spendgate-provider")).toBe("cheap")
      const types: Array<string> = []
      for await (const event of stream) types.push(event.type)
      expect(types).toEqual([
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop"
      ])
      expect(await settledCharges(agent.apiKey, 1)).toHaveLength(1)
    })

    it("x-api-key (no Authorization) authenticates, here and on the rest of the API; the raw stream has no Spendgate event", async () => {
      const agent = await funded()
      const res = await fetch(`${server.baseUrl}/v1/messages`, {
        method: "POST",
        headers: { "x-api-key": agent.apiKey, "anthropic-version": "2023-06-01", "content-type": "application/json" },
        body: JSON.stringify({ model: "claude-m", max_tokens: 50, messages: hi, stream: true })
      })
      expect(res.status).toBe(200)
      const text = await res.text()
      expect(text).not.toContain("spendgate")
      expect(text.trim().split("\n\n").at(-1)).toBe(streamEvents("claude-m").at(-1)!.trim())
      expect(upstream.requests.at(-1)).toMatchObject({ version: "2023-06-01", apiKey: OPERATOR_KEY, authorization: undefined })
      await settledCharges(agent.apiKey, 1)
      const wallet = await api.call("GET", "/v1/wallet", { headers: { "x-api-key": agent.apiKey } })
      expect(wallet.status).toBe(200)
      expect(wallet.body.balanceUsdCents).toBeCloseTo(100 - CHARGE_CENTS, 6)
      // A wrong key in either header is 401; Authorization is the one checked when both are sent.
      const both = await api.call("GET", "/v1/wallet", { key: "sk_agt_wrong", headers: { "x-api-key": agent.apiKey } })
      expect(both.status).toBe(401)
      expect((await api.call("GET", "/v1/wallet", { headers: { "x-api-key": "sk_agt_wrong" } })).status).toBe(401)
      // No version sent: the default one goes upstream.
      const plain = await fetch(`${server.baseUrl}/v1/messages`, {
        method: "POST",
        headers: { "x-api-key": agent.apiKey, "content-type": "application/json" },
        body: JSON.stringify({ model: "claude-m", max_tokens: 50, messages: hi })
      })
      expect(plain.status).toBe(200)
      expect(upstream.requests.at(-1)!.version).toBe("2023-06-01")
    })

    it("a killed agent is PermissionDeniedError (by either header); nothing reaches the upstream, nothing charged", async () => {
      const owner = await funded()
      const created = await api.post("/v1/agents", { name: "worker" }, owner.apiKey)
      const worker = created.body as { id: string; apiKey: string }
      const anthropic = new Anthropic({ baseURL: server.baseUrl, apiKey: worker.apiKey, maxRetries: 0 })
      await anthropic.messages.create({ model: "claude-m", max_tokens: 100, messages: hi })
      const before = upstream.requests.length
      expect((await api.patch(`/v1/agents/${worker.id}`, { killed: true }, owner.apiKey)).status).toBe(200)
      const error = await anthropic.messages.create({ model: "claude-m", max_tokens: 100, messages: hi }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(Anthropic.PermissionDeniedError)
      expect(error).toMatchObject({ status: 403, type: "permission_error", errorCode: "AGENT_KILLED" })
      expect((error as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({
        type: "error",
        error: { type: "permission_error", code: "AGENT_KILLED", message: expect.any(String) }
      })
      const streamed = await anthropic.messages.create({ model: "claude-m", max_tokens: 100, messages: hi, stream: true })
        .catch((e: unknown) => e)
      expect(streamed).toBeInstanceOf(Anthropic.PermissionDeniedError)
      const raw = await fetch(`${server.baseUrl}/v1/messages`, {
        method: "POST",
        headers: { "x-api-key": worker.apiKey, "content-type": "application/json" },
        body: JSON.stringify({ model: "claude-m", max_tokens: 50, messages: hi })
      })
      expect(raw.status).toBe(403)
      expect(upstream.requests.length).toBe(before)
      expect(await charges(owner.apiKey)).toHaveLength(1)
    })

    it("an over-cap call is PaymentRequiredError (402) naming the cap; nothing charged, nothing sent", async () => {
      const agent = await funded()
      await api.patch(`/v1/agents/${agent.agentId}/policy`, { maxPerCallUsdCents: 0.001 }, agent.apiKey)
      const before = upstream.requests.length
      const error = await agent.anthropic.messages.create({ model: "claude-m", max_tokens: 100, messages: hi }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(Anthropic.PaymentRequiredError)
      expect(error).toMatchObject({ status: 402, type: "billing_error", errorCode: "PER_CALL_LIMIT_EXCEEDED" })
      expect((error as InstanceType<typeof Anthropic.APIError>).details).toMatchObject({ perCallCap: 0.001 })
      expect(upstream.requests.length).toBe(before)
      expect(await charges(agent.apiKey)).toHaveLength(0)
    })

    it("an empty wallet is PaymentRequiredError INSUFFICIENT_BALANCE, for streams too", async () => {
      const agent = await funded(0n)
      const before = upstream.requests.length
      for (const stream of [false, true]) {
        const error = await agent.anthropic.messages.create({ model: "claude-m", max_tokens: 100, messages: hi, stream })
          .catch((e: unknown) => e)
        expect(error).toBeInstanceOf(Anthropic.PaymentRequiredError)
        expect(error).toMatchObject({ status: 402, type: "billing_error", errorCode: "INSUFFICIENT_BALANCE" })
      }
      const streamed = await agent.anthropic.messages.stream({ model: "claude-m", max_tokens: 100, messages: hi }).finalMessage()
        .catch((e: unknown) => e)
      expect(streamed).toBeInstanceOf(Anthropic.PaymentRequiredError)
      expect(upstream.requests.length).toBe(before)
    })

    it("a bad key is AuthenticationError; unknown or OpenAI-only models NotFoundError; bad bodies BadRequestError; nothing charged", async () => {
      const stranger = new Anthropic({ baseURL: server.baseUrl, apiKey: "sk_agt_nope", maxRetries: 0 })
      const denied = await stranger.messages.create({ model: "claude-m", max_tokens: 10, messages: hi }).catch((e: unknown) => e)
      expect(denied).toBeInstanceOf(Anthropic.AuthenticationError)
      expect(denied).toMatchObject({ type: "authentication_error", errorCode: "UNAUTHORIZED" })
      // The rest of the API keeps its own envelope.
      const elsewhere = await api.get("/v1/wallet", "sk_agt_nope")
      expect(elsewhere.status).toBe(401)
      expect(Object.keys(elsewhere.body.error).sort()).toEqual(["code", "message", "requestId"])
      expect(elsewhere.body.error.requestId).toBe(elsewhere.headers.get("x-request-id"))
      const agent = await funded()
      for (const model of ["nope", "gpt-m", "chatonly/gpt-m"]) {
        const unknown = await agent.anthropic.messages.create({ model, max_tokens: 10, messages: hi }).catch((e: unknown) => e)
        expect(unknown, model).toBeInstanceOf(Anthropic.NotFoundError)
        expect(unknown).toMatchObject({ type: "not_found_error", errorCode: "NOT_FOUND" })
      }
      const empty = await agent.anthropic.messages.create({ model: "claude-m", max_tokens: 10, messages: [] }).catch((e: unknown) => e)
      expect(empty).toBeInstanceOf(Anthropic.BadRequestError)
      expect(empty).toMatchObject({ type: "invalid_request_error", errorCode: "VALIDATION_ERROR" })
      const noBudget = await api.call("POST", "/v1/messages", { key: agent.apiKey, body: { model: "claude-m", messages: hi } })
      expect(noBudget.status).toBe(400)
      expect(errorCode(noBudget)).toBe("VALIDATION_ERROR")
      expect(noBudget.body).toMatchObject({ type: "error", error: { type: "invalid_request_error" }, request_id: null })
      const tooMany = await agent.anthropic.messages.create({ model: "claude-m", max_tokens: 5000, messages: hi }).catch((e: unknown) => e)
      expect(tooMany).toBeInstanceOf(Anthropic.BadRequestError)
      expect(tooMany).toMatchObject({ errorCode: "VALIDATION_ERROR", details: { issues: [{ path: "body.max_tokens" }] } })
      const notJson = await api.call("POST", "/v1/messages", { key: agent.apiKey, raw: "{", headers: { "content-type": "application/json" } })
      expect(notJson.status).toBe(400)
      expect(errorCode(notJson)).toBe("VALIDATION_ERROR")
      const unknownRoute = await api.call("GET", "/v1/messages", { key: agent.apiKey })
      expect(unknownRoute.status).toBe(404)
      expect(errorCode(unknownRoute)).toBe("NOT_FOUND")
      expect(unknownRoute.body.type).toBe("error")
      const countTokens = await agent.anthropic.messages.countTokens({ model: "claude-m", messages: hi }).catch((e: unknown) => e)
      expect(countTokens).toBeInstanceOf(Anthropic.NotFoundError)
      expect(countTokens).toMatchObject({ type: "not_found_error", errorCode: "NOT_FOUND" })
      expect(await charges(agent.apiKey)).toHaveLength(0)
    })

    it("an upstream's own refusal passes through in its shape and is not charged", async () => {
      const agent = await funded()
      upstream.status = 400
      try {
        const error = await agent.anthropic.messages.create({ model: "claude-m", max_tokens: 10, messages: hi }).catch((e: unknown) => e)
        expect(error).toBeInstanceOf(Anthropic.BadRequestError)
        expect(error).toMatchObject({ type: "invalid_request_error", message: expect.stringContaining("upstream refused") })
        expect((error as InstanceType<typeof Anthropic.APIError>).requestID).toBe(null)
      } finally {
        upstream.status = 200
      }
      const charged = await charges(agent.apiKey)
      expect(charged.every((c) => c.amountUsdCents === 0)).toBe(true)
    })

    it("models.list: the Messages models in Anthropic's shape; OpenAI's client still gets OpenAI's models; none without reason", async () => {
      const agent = await funded()
      const page = await agent.anthropic.models.list()
      expect(page.data.map((m) => m.id)).toEqual(["claude-m", "dear/claude-m", "cheap/claude-m"])
      expect(page.data[0]).toEqual({ type: "model", id: "claude-m", display_name: "claude-m", created_at: "1970-01-01T00:00:00.000Z" })
      const openai = new OpenAI({ baseURL: `${server.baseUrl}/v1`, apiKey: agent.apiKey, maxRetries: 0 })
      expect((await openai.models.list()).data.map((m) => m.id)).toEqual(["gpt-m", "chatonly/gpt-m"])
      await api.patch(`/v1/agents/${agent.agentId}/policy`, { allowedCapabilities: ["search"] }, agent.apiKey)
      expect((await agent.anthropic.models.list()).data).toEqual([])
      const refused = await agent.anthropic.messages.create({ model: "claude-m", max_tokens: 10, messages: hi }).catch((e: unknown) => e)
      expect(refused).toBeInstanceOf(Anthropic.PermissionDeniedError)
      expect(refused).toMatchObject({ status: 403, type: "permission_error", errorCode: "CAPABILITY_NOT_ALLOWED" })
      // OpenAI's errors stay OpenAI's on the same route without anthropic-version.
      const stranger = new OpenAI({ baseURL: `${server.baseUrl}/v1`, apiKey: "sk_agt_nope", maxRetries: 0 })
      expect(await stranger.models.list().catch((e: unknown) => e)).toMatchObject({ type: "authentication_error", code: "UNAUTHORIZED" })
      const anthropicStranger = new Anthropic({ baseURL: server.baseUrl, apiKey: "sk_agt_nope", maxRetries: 0 })
      const denied = await anthropicStranger.models.list().catch((e: unknown) => e)
      expect(denied).toBeInstanceOf(Anthropic.AuthenticationError)
      expect(denied).toMatchObject({ type: "authentication_error", errorCode: "UNAUTHORIZED" })
    })
  })
}

describe("Anthropic-compatible API over the operator's configured provider", () => {
  it("ANTHROPIC_API_KEY with ANTHROPIC_BASE_URL: its price card's models answer with the operator's key and version", async () => {
    const upstream = await startUpstream()
    const config = await Effect.runPromise(loadProvidersConfig.pipe(
      Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnvRecord({ ANTHROPIC_API_KEY: OPERATOR_KEY, ANTHROPIC_BASE_URL: upstream.url })))
    ))
    const transport = Transport.layer({ operatorServices: config.operatorServices }).pipe(Layer.provide(upstreamLayers))
    const server = await startServer(storeBackends[0]![1](), { transport })
    try {
      const api = client(server.baseUrl)
      const { apiKey, accountId } = (await api.post("/v1/signup", { name: "configured" })).body as { apiKey: string; accountId: string }
      await seed(server, accountId, apiKey, 1_000_000n)
      const anthropic = new Anthropic({ baseURL: server.baseUrl, apiKey, maxRetries: 0 })
      const ids = (await anthropic.models.list()).data.map((m) => m.id)
      expect(ids).toContain("claude-3-5-haiku-latest")
      expect(ids).toContain("anthropic/claude-3-5-haiku-latest")
      const { response } = await anthropic.messages.create({ model: "anthropic/claude-3-5-haiku-latest", max_tokens: 100, messages: hi })
        .withResponse()
      expect(upstream.requests.at(-1)).toMatchObject({
        path: "/v1/messages",
        apiKey: OPERATOR_KEY,
        version: "2023-06-01",
        authorization: undefined,
        body: { model: "claude-3-5-haiku-latest", max_tokens: 100 }
      })
      // The card's prices: 40 × 0.08 / 1000 + 10 × 0.4 / 1000 cents = 0.0072 cents.
      expect(response.headers.get("x-spendgate-charged-usd-cents")).toBe("0.0072")
      const final = await anthropic.messages.stream({ model: "claude-3-5-haiku-latest", max_tokens: 100, messages: hi }).finalMessage()
      expect(final.usage).toMatchObject(USAGE)
      let charged: Array<{ type: string; amountUsdCents: number }> = []
      for (let i = 0; i < 100 && charged.length < 2; i++) {
        charged = ((await api.get("/v1/wallet/transactions?limit=100", apiKey)).body.transactions as typeof charged).filter((t) => t.type === "charge")
        if (charged.length < 2) await new Promise((r) => setTimeout(r, 20))
      }
      expect(charged.map((t) => t.amountUsdCents)).toEqual([0.0072, 0.0072])
      expect((await api.get("/v1/wallet", apiKey)).body.balanceUsdCents).toBeCloseTo(100 - 2 * 0.0072, 6)
    } finally {
      await server.close()
      await upstream.close()
    }
  })
})

describe("Anthropic-compatible API: fallback and rate limits", () => {
  it("a bare model whose cheapest service cannot be reached is answered by the next; one charge; a named one is not rerouted", async () => {
    const upstream = await startUpstream()
    const port = await Effect.runPromise(closedPort)
    const transport = Transport.layer({
      operatorServices: [
        service("cheap", upstream.url, price("anthropic-messages", 1_000n, 2_000n)),
        service("down", `http://127.0.0.1:${port}`, price("anthropic-messages", 100n, 200n))
      ]
    }).pipe(Layer.provide(upstreamLayers))
    const server = await startServer(storeBackends[0]![1](), { transport })
    try {
      const api = client(server.baseUrl)
      const { apiKey, accountId } = (await api.post("/v1/signup", { name: "fallback" })).body as { apiKey: string; accountId: string }
      await seed(server, accountId, apiKey, 1_000_000n)
      const anthropic = new Anthropic({ baseURL: server.baseUrl, apiKey, maxRetries: 0 })
      const { response } = await anthropic.messages.create({ model: "claude-m", max_tokens: 100, messages: hi }).withResponse()
      expect(response.headers.get("x-spendgate-provider")).toBe("cheap")
      const final = await anthropic.messages.stream({ model: "claude-m", max_tokens: 100, messages: hi }).finalMessage()
      expect(final.content).toMatchObject([{ type: "text", text: "Hello" }])
      const named = await anthropic.messages.create({ model: "down/claude-m", max_tokens: 100, messages: hi }).catch((e: unknown) => e)
      expect(named).toBeInstanceOf(Anthropic.InternalServerError)
      expect(named).toMatchObject({ status: 502, type: "api_error", errorCode: "PROVIDER_ERROR" })
      let listed: Array<{ type: string; amountUsdCents: number }> = []
      for (let i = 0; i < 100 && listed.length < 2; i++) {
        listed = ((await api.get("/v1/wallet/transactions?limit=100", apiKey)).body.transactions as typeof listed).filter((t) => t.type === "charge")
        if (listed.length < 2) await new Promise((r) => setTimeout(r, 20))
      }
      expect(listed.map((t) => t.amountUsdCents)).toEqual([CHARGE_CENTS, CHARGE_CENTS])
      expect((await api.get("/v1/wallet", apiKey)).body.balanceUsdCents).toBe(100 - 2 * CHARGE_CENTS)
    } finally {
      await server.close()
      await upstream.close()
    }
  })

  it("429 is RateLimitError with Retry-After kept", async () => {
    const server = await startServer(storeBackends[0]![1](), { rateLimits: { agentPerMinute: 2, accountPerMinute: 1000 } })
    try {
      const api = client(server.baseUrl)
      const { apiKey } = (await api.post("/v1/signup", { name: "busy" })).body as { apiKey: string }
      const anthropic = new Anthropic({ baseURL: server.baseUrl, apiKey, maxRetries: 0 })
      let error: unknown
      for (let i = 0; i < 5 && error === undefined; i++) {
        error = await anthropic.messages.create({ model: "claude-m", max_tokens: 10, messages: hi }).then(() => undefined, (e: unknown) => e)
        if (error instanceof Anthropic.NotFoundError) error = undefined // no model configured: the limit is what is looked for
      }
      expect(error).toBeInstanceOf(Anthropic.RateLimitError)
      expect(error).toMatchObject({ status: 429, type: "rate_limit_error", errorCode: "RATE_LIMITED" })
      expect((error as InstanceType<typeof Anthropic.RateLimitError>).headers?.get("retry-after")).toMatch(/^\d+$/)
    } finally {
      await server.close()
    }
  })
})
