import { NodeHttpServer } from "@effect/platform-node"
import { Clock, Context, Duration, Effect, Exit, Layer, Scope } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { HttpApi, HttpApiBuilder } from "effect/http-api"
import { createServer } from "node:http"
import { createClient } from "redis"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AgentsApi, PublicApi } from "../../adapters/http/Api.ts"
import { envelopeMiddleware } from "../../adapters/http/envelope.ts"
import { AgentsHandlers, PublicHandlers } from "../../adapters/http/handlers.ts"
import { IdempotencyKeysLive } from "../../adapters/http/idempotency.ts"
import { AccessControlLive } from "../../adapters/http/access.ts"
import { RateLimitedAuthenticationLive, type RateLimitOptions, SignupAdmissionLive, SignupGateLive } from "../../adapters/http/rateLimit.ts"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import * as MemoryRateLimiter from "../../adapters/ratelimit/memory.ts"
import * as RedisRateLimiter from "../../adapters/ratelimit/redis.ts"
import { Agents } from "../../src/agents/Agents.ts"
import { Policies } from "../../src/agents/Policies.ts"
import { Health } from "../../src/Health.ts"
import { Idempotency } from "../../src/idempotency/Idempotency.ts"
import { RateLimiter } from "../../src/ports/RateLimiter.ts"

/**
 * Rate limits over real HTTP. The server is a small one of its own: the
 * public and agents groups with their real handlers, the real envelope and
 * Idempotency-Key middleware, and `RateLimitedAuthenticationLive` in place of
 * `AuthenticationLive` (routes() in server.ts assembles the full API).
 *
 * The limiter's clock is a manual one set by each test, so counts are exact
 * however long the requests take (a real 60 ms account interval would free
 * slots during a burst of 1100 requests); one test runs on the real clock.
 */

const REDIS_URL = process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379"
const T0 = Date.parse("2026-04-01T12:00:00Z")

/** A clock whose time only moves when told to. */
const manualClock = (startMs: number) => {
  let now = startMs
  const nanos = () => BigInt(now) * 1_000_000n
  const clock: Clock.Clock = {
    currentTimeMillisUnsafe: () => now,
    currentTimeMillis: Effect.sync(() => now),
    currentTimeNanosUnsafe: nanos,
    currentTimeNanos: Effect.sync(nanos),
    monotonicTimeNanosUnsafe: nanos,
    monotonicTimeNanos: Effect.sync(nanos),
    sleep: (duration) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, Duration.toMillis(duration))))
  }
  return {
    clock,
    set: (ms: number) => {
      now = ms
    },
    advance: (ms: number) => {
      now += ms
    }
  }
}

/** The limiter reading `clock` instead of the request's. */
const onClock = (clock: Clock.Clock, limiter: Layer.Layer<RateLimiter>): Layer.Layer<RateLimiter> =>
  Layer.effect(
    RateLimiter,
    Effect.gen(function*() {
      const inner = yield* RateLimiter
      return RateLimiter.of({ take: (keys) => Effect.provideService(inner.take(keys), Clock.Clock, clock) })
    })
  ).pipe(Layer.provide(limiter))

class SmallApi extends HttpApi.make("spendgate").add(PublicApi).add(AgentsApi) {}

type StoreContext = Context.Context<Layer.Success<typeof MemoryStore.layer>>

interface Running {
  readonly baseUrl: string
  readonly close: () => Promise<void>
}

