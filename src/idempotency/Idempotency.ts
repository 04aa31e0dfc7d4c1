import { Clock, Context, Effect, Exit, Layer, Option, Schema } from "effect"
import { ValidationError } from "../domain/errors.ts"
import type { AgentId } from "../domain/ids.ts"
import { IdempotencyStore } from "../ports/IdempotencyStore.ts"

/**
 * Idempotency keys, with the semantics of Stripe's `Idempotency-Key`:
 *
 * - the same key with the same request (method, target and body bytes) gets
 *   the stored response of the first one, and the request has no second
 *   effect, also when both arrive at once (the second waits, bounded, for the
 *   first to finish);
 * - the same key with a different request is `IDEMPOTENCY_CONFLICT`;
 * - keys are kept `ttlMs` (24 h) from their first use, by effect's Clock;
 * - an answer that says the request was not taken in (validation, body too
 *   large, wrong media type, rate limit), a failure or a defect frees the key,
 *   so that a corrected retry with the same key runs.
 *
 * Transport-neutral: the caller hands over the request as bytes and says how
 * to read a status and a body out of its result (adapters/http/idempotency.ts).
 */

// ---- key format and scopes -------------------------------------------------

/** 1 to 255 printable ASCII characters (space included). */
const KEY_PATTERN = /^[\x20-\x7e]{1,255}$/

export const MAX_KEY_LENGTH = 255

/**
 * Keys of authenticated requests are scoped per agent: a key and its stored
 * answer belong to the agent that used it, never to another agent of the
 * same account (an answer may carry what only its caller may see, such as a
 * new agent's API key or a checkout session).
 */
export const agentScope = (agentId: AgentId): string => `agent:${agentId}`

/**
 * The scope of unauthenticated requests (signup), per client address: a
 * stored signup answer holds the new owner's API key, so it is replayed only
 * to the address that asked for it. Behind a reverse proxy every client has
 * the proxy's address and shares one scope, as without an address.
 */
export const publicScope = (clientAddress: string | undefined): string =>
  clientAddress === undefined || clientAddress === "" ? "public" : `public:${clientAddress}`

/**
 * The scope of the operator's admin requests (ADMIN_TOKEN): one operator, one
 * scope, whatever the client address; the stored answer is sealed with the
 * admin token.
 */
export const adminScope = "admin"

export const validateKey = (key: string): Effect.Effect<string, ValidationError> =>
  KEY_PATTERN.test(key) ? Effect.succeed(key) : Effect.fail(
    new ValidationError({
      message: "Invalid Idempotency-Key: it must be 1 to 255 printable ASCII characters",
      issues: [{ path: "Idempotency-Key", message: "Expected 1 to 255 printable ASCII characters" }]
    })
  )

// ---- errors ------------------------------------------------------------------

export class IdempotencyConflict extends Schema.TaggedError<IdempotencyConflict>()("IdempotencyConflict", {}) {
  readonly code = "IDEMPOTENCY_CONFLICT"
  override get message() {
    return "This Idempotency-Key was already used with a different request"
  }
}

/** The first request with the key did not finish within the wait bound. */
export class IdempotencyKeyInProgress
  extends Schema.TaggedError<IdempotencyKeyInProgress>()("IdempotencyKeyInProgress", {})
{
  readonly code = "CONFLICT"
  override get message() {
    return "A request with this key is still in progress"
  }
}

// ---- what is stored ------------------------------------------------------------

export interface StoredResponse {
  readonly status: number
  /** The response body as sent (JSON text). */
  readonly body: string
}

/**
 * Statuses that say the request was not taken in at all. They are not
 * stored: the key stays free for a corrected retry.
 */
const NOT_TAKEN_IN = new Set([400, 401, 408, 413, 415, 429])

/** 2xx and the other 4xx (402, 403, 404, 409, …) are final answers: stored and replayed. */
export const isReplayableStatus = (status: number): boolean =>
  status >= 200 && status < 500 && !NOT_TAKEN_IN.has(status)

