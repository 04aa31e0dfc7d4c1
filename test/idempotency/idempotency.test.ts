import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Option, Ref } from "effect"
import { TestClock } from "effect/testing"
import * as MemoryIdempotencyStore from "../../adapters/memory/MemoryIdempotencyStore.ts"
import { ValidationError } from "../../src/domain/errors.ts"
import type { AgentId } from "../../src/domain/ids.ts"
import {
  agentScope,
  DEFAULTS,
  hashRequest,
  Idempotency,
  IdempotencyConflict,
  IdempotencyKeyInProgress,
  type IdempotentRequest,
  publicScope,
  type IdempotencyOptions,
  type StoredResponse,
  storageKeyOf,
  sweepExpiredKeys
} from "../../src/idempotency/Idempotency.ts"
import { IdempotencyStore } from "../../src/ports/IdempotencyStore.ts"

/**
 * The idempotency rules over the in-memory store, with time under TestClock.
 * The store contract (test/ports) and the HTTP suite cover the rest.
 */

const HOUR = 60 * 60 * 1000
const encoder = new TextEncoder()

const request = (overrides: Partial<IdempotentRequest> = {}): IdempotentRequest => ({
  scope: agentScope("agt_1" as AgentId),
  key: "order-42",
  method: "POST",
  target: "/v1/agents",
  body: encoder.encode(JSON.stringify({ name: "worker" })),
  ...overrides
})

const withIdempotency = (options: IdempotencyOptions = {}) =>
  Effect.provide(Idempotency.layer(options).pipe(Layer.provideMerge(MemoryIdempotencyStore.layer)))

/** A stand-in for an endpoint: counts its runs and answers `response`. */
const endpoint = (response: StoredResponse) =>
  Effect.gen(function*() {
    const runs = yield* Ref.make(0)
    const execute = Effect.as(Ref.update(runs, (n) => n + 1), response)
    return { runs, execute }
  })

const asStored = (response: StoredResponse) => Option.some(response)

/**
 * Lets forked requests get past the request hashing (a Web Crypto promise,
 * outside TestClock's control) and reach their claim before time moves.
 */
const settle = TestClock.withLive(Effect.sleep(200))

const created: StoredResponse = { status: 201, body: JSON.stringify({ id: "agt_1" }) }

