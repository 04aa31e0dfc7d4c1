import { assert, layer } from "@effect/vitest"
import { Effect, Exit, type Layer } from "effect"
import { TestClock } from "effect/testing"
import { type Decision, type RateKey, RateLimiter } from "../../src/ports/RateLimiter.ts"

/**
 * The one contract every RateLimiter passes: the in-process and the Redis
 * limiter run exactly these tests. Time is the TestClock, set at the start of
 * every test; every test uses keys of its own.
 */

export const T0 = Date.parse("2026-04-01T12:00:00Z")
const MINUTE = 60_000

let counter = 0
/** An id no other test (or run, for Redis) uses. */
export const freshId = (label: string) =>
  `${label}-${Date.now().toString(36)}-${(counter++).toString(36)}-${Math.random().toString(36).slice(2, 8)}`

export const agentKey = (id: string, limit = 100, windowMs = MINUTE): RateKey => ({
  scope: "agent",
  key: id,
  limit,
  windowMs
})
export const accountKey = (id: string, limit = 1000, windowMs = MINUTE): RateKey => ({
  scope: "account",
  key: id,
  limit,
  windowMs
})

/** `count` takes one after the other, at the current (test) time. */
export const takeMany = (keys: ReadonlyArray<RateKey>, count: number) =>
  Effect.flatMap(RateLimiter, (limiter) => Effect.forEach(Array.from({ length: count }), () => limiter.take(keys)))

const allowedCount = (decisions: ReadonlyArray<Decision>) => decisions.filter((d) => d.allowed).length