const utf8 = new TextEncoder()

// ---- request fingerprint -----------------------------------------------------------

export interface IdempotentRequest {
  readonly scope: string
  readonly key: string
  readonly method: string
  /** Path and query string. */
  readonly target: string
  readonly body: Uint8Array
  /**
   * What only the caller holds (its API key), mixed into the key that seals
   * the stored answer; with none, the answer is sealed by the raw
   * Idempotency-Key alone.
   */
  readonly secret?: string
}

/**
 * Lower-case hex SHA-256 of `METHOD target\n` followed by the body bytes.
 * Neither the method nor a request target can contain a line feed, so two
 * different requests never share an input.
 */
export const hashRequest = (request: Pick<IdempotentRequest, "method" | "target" | "body">): Effect.Effect<string> =>
  Effect.promise(() => {
    const head = utf8.encode(`${request.method.toUpperCase()} ${request.target}\n`)
    const input = new Uint8Array(head.length + request.body.length)
    input.set(head, 0)
    input.set(request.body, head.length)
    return globalThis.crypto.subtle.digest("SHA-256", input)
  }).pipe(Effect.map((digest) => {
    let hex = ""
    for (const byte of new Uint8Array(digest)) hex += byte.toString(16).padStart(2, "0")
    return hex
  }))

// ---- what reaches storage ------------------------------------------------------------

/*
 * A stored answer can hold a secret: `POST /v1/agents` and signup return a new
 * API key, which is otherwise kept only as a hash. So storage never sees the
 * raw Idempotency-Key (rows are found by SHA-256 of scope and key) and the
 * answer is sealed with AES-256-GCM under a key derived (HKDF-SHA-256) from
 * the raw Idempotency-Key and the caller's secret. Reading the table alone
 * gives neither the answers nor the keys that would open them.
 */

const SEALED_PREFIX = "sealed:v1:"

const toHex = (bytes: Uint8Array): string => {
  let hex = ""
  for (const byte of bytes) hex += byte.toString(16).padStart(2, "0")
  return hex
}

const toBase64 = (bytes: Uint8Array): string => {
  let binary = ""
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000))
  return btoa(binary)
}

const fromBase64 = (text: string): Uint8Array => Uint8Array.from(atob(text), (c) => c.charCodeAt(0))

/** The row id of (scope, key) in storage: lower-case hex SHA-256. */
export const storageKeyOf = (scope: string, key: string): Effect.Effect<string> =>
  Effect.promise(() => globalThis.crypto.subtle.digest("SHA-256", utf8.encode(`${scope}\n${key}`))).pipe(
    Effect.map((digest) => toHex(new Uint8Array(digest)))
  )

const sealingKeyOf = (request: Pick<IdempotentRequest, "scope" | "key" | "secret">) =>
  Effect.promise(async () => {
    const material = await globalThis.crypto.subtle.importKey(
      "raw",
      utf8.encode(`${request.key}\n${request.secret ?? ""}`),
      "HKDF",
      false,
      ["deriveKey"]
    )
    return globalThis.crypto.subtle.deriveKey(
      { name: "HKDF", hash: "SHA-256", salt: utf8.encode(request.scope), info: utf8.encode("spendgate idempotency v1") },
      material,
      { name: "AES-GCM", length: 256 },
      false,
      ["encrypt", "decrypt"]
    )
  })

type SealingKey = Awaited<ReturnType<typeof globalThis.crypto.subtle.deriveKey>>

const seal = (key: SealingKey, body: string): Effect.Effect<string> =>
  Effect.promise(async () => {
    const iv = globalThis.crypto.getRandomValues(new Uint8Array(12))
    const sealed = new Uint8Array(await globalThis.crypto.subtle.encrypt({ name: "AES-GCM", iv }, key, utf8.encode(body)))
    const out = new Uint8Array(iv.length + sealed.length)
    out.set(iv, 0)
    out.set(sealed, iv.length)
    return SEALED_PREFIX + toBase64(out)
  })

