import { assert, it } from "@effect/vitest"
import { Effect, Layer, Logger } from "effect"
import { TestClock } from "effect/testing"
import { createServer, connect, type Socket } from "node:net"
import { createClient } from "redis"
import { afterAll, beforeAll } from "vitest"
import * as RedisRateLimiter from "../../adapters/ratelimit/redis.ts"
import { RateLimiter } from "../../src/ports/RateLimiter.ts"
import { accountKey, agentKey, freshId, rateLimiterContract, T0, takeMany } from "./limiter.contract.ts"

/**
 * The contract against the local Redis (REDIS_URL, default
 * redis://127.0.0.1:6379; CI makes sure it runs). Keys live under a prefix of
 * this run, deleted at the end.
 */

export const REDIS_URL = process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379"
const prefix = `spendgate:test:${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}:rl:`

const admin = createClient({ url: REDIS_URL })

beforeAll(async () => {
  await admin.connect()
})
/** What the limiter logged at Warn or above: the contract must never have fallen back to in-process counting. */
const complaints: Array<string> = []
const recorder = Logger.make<unknown, void>(({ logLevel, message }) => {
  if (logLevel === "Warn" || logLevel === "Error" || logLevel === "Fatal") complaints.push(`${logLevel}: ${String(message)}`)
})

afterAll(async () => {
  assert.deepStrictEqual(complaints, [])
  const keys: Array<string> = []
  for await (const batch of admin.scanIterator({ MATCH: `${prefix}*`, COUNT: 1000 })) keys.push(...batch)
  if (keys.length > 0) await admin.del(keys)
  await admin.close()
})

const limiterLayer = (options: Partial<RedisRateLimiter.RedisRateLimiterOptions> = {}) =>
  RedisRateLimiter.layer({ url: REDIS_URL, keyPrefix: prefix, ...options })

rateLimiterContract("Redis", limiterLayer().pipe(Layer.provideMerge(Logger.layer([recorder]))))

const withLimiter = <A, E>(
  effect: Effect.Effect<A, E, RateLimiter>,
  options: Partial<RedisRateLimiter.RedisRateLimiterOptions> = {}
) => Effect.provide(effect, limiterLayer(options))

it.effect("Redis: one key per scope under the prefix, holding the TAT and expiring at it", () =>
  withLimiter(Effect.gen(function*() {
    yield* TestClock.setTime(T0)
    const agent = freshId("agt")
    const account = freshId("acc")
    yield* takeMany([agentKey(agent), accountKey(account)], 3)
    const stored = yield* Effect.promise(() => admin.get(`${prefix}agent:${agent}`))
    assert.strictEqual(Number(stored), (T0 + 1800) * 1000)
    assert.strictEqual(Number(yield* Effect.promise(() => admin.get(`${prefix}account:${account}`))), (T0 + 180) * 1000)
    const ttl = yield* Effect.promise(() => admin.pTTL(`${prefix}agent:${agent}`))
    assert.isTrue(ttl > 1700 && ttl <= 1800, `PTTL ${ttl}`)
  })))

it.effect("Redis: two instances (two connections) racing on one key admit exactly the limit", () =>
  Effect.gen(function*() {
    yield* TestClock.setTime(T0)
    const keys = [agentKey(freshId("agt"), 10), accountKey(freshId("acc"), 1000)]
    const race = Effect.flatMap(RateLimiter, (limiter) =>
      Effect.all(Array.from({ length: 25 }, () => limiter.take(keys)), { concurrency: "unbounded" }))
    const [first, second] = yield* Effect.all([
      Effect.provide(race, Layer.fresh(limiterLayer())),
      Effect.provide(race, Layer.fresh(limiterLayer()))
    ], { concurrency: 2 })
    assert.strictEqual([...first, ...second].filter((d) => d.allowed).length, 10)
  }))