const startLimitedServer = async (store: StoreContext, rateLimits: RateLimitOptions): Promise<Running> => {
  const scope = Effect.runSync(Scope.make())
  const routes = Layer.mergeAll(
    HttpApiBuilder.layer(SmallApi).pipe(Layer.provide([PublicHandlers, AgentsHandlers])),
    envelopeMiddleware()
  ).pipe(
    Layer.provideMerge(RateLimitedAuthenticationLive(rateLimits)),
    // Signups here only make accounts to limit; their own limit is tested in test/http/signup.test.ts.
    Layer.provideMerge(SignupAdmissionLive),
    Layer.provideMerge(SignupGateLive({ perHour: 1_000_000 }).pipe(Layer.provide(MemoryRateLimiter.layer()))),
    Layer.provideMerge(IdempotencyKeysLive),
    Layer.provideMerge(AccessControlLive)
  )
  const app = HttpRouter.serve(routes, { disableLogger: true, disableListenLog: true }).pipe(
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
    Layer.provideMerge(Layer.mergeAll(Agents.layer, Policies.layer, Health.layer(), Idempotency.layer())),
    Layer.provide(Layer.succeedContext(store))
  )
  const context = await Effect.runPromise(Layer.buildWithScope(app, scope))
  const address = Context.get(context, HttpServer.HttpServer).address
  if (address._tag === "UnixPathAddress") throw new Error("expected a TCP address")
  return {
    baseUrl: `http://127.0.0.1:${address.port}`,
    close: () => Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly body: any
}

const call = async (
  baseUrl: string,
  method: string,
  path: string,
  options: { readonly key?: string; readonly body?: unknown } = {}
): Promise<Answer> => {
  const headers: Record<string, string> = {}
  if (options.key !== undefined) headers["authorization"] = `Bearer ${options.key}`
  if (options.body !== undefined) headers["content-type"] = "application/json"
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers,
    signal: AbortSignal.timeout(10_000),
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) })
  })
  const text = await response.text()
  return { status: response.status, headers: response.headers, body: text === "" ? undefined : JSON.parse(text) }
}

/** Runs `tasks` with at most `width` in flight, keeping their order. */
const pooled = async <A>(tasks: ReadonlyArray<() => Promise<A>>, width = 25): Promise<Array<A>> => {
  const results = new Array<A>(tasks.length)
  let next = 0
  const worker = async () => {
    while (next < tasks.length) {
      const i = next++
      results[i] = await tasks[i]()
    }
  }
  await Promise.all(Array.from({ length: Math.min(width, tasks.length) }, worker))
  return results
}

const signup = async (baseUrl: string) => {
  const res = await call(baseUrl, "POST", "/v1/signup", { body: { name: "ops" } })
  expect(res.status).toBe(201)
  return res.body as { apiKey: string; agentId: string; accountId: string }
}

const createAgent = async (baseUrl: string, ownerKey: string, name: string) => {
  const res = await call(baseUrl, "POST", "/v1/agents", { key: ownerKey, body: { name } })
  expect(res.status).toBe(201)
  return res.body as { id: string; apiKey: string }
}

const rateHeaders = (res: Answer) => ({
  limit: res.headers.get("x-ratelimit-limit"),
  remaining: res.headers.get("x-ratelimit-remaining"),
  reset: res.headers.get("x-ratelimit-reset")
})

/** The envelope of a 429 and its headers, all consistent with each other. */
const expectRateLimited = (res: Answer, expected: { scope: string; limit: number; resetAtMs: number }) => {
  expect(res.status).toBe(429)
  expect(Object.keys(res.body)).toEqual(["error"])
  expect(res.body.error).toEqual({
    code: "RATE_LIMITED",
    message: expect.any(String),
    details: { scope: expected.scope, limit: expected.limit, resetAt: new Date(expected.resetAtMs).toISOString() }
  })
  expect(rateHeaders(res)).toEqual({
    limit: String(expected.limit),
    remaining: "0",
    reset: String(Math.ceil(expected.resetAtMs / 1000))
  })
  const retryAfter = Number(res.headers.get("retry-after"))
  expect(Number.isInteger(retryAfter) && retryAfter >= 1).toBe(true)
}

const count = (answers: ReadonlyArray<Answer>, status: number) => answers.filter((a) => a.status === status).length

/** The X-RateLimit-Remaining of the successes, ascending. */
const passedRemaining = (answers: ReadonlyArray<Answer>) =>
  answers.filter((a) => a.status === 200).map((a) => Number(a.headers.get("x-ratelimit-remaining"))).sort((x, y) => x - y)