/** The stored answer's text; None when it does not open with this key. */
const unseal = (key: SealingKey, stored: string): Effect.Effect<Option.Option<string>> =>
  Effect.promise(async () => {
    if (!stored.startsWith(SEALED_PREFIX)) return Option.none<string>()
    try {
      const bytes = fromBase64(stored.slice(SEALED_PREFIX.length))
      const plain = await globalThis.crypto.subtle.decrypt({ name: "AES-GCM", iv: bytes.subarray(0, 12) }, key, bytes.subarray(12))
      return Option.some(new TextDecoder().decode(plain))
    } catch {
      return Option.none<string>()
    }
  })

// ---- the service -----------------------------------------------------------------

export interface IdempotencyOptions {
  /** How long a key is kept after its first use. Default 24 h. */
  readonly ttlMs?: number
  /**
   * How long an unfinished claim holds its key when its owner never completes
   * or releases it (a crash). Longer than any request may run. Default 10 min.
   */
  readonly leaseMs?: number
  /** How long a request waits for a concurrent one with the same key. Default 30 s. */
  readonly maxWaitMs?: number
  /** First poll interval while waiting; it doubles up to `maxPollIntervalMs`. Defaults 20 ms and 500 ms. */
  readonly pollIntervalMs?: number
  readonly maxPollIntervalMs?: number
  /** Larger responses are not stored (the key is released). Default 64 KiB. */
  readonly maxStoredBodyBytes?: number
}

export const DEFAULTS = {
  ttlMs: 24 * 60 * 60 * 1000,
  leaseMs: 10 * 60 * 1000,
  maxWaitMs: 30_000,
  pollIntervalMs: 20,
  maxPollIntervalMs: 500,
  maxStoredBodyBytes: 64 * 1024
} as const satisfies Required<IdempotencyOptions>

/** Upper bound of rows one `purgeExpired` call deletes. */
export const MAX_PURGE_BATCH = 10_000

export type IdempotentResult<A> =
  /** The request ran here; `value` is its own result. */
  | { readonly _tag: "Executed"; readonly value: A }
  /** An earlier identical request's stored response. */
  | { readonly _tag: "Replayed"; readonly response: StoredResponse }

