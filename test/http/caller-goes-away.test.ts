import { upstreamLayers } from "../support/upstreamLayers.ts"
import { Effect, Layer } from "effect"
import OpenAI, { APIConnectionTimeoutError } from "openai"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Transport from "../../adapters/services/transport.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import type { Reservation } from "../../src/domain/Ledger.ts"
import { Agents } from "../../src/agents/Agents.ts"
import { Store } from "../../src/ports/Store.ts"
import { Services } from "../../src/services/Services.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { chatCompletion } from "../providers/fakeLlm.ts"
import { checkAccount } from "../support/ledger-check.ts"
import { operatorChatService } from "../support/chatService.ts"
import { client, type RunningServer, startServer, storeBackends } from "../support/server.ts"

/**
 * A caller that hangs up before its answer (adapters/http/carry.ts): the call
 * it asked for is carried out to its end and charged as if it had waited,
 * counted against its agent's caps; a retry under the same Idempotency-Key
 * gets the stored answer of that call; a streamed call whose caller left
 * before the first byte is closed and charged what was streamed, not left
 * held. The upstream is a local OpenAI-format server that answers after a
 * delay the test sets, and counts what it received.
 */

const KEY = "sk-operator-carry"
/** A caller gives up after this long; the upstream answers later. */
const HANG_UP_MS = 100
const ANSWER_AFTER_MS = 400

/** How long the upstream takes: ANSWER_AFTER_MS, or what a first message `wait <ms>` asks for. */
const answerAfterMs = (body: Record<string, unknown>): number => {
  const first = (body.messages as ReadonlyArray<{ readonly content?: unknown }> | undefined)?.[0]?.content
  const asked = typeof first === "string" ? /^wait (\d+)$/.exec(first) : null
  return asked === null ? ANSWER_AFTER_MS : Number(asked[1])
}

