import { upstreamLayers } from "../support/upstreamLayers.ts"
import { Duration, Effect, Layer, Redacted, Result } from "effect"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import * as Transport from "../../adapters/services/transport.ts"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import type { Provider } from "../../src/capabilities/Provider.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { Store } from "../../src/ports/Store.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { client, type RunningServer, startServer } from "../support/server.ts"

/**
 * The receipt (`metadata`) is one view over every route: a capability call, a
 * proxied call and a streamed proxied call answer the same fields, and
 * `latencyMs` means the same on all three — the upstream call's time, from the
 * request being sent to the last byte of the answer (a stream: until it ends),
 * never the hold before it. The store here takes a known time to place a hold
 * and every upstream a known time to answer, so the two cannot be confused.
 */

/** How long every upstream takes to answer (a stream: between its first and its last chunk). */
const UPSTREAM_MS = 250
/** How long the store takes to place a hold: never part of `latencyMs`. */
const HOLD_MS = 1000

/** A chat upstream in OpenAI's wire format that answers after UPSTREAM_MS. */
const startUpstream = (): Promise<{ readonly url: string; readonly close: () => Promise<void> }> =>
  new Promise((resolve) => {
    const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 }
    const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
      let raw = ""
      req.on("data", (c) => (raw += c))
      req.on("end", () => {
        const body = JSON.parse(raw || "{}") as { stream?: boolean }
        if (body.stream === true) {
          res.writeHead(200, { "content-type": "text/event-stream" })
          const chunk = (extra: Record<string, unknown>) =>
            `data: ${JSON.stringify({ id: "c-1", object: "chat.completion.chunk", created: 1, model: "m-1", ...extra })}\n\n`
          res.write(chunk({ choices: [{ index: 0, delta: { content: "Hel" }, finish_reason: null }] }))
          setTimeout(() => {
            res.write(chunk({ choices: [{ index: 0, delta: { content: "lo" }, finish_reason: "stop" }] }))
            res.write(chunk({ choices: [], usage }))
            res.end("data: [DONE]\n\n")
          }, UPSTREAM_MS)
          return
        }
        setTimeout(() => {
          res.writeHead(200, { "content-type": "application/json" })
          res.end(JSON.stringify({
            id: "c-1",
            object: "chat.completion",
            created: 1,
            model: "m-1",
            choices: [{ index: 0, message: { role: "assistant", content: "Hello" }, finish_reason: "stop" }],
            usage
          }))
        }, UPSTREAM_MS)
      })
    })
    server.listen(0, "127.0.0.1", () =>
      resolve({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        close: () => new Promise((done) => server.close(() => done()))
      }))
  })

/** A `reason` provider whose upstream takes UPSTREAM_MS. */
const slowProvider: Provider<"reason"> = {
  name: "slow",
  capability: "reason",
  models: [{ id: "m-1", inputPer1kMicroUsd: 1_000n, outputPer1kMicroUsd: 2_000n, maxTokens: 1000, defaultMaxTokens: 100 }],
  quote: () => Result.succeed({ microUsd: 10_000n, model: "m-1", maxTokens: 100 }),
  run: () =>
    Effect.as(Effect.sleep(Duration.millis(UPSTREAM_MS)), {
      output: { content: "Hello", finishReason: "stop", usage: { promptTokens: 10, completionTokens: 5, totalTokens: 15 } },
      actualMicroUsd: 20n,
      model: "m-1"
    })
}

/** The memory store, with holds that take HOLD_MS to place. */
const slowHolds = Layer.effect(
  Store,
  Effect.gen(function*() {
    const store = yield* Store
    return Store.of({ ...store, reserve: (input) => Effect.delay(store.reserve(input), Duration.millis(HOLD_MS)) })
  })
).pipe(Layer.provideMerge(MemoryStore.layer))

describe("the call receipt", () => {
  let upstream: Awaited<ReturnType<typeof startUpstream>>
  let server: RunningServer
  let api: ReturnType<typeof client>

  beforeAll(async () => {
    upstream = await startUpstream()
    const chat = {
      path: "/v1/chat/completions",
      method: "POST" as const,
      description: "chat",
      price: {
        kind: "tokens" as const,
        format: "openai-chat" as const,
        models: [{ id: "m-1", inputPer1kMicroUsd: 1_000n, outputPer1kMicroUsd: 2_000n, maxTokens: 1000, defaultMaxTokens: 100 }]
      }
    }
    const transport = Transport.layer({
      operatorServices: [{
        service: {
          slug: "chat",
          name: "Chat",
          description: "test",
          baseUrl: upstream.url,
          capabilities: ["reason"],
          origin: "operator",
          endpoints: [chat]
        },
        credentials: { authorization: Redacted.make("Bearer sk-test") }
      }]
    }).pipe(Layer.provide(upstreamLayers))
    server = await startServer(slowHolds, { transport, providers: Providers.make([slowProvider]) })
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
    return signup.body.apiKey as string
  }

  const streamedMetadata = async (key: string) => {
    const response = await fetch(`${server.baseUrl}/v1/proxy/chat`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ method: "POST", path: "/v1/chat/completions", body: { model: "m-1", stream: true, messages: [] } })
    })
    expect(response.status).toBe(200)
    const text = await response.text()
    const event = text.split("\n\n").find((e) => e.startsWith("event: spendgate.metadata\n"))
    expect(event, text).toBeDefined()
    return JSON.parse(event!.slice(event!.indexOf("data: ") + 6)) as Record<string, unknown>
  }

  const shape = (metadata: Record<string, unknown>) =>
    Object.fromEntries(Object.entries(metadata).map(([k, v]) => [k, typeof v === "object" && v !== null ? Object.keys(v).sort() : typeof v]))

  it("has the same fields on capability, proxied and streamed calls, and latencyMs is the upstream call alone", async () => {
    const key = await funded()
    const capability = await api.post("/v1/capabilities/reason", { prompt: "hi" }, key)
    expect(capability.status, capability.text).toBe(200)
    const proxied = await api.post("/v1/proxy/chat", { method: "POST", path: "/v1/chat/completions", body: { model: "m-1", messages: [] } }, key)
    expect(proxied.status, proxied.text).toBe(200)
    const streamed = await streamedMetadata(key)

    const receipts = { capability: capability.body.metadata, proxied: proxied.body.metadata, streamed }
    expect(shape(receipts.proxied)).toEqual(shape(receipts.capability))
    expect(shape(receipts.streamed)).toEqual(shape(receipts.capability))
    expect(Object.keys(receipts.capability).sort()).toEqual(
      ["auditId", "balanceAfter", "chargedUsdCents", "debited", "latencyMs", "model", "provider", "quotedUsdCents"]
    )
    for (const [route, metadata] of Object.entries(receipts)) {
      // The whole upstream answer (for the stream: until its last chunk), and not the hold:
      // counting the hold too would make it at least UPSTREAM_MS + HOLD_MS.
      expect(metadata.latencyMs, route).toBeGreaterThanOrEqual(UPSTREAM_MS - 5)
      expect(metadata.latencyMs, route).toBeLessThan(UPSTREAM_MS + HOLD_MS)
    }
  })
})
