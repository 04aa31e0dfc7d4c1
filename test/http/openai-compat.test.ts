import { upstreamLayers } from "../support/upstreamLayers.ts"
import { Effect, Layer, Redacted } from "effect"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Transport from "../../adapters/services/transport.ts"
import { loadProvidersConfig } from "../../adapters/providersConfig.ts"
import { closedPort } from "../providers/fakeLlm.ts"
import { ConfigProvider } from "effect"
import type { AccountId } from "../../src/domain/ids.ts"
import type { EndpointPrice } from "../../src/services/Service.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { client, type RunningServer, startServer, storeBackends } from "../support/server.ts"

/**
 * The OpenAI-compatible API driven by the official `openai` client, unmodified
 * but for `baseURL` and `apiKey`, against a local upstream speaking OpenAI's
 * wire format: chat, tools, streams with their usage chunk, models.list, and
 * refusals as the client's typed errors; every call charged once, from usage.
 */

const OPERATOR_KEY = "sk-operator-chat"

interface Recorded {
  readonly path: string
  readonly authorization: string | undefined
  readonly body: Record<string, unknown>
}

interface Upstream {
  readonly url: string
  readonly requests: Array<Recorded>
  /** Status the next answers have (200 by default). */
  status: number
  close: () => Promise<void>
}

const USAGE = { prompt_tokens: 40, completion_tokens: 10, total_tokens: 50 }

const completion = (request: Record<string, unknown>) => {
  const tools = request["tools"] as ReadonlyArray<{ function: { name: string } }> | undefined
  const lastRole = (request["messages"] as ReadonlyArray<{ role: string }>).at(-1)?.role
  const callsTool = tools !== undefined && tools.length > 0 && lastRole !== "tool"
  return {
    id: "chatcmpl-1",
    object: "chat.completion",
    created: 1_700_000_000,
    model: request["model"],
    choices: [{
      index: 0,
      message: callsTool
        ? {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "call_1", type: "function", function: { name: tools[0]!.function.name, arguments: "{\"city\":\"Paris\"}" } }]
        }
        : { role: "assistant", content: lastRole === "tool" ? "It is sunny in Paris." : "Hello there." },
      finish_reason: callsTool ? "tool_calls" : "stop"
    }],
    usage: USAGE
  }
}

const chunk = (body: Record<string, unknown>) =>
  `data: ${JSON.stringify({ id: "chatcmpl-2", object: "chat.completion.chunk", created: 1_700_000_000, model: "m-1", ...body })}\n\n`

const startUpstream = (): Promise<Upstream> =>
  new Promise((resolve) => {
    const upstream: Upstream = { url: "", requests: [], status: 200, close: () => new Promise((done) => server.close(() => done())) }
    const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
      let raw = ""
      req.on("data", (c) => (raw += c))
      req.on("end", () => {
        const body = JSON.parse(raw || "{}") as Record<string, unknown>
        upstream.requests.push({ path: req.url ?? "", authorization: req.headers.authorization, body })
        if (req.headers.authorization !== `Bearer ${OPERATOR_KEY}`) {
          res.writeHead(401, { "content-type": "application/json" })
          return res.end(JSON.stringify({ error: { message: "bad key", type: "invalid_request_error", code: "invalid_api_key", param: null } }))
        }
        if (upstream.status !== 200) {
          res.writeHead(upstream.status, { "content-type": "application/json" })
          return res.end(JSON.stringify({ error: { message: "upstream refused", type: "invalid_request_error", code: "bad", param: "messages" } }))
        }
        if (body["stream"] === true) {
          res.writeHead(200, { "content-type": "text/event-stream" })
          res.write(chunk({ choices: [{ index: 0, delta: { role: "assistant", content: "Hel" }, finish_reason: null }] }))
          res.write(chunk({ choices: [{ index: 0, delta: { content: "lo" }, finish_reason: "stop" }] }))
          const options = body["stream_options"] as { include_usage?: boolean } | undefined
          if (options?.include_usage === true) res.write(chunk({ choices: [], usage: USAGE }))
          return res.end("data: [DONE]\n\n")
        }
        res.writeHead(200, { "content-type": "application/json", "x-request-id": "req_1" })
        res.end(JSON.stringify(completion(body)))
      })
    })
    server.listen(0, "127.0.0.1", () => {
      resolve(Object.assign(upstream, { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }))
    })
  })

