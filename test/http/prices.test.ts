import { upstreamLayers } from "../support/upstreamLayers.ts"
import { ConfigProvider, Effect, Layer } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as SafeHttp from "../../adapters/net/SafeHttp.ts"
import { loadProvidersConfig } from "../../adapters/providersConfig.ts"
import * as Transport from "../../adapters/services/transport.ts"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { client, type RunningServer, startServer, storeBackends } from "../support/server.ts"

/**
 * Model prices end to end, configured the way an operator does it (price
 * file in PRICES_FILE, LLM_BASE_URL / LLM_NAME / LLM_API_KEY, ANTHROPIC_*):
 * a self-hosted OpenAI-compatible server answers /v1/chat/completions through
 * the official `openai` client and is listed by GET /v1/models; prompt tokens
 * an upstream served from its cache are charged at the cached price, in JSON
 * answers and in streams, in OpenAI's and Anthropic's formats; and a model no
 * card prices is refused before anything is held, naming the price file.
 */

const LOCAL_KEY = "sk-local-server-key"
const ANTHROPIC_KEY = "sk-ant-operator-key"

/** OpenAI usage: 1000 prompt tokens of which 800 cached, 20 completion tokens. */
const OPENAI_USAGE = { prompt_tokens: 1000, completion_tokens: 20, total_tokens: 1020, prompt_tokens_details: { cached_tokens: 800 } }
/** Anthropic usage: 100 plain input tokens, 1000 read from the cache, 200 written to it, 20 output. */
const ANTHROPIC_USAGE = { input_tokens: 100, output_tokens: 20, cache_read_input_tokens: 1000, cache_creation_input_tokens: 200 }

/**
 * Card prices, µUSD per 1000 tokens: input 1000, cached 100, cache writes 1250, output 2000.
 * OpenAI: (200 × 1000 + 800 × 100) / 1000 + 20 × 2000 / 1000 = 280 + 40 = 320 µUSD = 0.032 cents.
 * Anthropic: (100 × 1000 + 1000 × 100 + 200 × 1250) / 1000 + 40 = 450 + 40 = 490 µUSD = 0.049 cents.
 * Without the cached prices: 1040 µUSD (0.104 cents) and 1340 µUSD (0.134 cents).
 */
const OPENAI_CHARGE_CENTS = 0.032
const ANTHROPIC_CHARGE_CENTS = 0.049

const card = (id: string, extra: Record<string, unknown> = {}) => ({
  capability: "reason",
  $sources: "test",
  models: [{
    id,
    inputPer1kUsdCents: 0.1,
    cachedInputPer1kUsdCents: 0.01,
    outputPer1kUsdCents: 0.2,
    maxTokens: 1000,
    defaultMaxTokens: 100,
    contextTokens: 32_768,
    ...extra
  }]
})

interface Recorded {
  readonly path: string
  readonly headers: IncomingMessage["headers"]
  readonly body: Record<string, unknown>
}

