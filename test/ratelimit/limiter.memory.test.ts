import { assert, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import * as MemoryRateLimiter from "../../adapters/ratelimit/memory.ts"
import { agentKey, freshId, rateLimiterContract, T0 } from "./limiter.contract.ts"

rateLimiterContract("memory", MemoryRateLimiter.layer())

it.effect("memory: expired keys are dropped and the map never passes maxKeys", () =>
  Effect.gen(function*() {
    yield* TestClock.setTime(T0)
    const limiter = MemoryRateLimiter.makeMemoryRateLimiter({ maxKeys: 10 })
    // 25 live keys (each TAT 600 ms ahead): the least recently charged go first.
    for (let i = 0; i < 25; i++) {
      assert.isTrue((yield* limiter.take([agentKey(freshId("agt"))])).allowed)
      assert.isAtMost(limiter.size(), 10)
    }
    // A long-lived key charged last survives the evictions.
    const kept = agentKey(freshId("agt"), 1)
    yield* limiter.take([kept])
    assert.strictEqual((yield* limiter.take([kept])).allowed, false)
    // Once expired, entries disappear as new charges sweep the oldest.
    yield* TestClock.adjust(1000)
    for (let i = 0; i < 3; i++) yield* limiter.take([agentKey(freshId("agt"))])
    assert.isAtMost(limiter.size(), 5)
    assert.strictEqual((yield* limiter.take([kept])).allowed, false)
  }))

it.effect("memory: refused requests add no entries", () =>
  Effect.gen(function*() {
    yield* TestClock.setTime(T0)
    const limiter = MemoryRateLimiter.makeMemoryRateLimiter()
    const account = { scope: "account" as const, key: freshId("acc"), limit: 1, windowMs: 60_000 }
    yield* limiter.take([account])
    for (let i = 0; i < 100; i++) yield* limiter.take([agentKey(freshId("agt")), account])
    assert.strictEqual(limiter.size(), 1)
  }))
