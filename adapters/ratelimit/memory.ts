import { Effect, Layer } from "effect"
import {
  gcra,
  type RateKey,
  RateLimiter,
  type RateLimiterShape,
  toMicros,
  validateKeys
} from "../../src/ports/RateLimiter.ts"

/**
 * In-process rate limiting: one Map of "scope:key" → TAT (epoch µs). Each
 * `take` is one `Effect.sync`, so it is atomic with respect to every other
 * fiber. Counters are per process; several instances share nothing (use the
 * Redis layer for that).
 *
 * Bounded memory: a TAT at or before `now` means a full budget, exactly like
 * no entry, so such entries can go at any time. The Map's iteration order is
 * the order of last charge; each `take` drops the few oldest entries that
 * have expired, and once the Map passes `maxKeys` one pass drops every expired
 * entry and, if that is not enough, the least recently charged live ones
 * (they restart with a full budget) down to 90 % of `maxKeys`, so that the
 * next full pass is at least a tenth of `maxKeys` insertions away. Refused
 * requests never add entries.
 */

export interface MemoryRateLimiterOptions {
  /** Most keys held at once (default 100 000). */
  readonly maxKeys?: number
}

export const DEFAULT_MAX_KEYS = 100_000

/** Oldest entries looked at (and dropped if expired) on every charge. */
const SWEEP_PER_TAKE = 4

export const makeMemoryRateLimiter = (options: MemoryRateLimiterOptions = {}): RateLimiterShape & {
  /** Keys currently held, for tests and metrics. */
  readonly size: () => number
} => {
  const maxKeys = Math.max(1, options.maxKeys ?? DEFAULT_MAX_KEYS)
  const lowWater = Math.max(1, Math.floor(maxKeys * 0.9))
  const tats = new Map<string, number>()

  const sweep = (now: number) => {
    let looked = 0
    for (const [name, tat] of tats) {
      if (looked++ >= SWEEP_PER_TAKE) break
      if (tat <= now) tats.delete(name)
    }
    if (tats.size <= maxKeys) return
    for (const [name, tat] of tats) {
      if (tat <= now) tats.delete(name)
    }
    if (tats.size <= maxKeys) return
    for (const name of tats.keys()) {
      if (tats.size <= lowWater) break
      tats.delete(name)
    }
  }

  const takeAt = (nowMs: number, keys: ReadonlyArray<RateKey>) => {
    validateKeys(keys)
    const now = toMicros(nowMs)
    const names = keys.map((key) => `${key.scope}:${key.key}`)
    const stored = names.map((name) => {
      const tat = tats.get(name)
      return tat !== undefined && tat > now ? tat : undefined
    })
    const result = gcra(nowMs, keys, stored)
    if (result.tats !== undefined) {
      for (let i = 0; i < names.length; i++) {
        // Re-inserting moves the key to the end of the iteration order.
        tats.delete(names[i])
        tats.set(names[i], result.tats[i])
      }
      sweep(now)
    }
    return result.decision
  }

  return {
    take: (keys) => Effect.clockWith((clock) => Effect.sync(() => takeAt(clock.currentTimeMillisUnsafe(), keys))),
    size: () => tats.size
  }
}

export const layer = (options: MemoryRateLimiterOptions = {}): Layer.Layer<RateLimiter> =>
  Layer.sync(RateLimiter, () => RateLimiter.of(makeMemoryRateLimiter(options)))