/** One server speaking OpenAI's Chat Completions and Anthropic's Messages, JSON and streamed, as documented. */
const startUpstream = (): Promise<{ url: string; requests: Array<Recorded>; close: () => Promise<void> }> =>
  new Promise((resolve) => {
    const requests: Array<Recorded> = []
    const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
      let raw = ""
      req.on("data", (c) => (raw += c))
      req.on("end", () => {
        const body = JSON.parse(raw || "{}") as Record<string, unknown>
        requests.push({ path: req.url ?? "", headers: req.headers, body })
        const sse = (lines: ReadonlyArray<string>) => {
          res.writeHead(200, { "content-type": "text/event-stream" })
          for (const line of lines) res.write(line)
          res.end()
        }
        if (req.url === "/v1/chat/completions") {
          if (req.headers.authorization !== `Bearer ${LOCAL_KEY}`) {
            res.writeHead(401, { "content-type": "application/json" })
            return res.end(JSON.stringify({ error: { message: "bad key", type: "invalid_request_error", code: "invalid_api_key", param: null } }))
          }
          const base = { id: "chatcmpl-1", created: 1_700_000_000, model: body["model"] }
          if (body["stream"] === true) {
            const chunk = (extra: Record<string, unknown>) => `data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", ...extra })}\n\n`
            const includeUsage = (body["stream_options"] as { include_usage?: boolean } | undefined)?.include_usage === true
            return sse([
              chunk({ choices: [{ index: 0, delta: { role: "assistant", content: "Hi" }, finish_reason: null }] }),
              chunk({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }),
              ...(includeUsage ? [chunk({ choices: [], usage: OPENAI_USAGE })] : []),
              "data: [DONE]\n\n"
            ])
          }
          res.writeHead(200, { "content-type": "application/json" })
          return res.end(JSON.stringify({
            ...base,
            object: "chat.completion",
            choices: [{ index: 0, message: { role: "assistant", content: "Hi from the local model." }, logprobs: null, finish_reason: "stop" }],
            usage: OPENAI_USAGE
          }))
        }
        if (req.url === "/v1/messages") {
          if (req.headers["x-api-key"] !== ANTHROPIC_KEY) {
            res.writeHead(401, { "content-type": "application/json" })
            return res.end(JSON.stringify({ type: "error", error: { type: "authentication_error", message: "invalid x-api-key" } }))
          }
          const message = { id: "msg_1", type: "message", role: "assistant", model: body["model"], stop_sequence: null }
          if (body["stream"] === true) {
            const event = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`
            return sse([
              event("message_start", { message: { ...message, content: [], stop_reason: null, usage: { ...ANTHROPIC_USAGE, output_tokens: 1 } } }),
              event("content_block_start", { index: 0, content_block: { type: "text", text: "" } }),
              event("content_block_delta", { index: 0, delta: { type: "text_delta", text: "Hi" } }),
              event("content_block_stop", { index: 0 }),
              event("message_delta", { delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: ANTHROPIC_USAGE.output_tokens } }),
              event("message_stop", {})
            ])
          }
          res.writeHead(200, { "content-type": "application/json" })
          return res.end(JSON.stringify({ ...message, content: [{ type: "text", text: "Hi" }], stop_reason: "end_turn", usage: ANTHROPIC_USAGE }))
        }
        res.writeHead(404, { "content-type": "application/json" })
        res.end(JSON.stringify({ error: { message: "no such path", type: "invalid_request_error", code: null, param: null } }))
      })
    })
    server.listen(0, "127.0.0.1", () => {
      resolve({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        requests,
        close: () => new Promise((done) => server.close(() => done()))
      })
    })
  })

/** A prompt long enough that the quote's prompt bound covers the 1000-odd prompt tokens the upstream reports. */
const PROMPT = "Summarise the cached document. ".repeat(60)

describe.each(storeBackends)("model prices over HTTP (%s)", (_name, store) => {
  const dir = mkdtempSync(join(tmpdir(), "spendgate-prices-http-"))
  let upstream: Awaited<ReturnType<typeof startUpstream>>
  let server: RunningServer
  let api: ReturnType<typeof client>

  beforeAll(async () => {
    upstream = await startUpstream()
    const pricesFile = join(dir, "prices.json")
    writeFileSync(pricesFile, JSON.stringify({
      "my-llm": card("llama-local"),
      openai: card("gpt-test"),
      anthropic: card("claude-test", { cacheWritePer1kUsdCents: 0.125 })
    }))
    const env = {
      PRICES_FILE: pricesFile,
      LLM_BASE_URL: `${upstream.url}/v1`,
      LLM_NAME: "my-llm",
      LLM_API_KEY: LOCAL_KEY,
      // OpenAI itself, at the same local server (it checks the same key).
      OPENAI_API_KEY: LOCAL_KEY,
      OPENAI_BASE_URL: `${upstream.url}/v1`,
      ANTHROPIC_API_KEY: ANTHROPIC_KEY,
      ANTHROPIC_BASE_URL: upstream.url
    }
    const config = await Effect.runPromise(loadProvidersConfig.pipe(
      Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnvRecord(env)))
    ))
    const http = upstreamLayers
    const providers = Layer.effect(
      Providers,
      Effect.map(Effect.forEach(config.builders.filter((b) => b.capability === "reason"), (b) => b.build), (all) => ({ all }))
    ).pipe(Layer.provide(Layer.mergeAll(http, SafeHttp.layer({}))))
    const transport = Transport.layer({ operatorServices: config.operatorServices }).pipe(Layer.provide(http))
    server = await startServer(store(), { providers, transport })
    api = client(server.baseUrl)
  })
  afterAll(async () => {
    await server?.close()
    await upstream?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  const funded = async () => {
    const signup = await api.post("/v1/signup", { name: "agent" })
    const { apiKey, accountId } = signup.body as { apiKey: string; accountId: string }
    await server.run(Effect.gen(function*() {
      yield* (yield* Wallets).credit({ accountId: accountId as AccountId, key: `seed-${apiKey}`, pocket: "usd", amount: 1_000_000n, description: "seed" })
    }))
    return { apiKey, openai: new OpenAI({ baseURL: `${server.baseUrl}/v1`, apiKey, maxRetries: 0 }) }
  }

  const charges = async (key: string) => {
    const listed = await api.get("/v1/wallet/transactions?limit=100", key)
    return (listed.body.transactions as Array<{ type: string; amountUsdCents: number; provider?: string }>).filter((t) => t.type === "charge")
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

  const balance = async (key: string) => (await api.get("/v1/wallet", key)).body.balanceUsdCents as number

  describe("the self-hosted server on the OpenAI surface", () => {
    it("answers /v1/chat/completions by model through the official client, charged from usage at its card's prices", async () => {
      const agent = await funded()
      const { data, response } = await agent.openai.chat.completions.create({
        model: "llama-local",
        messages: [{ role: "user", content: PROMPT }]
      }).withResponse()
      expect(data.choices[0]!.message.content).toBe("Hi from the local model.")
      expect(response.headers.get("x-spendgate-provider")).toBe("my-llm")
      expect(response.headers.get("x-spendgate-charged-usd-cents")).toBe(String(OPENAI_CHARGE_CENTS))
      const sent = upstream.requests.at(-1)!
      expect(sent.path).toBe("/v1/chat/completions")
      expect(sent.headers.authorization).toBe(`Bearer ${LOCAL_KEY}`)
      expect(sent.body).toMatchObject({ model: "llama-local", max_tokens: 100 })
      expect(await charges(agent.apiKey)).toMatchObject([{ amountUsdCents: OPENAI_CHARGE_CENTS }])
    })

    it("GET /v1/capabilities/reason shows its card: cached price and context window included", async () => {
      const agent = await funded()
      const res = await api.get("/v1/capabilities/reason", agent.apiKey)
      expect(res.status).toBe(200)
      const provider = (res.body.providers as Array<{ name: string; models?: Array<unknown> }>).find((p) => p.name === "my-llm")
      expect(provider?.models).toEqual([{
        id: "llama-local",
        inputPricePer1kTokens: 0.1,
        outputPricePer1kTokens: 0.2,
        cachedInputPricePer1kTokens: 0.01,
        maxTokens: 1000,
        contextTokens: 32_768
      }])
      const anthropic = (res.body.providers as Array<{ name: string; models?: Array<Record<string, unknown>> }>).find((p) => p.name === "anthropic")
      expect(anthropic?.models?.[0]).toMatchObject({ id: "claude-test", cacheWritePricePer1kTokens: 0.125 })
    })

    it("is listed by GET /v1/models, bare and as LLM_NAME/model", async () => {
      const agent = await funded()
      const ids = (await agent.openai.models.list()).data.map((m) => m.id)
      expect(ids).toEqual(expect.arrayContaining(["llama-local", "my-llm/llama-local"]))
    })

    it("streams with its usage chunk: cached tokens at the cached price", async () => {
      const agent = await funded()
      const stream = await agent.openai.chat.completions.create({
        model: "my-llm/llama-local",
        messages: [{ role: "user", content: PROMPT }],
        stream: true
      })
      let text = ""
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ""
      expect(text).toBe("Hi")
      expect(upstream.requests.at(-1)!.body).toMatchObject({ stream: true, stream_options: { include_usage: true } })
      expect(await settledCharges(agent.apiKey, 1)).toMatchObject([{ amountUsdCents: OPENAI_CHARGE_CENTS }])
    })

    it("is offered at /v1/proxy/{LLM_NAME} with the same prices", async () => {
      const agent = await funded()
      const res = await api.post("/v1/proxy/my-llm", {
        method: "POST",
        path: "/chat/completions",
        body: { model: "llama-local", messages: [{ role: "user", content: PROMPT }] }
      }, agent.apiKey)
      expect(res.status).toBe(200)
      expect(await charges(agent.apiKey)).toMatchObject([{ amountUsdCents: OPENAI_CHARGE_CENTS }])
    })

    it("backs the reason capability, charged at the cached price too", async () => {
      const agent = await funded()
      const res = await api.post("/v1/capabilities/reason", { prompt: PROMPT, provider: "my-llm" }, agent.apiKey)
      expect(res.status).toBe(200)
      expect(res.body.metadata).toMatchObject({ provider: "my-llm", chargedUsdCents: OPENAI_CHARGE_CENTS })
    })
  })

  describe("OpenAI's completion cap field", () => {
    it("OpenAI is sent max_completion_tokens (its reasoning models refuse max_tokens); a caller's own field is kept", async () => {
      const agent = await funded()
      await agent.openai.chat.completions.create({ model: "openai/gpt-test", messages: [{ role: "user", content: PROMPT }] })
      const sent = upstream.requests.at(-1)!.body
      expect(sent["max_completion_tokens"]).toBe(100)
      expect(sent).not.toHaveProperty("max_tokens")
      await agent.openai.chat.completions.create({ model: "openai/gpt-test", max_tokens: 50, messages: [{ role: "user", content: PROMPT }] })
      expect(upstream.requests.at(-1)!.body).toMatchObject({ max_tokens: 50 })
      expect(upstream.requests.at(-1)!.body).not.toHaveProperty("max_completion_tokens")
      const reason = await api.post("/v1/capabilities/reason", { prompt: PROMPT, provider: "openai", maxTokens: 70 }, agent.apiKey)
      expect(reason.status).toBe(200)
      expect(upstream.requests.at(-1)!.body).toMatchObject({ model: "gpt-test", max_completion_tokens: 70 })
      expect(upstream.requests.at(-1)!.body).not.toHaveProperty("max_tokens")
      // The self-hosted server keeps max_tokens, which llama.cpp, vLLM and Ollama read.
      await agent.openai.chat.completions.create({ model: "my-llm/llama-local", messages: [{ role: "user", content: PROMPT }] })
      expect(upstream.requests.at(-1)!.body).toMatchObject({ max_tokens: 100 })
    })
  })

  describe("Anthropic's prompt cache", () => {
    it("reason: cache reads at the cached price, cache writes at the write price", async () => {
      const agent = await funded()
      const res = await api.post("/v1/capabilities/reason", { prompt: PROMPT, provider: "anthropic" }, agent.apiKey)
      expect(res.status).toBe(200)
      expect(res.body.data.usage).toEqual({ promptTokens: 1300, completionTokens: 20, totalTokens: 1320 })
      expect(res.body.metadata).toMatchObject({ provider: "anthropic", chargedUsdCents: ANTHROPIC_CHARGE_CENTS })
    })

    it("proxy, JSON and streamed: the same charge", async () => {
      const agent = await funded()
      const call = (stream: boolean) =>
        fetch(`${server.baseUrl}/v1/proxy/anthropic`, {
          method: "POST",
          headers: { authorization: `Bearer ${agent.apiKey}`, "content-type": "application/json" },
          body: JSON.stringify({
            method: "POST",
            path: "/v1/messages",
            body: { model: "claude-test", max_tokens: 100, stream, messages: [{ role: "user", content: PROMPT }] }
          })
        })
      const json = await call(false)
      expect(json.status).toBe(200)
      await json.text()
      const streamed = await call(true)
      expect(streamed.status).toBe(200)
      expect(await streamed.text()).toContain("message_stop")
      const found = await settledCharges(agent.apiKey, 2)
      expect(found.map((c) => c.amountUsdCents)).toEqual([ANTHROPIC_CHARGE_CENTS, ANTHROPIC_CHARGE_CENTS])
    })
  })

  describe("a model no card prices", () => {
    const expectNotPriced = (body: { error: { code: string; message: string; details: Record<string, unknown> } }, model: string) => {
      expect(body.error.code).toBe("MODEL_NOT_PRICED")
      expect(body.error.message).toContain(`"${model}"`)
      expect(body.error.message).toContain("PRICES_FILE")
      expect(body.error.message).toContain("\"capability\": \"reason\"")
      expect(body.error.details).toMatchObject({ model })
    }

    it("reason: 400 MODEL_NOT_PRICED naming the model and the price file; nothing is held or charged", async () => {
      const agent = await funded()
      const before = await balance(agent.apiKey)
      const res = await api.post("/v1/capabilities/reason", { prompt: "hi", model: "gpt-9" }, agent.apiKey)
      expect(res.status).toBe(400)
      expectNotPriced(res.body, "gpt-9")
      expect(res.body.error.details.provider).toBeUndefined()
      const pinned = await api.post("/v1/capabilities/reason", { prompt: "hi", model: "gpt-9", provider: "my-llm" }, agent.apiKey)
      expect(pinned.status).toBe(400)
      expectNotPriced(pinned.body, "gpt-9")
      expect(pinned.body.error.details.provider).toBe("my-llm")
      expect(pinned.body.error.message).toContain("\"my-llm\": {")
      expect(await balance(agent.apiKey)).toBe(before)
      expect(await charges(agent.apiKey)).toEqual([])
    })

    it("proxy: 400 MODEL_NOT_PRICED naming the service's card; the upstream is not called", async () => {
      const agent = await funded()
      const sent = upstream.requests.length
      const res = await api.post("/v1/proxy/my-llm", {
        method: "POST",
        path: "/chat/completions",
        body: { model: "gpt-9", messages: [{ role: "user", content: "hi" }] }
      }, agent.apiKey)
      expect(res.status).toBe(400)
      expectNotPriced(res.body, "gpt-9")
      expect(res.body.error.details.provider).toBe("my-llm")
      const noModel = await api.post("/v1/proxy/my-llm", {
        method: "POST",
        path: "/chat/completions",
        body: { messages: [{ role: "user", content: "hi" }] }
      }, agent.apiKey)
      expect(noModel.status).toBe(400)
      expect(noModel.body.error.code).toBe("VALIDATION_ERROR")
      expect(upstream.requests.length).toBe(sent)
      expect(await charges(agent.apiKey)).toEqual([])
    })

    it("chat completions: service/model the service does not price is 400; a name no service knows is 404 naming the price file", async () => {
      const agent = await funded()
      const sent = upstream.requests.length
      const notPriced = await agent.openai.chat.completions.create({ model: "my-llm/gpt-9", messages: [{ role: "user", content: "hi" }] })
        .catch((error: unknown) => error)
      expect(notPriced).toBeInstanceOf(OpenAI.BadRequestError)
      expect((notPriced as InstanceType<typeof OpenAI.BadRequestError>).code).toBe("MODEL_NOT_PRICED")
      expect((notPriced as Error).message).toContain("PRICES_FILE")
      const unknown = await agent.openai.chat.completions.create({ model: "gpt-9", messages: [{ role: "user", content: "hi" }] })
        .catch((error: unknown) => error)
      expect(unknown).toBeInstanceOf(OpenAI.NotFoundError)
      expect((unknown as Error).message).toContain("GET /v1/models")
      expect((unknown as Error).message).toContain("PRICES_FILE")
      expect(upstream.requests.length).toBe(sent)
      expect(await charges(agent.apiKey)).toEqual([])
    })
  })
})
