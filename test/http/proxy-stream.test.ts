import { upstreamLayers } from "../support/upstreamLayers.ts"
import { Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import * as Transport from "../../adapters/services/transport.ts"
import type { AccountId, AgentId } from "../../src/domain/ids.ts"
import { RegistryStore } from "../../src/ports/RegistryStore.ts"
import { newSubmissionId } from "../../src/services/Service.ts"
import { Store } from "../../src/ports/Store.ts"
import { countedStreamCost } from "../../src/services/quote.ts"
import { usageTracker } from "../../src/services/sse.ts"
import { Spend } from "../../src/wallet/Spend.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { operatorChatService } from "../support/chatService.ts"
import { client, errorCode, type RunningServer, startServer } from "../support/server.ts"

/**
 * Streaming through the proxy: a local server that streams an OpenAI chat
 * completion as server-sent events (`chat.completion.chunk` objects, then a
 * usage chunk, then `data: [DONE]`), paced by the test.
 */

const KEY = "sk-operator-stream"

interface Upstream {
  readonly url: string
  readonly requests: Array<{ headers: IncomingMessage["headers"]; body: Record<string, unknown> }>
  release: () => void
  closed: number
  /** The usage chunk the upstream ends with: a real one, none, or one with no usable counts. */
  usage: "reported" | "none" | "malformed"
  close: () => Promise<void>
}

const chunk = (content: string, extra: Record<string, unknown> = {}) =>
  `data: ${JSON.stringify({
    id: "chatcmpl-1",
    object: "chat.completion.chunk",
    created: 1,
    model: "m-1",
    choices: content === "" ? [] : [{ index: 0, delta: { content }, finish_reason: null }],
    ...extra
  })}\n\n`

const startUpstream = (): Promise<Upstream> =>
  new Promise((resolve) => {
    let gate: () => void = () => {}
    const upstream: Upstream = {
      url: "",
      requests: [],
      release: () => gate(),
      closed: 0,
      usage: "reported",
      close: () => new Promise((done) => server.close(() => done()))
    }
    const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
      let raw = ""
      req.on("data", (c) => (raw += c))
      req.on("end", () => {
        upstream.requests.push({ headers: req.headers, body: JSON.parse(raw || "{}") })
        res.on("close", () => upstream.closed++)
        res.writeHead(200, { "content-type": "text/event-stream", "set-cookie": "upstream=1" })
        res.write(chunk("Hel"))
        const waited = new Promise<void>((r) => (gate = r))
        void waited.then(() => {
          if (res.writableEnded || res.destroyed) return
          res.write(chunk("lo"))
          if (upstream.usage === "reported") {
            res.write(chunk("", { usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 } }))
          } else if (upstream.usage === "malformed") {
            res.write(chunk("", { usage: { prompt_tokens: 11, completion_tokens: "lots" } }))
          }
          res.end("data: [DONE]\n\n")
        })
      })
    })
    server.listen(0, "127.0.0.1", () => {
      resolve(Object.assign(upstream, { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }))
    })
  })

