import { NodeHttpClient } from "@effect/platform-node"
import { Effect, Layer, Redacted } from "effect"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import * as Transport from "../../adapters/services/transport.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { Store } from "../../src/ports/Store.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
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
  withUsage: boolean
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
      withUsage: true,
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
          if (upstream.withUsage) {
            res.write(chunk("", { usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 } }))
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
      operatorServices: [{
        service: {
          slug: "streamer",
          name: "Streamer",
          description: "test",
          baseUrl: upstream.url,
          capabilities: ["reason"],
          origin: "operator",
          endpoints: [{
            path: "/v1/chat/completions",
            method: "POST",
            description: "chat",
            price: {
              kind: "tokens",
              format: "openai-chat",
              models: [{ id: "m-1", inputPer1kMicroUsd: 1_000n, outputPer1kMicroUsd: 2_000n, maxTokens: 1000, defaultMaxTokens: 100 }]
            }
          }]
        },
        credentials: { authorization: Redacted.make(`Bearer ${KEY}`) }
      }]
    }).pipe(Layer.provide(NodeHttpClient.layerUndici))
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
    upstream.withUsage = true
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

  it("a client that disconnects mid-stream stops the upstream and is charged the prompt part of the quote", async () => {
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
    for (let i = 0; i < 100 && !settled; i++) {
      await new Promise((r) => setTimeout(r, 50))
      const holds = await server.run(Effect.gen(function*() {
        return yield* (yield* Store).listReservations(owner.accountId as AccountId, { limit: 5, offset: 0 })
      }))
      settled = holds.items.length === 1 && holds.items[0]!.status === "settled"
    }
    expect(settled).toBe(true)
    expect(upstream.closed).toBeGreaterThan(closedBefore)
    const charges = await api.get("/v1/wallet/transactions?type=charge", owner.apiKey)
    const charged = charges.body.transactions[0].amountUsdCents
    expect(charged).toBeGreaterThan(0)
    // Only the prompt part: the completion budget (100 tokens × 2000 / 1000 = 200 µUSD) is not charged.
    expect(charged).toBeLessThan(0.02)
    upstream.release()
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
