import { PgClient, PgConnection } from "@effect/sql-pg"
import { Cause, Duration, Effect, type Exit, Layer, Option, Queue } from "effect"
import { ReadCache, type ReadCacheShape, makeReadCache } from "./ReadCache.ts"

/**
 * Keeps this process's read cache (ReadCache.ts) in step with changes other
 * processes make to the same PostgreSQL database.
 *
 * Migration 0013's triggers send `NOTIFY spendgate_cache` with every change
 * of an agent (`agent:<id>`) or a registry submission (`registry`); PostgreSQL
 * delivers it when the writing transaction commits. This process listens on a
 * connection of its own (not one of the pool's), and:
 *
 * - serves nothing from the cache until `LISTEN` is confirmed, and starts
 *   from an empty cache then;
 * - drops the named entry on each notification;
 * - sends itself a heartbeat (`ping`) every second through the pool; when
 *   nothing at all arrives on the listening connection for 3 seconds, or
 *   the connection fails, it empties the cache and serves nothing from it
 *   (every read goes to the database) until a new connection listens again.
 *
 * So a change made elsewhere reaches this process as fast as PostgreSQL
 * delivers a notification (a few milliseconds), and a lost connection can
 * leave a stale entry served for at most the 3 seconds of silence it takes
 * to notice one that died without an error. Spending is safe in that window
 * as well: the reserve reads the agent again under the wallet lock.
 */

export const CACHE_CHANNEL = "spendgate_cache"
/** How often a process pings its own listening connection. */
export const HEARTBEAT_MS = 1_000
/** Silence on the listening connection after which it is given up (and the cache emptied). */
export const SILENCE_MS = 3_000
const RETRY_MIN_MS = 100
const RETRY_MAX_MS = 5_000

/** What a notification asks the cache to drop. */
export const applyNotification = (cache: ReadCacheShape, payload: string): void => {
  if (payload === "ping") return
  if (payload === "registry") return cache.invalidateRegistry()
  if (payload.startsWith("agent:")) return cache.invalidateAgent(payload.slice("agent:".length))
  // Unknown (a newer version's notification): drop everything rather than guess.
  cache.reset(true)
}

/** One listening session: returns (with an error) when the connection fails or falls silent. */
const listenOnce = (pg: PgClient.PgClient, cache: ReadCacheShape, onListening: Effect.Effect<void>) =>
  Effect.scoped(Effect.gen(function*() {
    const connection = yield* PgConnection.make({ ...pg.config, applicationName: "spendgate-cache-feed" })
    const notifications = yield* connection.listen(CACHE_CHANNEL)
    // Everything cached before now may have missed a notification: start empty.
    cache.reset(true)
    yield* onListening
    yield* Effect.forkScoped(
      pg.notify(CACHE_CHANNEL, "ping").pipe(
        Effect.ignore,
        Effect.andThen(Effect.sleep(Duration.millis(HEARTBEAT_MS))),
        Effect.forever
      )
    )
    while (true) {
      const next = yield* Queue.take(notifications).pipe(Effect.timeoutOption(Duration.millis(SILENCE_MS)))
      if (Option.isNone(next)) return yield* Effect.fail(new Error(`no notification for ${SILENCE_MS} ms`))
      applyNotification(cache, next.value.payload)
    }
  }))

const reason = (exit: Exit.Exit<unknown, unknown>): string => {
  if (exit._tag === "Success") return "ended"
  const error = Cause.squash(exit.cause)
  const text = error instanceof Error
    ? [error.message, error.cause instanceof Error ? error.cause.message : undefined].filter((m) => m !== undefined).join(": ")
    : String(error)
  return text.slice(0, 200)
}

/** Runs for the life of the scope: listens, and listens again after every failure. */
export const followInvalidations = (pg: PgClient.PgClient, cache: ReadCacheShape) =>
  Effect.gen(function*() {
    let retryMs = RETRY_MIN_MS
    let lost = false
    while (true) {
      const exit = yield* Effect.exit(
        listenOnce(pg, cache, Effect.suspend(() => {
          retryMs = RETRY_MIN_MS
          if (!lost) return Effect.void
          lost = false
          return Effect.logInfo("Read cache: listening for changes again; serving from memory")
        })).pipe(Effect.ensuring(Effect.sync(() => cache.reset(false))))
      )
      if (exit._tag === "Failure" && Cause.hasInterruptsOnly(exit.cause)) return
      if (!lost) {
        lost = true
        yield* Effect.logWarning(
          `Read cache: not listening for changes (${reason(exit)}); every read goes to the database until it listens again`
        )
      }
      yield* Effect.sleep(Duration.millis(retryMs))
      retryMs = Math.min(retryMs * 2, RETRY_MAX_MS)
    }
  })

/**
 * How the cache learns of changes: `auto` listens on PostgreSQL (a
 * PgClient in the context) and trusts in-process invalidation alone on
 * PGlite (one process owns its data directory); `local` trusts in-process
 * invalidation alone anywhere (only for a single process, or for tests
 * that need a process deaf to others); `off` serves nothing from memory.
 */
export type CacheMode = "auto" | "local" | "off"

export const readCacheLayer = (mode: CacheMode = "auto"): Layer.Layer<ReadCache> =>
  Layer.effect(
    ReadCache,
    Effect.gen(function*() {
      const cache = makeReadCache()
      if (mode === "off") return cache
      const pg = mode === "auto" ? yield* Effect.serviceOption(PgClient.PgClient) : Option.none()
      if (Option.isNone(pg)) {
        cache.reset(true)
        return cache
      }
      yield* Effect.forkScoped(followInvalidations(pg.value, cache))
      return cache
    })
  )