export class Idempotency extends Context.Service<Idempotency, {
  /**
   * Runs `execute` at most once per (scope, key) and request. `capture`
   * reads the status and body of a result; `None` (e.g. a streamed body)
   * means it cannot be stored, and the key is released.
   */
  readonly run: <A, E, R>(
    request: IdempotentRequest,
    execute: Effect.Effect<A, E, R>,
    capture: (result: A) => Option.Option<StoredResponse>
  ) => Effect.Effect<IdempotentResult<A>, E | ValidationError | IdempotencyConflict | IdempotencyKeyInProgress, R>
  /** Deletes up to `limit` (at most MAX_PURGE_BATCH) expired keys; returns how many. */
  readonly purgeExpired: (limit?: number) => Effect.Effect<number>
}>()("spendgate/Idempotency") {
  static readonly layer = (options: IdempotencyOptions = {}) =>
    Layer.effect(
      Idempotency,
      Effect.gen(function*() {
        const store = yield* IdempotencyStore
        const settings = { ...DEFAULTS, ...options }
        const leaseMs = Math.min(settings.leaseMs, settings.ttlMs)

        const run = <A, E, R>(
          request: IdempotentRequest,
          execute: Effect.Effect<A, E, R>,
          capture: (result: A) => Option.Option<StoredResponse>
        ): Effect.Effect<IdempotentResult<A>, E | ValidationError | IdempotencyConflict | IdempotencyKeyInProgress, R> =>
          Effect.gen(function*() {
            yield* validateKey(request.key)
            const { scope } = request
            const key = yield* storageKeyOf(scope, request.key)
            // Derived only when an answer is stored or replayed, not on the way to the claim.
            const sealingKey = yield* Effect.cached(sealingKeyOf(request))
            const requestHash = yield* hashRequest(request)
            const deadline = (yield* Clock.currentTimeMillis) + settings.maxWaitMs
            let interval = settings.pollIntervalMs

            // Stores the answer, or frees the key when it is not a final one.
            const finish = (claimedMs: number, exit: Exit.Exit<A, E>) => {
              if (Exit.isSuccess(exit)) {
                const captured = capture(exit.value)
                if (Option.isSome(captured)) {
                  const { status, body } = captured.value
                  if (isReplayableStatus(status) && utf8.encode(body).length <= settings.maxStoredBodyBytes) {
                    return Effect.flatMap(Effect.flatMap(sealingKey, (k) => seal(k, body)), (sealed) =>
                      store.complete({ scope, key, status, body: sealed, expiresAt: new Date(claimedMs + settings.ttlMs) }))
                  }
                }
              }
              return store.release({ scope, key })
            }

            while (true) {
              // Claim and run under one mask: once the key is ours, it is
              // completed or released whatever happens to this fiber.
              const attempt = yield* Effect.uninterruptibleMask((restore) =>
                Effect.gen(function*() {
                  const nowMs = yield* Clock.currentTimeMillis
                  const claim = yield* store.claim({
                    scope,
                    key,
                    requestHash,
                    now: new Date(nowMs),
                    expiresAt: new Date(nowMs + leaseMs)
                  })
                  if (claim._tag !== "Claimed") return claim
                  const exit = yield* Effect.exit(restore(execute))
                  yield* finish(nowMs, exit)
                  return { _tag: "Ran" as const, exit }
                })
              )
              switch (attempt._tag) {
                case "Ran":
                  return { _tag: "Executed", value: yield* attempt.exit } satisfies IdempotentResult<A>
                case "Replay": {
                  // The same request hash under this (scope, key) seals with the same key; an
                  // answer that does not open was stored by another caller secret: a conflict.
                  const body = yield* unseal(yield* sealingKey, attempt.body)
                  if (Option.isNone(body)) return yield* new IdempotencyConflict()
                  return {
                    _tag: "Replayed",
                    response: { status: attempt.status, body: body.value }
                  } satisfies IdempotentResult<A>
                }
                case "Mismatch":
                  return yield* new IdempotencyConflict()
                case "InProgress": {
                  const left = deadline - (yield* Clock.currentTimeMillis)
                  if (left <= 0) return yield* new IdempotencyKeyInProgress()
                  yield* Effect.sleep(Math.min(interval, left))
                  interval = Math.min(interval * 2, settings.maxPollIntervalMs)
                }
              }
            }
          }).pipe(Effect.withSpan("Idempotency.run"))

        const purgeExpired = Effect.fn("Idempotency.purgeExpired")(function*(limit: number = 1_000) {
          const bounded = Math.max(1, Math.min(Math.floor(limit), MAX_PURGE_BATCH))
          return yield* store.purgeExpired(new Date(yield* Clock.currentTimeMillis), bounded)
        })

        return Idempotency.of({ run, purgeExpired })
      })
    )
}

/**
 * A sweep that never ends: every `intervalMs`, purges expired keys in
 * batches of `batchSize`, at most `maxBatches` batches per round. A storage
 * failure is logged and the next round tries again. Fork it in a scope.
 */
export const sweepExpiredKeys = (
  options: { readonly intervalMs?: number; readonly batchSize?: number; readonly maxBatches?: number } = {}
): Effect.Effect<never, never, Idempotency> =>
  Effect.gen(function*() {
    const idempotency = yield* Idempotency
    const batchSize = options.batchSize ?? 1_000
    const round = Effect.gen(function*() {
      for (let batch = 0; batch < (options.maxBatches ?? 10); batch++) {
        if ((yield* idempotency.purgeExpired(batchSize)) < batchSize) return
      }
    }).pipe(Effect.catchCause((cause) => Effect.logWarning("Purging expired idempotency keys failed", cause)))
    return yield* Effect.forever(Effect.andThen(Effect.sleep(options.intervalMs ?? 10 * 60 * 1000), round))
  })