export const rateLimiterContract = (name: string, limiterLayer: Layer.Layer<RateLimiter, unknown>) =>
  layer(limiterLayer, { timeout: 60_000 })(`RateLimiter contract: ${name}`, (it) => {
    it.effect("a fresh key takes its limit at once, then one request every T = window / limit", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(T0)
        const limiter = yield* RateLimiter
        const keys = [agentKey(freshId("agt"))]
        const burst = yield* takeMany(keys, 100)
        burst.forEach((decision, i) => {
          // The first slot frees at T0 + 600 whatever the burst has used.
          assert.deepStrictEqual(decision, {
            allowed: true,
            scope: "agent",
            limit: 100,
            remaining: 99 - i,
            resetAtMs: T0 + 600
          })
        })
        assert.deepStrictEqual(yield* limiter.take(keys), {
          allowed: false,
          scope: "agent",
          limit: 100,
          remaining: 0,
          resetAtMs: T0 + 600,
          retryAfterMs: 600
        })
        yield* TestClock.adjust(599)
        const early = yield* limiter.take(keys)
        assert.strictEqual(early.allowed, false)
        assert.strictEqual(early.retryAfterMs, 1)
        yield* TestClock.adjust(1)
        assert.deepStrictEqual(yield* limiter.take(keys), {
          allowed: true,
          scope: "agent",
          limit: 100,
          remaining: 0,
          resetAtMs: T0 + 1200
        })
        assert.deepStrictEqual(yield* limiter.take(keys), {
          allowed: false,
          scope: "agent",
          limit: 100,
          remaining: 0,
          resetAtMs: T0 + 1200,
          retryAfterMs: 600
        })
      }))

    it.effect("remaining and reset are exact between bursts, and an idle minute restores the whole budget", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(T0)
        const limiter = yield* RateLimiter
        const keys = [agentKey(freshId("agt"))]
        yield* takeMany(keys, 100)
        // 1000 ms later one slot (600 ms) has freed and 400 ms of the next.
        yield* TestClock.adjust(1000)
        assert.deepStrictEqual(yield* limiter.take(keys), {
          allowed: true,
          scope: "agent",
          limit: 100,
          remaining: 0,
          resetAtMs: T0 + 1200
        })
        // 30 s later: 50 slots free (and 400 ms towards one more).
        yield* TestClock.adjust(30_000)
        const half = yield* takeMany(keys, 51)
        assert.strictEqual(allowedCount(half), 50)
        assert.deepStrictEqual(half[0], {
          allowed: true,
          scope: "agent",
          limit: 100,
          remaining: 49,
          resetAtMs: T0 + 31_200
        })
        // Idle until the TAT: a full budget again, exactly as for a new key.
        yield* TestClock.setTime(T0 + 60_600 + 30_000)
        const full = yield* takeMany(keys, 101)
        assert.strictEqual(allowedCount(full), 100)
        assert.strictEqual(full[0].remaining, 99)
      }))

    it.effect("no fixed-window double burst: 100 at 59.9 s and 100 at 60.1 s let the second batch through only as slots free", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(T0 + 59_900)
        const keys = [agentKey(freshId("agt"))]
        assert.strictEqual(allowedCount(yield* takeMany(keys, 100)), 100)
        yield* TestClock.setTime(T0 + 60_100)
        assert.strictEqual(allowedCount(yield* takeMany(keys, 100)), 0)
        // Over the following minute the budget comes back one slot per 600 ms, never as a block.
        let allowed = 0
        for (let step = 0; step < 100; step++) {
          yield* TestClock.adjust(600)
          allowed += allowedCount(yield* takeMany(keys, 3))
        }
        assert.strictEqual(allowed, 100)
      }))

    it.effect("a window that is not a multiple of the limit keeps whole-request arithmetic", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(T0)
        const limiter = yield* RateLimiter
        const keys = [agentKey(freshId("agt"), 7)]
        const burst = yield* takeMany(keys, 8)
        assert.deepStrictEqual(burst.map((d) => d.remaining), [6, 5, 4, 3, 2, 1, 0, 0])
        assert.strictEqual(allowedCount(burst), 7)
        const refused = burst[7]
        // T is rounded to the microsecond.
        assert.closeTo(refused.retryAfterMs!, MINUTE / 7, 1e-3)
        yield* TestClock.adjust(Math.ceil(MINUTE / 7))
        assert.strictEqual((yield* limiter.take(keys)).allowed, true)
        assert.strictEqual((yield* limiter.take(keys)).allowed, false)
      }))

    it.effect("an account refusal charges neither scope, and an agent refusal does not charge the account", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(T0)
        const limiter = yield* RateLimiter
        const account = freshId("acc")
        const [a, b, c] = [freshId("agt"), freshId("agt"), freshId("agt")]
        // The account admits 3, agents 5 each: a uses the whole account budget.
        assert.strictEqual(allowedCount(yield* takeMany([agentKey(a, 5), accountKey(account, 3)], 3)), 3)
        const refused = yield* limiter.take([agentKey(b, 5), accountKey(account, 3)])
        assert.deepStrictEqual(refused, {
          allowed: false,
          scope: "account",
          limit: 3,
          remaining: 0,
          resetAtMs: T0 + 20_000,
          retryAfterMs: 20_000
        })
        yield* takeMany([agentKey(b, 5), accountKey(account, 3)], 10)
        // b's own budget is untouched: charged alone (another account), it has all 5.
        const alone = yield* limiter.take([agentKey(b, 5), accountKey(freshId("acc"), 1000)])
        assert.strictEqual(alone.scope, "agent")
        assert.strictEqual(alone.remaining, 4)

        // The other way round: c's agent limit (1) refuses; the account is not charged.
        const account2 = freshId("acc")
        assert.strictEqual((yield* limiter.take([agentKey(c, 1), accountKey(account2, 10)])).allowed, true)
        const byAgent = yield* takeMany([agentKey(c, 1), accountKey(account2, 10)], 5)
        for (const decision of byAgent) {
          assert.strictEqual(decision.allowed, false)
          assert.strictEqual(decision.scope, "agent")
          assert.strictEqual(decision.limit, 1)
        }
        const next = yield* limiter.take([agentKey(freshId("agt"), 100), accountKey(account2, 10)])
        assert.strictEqual(next.scope, "account")
        assert.strictEqual(next.remaining, 8)
      }))

    it.effect("reports the scope closest to exhaustion, and of several refusing scopes the one that frees last", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(T0)
        const limiter = yield* RateLimiter
        const agent = freshId("agt")
        const account = freshId("acc")
        const keys = [agentKey(agent, 100), accountKey(account, 1000)]
        const first = yield* limiter.take(keys)
        assert.deepStrictEqual(first, { allowed: true, scope: "agent", limit: 100, remaining: 99, resetAtMs: T0 + 600 })
        // Other agents use up the account: 998 of 1000 gone.
        yield* takeMany([agentKey(freshId("agt"), 1000), accountKey(account, 1000)], 997)
        const second = yield* limiter.take(keys)
        assert.deepStrictEqual(second, { allowed: true, scope: "account", limit: 1000, remaining: 1, resetAtMs: T0 + 60 })
        // Both refuse (the agent now at 1 per minute): the agent frees later than the account.
        yield* limiter.take([accountKey(account, 1000)])
        const both = yield* limiter.take([agentKey(agent, 1), accountKey(account, 1000)])
        assert.deepStrictEqual(both, {
          allowed: false,
          scope: "agent",
          limit: 1,
          remaining: 0,
          resetAtMs: T0 + 1200,
          retryAfterMs: 1200
        })
      }))

    it.effect("50 concurrent takes on one key with limit 10: exactly 10 are allowed", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(T0)
        const limiter = yield* RateLimiter
        const keys = [agentKey(freshId("agt"), 10), accountKey(freshId("acc"), 1000)]
        const decisions = yield* Effect.all(Array.from({ length: 50 }, () => limiter.take(keys)), {
          concurrency: "unbounded"
        })
        assert.strictEqual(allowedCount(decisions), 10)
        assert.deepStrictEqual(
          decisions.filter((d) => d.allowed).map((d) => d.remaining).sort((x, y) => x - y),
          [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
        )
      }))

    it.effect("refuses nonsensical keys as defects", () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter
        for (
          const keys of [
            [],
            [agentKey("x", 0)],
            [agentKey("x", 1.5)],
            [agentKey("x", 10, 0)],
            [agentKey("x"), agentKey("x")]
          ]
        ) {
          const exit = yield* Effect.exit(limiter.take(keys))
          assert.isTrue(Exit.isFailure(exit) && Exit.hasDies(exit), JSON.stringify(keys))
        }
      }))
  })