describe("streamed completions through the proxy", () => {
  let upstream: Upstream
  let server: RunningServer
  let api: ReturnType<typeof client>

  beforeAll(async () => {
    upstream = await startUpstream()
    const transport = Transport.layer({
      operatorServices: [operatorChatService("streamer", "Streamer", upstream.url, KEY)],
      // A registry service at the same local upstream (allowed here; registry URLs are https in production).
      registry: { allowHosts: [new URL(upstream.url).host] }
    }).pipe(Layer.provide(upstreamLayers))
    server = await startServer(MemoryStore.layer, { transport })
    api = client(server.baseUrl)
  })
  afterAll(async () => {
    await server?.close()
    await upstream?.close()
  })

  const funded = async () => {
    const signup = await api.post("/v1/signup", { name: "ops" })
    await server.run(Effect.gen(function*() {
      yield* (yield* Wallets).credit({ accountId: signup.body.accountId as AccountId, key: "s", pocket: "usd", amount: 1_000_000n, description: "seed" })
    }))
    return signup.body as { apiKey: string; accountId: string }
  }

  const call = (key: string) =>
    fetch(`${server.baseUrl}/v1/proxy/streamer`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({
        method: "POST",
        path: "/v1/chat/completions",
        body: { model: "m-1", stream: true, messages: [{ role: "user", content: "hi" }] }
      })
    })

  it("streams chunk by chunk and charges from the usage chunk", async () => {
    const owner = await funded()
    upstream.usage = "reported"
    const res = await call(owner.apiKey)
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toContain("text/event-stream")
    expect(res.headers.get("set-cookie")).toBeNull()
    const reader = res.body!.getReader()
    const decoder = new TextDecoder()
    const first = decoder.decode((await reader.read()).value)
    // The first chunk arrived while the upstream is still holding the rest back.
    expect(first).toContain("\"Hel\"")
    upstream.release()
    let rest = ""
    for (;;) {
      const { value, done } = await reader.read()
      if (done) break
      rest += decoder.decode(value)
    }
    expect(rest).toContain("\"lo\"")
    expect(rest).toContain("data: [DONE]")
    const meta = /event: spendgate\.metadata\ndata: (.*)\n/.exec(rest)
    expect(meta).not.toBeNull()
    // 11 × 1000 / 1000 = 11 + 7 × 2000 / 1000 = 14 → 25 µUSD
    expect(JSON.parse(meta![1]!)).toMatchObject({ chargedUsdCents: 0.0025, provider: "streamer", model: "m-1" })
    const sent = upstream.requests.at(-1)!
    expect(sent.headers["authorization"]).toBe(`Bearer ${KEY}`)
    expect(sent.body).toMatchObject({ stream: true, max_tokens: 100, stream_options: { include_usage: true } })
    const wallet = await api.get("/v1/wallet", owner.apiKey)
    expect(wallet.body.balanceUsdCents).toBe(99.9975)
  })

  const readAll = async (res: Response) => {
    const reader = res.body!.getReader()
    const decoder = new TextDecoder()
    let text = ""
    for (;;) {
      const { value, done } = await reader.read()
      if (done) break
      text += decoder.decode(value)
      if (text.includes("\"Hel\"")) upstream.release()
    }
    return text
  }

  for (const usage of ["none", "malformed"] as const) {
    it(`a stream with ${usage === "none" ? "no usage chunk" : "a malformed usage chunk"} is charged the prompt part plus what it streamed, never 0`, async () => {
      const owner = await funded()
      upstream.usage = usage
      const res = await call(owner.apiKey)
      expect(res.status).toBe(200)
      const text = await readAll(res)
      upstream.usage = "reported"
      expect(text).toContain("data: [DONE]")
      const meta = /event: spendgate\.metadata\ndata: (.*)\n/.exec(text)
      expect(meta).not.toBeNull()
      const { chargedUsdCents, quotedUsdCents } = JSON.parse(meta![1]!) as { chargedUsdCents: number; quotedUsdCents: number }
      // Quote: prompt part + 100 tokens × 2000 µUSD / 1000 = prompt part + 200 µUSD. Streamed: "Hel" + "lo" = 5 bytes,
      // so at most 5 completion tokens = 10 µUSD: the charge is the quote less 190 µUSD (0.019 cents).
      expect(chargedUsdCents).toBeGreaterThan(0)
      expect(Math.round((quotedUsdCents - chargedUsdCents) * 10_000)).toBe(190)
      const wallet = await api.get("/v1/wallet", owner.apiKey)
      expect(Math.round((100 - wallet.body.balanceUsdCents) * 10_000)).toBe(Math.round(chargedUsdCents * 10_000))
      const charges = await api.get("/v1/wallet/transactions?type=charge", owner.apiKey)
      expect(charges.body.transactions[0].amountUsdCents).toBe(chargedUsdCents)
    })
  }

  it("a registry service that streams with no usage chunk is charged by counting too", async () => {
    const owner = await funded()
    await server.run(Effect.gen(function*() {
      const registry = yield* RegistryStore
      const id = newSubmissionId()
      yield* registry.insert({
        slug: "crafted",
        name: "Crafted",
        description: "omits usage",
        baseUrl: upstream.url,
        capabilities: ["reason"],
        endpoints: [{ path: "/v1/chat/completions", method: "POST", description: "chat" }],
        pricing: {
          "/v1/chat/completions": {
            format: "openai-chat",
            models: { "m-1": { inputPer1kTokens: 0.1, outputPer1kTokens: 0.2, maxTokens: 1000 } }
          }
        },
        contact: "ops@example.com",
        id,
        accountId: owner.accountId as AccountId,
        agentId: "agt_x" as AgentId,
        status: "pending",
        createdAt: new Date(),
        reviewedAt: null,
        reviewNote: null
      })
      yield* registry.review(id, { status: "approved", note: null, at: new Date() })
      // The server's context holds the registry store; `run` types only the services most tests use.
    }) as Effect.Effect<void, never, never>)
    upstream.usage = "none"
    const seen = upstream.requests.length
    const res = await fetch(`${server.baseUrl}/v1/proxy/crafted`, {
      method: "POST",
      headers: { authorization: `Bearer ${owner.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        method: "POST",
        path: "/v1/chat/completions",
        body: { model: "m-1", stream: true, messages: [{ role: "user", content: "hi" }] }
      })
    })
    expect(res.status).toBe(200)
    const text = await readAll(res)
    upstream.usage = "reported"
    expect(upstream.requests.length).toBe(seen + 1)
    // No operator credentials for a registry service.
    expect(upstream.requests.at(-1)!.headers["authorization"]).toBeUndefined()
    const meta = /event: spendgate\.metadata\ndata: (.*)\n/.exec(text)
    const { chargedUsdCents, quotedUsdCents } = JSON.parse(meta![1]!) as { chargedUsdCents: number; quotedUsdCents: number }
    // Budget 1000 tokens × 2000 µUSD / 1000 = 2000 µUSD; streamed 5 bytes = 10 µUSD.
    expect(chargedUsdCents).toBeGreaterThan(0)
    expect(Math.round((quotedUsdCents - chargedUsdCents) * 10_000)).toBe(1990)
  })

  it("a client that disconnects mid-stream stops the upstream and pays the prompt part plus what reached it", async () => {
    const owner = await funded()
    const closedBefore = upstream.closed
    const controller = new AbortController()
    const res = await fetch(`${server.baseUrl}/v1/proxy/streamer`, {
      method: "POST",
      signal: controller.signal,
      headers: { authorization: `Bearer ${owner.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        method: "POST",
        path: "/v1/chat/completions",
        body: { model: "m-1", stream: true, messages: [{ role: "user", content: "hi" }] }
      })
    })
    const reader = res.body!.getReader()
    await reader.read()
    controller.abort()
    // The upstream connection is closed, and the hold is settled, not left held.
    let settled = false
    let quoted = 0
    for (let i = 0; i < 100 && !settled; i++) {
      await new Promise((r) => setTimeout(r, 50))
      const holds = await server.run(Effect.gen(function*() {
        return yield* (yield* Store).listReservations(owner.accountId as AccountId, { limit: 5, offset: 0 })
      }))
      settled = holds.items.length === 1 && holds.items[0]!.status === "settled"
      quoted = Number(holds.items[0]?.quotedMicroUsd ?? 0n)
    }
    expect(settled).toBe(true)
    expect(upstream.closed).toBeGreaterThan(closedBefore)
    const charges = await api.get("/v1/wallet/transactions?type=charge", owner.apiKey)
    const charged = charges.body.transactions[0].amountUsdCents
    expect(charged).toBeGreaterThan(0)
    // Not the completion budget (100 tokens × 2000 / 1000 = 200 µUSD): the prompt part and the
    // 3 bytes ("Hel") streamed before the client left, 3 tokens × 2000 / 1000 = 6 µUSD.
    expect(Math.round(charged * 10_000)).toBe(quoted - 200 + 6)
    upstream.release()
  })

  /** Runs the recovery sweep as if a day had passed: every hold now in progress is past its lifetime. */
  const sweepADayLater = () =>
    server.run(Effect.gen(function*() {
      yield* TestClock.setTime(Date.now() + 86_400_000)
      return yield* (yield* Spend).sweep
    }).pipe(Effect.provide(TestClock.layer())))

  const firstChunkThenSweep = async (key: string) => {
    upstream.usage = "reported"
    const res = await call(key)
    const reader = res.body!.getReader()
    const decoder = new TextDecoder()
    expect(decoder.decode((await reader.read()).value)).toContain("\"Hel\"")
    expect(await sweepADayLater()).toBe(1)
    return async () => {
      upstream.release()
      let rest = ""
      for (;;) {
        const { value, done } = await reader.read()
        if (done) break
        rest += decoder.decode(value)
      }
      return rest
    }
  }

  it("a stream that outlives its hold is still charged, as a new debit, and gets its metadata", async () => {
    const owner = await funded()
    const finish = await firstChunkThenSweep(owner.apiKey)
    const rest = await finish()
    const meta = /event: spendgate\.metadata\ndata: (.*)\n/.exec(rest)
    expect(meta).not.toBeNull()
    expect(JSON.parse(meta![1]!)).toMatchObject({ chargedUsdCents: 0.0025 })
    expect((await api.get("/v1/wallet", owner.apiKey)).body.balanceUsdCents).toBe(99.9975)
  })

  it("a stream that outlives its hold and can no longer be charged ends with an error event, not metadata", async () => {
    const owner = await funded()
    const worker = await api.post("/v1/agents", { name: "slow" }, owner.apiKey)
    const finish = await firstChunkThenSweep(worker.body.apiKey)
    // Meanwhile the owner caps the worker below the charge.
    await api.patch(`/v1/agents/${worker.body.id}/policy`, { maxPerDayUsdCents: 0.0001 }, owner.apiKey)
    const rest = await finish()
    expect(rest).not.toContain("spendgate.metadata")
    const error = /event: spendgate\.error\ndata: (.*)\n/.exec(rest)
    expect(error).not.toBeNull()
    expect(JSON.parse(error![1]!)).toMatchObject({ error: { code: "BUDGET_EXCEEDED" } })
    expect((await api.get("/v1/wallet", owner.apiKey)).body.balanceUsdCents).toBe(100)
  })

  it("never reaches the upstream for a killed agent or an exhausted cap", async () => {
    const owner = await funded()
    const worker = await api.post("/v1/agents", { name: "w" }, owner.apiKey)
    const seen = upstream.requests.length
    await api.put(`/v1/agents/${worker.body.id}/policy`, { maxPerCallUsdCents: null, maxPerDayUsdCents: 0.0001, allowedCapabilities: null }, owner.apiKey)
    const capped = await call(worker.body.apiKey)
    expect(capped.status).toBe(402)
    expect(((await capped.json()) as { error: { code: string } }).error.code).toBe("BUDGET_EXCEEDED")
    await api.patch(`/v1/agents/${worker.body.id}`, { killed: true }, owner.apiKey)
    const killed = await call(worker.body.apiKey)
    expect(killed.status).toBe(403)
    expect(upstream.requests.length).toBe(seen)
    expect(errorCode(await api.get("/v1/wallet", worker.body.apiKey))).toBe("AGENT_KILLED")
  })
})