it.effect("Redis: the script is loaded again after SCRIPT FLUSH (EVALSHA answers NOSCRIPT)", () =>
  withLimiter(Effect.gen(function*() {
    yield* TestClock.setTime(T0)
    const keys = [agentKey(freshId("agt"), 5)]
    yield* takeMany(keys, 2)
    yield* Effect.promise(() => admin.scriptFlush())
    const after = yield* takeMany(keys, 4)
    assert.deepStrictEqual(after.map((d) => d.allowed), [true, true, true, false])
    assert.strictEqual(after[0].remaining, 2)
  })))

it.effect("Redis unreachable: the layer still builds within its bound and counts in-process", () =>
  Effect.gen(function*() {
    yield* TestClock.setTime(T0)
    const started = Date.now()
    const decisions = yield* withLimiter(takeMany([agentKey(freshId("agt"), 3)], 5), {
      // Nothing listens on port 1 of the loopback interface.
      url: "redis://127.0.0.1:1",
      connectTimeoutMs: 300
    })
    assert.isBelow(Date.now() - started, 5_000)
    assert.deepStrictEqual(decisions.map((d) => d.allowed), [true, true, true, false, false])
  }))

/** A TCP relay to the local Redis that can be cut and restored, to stage an outage. */
const relay = (port = 0) =>
  new Promise<{ readonly port: number; readonly cut: () => Promise<void> }>((resolve, reject) => {
    const sockets = new Set<Socket>()
    const redis = new URL(REDIS_URL)
    const server = createServer((downstream) => {
      const upstream = connect(Number(redis.port || 6379), redis.hostname)
      for (const socket of [downstream, upstream]) {
        sockets.add(socket)
        socket.on("error", () => undefined)
        socket.on("close", () => {
          sockets.delete(socket)
          downstream.destroy()
          upstream.destroy()
        })
      }
      downstream.pipe(upstream).pipe(downstream)
    })
    server.on("error", reject)
    server.listen(port, "127.0.0.1", () => {
      const address = server.address()
      if (address === null || typeof address === "string") return reject(new Error("no TCP address"))
      resolve({
        port: address.port,
        cut: () =>
          new Promise<void>((done) => {
            for (const socket of sockets) socket.destroy()
            server.close(() => done())
          })
      })
    })
  })

/** Real time, while the TestClock stands still. */
const pause = (ms: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, ms)))

it.effect("Redis outage mid-run: counts in-process (logged), then back to Redis once it reconnects", () =>
  Effect.gen(function*() {
    yield* TestClock.setTime(T0)
    const logged: Array<string> = []
    const logger = Logger.make<unknown, void>(({ logLevel, message }) => {
      logged.push(`${logLevel}: ${String(message)}`)
    })
    const first = yield* Effect.promise(() => relay())
    const keys = [agentKey(freshId("agt"), 3)]
    yield* Effect.gen(function*() {
      const limiter = yield* RateLimiter
      assert.strictEqual((yield* limiter.take(keys)).remaining, 2)
      assert.isNotNull(yield* Effect.promise(() => admin.get(`${prefix}agent:${keys[0].key}`)))

      yield* Effect.promise(() => first.cut())
      // Local counting knows nothing of Redis' count: a fresh budget of 3.
      const during = yield* takeMany(keys, 4)
      assert.deepStrictEqual(during.map((d) => d.allowed), [true, true, true, false])
      assert.isTrue(logged.some((line) => line.startsWith("Error: ") && line.includes("in-process")), logged.join("\n"))

      const second = yield* Effect.promise(() => relay(first.port))
      for (let waited = 0; !logged.some((line) => line.includes("reconnected")) && waited < 8_000; waited += 100) {
        yield* pause(100)
      }
      assert.isTrue(logged.some((line) => line.includes("reconnected")), logged.join("\n"))
      // Redis again: one of its 3 was used before the outage.
      assert.strictEqual((yield* limiter.take(keys)).remaining, 1)
      assert.isTrue(logged.some((line) => line.startsWith("Warn: ") && line.includes("answers again")), logged.join("\n"))
      yield* Effect.promise(() => second.cut())
    }).pipe(
      Effect.provide(
        limiterLayer({ url: `redis://127.0.0.1:${first.port}` }).pipe(Layer.provideMerge(Logger.layer([logger])))
      )
    )
  }), { timeout: 20_000 })