describe("rate limits over HTTP (in-process counters)", () => {
  const time = manualClock(T0)
  const storeScope = Effect.runSync(Scope.make())
  let server: Running
  let lowServer: Running

  beforeAll(async () => {
    const store = await Effect.runPromise(Layer.buildWithScope(MemoryStore.layer, storeScope))
    server = await startLimitedServer(store, {
      agentPerMinute: 100,
      accountPerMinute: 1000,
      limiter: onClock(time.clock, MemoryRateLimiter.layer())
    })
    lowServer = await startLimitedServer(store, {
      agentPerMinute: 5,
      accountPerMinute: 1000,
      limiter: onClock(time.clock, MemoryRateLimiter.layer())
    })
  })
  afterAll(async () => {
    await server?.close()
    await lowServer?.close()
    await Effect.runPromise(Scope.close(storeScope, Exit.void))
  })

  it("a burst of 150 from one agent: exactly 100 pass, 50 get 429 RATE_LIMITED with Retry-After and X-RateLimit-*", async () => {
    time.set(T0)
    const { apiKey, agentId } = await signup(server.baseUrl)
    const answers = await pooled(
      Array.from({ length: 150 }, () => () => call(server.baseUrl, "GET", `/v1/agents/${agentId}`, { key: apiKey }))
    )
    expect(count(answers, 200)).toBe(100)
    expect(count(answers, 429)).toBe(50)
    // Each remaining count from 99 down to 0 exactly once; the first slot frees at T0 + 600 ms.
    expect(passedRemaining(answers)).toEqual(Array.from({ length: 100 }, (_, i) => i))
    for (const answer of answers.filter((a) => a.status === 200)) {
      expect(answer.headers.get("x-ratelimit-limit")).toBe("100")
      expect(answer.headers.get("x-ratelimit-reset")).toBe(String(T0 / 1000 + 1))
      expect(answer.headers.get("retry-after")).toBeNull()
    }
    for (const answer of answers.filter((a) => a.status === 429)) {
      expectRateLimited(answer, { scope: "agent", limit: 100, resetAtMs: T0 + 600 })
      expect(answer.headers.get("retry-after")).toBe("1")
    }

    // 600 ms later exactly one more request fits.
    time.advance(600)
    const again = await call(server.baseUrl, "GET", `/v1/agents/${agentId}`, { key: apiKey })
    expect(again.status).toBe(200)
    expect(rateHeaders(again)).toEqual({ limit: "100", remaining: "0", reset: String(T0 / 1000 + 2) })
    expectRateLimited(await call(server.baseUrl, "GET", `/v1/agents/${agentId}`, { key: apiKey }), {
      scope: "agent",
      limit: 100,
      resetAtMs: T0 + 1200
    })
  })

  it("11 agents of one account sending 100 each: the account limit holds at exactly 1000", async () => {
    time.set(T0 + 10 * 60_000)
    const owner = await signup(server.baseUrl)
    const workers = []
    for (let i = 0; i < 10; i++) workers.push(await createAgent(server.baseUrl, owner.apiKey, `w${i}`))
    // A minute later the setup calls no longer count: every budget is full.
    time.advance(60_000)
    const agents = [{ id: owner.agentId, apiKey: owner.apiKey }, ...workers]
    const tasks = agents.flatMap((agent) =>
      Array.from({ length: 100 }, () => () => call(server.baseUrl, "GET", `/v1/agents/${agent.id}`, { key: agent.apiKey }))
    )
    // Interleave the agents, as independent clients would.
    const order = tasks.map((_, i) => tasks[(i % 11) * 100 + Math.floor(i / 11)])
    const answers = await pooled(order, 50)
    expect(count(answers, 200)).toBe(1000)
    expect(count(answers, 429)).toBe(100)
    for (const answer of answers.filter((a) => a.status === 429)) {
      expect(answer.body.error.details.scope).toBe("account")
      expect(answer.body.error.details.limit).toBe(1000)
      expect(answer.headers.get("x-ratelimit-limit")).toBe("1000")
    }
    // The last successes were the account's: closest to exhaustion.
    const last = answers.filter((a) => a.status === 200).find((a) => a.headers.get("x-ratelimit-remaining") === "0")
    expect(last?.headers.get("x-ratelimit-limit")).toBe("1000")
  })

  it("errors after authentication carry the headers and count; 401s neither", async () => {
    time.set(T0 + 100 * 60_000)
    const owner = await signup(lowServer.baseUrl)
    const worker = await createAgent(lowServer.baseUrl, owner.apiKey, "worker") // owner: 1 of 5

    const notFound = await call(lowServer.baseUrl, "GET", "/v1/agents/agt_missing", { key: owner.apiKey })
    expect(notFound.status).toBe(404)
    expect(rateHeaders(notFound)).toEqual({ limit: "5", remaining: "3", reset: String((T0 + 100 * 60_000) / 1000 + 12) })

    const invalid = await call(lowServer.baseUrl, "GET", "/v1/agents?limit=0", { key: owner.apiKey })
    expect(invalid.status).toBe(400)
    expect(invalid.body.error.code).toBe("VALIDATION_ERROR")
    expect(rateHeaders(invalid).remaining).toBe("2")

    const forbidden = await call(lowServer.baseUrl, "POST", "/v1/agents", { key: worker.apiKey, body: { name: "x" } })
    expect(forbidden.status).toBe(403)
    expect(rateHeaders(forbidden)).toEqual({ limit: "5", remaining: "4", reset: String((T0 + 100 * 60_000) / 1000 + 12) })

    for (const key of [undefined, "sk_agt_" + "A".repeat(32), `${owner.apiKey}x`]) {
      for (let i = 0; i < 5; i++) {
        const res = await call(lowServer.baseUrl, "GET", "/v1/agents", key === undefined ? {} : { key })
        expect(res.status).toBe(401)
        expect(res.headers.get("x-ratelimit-limit")).toBeNull()
        expect(res.headers.get("x-ratelimit-remaining")).toBeNull()
      }
    }
    const ok = await call(lowServer.baseUrl, "GET", "/v1/agents", { key: owner.apiKey })
    expect(ok.status).toBe(200)
    expect(rateHeaders(ok).remaining).toBe("1")
    expect((await call(lowServer.baseUrl, "GET", "/v1/agents", { key: owner.apiKey })).status).toBe(200)
    // The endpoint does not run on a refusal: no agent is created.
    const refused = await call(lowServer.baseUrl, "POST", "/v1/agents", { key: owner.apiKey, body: { name: "extra" } })
    expectRateLimited(refused, { scope: "agent", limit: 5, resetAtMs: T0 + 100 * 60_000 + 12_000 })
    expect(refused.headers.get("retry-after")).toBe("12")
    time.advance(12_000)
    const list = await call(lowServer.baseUrl, "GET", "/v1/agents", { key: owner.apiKey })
    expect(list.body.agents.map((a: { name: string }) => a.name).sort()).toEqual(["ops", "worker"])
  })
})

