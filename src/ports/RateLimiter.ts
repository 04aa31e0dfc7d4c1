import { Context, type Effect } from "effect"

/**
 * The rate-limit port. Implementations: in-process (adapters/ratelimit/memory.ts)
 * and Redis (adapters/ratelimit/redis.ts); both pass
 * test/ratelimit/limiter.contract.ts.
 *
 * The algorithm is GCRA (generic cell rate algorithm), a smoothed sliding
 * window. Per key it keeps one number, the theoretical arrival time (TAT):
 * the moment at which the key would be back to an empty budget. With
 * `T = windowMs / limit` (the emission interval), a request at `now` is
 * allowed iff
 *
 *     max(tat, now) + T - now <= windowMs
 *
 * and when allowed, `tat := max(tat, now) + T`. So a fresh key takes `limit`
 * requests at once, then one more every `T` ms; there is no boundary at which
 * a second full burst becomes available (a fixed window allows `2 × limit`
 * across a boundary; GCRA never more than `limit` in any `windowMs`).
 *
 * `take` checks and consumes all its keys atomically: either every key admits
 * the request and each is charged, or none is charged. A request refused by
 * its account's limit therefore does not burn its agent's quota.
 *
 * Time is the caller's: adapters read effect's `Clock`, so `TestClock` drives
 * them, and both compute the answer with `gcra` below. TATs are stored as
 * epoch microseconds (see `intervalUs`).
 */

/** Per agent and per account (authenticated requests); per client address (signup, dashboard sign-in, anonymous L402 calls). */
export type RateScope = "agent" | "account" | "signup" | "signin" | "client"

export interface RateKey {
  readonly scope: RateScope
  /** The agent's or account's id, or the client's address; one budget per (scope, key). */
  readonly key: string
  /** Requests allowed per window; a positive integer. */
  readonly limit: number
  /** The window in milliseconds; positive. */
  readonly windowMs: number
}

/**
 * The outcome of one `take`, describing one scope: the one that refused
 * (of several, the one that frees last), or when allowed the one closest to
 * exhaustion (fewest remaining; on a tie, the one that frees a slot last).
 */
export interface Decision {
  readonly allowed: boolean
  readonly scope: RateScope
  readonly limit: number
  /** Requests that scope would still admit right now (after this one, when allowed). */
  readonly remaining: number
  /** Epoch ms at which that scope admits one more request than `remaining` says. */
  readonly resetAtMs: number
  /** Refused only: ms until the same request would be allowed (> 0). */
  readonly retryAfterMs?: number
}

export interface RateLimiterShape {
  /** Checks every key and, only if all allow, charges each one request. */
  readonly take: (keys: ReadonlyArray<RateKey>) => Effect.Effect<Decision>
}

export class RateLimiter extends Context.Service<RateLimiter, RateLimiterShape>()("spendgate/RateLimiter") {}

/**
 * Throws on keys no limiter can honour: none at all, a limit that is not a
 * positive integer, a window that is not a positive finite number, or the same
 * (scope, key) twice. Adapters call it inside `Effect.sync`, so a bad call is
 * a defect.
 */
export const validateKeys = (keys: ReadonlyArray<RateKey>): void => {
  if (keys.length === 0) throw new Error("RateLimiter.take: no keys")
  const seen = new Set<string>()
  for (const key of keys) {
    if (!Number.isSafeInteger(key.limit) || key.limit < 1) {
      throw new Error(`RateLimiter.take: limit must be a positive integer, got ${key.limit}`)
    }
    if (!Number.isFinite(key.windowMs) || key.windowMs <= 0) {
      throw new Error(`RateLimiter.take: windowMs must be positive, got ${key.windowMs}`)
    }
    const id = `${key.scope}:${key.key}`
    if (seen.has(id)) throw new Error(`RateLimiter.take: ${id} given twice`)
    seen.add(id)
  }
}

/**
 * The arithmetic runs on whole microseconds, so every value is an integer a
 * double holds exactly (epoch µs stay below 2^53 until the year 2255): the
 * Lua script and this module agree to the last unit, and `remaining` has no
 * rounding noise when the window is not a multiple of the limit. The
 * emission interval is rounded to the microsecond and the burst is exactly
 * `limit`: the effective window is `limit × T`, within `limit / 2` µs of
 * `windowMs` (for rates up to one request per µs).
 */
export const intervalUs = (key: RateKey): number => Math.max(1, Math.round((key.windowMs * 1000) / key.limit))

/** The effective window in µs: `limit` intervals. */
export const capacityUs = (key: RateKey): number => intervalUs(key) * key.limit

export const toMicros = (ms: number): number => Math.round(ms * 1000)

export interface GcraResult {
  readonly decision: Decision
  /** The TATs (epoch µs) to store, in the order of the keys; undefined when refused (nothing changes). */
  readonly tats: ReadonlyArray<number> | undefined
}

/**
 * One GCRA step over the stored TATs (epoch µs; undefined: never seen, or
 * expired). Pure; the Redis adapter's Lua script applies exactly the same
 * integer arithmetic, this function then describes its outcome.
 */
export const gcra = (
  nowMs: number,
  keys: ReadonlyArray<RateKey>,
  stored: ReadonlyArray<number | undefined>
): GcraResult => {
  const now = toMicros(nowMs)
  const steps = keys.map((key, i) => {
    const interval = intervalUs(key)
    const capacity = interval * key.limit
    const next = Math.max(stored[i] ?? now, now) + interval
    return { key, interval, capacity, next, ok: next - now <= capacity }
  })

  if (steps.some((step) => !step.ok)) {
    let worst: { readonly key: RateKey; readonly retryAfter: number } | undefined
    for (const step of steps) {
      if (step.ok) continue
      const retryAfter = step.next - step.capacity - now
      if (worst === undefined || retryAfter > worst.retryAfter) worst = { key: step.key, retryAfter }
    }
    const { key, retryAfter } = worst!
    return {
      decision: {
        allowed: false,
        scope: key.scope,
        limit: key.limit,
        remaining: 0,
        resetAtMs: (now + retryAfter) / 1000,
        retryAfterMs: retryAfter / 1000
      },
      tats: undefined
    }
  }

  let closest: Decision | undefined
  for (const step of steps) {
    const room = now + step.capacity - step.next
    const remaining = (room - (room % step.interval)) / step.interval
    // `remaining` grows by one when `now + capacity - tat` reaches (remaining + 1) × T.
    const resetAtMs = (step.next - step.capacity + (remaining + 1) * step.interval) / 1000
    if (
      closest === undefined || remaining < closest.remaining ||
      (remaining === closest.remaining && resetAtMs > closest.resetAtMs)
    ) {
      closest = { allowed: true, scope: step.key.scope, limit: step.key.limit, remaining, resetAtMs }
    }
  }
  return { decision: closest!, tats: steps.map((step) => step.next) }
}
