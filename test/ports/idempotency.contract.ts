import { assert, layer } from "@effect/vitest"
import { Effect, type Layer } from "effect"
import { IdempotencyStore } from "../../src/ports/IdempotencyStore.ts"

/**
 * The one contract every IdempotencyStore implementation passes: memory,
 * PGlite and PostgreSQL run exactly these tests.
 */

const at = (iso: string) => new Date(iso)
const HOUR = 60 * 60 * 1000
const later = (date: Date, ms: number) => new Date(date.getTime() + ms)

const hashA = "a".repeat(64)
const hashB = "b".repeat(64)

let counter = 0
/** A key no other test uses, so the tests share one database without interfering. */
const freshKey = () => `key-${Date.now().toString(36)}-${(counter++).toString(36)}-${Math.random().toString(36).slice(2)}`

const t0 = at("2026-04-01T12:00:00Z")

export const idempotencyStoreContract = (name: string, storeLayer: Layer.Layer<IdempotencyStore, unknown>) =>
  layer(storeLayer, { timeout: 60_000 })(`IdempotencyStore contract: ${name}`, (it) => {
    it.effect("claims a free key once; the same request is in progress until completed, then replayed", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore
        const key = freshKey()
        const claim = { scope: "account:a", key, requestHash: hashA, now: t0, expiresAt: later(t0, HOUR) }
        assert.deepStrictEqual(yield* store.claim(claim), { _tag: "Claimed" })
        assert.deepStrictEqual(yield* store.claim({ ...claim, now: later(t0, 1000) }), { _tag: "InProgress" })
        const body = JSON.stringify({ id: "agt_1", note: "ünïcödé ✓" })
        yield* store.complete({ scope: "account:a", key, status: 201, body, expiresAt: later(t0, 24 * HOUR) })
        const replay = yield* store.claim({ ...claim, now: later(t0, 2000) })
        assert.deepStrictEqual(replay, { _tag: "Replay", status: 201, body })
        // Still replayed after the claim's own lease: complete set the final expiry.
        assert.deepStrictEqual(yield* store.claim({ ...claim, now: later(t0, 23 * HOUR) }), replay)
      }))

    it.effect("reports a different request with the same key as a mismatch, in progress or completed", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore
        const key = freshKey()
        const claim = { scope: "account:a", key, requestHash: hashA, now: t0, expiresAt: later(t0, HOUR) }
        assert.strictEqual((yield* store.claim(claim))._tag, "Claimed")
        assert.deepStrictEqual(yield* store.claim({ ...claim, requestHash: hashB }), { _tag: "Mismatch" })
        yield* store.complete({ scope: "account:a", key, status: 402, body: "{}", expiresAt: later(t0, 24 * HOUR) })
        assert.deepStrictEqual(yield* store.claim({ ...claim, requestHash: hashB }), { _tag: "Mismatch" })
        assert.deepStrictEqual(yield* store.claim(claim), { _tag: "Replay", status: 402, body: "{}" })
      }))

    it.effect("keeps scopes apart: the same key in two scopes is two keys", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore
        const key = freshKey()
        const claim = { key, requestHash: hashA, now: t0, expiresAt: later(t0, HOUR) }
        assert.strictEqual((yield* store.claim({ ...claim, scope: "account:a" }))._tag, "Claimed")
        assert.strictEqual((yield* store.claim({ ...claim, scope: "account:b", requestHash: hashB }))._tag, "Claimed")
        assert.strictEqual((yield* store.claim({ ...claim, scope: "public" }))._tag, "Claimed")
        yield* store.complete({ scope: "account:b", key, status: 200, body: "\"b\"", expiresAt: later(t0, HOUR) })
        assert.strictEqual((yield* store.claim({ ...claim, scope: "account:a" }))._tag, "InProgress")
        assert.deepStrictEqual(
          yield* store.claim({ ...claim, scope: "account:b", requestHash: hashB }),
          { _tag: "Replay", status: 200, body: "\"b\"" }
        )
      }))

    it.effect("release frees an in-progress claim but never a completed answer", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore
        const key = freshKey()
        const claim = { scope: "account:a", key, requestHash: hashA, now: t0, expiresAt: later(t0, HOUR) }
        assert.strictEqual((yield* store.claim(claim))._tag, "Claimed")
        yield* store.release({ scope: "account:a", key })
        // Free again, also for a different request.
        assert.strictEqual((yield* store.claim({ ...claim, requestHash: hashB }))._tag, "Claimed")
        yield* store.complete({ scope: "account:a", key, status: 201, body: "{}", expiresAt: later(t0, HOUR) })
        yield* store.release({ scope: "account:a", key })
        assert.deepStrictEqual(yield* store.claim({ ...claim, requestHash: hashB }), {
          _tag: "Replay",
          status: 201,
          body: "{}"
        })
        // Releasing or completing a key nobody holds changes nothing.
        const unknown = freshKey()
        yield* store.release({ scope: "account:a", key: unknown })
        yield* store.complete({ scope: "account:a", key: unknown, status: 201, body: "{}", expiresAt: later(t0, HOUR) })
        assert.strictEqual((yield* store.claim({ ...claim, key: unknown }))._tag, "Claimed")
      }))

    it.effect("complete stores only the first answer", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore
        const key = freshKey()
        const claim = { scope: "account:a", key, requestHash: hashA, now: t0, expiresAt: later(t0, HOUR) }
        assert.strictEqual((yield* store.claim(claim))._tag, "Claimed")
        yield* store.complete({ scope: "account:a", key, status: 201, body: "\"first\"", expiresAt: later(t0, HOUR) })
        yield* store.complete({ scope: "account:a", key, status: 404, body: "\"second\"", expiresAt: later(t0, HOUR) })
        assert.deepStrictEqual(yield* store.claim(claim), { _tag: "Replay", status: 201, body: "\"first\"" })
      }))

    it.effect("an expired row counts as absent: it is replaced by the next claim, whatever the request", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore
        const key = freshKey()
        const claim = { scope: "account:a", key, requestHash: hashA, now: t0, expiresAt: later(t0, HOUR) }
        // A completed answer expires at the expiry complete gave it…
        assert.strictEqual((yield* store.claim(claim))._tag, "Claimed")
        yield* store.complete({ scope: "account:a", key, status: 201, body: "{}", expiresAt: later(t0, 24 * HOUR) })
        const justBefore = later(t0, 24 * HOUR - 1)
        assert.strictEqual((yield* store.claim({ ...claim, requestHash: hashB, now: justBefore }))._tag, "Mismatch")
        const expiry = later(t0, 24 * HOUR)
        assert.strictEqual(
          (yield* store.claim({ ...claim, requestHash: hashB, now: expiry, expiresAt: later(expiry, HOUR) }))._tag,
          "Claimed"
        )
        assert.strictEqual((yield* store.claim({ ...claim, requestHash: hashB, now: expiry }))._tag, "InProgress")
        // …and an abandoned claim at the end of its lease.
        const key2 = freshKey()
        assert.strictEqual((yield* store.claim({ ...claim, key: key2 }))._tag, "Claimed")
        assert.strictEqual((yield* store.claim({ ...claim, key: key2, now: later(t0, HOUR - 1) }))._tag, "InProgress")
        assert.strictEqual(
          (yield* store.claim({ ...claim, key: key2, now: later(t0, HOUR), expiresAt: later(t0, 2 * HOUR) }))._tag,
          "Claimed"
        )
      }))

    it.effect("purges expired rows only, at most `limit` per call", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore
        // Long before every other test's rows expire, so the counts are this test's own.
        const base = at("1990-01-01T00:00:00Z")
        const scope = `purge-${freshKey()}`
        const keys = Array.from({ length: 7 }, freshKey)
        for (const [i, key] of keys.entries()) {
          const claim = { scope, key, requestHash: hashA, now: base, expiresAt: later(base, HOUR) }
          assert.strictEqual((yield* store.claim(claim))._tag, "Claimed")
          // Four completed keys expire at base + 2 h; three stay in progress until base + 1 h.
          if (i < 4) yield* store.complete({ scope, key, status: 201, body: "{}", expiresAt: later(base, 2 * HOUR) })
        }
        assert.strictEqual(yield* store.purgeExpired(later(base, HOUR - 1), 100), 0)
        assert.strictEqual(yield* store.purgeExpired(later(base, HOUR), 2), 2)
        assert.strictEqual(yield* store.purgeExpired(later(base, HOUR), 100), 1)
        assert.strictEqual(yield* store.purgeExpired(later(base, HOUR), 100), 0)
        // The completed ones are still answered.
        const replay = yield* store.claim({ scope, key: keys[0]!, requestHash: hashA, now: later(base, HOUR), expiresAt: later(base, 3 * HOUR) })
        assert.strictEqual(replay._tag, "Replay")
        assert.strictEqual(yield* store.purgeExpired(later(base, 2 * HOUR), 3), 3)
        assert.strictEqual(yield* store.purgeExpired(later(base, 2 * HOUR), 3), 1)
        // Purged rows are free keys.
        const again = yield* store.claim({ scope, key: keys[0]!, requestHash: hashB, now: later(base, 2 * HOUR), expiresAt: later(base, 3 * HOUR) })
        assert.strictEqual(again._tag, "Claimed")
      }))

    it.effect("20 concurrent claims of one key: exactly one is Claimed, the others see it in progress", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore
        for (let round = 0; round < 3; round++) {
          const key = freshKey()
          const results = yield* Effect.all(
            Array.from({ length: 20 }, () =>
              store.claim({ scope: "account:race", key, requestHash: hashA, now: t0, expiresAt: later(t0, HOUR) })),
            { concurrency: "unbounded" }
          )
          const tags = results.map((r) => r._tag)
          assert.strictEqual(tags.filter((t) => t === "Claimed").length, 1, tags.join(","))
          assert.strictEqual(tags.filter((t) => t === "InProgress").length, 19, tags.join(","))
        }
      }))

    it.effect("20 concurrent claims of one expired key: exactly one takes it over", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore
        const key = freshKey()
        const claim = { scope: "account:race", key, requestHash: hashA, now: t0, expiresAt: later(t0, HOUR) }
        assert.strictEqual((yield* store.claim(claim))._tag, "Claimed")
        yield* store.complete({ scope: "account:race", key, status: 201, body: "{}", expiresAt: later(t0, HOUR) })
        const now = later(t0, 2 * HOUR)
        const results = yield* Effect.all(
          Array.from({ length: 20 }, () => store.claim({ ...claim, now, expiresAt: later(now, HOUR) })),
          { concurrency: "unbounded" }
        )
        const tags = results.map((r) => r._tag)
        assert.strictEqual(tags.filter((t) => t === "Claimed").length, 1, tags.join(","))
        assert.strictEqual(tags.filter((t) => t === "InProgress").length, 19, tags.join(","))
      }))

    it.effect("keeps a 64 KiB body and a 255-character key exactly", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore
        const key = "~ !\"'\\%_".repeat(32).slice(0, 255)
        assert.strictEqual(key.length, 255)
        const scope = `exact-${freshKey()}`
        const body = JSON.stringify({ blob: "x€\u{1F600}".repeat(8_000) })
        const claim = { scope, key, requestHash: hashA, now: t0, expiresAt: later(t0, HOUR) }
        assert.strictEqual((yield* store.claim(claim))._tag, "Claimed")
        yield* store.complete({ scope, key, status: 409, body, expiresAt: later(t0, HOUR) })
        assert.deepStrictEqual(yield* store.claim(claim), { _tag: "Replay", status: 409, body })
      }))
  })