/** µUSD per 1000 tokens: 40 prompt tokens × 1000/1000 + 10 completion tokens × 2000/1000 = 60 µUSD = 0.006 cents. */
const price = (input: bigint, output: bigint): EndpointPrice => ({
  kind: "tokens",
  format: "openai-chat",
  models: [
    { id: "m-1", inputPer1kMicroUsd: input, outputPer1kMicroUsd: output, maxTokens: 1000, defaultMaxTokens: 100 },
    { id: "vendor/m-2", inputPer1kMicroUsd: input, outputPer1kMicroUsd: output, maxTokens: 1000, defaultMaxTokens: 100 }
  ]
})

const service = (slug: string, baseUrl: string, endpointPrice: EndpointPrice) => ({
  service: {
    slug,
    name: slug,
    description: "test",
    baseUrl,
    capabilities: ["reason" as const],
    origin: "operator" as const,
    endpoints: [{ path: "/v1/chat/completions", method: "POST" as const, description: "chat", price: endpointPrice }]
  },
  credentials: { authorization: Redacted.make(`Bearer ${OPERATOR_KEY}`) }
})

/** The charge of one call metered from USAGE at the cheap service's prices. */
const CHARGE_CENTS = 0.006

for (const [backend, store] of storeBackends) {
  describe(`OpenAI-compatible API through the official client (${backend})`, () => {
    let upstream: Upstream
    let server: RunningServer
    let api: ReturnType<typeof client>

    beforeAll(async () => {
      upstream = await startUpstream()
      const transport = Transport.layer({
        operatorServices: [
          service("dear", upstream.url, price(5_000n, 9_000n)),
          service("cheap", upstream.url, price(1_000n, 2_000n))
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
      const { apiKey, accountId } = signup.body as { apiKey: string; accountId: string }
      if (usdMicro > 0n) {
        await server.run(Effect.gen(function*() {
          yield* (yield* Wallets).credit({ accountId: accountId as AccountId, key: `seed-${apiKey}`, pocket: "usd", amount: usdMicro, description: "seed" })
        }))
      }
      return { apiKey, accountId, openai: new OpenAI({ baseURL: `${server.baseUrl}/v1`, apiKey, maxRetries: 0 }) }
    }

    const charges = async (key: string) => {
      const listed = await api.get("/v1/wallet/transactions?limit=100", key)
      return (listed.body.transactions as Array<{ type: string; amountUsdCents: number; capability: string; description: string }>)
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

    it("chat: a bare model goes to the cheapest service, is charged once from the upstream's usage", async () => {
      const agent = await funded()
      const { data, response } = await agent.openai.chat.completions.create({
        model: "m-1",
        messages: [{ role: "user", content: "hi" }],
        response_format: { type: "json_object" }
      }).withResponse()
      expect(data.choices[0]!.message.content).toBe("Hello there.")
      expect(data.usage).toEqual(USAGE)
      expect(response.headers.get("x-spendgate-charged-usd-cents")).toBe(String(CHARGE_CENTS))
      expect(Number(response.headers.get("x-spendgate-quoted-usd-cents"))).toBeGreaterThan(CHARGE_CENTS)
      expect(response.headers.get("x-spendgate-audit-id")).toMatch(/.+/)
      expect(response.headers.get("x-spendgate-provider")).toBe("cheap")
      const sent = upstream.requests.at(-1)!
      expect(sent.authorization).toBe(`Bearer ${OPERATOR_KEY}`)
      expect(sent.body).toMatchObject({ model: "m-1", response_format: { type: "json_object" }, max_tokens: 100 })
      const charged = await charges(agent.apiKey)
      expect(charged).toHaveLength(1)
      expect(charged[0]).toMatchObject({ amountUsdCents: CHARGE_CENTS, capability: "reason" })
    })

    it("chat: service/model picks that service, and a model id holding a slash still resolves", async () => {
      const agent = await funded()
      const { response } = await agent.openai.chat.completions.create({
        model: "dear/m-1",
        messages: [{ role: "user", content: "hi" }]
      }).withResponse()
      expect(response.headers.get("x-spendgate-provider")).toBe("dear")
      expect(upstream.requests.at(-1)!.body["model"]).toBe("m-1")
      const slashed = await agent.openai.chat.completions.create({ model: "vendor/m-2", messages: [{ role: "user", content: "hi" }] })
      expect(slashed.model).toBe("vendor/m-2")
      // 40 × 5000/1000 + 10 × 9000/1000 = 290 µUSD; then 60 µUSD at the cheap service.
      expect((await charges(agent.apiKey)).map((c) => c.amountUsdCents).sort()).toEqual([0.029, CHARGE_CENTS].sort())
    })

    it("tools: a function call round trip, each leg charged once", async () => {
      const agent = await funded()
      const tools = [{
        type: "function" as const,
        function: { name: "weather", description: "Weather in a city", parameters: { type: "object", properties: { city: { type: "string" } } } }
      }]
      const first = await agent.openai.chat.completions.create({
        model: "m-1",
        messages: [{ role: "user", content: "Weather in Paris?" }],
        tools,
        tool_choice: "auto"
      })
      const call = first.choices[0]!.message.tool_calls![0]!
      expect(first.choices[0]!.finish_reason).toBe("tool_calls")
      expect(call.type === "function" && call.function.name).toBe("weather")
      expect(upstream.requests.at(-1)!.body).toMatchObject({ tools, tool_choice: "auto" })
      const second = await agent.openai.chat.completions.create({
        model: "m-1",
        messages: [
          { role: "user", content: "Weather in Paris?" },
          first.choices[0]!.message,
          { role: "tool", tool_call_id: call.id, content: "sunny" }
        ],
        tools
      })
      expect(second.choices[0]!.message.content).toBe("It is sunny in Paris.")
      expect((upstream.requests.at(-1)!.body["messages"] as Array<unknown>)[2]).toEqual({ role: "tool", tool_call_id: "call_1", content: "sunny" })
      expect(await charges(agent.apiKey)).toHaveLength(2)
    })

    it("stream: chunks then the upstream's usage chunk last, no Spendgate event, one charge from usage", async () => {
      const agent = await funded()
      const stream = await agent.openai.chat.completions.create({
        model: "m-1",
        messages: [{ role: "user", content: "hi" }],
        stream: true,
        stream_options: { include_usage: true }
      })
      const chunks = []
      for await (const c of stream) chunks.push(c)
      expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe("Hello")
      expect(chunks.at(-1)!.usage).toEqual(USAGE)
      expect(chunks.every((c) => c.object === "chat.completion.chunk")).toBe(true)
      expect(upstream.requests.at(-1)!.body).toMatchObject({ stream: true, stream_options: { include_usage: true } })
      const charged = await settledCharges(agent.apiKey, 1)
      expect(charged).toHaveLength(1)
      expect(charged[0]!.amountUsdCents).toBe(CHARGE_CENTS)
    })

    it("stream: the raw answer ends with the usage chunk and [DONE], and names the quote", async () => {
      const agent = await funded()
      const res = await fetch(`${server.baseUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${agent.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "m-1", messages: [{ role: "user", content: "hi" }], stream: true })
      })
      expect(res.status).toBe(200)
      expect(res.headers.get("content-type")).toContain("text/event-stream")
      expect(Number(res.headers.get("x-spendgate-quoted-usd-cents"))).toBeGreaterThan(0)
      const text = await res.text()
      expect(text).not.toContain("spendgate")
      const events = text.split("\n\n").filter((e) => e !== "")
      expect(events.at(-1)).toBe("data: [DONE]")
      expect(JSON.parse(events.at(-2)!.slice("data: ".length)).usage).toEqual(USAGE)
      expect(await settledCharges(agent.apiKey, 1)).toHaveLength(1)
    })

    it("models.list: the priced models, bare and by service; none without reason", async () => {
      const agent = await funded()
      const page = await agent.openai.models.list()
      const ids = page.data.map((m) => m.id)
      expect(ids).toEqual(["m-1", "vendor/m-2", "dear/m-1", "dear/vendor/m-2", "cheap/m-1", "cheap/vendor/m-2"])
      expect(page.data[0]).toEqual({ id: "m-1", object: "model", created: 0, owned_by: "cheap" })
      const me = (await api.get("/v1/agents", agent.apiKey)).body.agents[0] as { id: string }
      await api.patch(`/v1/agents/${me.id}/policy`, { allowedCapabilities: ["search"] }, agent.apiKey)
      expect((await agent.openai.models.list()).data).toEqual([])
      await expect(agent.openai.chat.completions.create({ model: "m-1", messages: [{ role: "user", content: "hi" }] }))
        .rejects.toMatchObject({ status: 403, code: "CAPABILITY_NOT_ALLOWED", type: "permission_error" })
    })

    it("a killed agent is PermissionDeniedError, nothing reaches the upstream, nothing charged", async () => {
      const owner = await funded()
      const created = await api.post("/v1/agents", { name: "worker" }, owner.apiKey)
      const worker = created.body as { id: string; apiKey: string }
      const openai = new OpenAI({ baseURL: `${server.baseUrl}/v1`, apiKey: worker.apiKey, maxRetries: 0 })
      await openai.chat.completions.create({ model: "m-1", messages: [{ role: "user", content: "hi" }] })
      const before = upstream.requests.length
      expect((await api.patch(`/v1/agents/${worker.id}`, { killed: true }, owner.apiKey)).status).toBe(200)
      const error = await openai.chat.completions.create({ model: "m-1", messages: [{ role: "user", content: "hi" }] })
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(OpenAI.PermissionDeniedError)
      expect(error).toMatchObject({ status: 403, code: "AGENT_KILLED", type: "permission_error", param: null })
      expect(upstream.requests.length).toBe(before)
      expect(await charges(owner.apiKey)).toHaveLength(1)
    })

    it("an over-cap call is an APIError with status 402 naming the cap; nothing charged", async () => {
      const agent = await funded()
      const me = (await api.get("/v1/agents", agent.apiKey)).body.agents[0] as { id: string }
      await api.patch(`/v1/agents/${me.id}/policy`, { maxPerCallUsdCents: 0.001 }, agent.apiKey)
      const before = upstream.requests.length
      const error = await agent.openai.chat.completions.create({ model: "m-1", messages: [{ role: "user", content: "hi" }] })
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(OpenAI.APIError)
      expect(error).toMatchObject({ status: 402, code: "PER_CALL_LIMIT_EXCEEDED", type: "insufficient_quota" })
      expect(upstream.requests.length).toBe(before)
      expect(await charges(agent.apiKey)).toHaveLength(0)
    })

    it("an empty wallet is an APIError with status 402 INSUFFICIENT_BALANCE, for streams too", async () => {
      const agent = await funded(0n)
      for (const stream of [false, true]) {
        const error = await agent.openai.chat.completions.create({ model: "m-1", messages: [{ role: "user", content: "hi" }], stream })
          .catch((e: unknown) => e)
        expect(error).toBeInstanceOf(OpenAI.APIError)
        expect(error).toMatchObject({ status: 402, code: "INSUFFICIENT_BALANCE", type: "insufficient_quota" })
      }
    })

    it("a bad key is AuthenticationError; an unknown model NotFoundError; a bad body BadRequestError naming the field", async () => {
      const stranger = new OpenAI({ baseURL: `${server.baseUrl}/v1`, apiKey: "sk_agt_nope", maxRetries: 0 })
      const denied = await stranger.models.list().catch((e: unknown) => e)
      expect(denied).toBeInstanceOf(OpenAI.AuthenticationError)
      expect(denied).toMatchObject({ code: "UNAUTHORIZED", type: "authentication_error" })
      // The official client reads X-Request-Id into the error it throws.
      expect((denied as InstanceType<typeof OpenAI.APIError>).requestID).toMatch(/^[0-9a-f-]{36}$/)
      // The rest of the API keeps its own envelope.
      const elsewhere = await api.get("/v1/wallet", "sk_agt_nope")
      expect(elsewhere.status).toBe(401)
      expect(Object.keys(elsewhere.body.error).sort()).toEqual(["code", "message", "requestId"])
      expect(elsewhere.body.error.requestId).toBe(elsewhere.headers.get("x-request-id"))
      const agent = await funded()
      const unknown = await agent.openai.chat.completions.create({ model: "nope", messages: [{ role: "user", content: "hi" }] })
        .catch((e: unknown) => e)
      expect(unknown).toBeInstanceOf(OpenAI.NotFoundError)
      expect(unknown).toMatchObject({ code: "NOT_FOUND" })
      const bad = await agent.openai.chat.completions.create({ model: "m-1", messages: [] }).catch((e: unknown) => e)
      expect(bad).toBeInstanceOf(OpenAI.BadRequestError)
      expect(bad).toMatchObject({ code: "VALIDATION_ERROR", type: "invalid_request_error", param: "messages" })
      const tooMany = await agent.openai.chat.completions.create({ model: "m-1", messages: [{ role: "user", content: "hi" }], max_tokens: 5000 })
        .catch((e: unknown) => e)
      expect(tooMany).toBeInstanceOf(OpenAI.BadRequestError)
      expect(await charges(agent.apiKey)).toHaveLength(0)
    })

    it("an upstream's own refusal passes through in its shape and is not charged", async () => {
      const agent = await funded()
      upstream.status = 400
      try {
        const error = await agent.openai.chat.completions.create({ model: "m-1", messages: [{ role: "user", content: "hi" }] })
          .catch((e: unknown) => e)
        expect(error).toBeInstanceOf(OpenAI.BadRequestError)
        expect(error).toMatchObject({ code: "bad", param: "messages", message: expect.stringContaining("upstream refused") })
      } finally {
        upstream.status = 200
      }
      const charged = await charges(agent.apiKey)
      expect(charged.every((c) => c.amountUsdCents === 0)).toBe(true)
    })
  })
}

describe("OpenAI-compatible API over the operator's configured providers", () => {
  it("OPENAI_API_KEY with OPENAI_BASE_URL: its price card's models are listed and answered with the operator's key", async () => {
    const upstream = await startUpstream()
    const config = await Effect.runPromise(loadProvidersConfig.pipe(
      Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnvRecord({ OPENAI_API_KEY: OPERATOR_KEY, OPENAI_BASE_URL: `${upstream.url}/v1` })))
    ))
    const transport = Transport.layer({ operatorServices: config.operatorServices }).pipe(Layer.provide(upstreamLayers))
    const server = await startServer(storeBackends[0]![1](), { transport })
    try {
      const api = client(server.baseUrl)
      const { apiKey, accountId } = (await api.post("/v1/signup", { name: "configured" })).body as { apiKey: string; accountId: string }
      await server.run(Effect.gen(function*() {
        yield* (yield* Wallets).credit({ accountId: accountId as AccountId, key: "seed", pocket: "usd", amount: 1_000_000n, description: "seed" })
      }))
      const openai = new OpenAI({ baseURL: `${server.baseUrl}/v1`, apiKey, maxRetries: 0 })
      const ids = (await openai.models.list()).data.map((m) => m.id)
      expect(ids).toContain("gpt-4o-mini")
      expect(ids).toContain("openai/gpt-4o-mini")
      const { response } = await openai.chat.completions.create({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }] })
        .withResponse()
      expect(upstream.requests.at(-1)).toMatchObject({
        path: "/v1/chat/completions",
        authorization: `Bearer ${OPERATOR_KEY}`,
        body: { model: "gpt-4o-mini" }
      })
      // The card's prices: 40 × 0.015 / 1000 + 10 × 0.06 / 1000 cents = 0.0012 cents.
      expect(response.headers.get("x-spendgate-charged-usd-cents")).toBe("0.0012")
    } finally {
      await server.close()
      await upstream.close()
    }
  })
})

describe("OpenAI-compatible API: fallback", () => {
  it("a bare model whose cheapest service cannot be reached is answered by the next; one charge; a named one is not rerouted", async () => {
    const upstream = await startUpstream()
    const port = await Effect.runPromise(closedPort)
    const transport = Transport.layer({
      operatorServices: [
        service("cheap", upstream.url, price(1_000n, 2_000n)),
        service("down", `http://127.0.0.1:${port}`, price(100n, 200n))
      ]
    }).pipe(Layer.provide(upstreamLayers))
    const server = await startServer(storeBackends[0]![1](), { transport })
    try {
      const api = client(server.baseUrl)
      const { apiKey, accountId } = (await api.post("/v1/signup", { name: "fallback" })).body as { apiKey: string; accountId: string }
      await server.run(Effect.gen(function*() {
        yield* (yield* Wallets).credit({ accountId: accountId as AccountId, key: "seed", pocket: "usd", amount: 1_000_000n, description: "seed" })
      }))
      const openai = new OpenAI({ baseURL: `${server.baseUrl}/v1`, apiKey, maxRetries: 0 })
      expect((await openai.models.list()).data[0]).toMatchObject({ id: "m-1", owned_by: "down" })
      const { response } = await openai.chat.completions.create({ model: "m-1", messages: [{ role: "user", content: "hi" }] }).withResponse()
      expect(response.headers.get("x-spendgate-provider")).toBe("cheap")
      expect(response.headers.get("x-spendgate-charged-usd-cents")).toBe(String(CHARGE_CENTS))
      const stream = await openai.chat.completions.create({ model: "m-1", messages: [{ role: "user", content: "hi" }], stream: true })
      let text = ""
      for await (const c of stream) text += c.choices[0]?.delta.content ?? ""
      expect(text).toBe("Hello")
      const named = await openai.chat.completions.create({ model: "down/m-1", messages: [{ role: "user", content: "hi" }] })
        .catch((e: unknown) => e)
      expect(named).toBeInstanceOf(OpenAI.APIError)
      expect(named).toMatchObject({ code: "PROVIDER_ERROR", type: "api_error" })
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
})

describe("OpenAI-compatible API: rate limits", () => {
  it("429 is RateLimitError with Retry-After kept", async () => {
    const server = await startServer(storeBackends[0]![1](), { rateLimits: { agentPerMinute: 2, accountPerMinute: 1000 } })
    try {
      const api = client(server.baseUrl)
      const { apiKey } = (await api.post("/v1/signup", { name: "busy" })).body as { apiKey: string }
      const openai = new OpenAI({ baseURL: `${server.baseUrl}/v1`, apiKey, maxRetries: 0 })
      let error: unknown
      for (let i = 0; i < 5 && error === undefined; i++) error = await openai.models.list().then(() => undefined, (e: unknown) => e)
      expect(error).toBeInstanceOf(OpenAI.RateLimitError)
      expect(error).toMatchObject({ status: 429, code: "RATE_LIMITED", type: "rate_limit_error" })
      expect((error as InstanceType<typeof OpenAI.RateLimitError>).headers.get("retry-after")).toMatch(/^\d+$/)
    } finally {
      await server.close()
    }
  })
})