describe("counting what a stream carried", () => {
  const feed = (format: "openai-chat" | "anthropic-messages", text: string) => {
    const tracker = usageTracker(format)
    // Split mid-character to check the decoder keeps multi-byte text whole.
    const bytes = new TextEncoder().encode(text)
    tracker.push(bytes.subarray(0, 7))
    tracker.push(bytes.subarray(7))
    return tracker
  }

  it("counts content and tool-call deltas, not the envelope", () => {
    const tracker = feed(
      "openai-chat",
      chunk("héllo") +
        `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", model: "m", choices: [{ index: 0, delta: { role: "assistant", tool_calls: [{ index: 0, id: "", function: { name: "ab", arguments: "{}" } }] }, finish_reason: null }] })}\n\n` +
        "data: [DONE]\n\n"
    )
    // "héllo" is 6 bytes, "ab" 2 and "{}" 2; the tool call's empty id 0.
    expect(tracker.streamedBytes()).toBe(10)
    expect(tracker.usage()).toBeUndefined()
  })

  it("counts Anthropic text and JSON deltas, and anything that is not an SSE field", () => {
    const tracker = feed(
      "anthropic-messages",
      `event: message_start\ndata: ${JSON.stringify({ type: "message_start", message: { id: "m", type: "message", role: "assistant", model: "x", content: [], usage: { input_tokens: 5 } } })}\n\n` +
        `event: content_block_delta\ndata: ${JSON.stringify({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "abc" } })}\n\n` +
        `data: ${JSON.stringify({ type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: "{\"q\":1}" } })}\n\n` +
        "smuggled\n: a comment\n"
    )
    expect(tracker.streamedBytes()).toBe(3 + 7 + 8)
    // message_start gave the input count only: no usable usage yet.
    expect(tracker.usage()).toBeUndefined()
  })

  it("the counted charge is the prompt part plus the streamed bytes as tokens, capped at the budget", () => {
    const base = { inputMicroUsd: 100n, maxTokens: 50, outputPer1kMicroUsd: 2_000n }
    expect(countedStreamCost({ ...base, streamedBytes: 0 })).toBe(100n)
    expect(countedStreamCost({ ...base, streamedBytes: 10 })).toBe(120n)
    expect(countedStreamCost({ ...base, streamedBytes: 10_000 })).toBe(200n)
  })
})