describe("rate limits over HTTP on the real clock", () => {
  it("a burst of 150 from one agent: 100 pass, plus at most one per 600 ms the burst took", async () => {
    const storeScope = Effect.runSync(Scope.make())
    const store = await Effect.runPromise(Layer.buildWithScope(MemoryStore.layer, storeScope))
    const server = await startLimitedServer(store, {})
    try {
      const { apiKey, agentId } = await signup(server.baseUrl)
      const started = Date.now()
      const answers = await pooled(
        Array.from({ length: 150 }, () => () => call(server.baseUrl, "GET", `/v1/agents/${agentId}`, { key: apiKey }))
      )
      const elapsed = Date.now() - started
      const passed = count(answers, 200)
      expect(passed).toBeGreaterThanOrEqual(100)
      expect(passed).toBeLessThanOrEqual(100 + Math.ceil(elapsed / 600))
      expect(count(answers, 429)).toBe(150 - passed)
      const now = Date.now() / 1000
      for (const answer of answers.filter((a) => a.status === 429)) {
        expect(answer.body.error.code).toBe("RATE_LIMITED")
        const reset = Number(answer.headers.get("x-ratelimit-reset"))
        expect(reset).toBeGreaterThanOrEqual(Math.floor(started / 1000))
        expect(reset).toBeLessThanOrEqual(Math.ceil(now) + 1)
      }
    } finally {
      await server.close()
      await Effect.runPromise(Scope.close(storeScope, Exit.void))
    }
  })
})