describe("Idempotency", () => {
  it.effect("runs once and replays the stored response to the same request", () =>
    Effect.gen(function*() {
      const idempotency = yield* Idempotency
      const { runs, execute } = yield* endpoint(created)
      const first = yield* idempotency.run(request(), execute, asStored)
      assert.deepStrictEqual(first, { _tag: "Executed", value: created })
      const second = yield* idempotency.run(request(), execute, asStored)
      assert.deepStrictEqual(second, { _tag: "Replayed", response: created })
      assert.strictEqual(yield* Ref.get(runs), 1)
    }).pipe(withIdempotency()))

  it.effect("storage sees neither the raw key nor the answer (a new API key); another caller secret cannot open it", () =>
    Effect.gen(function*() {
      const inner = yield* IdempotencyStore
      const written: Array<string> = []
      const recording = IdempotencyStore.of({
        ...inner,
        claim: (input) => Effect.sync(() => written.push(JSON.stringify(input))).pipe(Effect.andThen(inner.claim(input))),
        complete: (input) => Effect.sync(() => written.push(JSON.stringify(input))).pipe(Effect.andThen(inner.complete(input)))
      })
      const answer: StoredResponse = { status: 201, body: JSON.stringify({ apiKey: "sk_agt_TheNewAgentsSecretKey0123456789" }) }
      const owner = request({ key: "create-worker-7", secret: "sk_agt_OwnersOwnKey" })
      yield* Effect.gen(function*() {
        const idempotency = yield* Idempotency
        const { runs, execute } = yield* endpoint(answer)
        yield* idempotency.run(owner, execute, asStored)
        assert.deepStrictEqual(yield* idempotency.run(owner, execute, asStored), { _tag: "Replayed", response: answer })
        // The same scope, key and request with another secret: the answer does not open.
        const other = yield* Effect.flip(idempotency.run({ ...owner, secret: "sk_agt_SomeoneElse" }, execute, asStored))
        assert.instanceOf(other, IdempotencyConflict)
        assert.strictEqual(yield* Ref.get(runs), 1)
      }).pipe(Effect.provide(Idempotency.layer().pipe(Layer.provide(Layer.succeed(IdempotencyStore, recording)))))
      const seen = written.join("\n")
      assert.isTrue(written.length >= 2)
      assert.notInclude(seen, "TheNewAgentsSecretKey")
      assert.notInclude(seen, "create-worker-7")
      assert.include(seen, "sealed:v1:")
    }).pipe(withIdempotency()))

  it.effect("refuses the same key with a different method, target or body", () =>
    Effect.gen(function*() {
      const idempotency = yield* Idempotency
      const { runs, execute } = yield* endpoint(created)
      yield* idempotency.run(request(), execute, asStored)
      const different = [
        request({ method: "PUT" }),
        request({ target: "/v1/signup" }),
        request({ target: "/v1/agents?x=1" }),
        request({ body: encoder.encode(JSON.stringify({ name: "worker2" })) }),
        request({ body: encoder.encode(JSON.stringify({ name: "worker" }) + " ") })
      ]
      for (const other of different) {
        const error = yield* Effect.flip(idempotency.run(other, execute, asStored))
        assert.instanceOf(error, IdempotencyConflict)
        assert.strictEqual(error.code, "IDEMPOTENCY_CONFLICT")
      }
      assert.strictEqual(yield* Ref.get(runs), 1)
    }).pipe(withIdempotency()))

  it("scopes keys per agent, and signup keys per client address", () => {
    assert.notStrictEqual(agentScope("agt_1" as AgentId), agentScope("agt_2" as AgentId))
    assert.notStrictEqual(publicScope("10.0.0.1"), publicScope("10.0.0.2"))
    assert.strictEqual(publicScope(undefined), "public")
    assert.notStrictEqual(publicScope("10.0.0.1"), agentScope("agt_1" as AgentId))
  })

  it.effect("keeps scopes apart", () =>
    Effect.gen(function*() {
      const idempotency = yield* Idempotency
      const { runs, execute } = yield* endpoint(created)
      yield* idempotency.run(request(), execute, asStored)
      const other = yield* idempotency.run(request({ scope: agentScope("agt_2" as AgentId), body: new Uint8Array() }), execute, asStored)
      assert.strictEqual(other._tag, "Executed")
      assert.strictEqual(yield* Ref.get(runs), 2)
    }).pipe(withIdempotency()))

  it.effect("keeps a key 24 hours from its first use, by the Clock", () =>
    Effect.gen(function*() {
      const idempotency = yield* Idempotency
      const { runs, execute } = yield* endpoint(created)
      yield* idempotency.run(request(), execute, asStored)
      yield* TestClock.adjust(24 * HOUR - 1)
      assert.strictEqual((yield* idempotency.run(request(), execute, asStored))._tag, "Replayed")
      const mismatch = yield* Effect.flip(idempotency.run(request({ method: "PUT" }), execute, asStored))
      assert.instanceOf(mismatch, IdempotencyConflict)
      yield* TestClock.adjust(1)
      // Expired: the key is free again, for any request.
      const fresh = yield* idempotency.run(request({ method: "PUT" }), execute, asStored)
      assert.strictEqual(fresh._tag, "Executed")
      assert.strictEqual(yield* Ref.get(runs), 2)
    }).pipe(withIdempotency()))

  it.effect("a concurrent identical request waits for the first and replays its response", () =>
    Effect.gen(function*() {
      const idempotency = yield* Idempotency
      const runs = yield* Ref.make(0)
      const slow = Effect.gen(function*() {
        yield* Ref.update(runs, (n) => n + 1)
        yield* Effect.sleep(5_000)
        return created
      })
      const fibers = yield* Effect.forEach(
        Array.from({ length: 10 }),
        () => Effect.forkChild(idempotency.run(request(), slow, asStored))
      )
      // Each request reaches its claim only after a few Web Crypto promises
      // (outside TestClock): move time in steps until every one has answered.
      for (let step = 0; step < 60 && fibers.some((fiber) => fiber.pollUnsafe() === undefined); step++) {
        yield* settle
        yield* TestClock.adjust(1_000)
      }
      const results = yield* Effect.forEach(fibers, Fiber.join)
      assert.strictEqual(yield* Ref.get(runs), 1)
      assert.deepStrictEqual(results.map((r) => r._tag).sort(), ["Executed", ...Array(9).fill("Replayed")])
      for (const result of results) {
        assert.deepStrictEqual(result._tag === "Executed" ? result.value : result.response, created)
      }
    }).pipe(withIdempotency()))

  it.effect("gives up waiting after maxWait with CONFLICT, and replays once the first finishes", () =>
    Effect.gen(function*() {
      const idempotency = yield* Idempotency
      const slow = Effect.as(Effect.sleep(60_000), created)
      const first = yield* Effect.forkChild(idempotency.run(request(), slow, asStored))
      yield* settle
      const second = yield* Effect.forkChild(Effect.flip(idempotency.run(request(), slow, asStored)))
      yield* settle
      yield* TestClock.adjust(DEFAULTS.maxWaitMs - 1)
      assert.isUndefined(second.pollUnsafe())
      yield* TestClock.adjust(1_000)
      const error = yield* Fiber.join(second)
      assert.instanceOf(error, IdempotencyKeyInProgress)
      assert.strictEqual(error.code, "CONFLICT")
      assert.strictEqual(error.message, "A request with this key is still in progress")
      yield* TestClock.adjust(60_000)
      assert.strictEqual((yield* Fiber.join(first))._tag, "Executed")
      assert.strictEqual((yield* idempotency.run(request(), slow, asStored))._tag, "Replayed")
    }).pipe(withIdempotency()))

  it.effect("polls with a growing interval, bounded by maxPollInterval", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore
      const claims = yield* Ref.make(0)
      const counting = Layer.succeed(IdempotencyStore, {
        ...store,
        claim: (input) => Effect.andThen(Ref.update(claims, (n) => n + 1), store.claim(input))
      })
      const idempotency = yield* Effect.provide(Idempotency, Idempotency.layer().pipe(Layer.provide(counting)))
      const first = yield* Effect.forkChild(idempotency.run(request(), Effect.as(Effect.sleep(HOUR), created), asStored))
      yield* settle
      const second = yield* Effect.forkChild(Effect.exit(idempotency.run(request(), Effect.succeed(created), asStored)))
      yield* settle
      yield* TestClock.adjust(DEFAULTS.maxWaitMs + 1_000)
      const exit = yield* Fiber.join(second)
      assert.isTrue(Exit.isFailure(exit))
      // 20, 40, …, 320 ms, then every 500 ms until 30 s: about 65 claims, not 1,500.
      const count = yield* Ref.get(claims)
      assert.isAbove(count, 40)
      assert.isBelow(count, 80)
      yield* Fiber.interrupt(first)
    }).pipe(withIdempotency()))

  it.effect("stores 2xx and final 4xx answers; releases validation, size, media type, rate limit and 5xx", () =>
    Effect.gen(function*() {
      const idempotency = yield* Idempotency
      for (const status of [200, 201, 402, 403, 404, 409]) {
        const { runs, execute } = yield* endpoint({ status, body: "{}" })
        const key = `stored-${status}`
        yield* idempotency.run(request({ key }), execute, asStored)
        const again = yield* idempotency.run(request({ key }), execute, asStored)
        assert.deepStrictEqual(again, { _tag: "Replayed", response: { status, body: "{}" } }, String(status))
        assert.strictEqual(yield* Ref.get(runs), 1)
      }
      for (const status of [400, 401, 413, 415, 429, 500, 502, 503]) {
        const { runs, execute } = yield* endpoint({ status, body: "{}" })
        const key = `released-${status}`
        yield* idempotency.run(request({ key }), execute, asStored)
        // A corrected request with the same key runs.
        const corrected = request({ key, body: encoder.encode("{\"name\":\"fixed\"}") })
        assert.strictEqual((yield* idempotency.run(corrected, execute, asStored))._tag, "Executed", String(status))
        assert.strictEqual(yield* Ref.get(runs), 2)
      }
    }).pipe(withIdempotency()))

  it.effect("releases the key on a failure, a defect, an interruption, an uncapturable or oversized response", () =>
    Effect.gen(function*() {
      const idempotency = yield* Idempotency
      const { runs, execute } = yield* endpoint(created)
      const retryRuns = (key: string) =>
        Effect.gen(function*() {
          const before = yield* Ref.get(runs)
          const result = yield* idempotency.run(request({ key, method: "PUT" }), execute, asStored)
          assert.strictEqual(result._tag, "Executed", key)
          assert.strictEqual(yield* Ref.get(runs), before + 1)
        })

      const failed = yield* Effect.flip(idempotency.run(request({ key: "fail" }), Effect.fail("boom"), asStored))
      assert.strictEqual(failed, "boom")
      yield* retryRuns("fail")

      const died = yield* Effect.exit(idempotency.run(request({ key: "die" }), Effect.die("bug"), asStored))
      assert.isTrue(Exit.isFailure(died))
      yield* retryRuns("die")

      const hanging = yield* Effect.forkChild(idempotency.run(request({ key: "interrupt" }), Effect.never, asStored))
      yield* settle
      yield* Fiber.interrupt(hanging)
      yield* retryRuns("interrupt")

      yield* idempotency.run(request({ key: "stream" }), execute, () => Option.none())
      yield* retryRuns("stream")

      const big = { status: 201, body: JSON.stringify("é".repeat(DEFAULTS.maxStoredBodyBytes / 2)) }
      const large = yield* idempotency.run(request({ key: "large" }), Effect.succeed(big), asStored)
      assert.deepStrictEqual(large, { _tag: "Executed", value: big })
      yield* retryRuns("large")

      const fits = { status: 201, body: "x".repeat(DEFAULTS.maxStoredBodyBytes) }
      yield* idempotency.run(request({ key: "fits" }), Effect.succeed(fits), asStored)
      assert.deepStrictEqual(yield* idempotency.run(request({ key: "fits" }), execute, asStored), {
        _tag: "Replayed",
        response: fits
      })
    }).pipe(withIdempotency()))

  it.effect("frees a key whose holder never finished once its lease ends", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore
      const idempotency = yield* Idempotency
      // A claim by a process that crashed before completing or releasing it.
      const requestHash = yield* hashRequest(request())
      yield* store.claim({
        scope: request().scope,
        key: yield* storageKeyOf(request().scope, request().key),
        requestHash,
        now: new Date(0),
        expiresAt: new Date(DEFAULTS.leaseMs)
      })
      const { runs, execute } = yield* endpoint(created)
      const waiting = yield* Effect.forkChild(Effect.flip(idempotency.run(request(), execute, asStored)))
      yield* settle
      yield* TestClock.adjust(DEFAULTS.maxWaitMs)
      assert.instanceOf(yield* Fiber.join(waiting), IdempotencyKeyInProgress)
      yield* TestClock.adjust(DEFAULTS.leaseMs)
      assert.strictEqual((yield* idempotency.run(request(), execute, asStored))._tag, "Executed")
      assert.strictEqual(yield* Ref.get(runs), 1)
    }).pipe(withIdempotency()))

  it.effect("accepts 1 to 255 printable ASCII characters as a key, nothing else", () =>
    Effect.gen(function*() {
      const idempotency = yield* Idempotency
      const { runs, execute } = yield* endpoint(created)
      for (const key of ["a", "~".repeat(255), "with space", "0c2f6e1a-5b7d-4f7e-9f3a-2d1c0b9a8e7f", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}"]) {
        assert.strictEqual((yield* idempotency.run(request({ key }), execute, asStored))._tag, "Executed", key)
      }
      for (const key of ["", "x".repeat(256), "café", "tab\there", "line\nbreak", "nul\u0000", "del\u007f", "emoji\u{1F600}"]) {
        const error = yield* Effect.flip(idempotency.run(request({ key }), execute, asStored))
        assert.instanceOf(error, ValidationError, JSON.stringify(key))
        assert.strictEqual(error.issues[0]?.path, "Idempotency-Key")
      }
      assert.strictEqual(yield* Ref.get(runs), 5)
    }).pipe(withIdempotency()))

  it.effect("purges expired keys in bounded batches, by the Clock", () =>
    Effect.gen(function*() {
      const idempotency = yield* Idempotency
      const { execute } = yield* endpoint(created)
      for (let i = 0; i < 5; i++) yield* idempotency.run(request({ key: `k${i}` }), execute, asStored)
      assert.strictEqual(yield* idempotency.purgeExpired(), 0)
      yield* TestClock.adjust(24 * HOUR)
      assert.strictEqual(yield* idempotency.purgeExpired(2), 2)
      assert.strictEqual(yield* idempotency.purgeExpired(0), 1)
      assert.strictEqual(yield* idempotency.purgeExpired(), 2)
      assert.strictEqual(yield* idempotency.purgeExpired(), 0)
    }).pipe(withIdempotency()))

  it.effect("the background sweep purges expired keys every interval", () =>
    Effect.gen(function*() {
      const idempotency = yield* Idempotency
      const store = yield* IdempotencyStore
      const { execute } = yield* endpoint(created)
      for (let i = 0; i < 25; i++) yield* idempotency.run(request({ key: `k${i}` }), execute, asStored)
      const sweeper = yield* Effect.forkChild(sweepExpiredKeys({ intervalMs: HOUR, batchSize: 10, maxBatches: 2 }))
      // Hourly rounds find nothing until the keys expire at 24 h; that round
      // deletes at most 2 batches of 10, and leaves the rest to the next one.
      yield* TestClock.adjust(24 * HOUR)
      assert.strictEqual(yield* store.purgeExpired(new Date(24 * HOUR), 100), 5)
      yield* Fiber.interrupt(sweeper)
    }).pipe(withIdempotency()))
})