/** A small seeded generator (mulberry32), so that a failing run can be replayed from its seed. */
const seeded = (seed: number) => () => {
  seed = (seed + 0x6D2B79F5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

interface Upstream {
  readonly url: string
  readonly requests: Array<{ readonly path: string; readonly body: Record<string, unknown> }>
  /** Responses the upstream could not finish writing (its client closed first). */
  cut: number
  close: () => Promise<void>
}

const startUpstream = (): Promise<Upstream> =>
  new Promise((resolve) => {
    const upstream: Upstream = {
      url: "",
      requests: [],
      cut: 0,
      close: () => new Promise((done) => {
        server.closeAllConnections()
        server.close(() => done())
      })
    }
    const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
      res.on("error", () => {})
      res.on("close", () => {
        if (!res.writableFinished) upstream.cut++
      })
      let raw = ""
      req.on("data", (c) => (raw += c))
      req.on("end", () => {
        const body = JSON.parse(raw || "{}") as Record<string, unknown>
        upstream.requests.push({ path: req.url ?? "", body })
        setTimeout(() => {
          if (res.destroyed) return
          if (body.stream === true) {
            res.writeHead(200, { "content-type": "text/event-stream" })
            res.write(`data: ${JSON.stringify({
              id: "chatcmpl-1",
              object: "chat.completion.chunk",
              created: 1,
              model: "m-1",
              choices: [{ index: 0, delta: { content: "Hel" }, finish_reason: null }]
            })}\n\n`)
            // The rest never comes: only a caller (or the gateway) closing the stream ends it.
            return
          }
          res.writeHead(200, { "content-type": "application/json" })
          res.end(JSON.stringify(chatCompletion(body, { promptTokens: 10, completionTokens: 20 })))
        }, answerAfterMs(body))
      })
    })
    server.listen(0, "127.0.0.1", () => {
      resolve(Object.assign(upstream, { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }))
    })
  })

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe.each(storeBackends)("a caller that goes away before its answer, over %s", (_name, store) => {
  let upstream: Upstream
  let server: RunningServer
  let api: ReturnType<typeof client>

  beforeAll(async () => {
    upstream = await startUpstream()
    const transport = Transport.layer({
      operatorServices: [operatorChatService("slow", "Slow", upstream.url, KEY)]
    }).pipe(Layer.provide(upstreamLayers))
    server = await startServer(store(), { transport })
    api = client(server.baseUrl)
  }, 60_000)
  afterAll(async () => {
    await server?.close()
    await upstream?.close()
  })

  const funded = async () => {
    const signup = await api.post("/v1/signup", { name: "hangs up" })
    await server.run(Effect.gen(function*() {
      yield* (yield* Wallets).credit({ accountId: signup.body.accountId as AccountId, key: "s", pocket: "usd", amount: 1_000_000n, description: "seed" })
    }))
    return signup.body as { apiKey: string; accountId: AccountId }
  }

  const proxied = (key: string, options: { readonly stream?: boolean; readonly idempotencyKey?: string; readonly signal?: AbortSignal } = {}) =>
    fetch(`${server.baseUrl}/v1/proxy/slow`, {
      method: "POST",
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      headers: {
        authorization: `Bearer ${key}`,
        "content-type": "application/json",
        ...(options.idempotencyKey === undefined ? {} : { "idempotency-key": options.idempotencyKey })
      },
      body: JSON.stringify({
        method: "POST",
        path: "/v1/chat/completions",
        body: { model: "m-1", ...(options.stream === true ? { stream: true } : {}), messages: [{ role: "user", content: "hi" }] }
      })
    })

  /** Sends the call and hangs up after HANG_UP_MS, before the upstream answers. */
  const hangUp = async (key: string, options: { readonly stream?: boolean; readonly idempotencyKey?: string } = {}) => {
    const controller = new AbortController()
    const sent = proxied(key, { ...options, signal: controller.signal })
    await sleep(HANG_UP_MS)
    controller.abort()
    await expect(sent).rejects.toThrow()
  }

  /** The account's reservations once none is held any more (or after 5 s, as they are then). */
  const holdsWhenDone = async (accountId: AccountId, limit = 10): Promise<ReadonlyArray<Reservation>> => {
    let items: ReadonlyArray<Reservation> = []
    for (let i = 0; i < 100; i++) {
      items = (await server.run(Effect.gen(function*() {
        return yield* (yield* Store).listReservations(accountId, { limit, offset: 0 })
      }))).items
      if (items.length > 0 && items.every((r) => r.status !== "held")) break
      await sleep(50)
    }
    return items
  }

  const charges = async (key: string) =>
    (await api.get("/v1/wallet/transactions?type=charge&limit=100", key)).body.transactions as Array<{ amountUsdCents: number }>

  it("the call is made, settled at what it cost and counted against the caps", async () => {
    const agent = await funded()
    const seen = upstream.requests.length
    await hangUp(agent.apiKey)
    const holds = await holdsWhenDone(agent.accountId)
    expect(holds.map((r) => r.status)).toEqual(["settled"])
    expect(upstream.requests.length).toBe(seen + 1)
    // 10 prompt tokens × 1000 / 1000 + 20 completion tokens × 2000 / 1000 = 50 µUSD: the
    // upstream's usage, not the quote and not nothing.
    expect((await charges(agent.apiKey)).map((c) => Math.round(c.amountUsdCents * 10_000))).toEqual([50])
    // Counted against the agent's caps: today's spend is the charge.
    const me = await api.get("/v1/agents/me", agent.apiKey)
    expect(Math.round(me.body.spentTodayUsdCents * 10_000)).toBe(50)
    const books = await server.run(checkAccount(agent.accountId))
    expect(books.problems).toEqual([])
  })

  it("a retry under the same Idempotency-Key gets the answer of the call it paid for, not a second call", async () => {
    const agent = await funded()
    const seen = upstream.requests.length
    await hangUp(agent.apiKey, { idempotencyKey: "retry-after-hang-up" })
    const retry = await proxied(agent.apiKey, { idempotencyKey: "retry-after-hang-up" })
    expect(retry.status).toBe(200)
    expect(retry.headers.get("idempotent-replayed")).toBe("true")
    // The proxy's answer: the upstream's status, headers and body, and the charge.
    const answer = await retry.json() as { status: number; body: { usage: { completion_tokens: number } }; metadata: { chargedUsdCents: number } }
    expect(answer.status).toBe(200)
    expect(answer.body.usage.completion_tokens).toBe(20)
    expect(Math.round(answer.metadata.chargedUsdCents * 10_000)).toBe(50)
    expect(upstream.requests.length).toBe(seen + 1)
    expect((await charges(agent.apiKey)).map((c) => Math.round(c.amountUsdCents * 10_000))).toEqual([50])
  })

  it("a streamed call whose caller left before the first byte is closed and charged what was streamed, not left held", async () => {
    const agent = await funded()
    const cutBefore = upstream.cut
    await hangUp(agent.apiKey, { stream: true })
    const holds = await holdsWhenDone(agent.accountId)
    expect(holds.map((r) => r.status)).toEqual(["settled"])
    // The gateway closed the upstream's stream (which never ends by itself).
    for (let i = 0; i < 100 && upstream.cut === cutBefore; i++) await sleep(50)
    expect(upstream.cut).toBeGreaterThan(cutBefore)
    // The prompt part of the quote (the completion budget is 100 tokens × 2000 / 1000 = 200 µUSD),
    // plus at most the 3 bytes ("Hel") of the one chunk sent: 6 µUSD.
    const quoted = Number(holds[0]!.quotedMicroUsd)
    const [charged] = (await charges(agent.apiKey)).map((c) => Math.round(c.amountUsdCents * 10_000))
    expect(charged).toBeGreaterThanOrEqual(quoted - 200)
    expect(charged).toBeLessThanOrEqual(quoted - 200 + 6)
  })

  it("a streamed call stopped before its answer began (in the library, or the server stopping) stops and settles too", async () => {
    const agent = await funded()
    const cutBefore = upstream.cut
    // The upstream's head comes after 400 ms: the call is interrupted while it waits for it.
    const outcome = await server.run(Effect.gen(function*() {
      const principal = yield* (yield* Agents).authenticate(agent.apiKey)
      return yield* (yield* Services).proxyStream(principal, "slow", {
        method: "POST",
        path: "/v1/chat/completions",
        body: { model: "m-1", stream: true, messages: [{ role: "user", content: "hi" }] }
      }).pipe(Effect.timeoutOption(HANG_UP_MS))
    }) as Effect.Effect<unknown, unknown, never>)
    expect(outcome).toMatchObject({ _tag: "None" })
    const holds = await holdsWhenDone(agent.accountId)
    expect(holds.map((r) => r.status)).toEqual(["settled"])
    for (let i = 0; i < 100 && upstream.cut === cutBefore; i++) await sleep(50)
    expect(upstream.cut).toBeGreaterThan(cutBefore)
  })

  it("the official OpenAI client giving up on its timeout: the call is made once and charged once", async () => {
    const agent = await funded()
    const seen = upstream.requests.length
    const openai = new OpenAI({ baseURL: `${server.baseUrl}/v1`, apiKey: agent.apiKey, timeout: HANG_UP_MS, maxRetries: 0 })
    await expect(openai.chat.completions.create({ model: "m-1", messages: [{ role: "user", content: "hi" }] }))
      .rejects.toBeInstanceOf(APIConnectionTimeoutError)
    const holds = await holdsWhenDone(agent.accountId)
    expect(holds.map((r) => r.status)).toEqual(["settled"])
    expect(upstream.requests.length).toBe(seen + 1)
    expect((await charges(agent.apiKey)).map((c) => Math.round(c.amountUsdCents * 10_000))).toEqual([50])
  })

  it("many callers hanging up at random: every call the upstream received is settled and charged once, nothing else", async () => {
    const agent = await funded()
    const seed = Number(process.env["HANG_UP_SEED"] ?? Math.floor(Math.random() * 2 ** 31))
    console.log(`caller-goes-away: HANG_UP_SEED=${seed}`)
    const random = seeded(seed)
    const seen = upstream.requests.length
    // 48 calls, 12 at a time: each upstream answer takes 0 – 60 ms, each caller hangs up after
    // 0 – 80 ms (before, during or after its call), or never.
    const calls = Array.from({ length: 48 }, () => ({
      waitMs: Math.floor(random() * 60),
      hangUpMs: random() < 0.2 ? undefined : Math.floor(random() * 80)
    }))
    let answered = 0
    for (let i = 0; i < calls.length; i += 12) {
      await Promise.all(calls.slice(i, i + 12).map(async ({ waitMs, hangUpMs }) => {
        const controller = new AbortController()
        const timer = hangUpMs === undefined ? undefined : setTimeout(() => controller.abort(), hangUpMs)
        try {
          const response = await fetch(`${server.baseUrl}/v1/proxy/slow`, {
            method: "POST",
            signal: controller.signal,
            headers: { authorization: `Bearer ${agent.apiKey}`, "content-type": "application/json" },
            body: JSON.stringify({
              method: "POST",
              path: "/v1/chat/completions",
              body: { model: "m-1", messages: [{ role: "user", content: `wait ${waitMs}` }] }
            })
          })
          await response.arrayBuffer()
          if (response.status === 200) answered++
        } catch {
          // Hung up.
        } finally {
          clearTimeout(timer)
        }
      }))
    }
    // A caller that hung up early leaves its request still running here (authenticated, held,
    // then sent): wait until nothing is held and neither the holds nor the upstream's count have
    // moved for 200 ms, so that no such straggler lands between the two reads.
    let holds: ReadonlyArray<Reservation> = []
    let received = -1
    for (let i = 0; i < 50; i++) {
      const before = { holds: holds.length, received }
      holds = await holdsWhenDone(agent.accountId, calls.length)
      received = upstream.requests.length - seen
      if (holds.length === before.holds && received === before.received) break
      await sleep(200)
    }
    expect(received).toBeGreaterThanOrEqual(answered)
    // Each call the upstream received has one hold, settled; no hold was released or left held.
    expect(holds.length, `seed ${seed}`).toBe(received)
    expect(holds.filter((r) => r.status !== "settled"), `seed ${seed}`).toEqual([])
    const charged = (await charges(agent.apiKey)).map((c) => Math.round(c.amountUsdCents * 10_000))
    expect(charged, `seed ${seed}`).toEqual(Array.from({ length: received }, () => 50))
    const wallet = await api.get("/v1/wallet", agent.apiKey)
    expect(Math.round((100 - wallet.body.balanceUsdCents) * 10_000), `seed ${seed}`).toBe(50 * received)
    expect((await server.run(checkAccount(agent.accountId))).problems).toEqual([])
  }, 60_000)
})