describe("rate limits over HTTP: two server instances sharing Redis", () => {
  const time = manualClock(T0)
  const prefix = `spendgate:test:${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}:rl:`
  const storeScope = Effect.runSync(Scope.make())
  const admin = createClient({ url: REDIS_URL })
  let servers: ReadonlyArray<Running> = []

  const start = (store: StoreContext, rateLimits: RateLimitOptions) =>
    startLimitedServer(store, {
      ...rateLimits,
      limiter: onClock(time.clock, RedisRateLimiter.layer({ url: REDIS_URL, keyPrefix: prefix }))
    })

  beforeAll(async () => {
    await admin.connect()
    // One store for both: the same accounts and keys behind two instances.
    const store = await Effect.runPromise(Layer.buildWithScope(MemoryStore.layer, storeScope))
    const low = { agentPerMinute: 10, accountPerMinute: 25 }
    servers = [await start(store, {}), await start(store, {}), await start(store, low), await start(store, low)]
  })
  afterAll(async () => {
    for (const server of servers) await server.close()
    await Effect.runPromise(Scope.close(storeScope, Exit.void))
    const keys: Array<string> = []
    for await (const batch of admin.scanIterator({ MATCH: `${prefix}*`, COUNT: 1000 })) keys.push(...batch)
    if (keys.length > 0) await admin.del(keys)
    await admin.close()
  })

  it("150 requests of one agent split across two instances: exactly 100 pass", async () => {
    time.set(T0)
    const [a, b] = servers
    const { apiKey, agentId } = await signup(a.baseUrl)
    const answers = await pooled(
      Array.from({ length: 150 }, (_, i) => () =>
        call((i % 2 === 0 ? a : b).baseUrl, "GET", `/v1/agents/${agentId}`, { key: apiKey }))
    )
    expect(count(answers, 200)).toBe(100)
    expect(count(answers, 429)).toBe(50)
    expect(answers.filter((x, i) => i % 2 === 1 && x.status === 200).length).toBeGreaterThan(0)
    expect(passedRemaining(answers)).toEqual(Array.from({ length: 100 }, (_, i) => i))
    for (const answer of answers.filter((x) => x.status === 429)) {
      expectRateLimited(answer, { scope: "agent", limit: 100, resetAtMs: T0 + 600 })
    }
  })

  it("three agents of one account across two instances: the account limit (25) holds", async () => {
    time.set(T0 + 10 * 60_000)
    const [, , a, b] = servers
    const owner = await signup(a.baseUrl)
    const workers = [await createAgent(b.baseUrl, owner.apiKey, "w1"), await createAgent(a.baseUrl, owner.apiKey, "w2")]
    time.advance(60_000)
    const agents = [{ id: owner.agentId, apiKey: owner.apiKey }, ...workers]
    const answers = await pooled(
      Array.from({ length: 30 }, (_, i) => () => {
        const agent = agents[i % 3]
        return call((i % 2 === 0 ? a : b).baseUrl, "GET", `/v1/agents/${agent.id}`, { key: agent.apiKey })
      })
    )
    expect(count(answers, 200)).toBe(25)
    for (const answer of answers.filter((x) => x.status === 429)) {
      expect(answer.body.error.details).toMatchObject({ scope: "account", limit: 25 })
    }
  })
})
