import { Effect, Layer, Redacted } from "effect"
import { createHash } from "node:crypto"
import { createClient } from "redis"
import {
  capacityUs,
  type Decision,
  gcra,
  intervalUs,
  type RateKey,
  RateLimiter,
  toMicros,
  validateKeys
} from "../../src/ports/RateLimiter.ts"
import { makeMemoryRateLimiter, type MemoryRateLimiterOptions } from "./memory.ts"

/**
 * Rate limiting in Redis (`REDIS_URL`), so that several server instances
 * share one budget per agent and per account.
 *
 * One Lua script checks and charges every key of a request atomically (Redis
 * runs a script without interleaving any other command), with the same GCRA
 * arithmetic as the port's `gcra` (src/ports/RateLimiter.ts). It is sent with
 * EVALSHA and, when the server answers NOSCRIPT (restart, SCRIPT FLUSH,
 * failover), once with EVAL, which also caches it again.
 *
 * Keys: `spendgate:rl:{scope}:{id}` (e.g. `spendgate:rl:agent:agt_…`), one
 * string each holding the TAT in epoch µs, with a PEXPIRE at that TAT: past
 * it the key means a full budget anyway, so idle keys vanish on their own.
 * On Redis Cluster the agent and account keys of one request would hash to
 * different slots (CROSSSLOT); a cluster deployment needs a hash tag, e.g.
 * the account id, in the key names.
 *
 * Time: `now` is the caller's `Clock`, passed to the script as an argument,
 * not Redis `TIME`. The memory and Redis limiters then run the same
 * arithmetic on the same time base (one contract suite, driven by
 * `TestClock`), and the headers computed from a decision use the clock of the
 * instance that answers. The cost is clock skew between instances: a TAT
 * never moves backwards (`max(tat, now)`), so an instance whose clock is δ ms
 * ahead admits at most about δ / T requests early (T = window / limit, 60 ms
 * at 1000/min). Instances are expected to run NTP, which keeps that at zero
 * or one request.
 *
 * Failure policy: fail open, but not unlimited. When Redis cannot answer (not
 * connected, a command over `commandTimeoutMs`, any error) the request is
 * counted by an in-process limiter instead, so each instance still enforces
 * the limits on its own (at most N × the limit across N instances) until
 * Redis is back. Refusing everything would turn a cache outage into a full
 * API outage, including the kill switch and key management; money is guarded
 * by the wallet's holds and the policies, not by rate limits. Every outage is
 * logged at Error (on entry, then every 30 s while it lasts) and the recovery
 * at Warning. After a failure Redis is skipped for `retryAfterFailureMs` (or
 * until the client reconnects), so a hung server costs one timeout, not one
 * per request. A script call that times out may still have run in Redis;
 * that request is then counted twice, which errs on the strict side by one.
 *
 * Connection: the client is created and starts connecting when the layer is
 * built; the build itself does not wait (the HTTP port may already be open),
 * the first requests do, at most `connectTimeoutMs`. A server that starts
 * while Redis is down serves after that bound (in-process counting, logged)
 * and switches to Redis when the client's background reconnection succeeds.
 */

export interface RedisRateLimiterOptions {
  /** `redis://[[user]:password@]host[:port][/db]` or `rediss://…`. */
  readonly url: string | Redacted.Redacted<string>
  /** Namespace of the keys (default `spendgate:rl:`). */
  readonly keyPrefix?: string
  /** Bound on one script call, in ms (default 1000). */
  readonly commandTimeoutMs?: number
  /** Bound on the first connection at layer build, in ms (default 1000). */
  readonly connectTimeoutMs?: number
  /** After a failure, count in-process for this long before trying Redis again, in ms (default 2000). */
  readonly retryAfterFailureMs?: number
  /** The in-process limiter used while Redis is unavailable. */
  readonly fallback?: MemoryRateLimiterOptions
}

export const DEFAULT_KEY_PREFIX = "spendgate:rl:"

const OUTAGE_LOG_INTERVAL_MS = 30_000

/**
 * KEYS: one per scope. ARGV[1]: now (epoch µs, the caller's clock);
 * ARGV[2i], ARGV[2i + 1]: emission interval T and capacity (limit × T) of
 * KEYS[i], in µs. All values are integers below 2^53, exact in Lua's doubles.
 * Every key is checked first; only if all allow is each one charged
 * (TAT := max(tat, now) + T, the key expiring at that TAT).
 * Reply: { 1 if charged else 0, stored TAT of KEYS[1] before the call or "", … },
 * from which the caller recomputes the decision with `gcra`.
 */
export const GCRA_SCRIPT = `
local now = tonumber(ARGV[1])
local count = #KEYS
local before = {}
local after = {}
local allowed = 1
for i = 1, count do
  local interval = tonumber(ARGV[2 * i])
  local capacity = tonumber(ARGV[2 * i + 1])
  local stored = redis.call('GET', KEYS[i])
  local tat = now
  if stored then
    before[i] = stored
    local value = tonumber(stored)
    if value and value > now then tat = value end
  else
    before[i] = ''
  end
  after[i] = tat + interval
  if after[i] - now > capacity then allowed = 0 end
end
if allowed == 1 then
  for i = 1, count do
    redis.call('SET', KEYS[i], string.format('%.17g', after[i]), 'PX', math.ceil((after[i] - now) / 1000))
  end
end
local reply = { allowed }
for i = 1, count do reply[i + 1] = before[i] end
return reply
`

const SCRIPT_SHA1 = createHash("sha1").update(GCRA_SCRIPT).digest("hex")

const describeUrl = (url: string): string => {
  try {
    const parsed = new URL(url)
    return `${parsed.protocol}//${parsed.host}`
  } catch {
    return "(unparseable REDIS_URL)"
  }
}

const errorText = (cause: unknown): string => cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause)

/** Parses the script's reply into the stored TATs; throws on anything else. */
const parseReply = (reply: unknown, count: number): { readonly charged: boolean; readonly stored: Array<number | undefined> } => {
  if (!Array.isArray(reply) || reply.length !== count + 1) {
    throw new Error(`unexpected rate-limit script reply: ${JSON.stringify(reply)}`)
  }
  const stored = reply.slice(1).map((value: unknown) => {
    const text = typeof value === "string" ? value : value instanceof Uint8Array ? Buffer.from(value).toString() : ""
    const tat = text === "" ? Number.NaN : Number(text)
    return Number.isFinite(tat) ? tat : undefined
  })
  return { charged: Number(reply[0]) === 1, stored }
}

const make = Effect.fnUntraced(function*(options: RedisRateLimiterOptions) {
  const url = Redacted.isRedacted(options.url) ? Redacted.value(options.url) : options.url
  const where = describeUrl(url)
  const keyPrefix = options.keyPrefix ?? DEFAULT_KEY_PREFIX
  const retryAfterFailureMs = options.retryAfterFailureMs ?? 2_000
  const fallback = makeMemoryRateLimiter(options.fallback)

  // Logs from the client's event callbacks, with this layer's services (logger, level).
  const fork = Effect.runForkWith(yield* Effect.context<never>())

  // Operational timing below (back-off, log throttling) is wall-clock time on
  // purpose: it is about the network, not about the limits, and must keep
  // working while a TestClock stands still.
  let up = false
  let everConnected = false
  let degradedSince: number | undefined
  let lastOutageLog = 0
  let countedLocally = 0
  let skipUntil = 0

  const client = yield* Effect.acquireRelease(
    Effect.sync(() =>
      createClient({
        url,
        // Fail fast while disconnected instead of queueing behind the reconnect.
        disableOfflineQueue: true,
        commandOptions: { timeout: options.commandTimeoutMs ?? 1_000 },
        socket: {
          connectTimeout: options.connectTimeoutMs ?? 1_000,
          // Never give up (node-redis' default stops on some errors): back off to one attempt per 2 s.
          reconnectStrategy: (retries: number) => Math.min(2 ** retries * 50, 2_000) + Math.floor(Math.random() * 100)
        }
      })
    ),
    (client) =>
      Effect.promise(async () => {
        try {
          if (client.isReady) await client.close()
          else if (client.isOpen) client.destroy()
        } catch {
          // Shutting down: nothing left to do with a failing connection.
        }
      })
  )

  client.on("ready", () => {
    up = true
    skipUntil = 0
    fork(
      everConnected
        ? Effect.logWarning(`Rate limiter: Redis at ${where} reconnected`)
        : Effect.logInfo(`Rate limiter: counters in Redis at ${where}`)
    )
    everConnected = true
  })
  // node-redis throws `error` events nobody listens to; every reconnect attempt emits one.
  client.on("error", (cause: unknown) => {
    if (up) {
      up = false
      fork(Effect.logError(`Rate limiter: lost Redis at ${where} (${errorText(cause)}); counting in-process until it is back`))
    } else {
      fork(Effect.logDebug(`Rate limiter: Redis at ${where} still unreachable (${errorText(cause)})`))
    }
  })

  // connect() keeps retrying in the background until it succeeds or the client
  // is closed. The layer does not wait for it (the port may already be open);
  // instead the first requests wait for it, at most `connectTimeoutMs`.
  const connecting = client.connect().then(() => true, () => false)
  let starting = true
  let timer: ReturnType<typeof setTimeout> | undefined
  const started = Promise.race([
    connecting,
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), options.connectTimeoutMs ?? 1_000)
      timer.unref()
    })
  ]).then((connected) => {
    clearTimeout(timer)
    starting = false
    if (!connected) {
      const wall = Date.now()
      degradedSince = wall
      lastOutageLog = wall
      skipUntil = wall + retryAfterFailureMs
      fork(Effect.logError(`Rate limiter: Redis at ${where} is not reachable at start-up; counting in-process until it connects`))
    }
  })
  yield* Effect.addFinalizer(() => Effect.sync(() => clearTimeout(timer)))
  const waitForStart = Effect.promise(() => started)

  const evalScript = async (keys: ReadonlyArray<string>, args: ReadonlyArray<string>): Promise<unknown> => {
    const tail = [String(keys.length), ...keys, ...args]
    try {
      return await client.sendCommand(["EVALSHA", SCRIPT_SHA1, ...tail])
    } catch (error) {
      if (error instanceof Error && error.message.startsWith("NOSCRIPT")) {
        return await client.sendCommand(["EVAL", GCRA_SCRIPT, ...tail])
      }
      throw error
    }
  }

  const onFailure = (cause: unknown, keys: ReadonlyArray<RateKey>) =>
    Effect.suspend(() => {
      const wall = Date.now()
      skipUntil = wall + retryAfterFailureMs
      countedLocally++
      let log: Effect.Effect<void> = Effect.void
      if (degradedSince === undefined) {
        degradedSince = wall
        lastOutageLog = wall
        log = Effect.logError(
          `Rate limiter: Redis at ${where} failed (${errorText(cause)}); counting in-process until it is back`
        )
      } else if (wall - lastOutageLog >= OUTAGE_LOG_INTERVAL_MS) {
        lastOutageLog = wall
        log = Effect.logError(
          `Rate limiter: Redis at ${where} unavailable for ${Math.round((wall - degradedSince) / 1000)} s ` +
            `(${errorText(cause)}); ${countedLocally} requests counted in-process so far`
        )
      }
      return Effect.andThen(log, fallback.take(keys))
    })

  const onSuccess = Effect.suspend(() => {
    if (degradedSince === undefined) return Effect.void
    const seconds = Math.round((Date.now() - degradedSince) / 1000)
    const counted = countedLocally
    degradedSince = undefined
    countedLocally = 0
    return Effect.logWarning(
      `Rate limiter: Redis at ${where} answers again after ${seconds} s; ${counted} requests were counted in-process`
    )
  })

  const take = (keys: ReadonlyArray<RateKey>): Effect.Effect<Decision> =>
    Effect.clockWith((clock) =>
      Effect.suspend(() => {
        validateKeys(keys)
        if (starting) return Effect.andThen(waitForStart, take(keys))
        if (Date.now() < skipUntil) {
          countedLocally++
          return fallback.take(keys)
        }
        const nowMs = clock.currentTimeMillisUnsafe()
        const names = keys.map((key) => `${keyPrefix}${key.scope}:${key.key}`)
        const args = [String(toMicros(nowMs))]
        for (const key of keys) args.push(String(intervalUs(key)), String(capacityUs(key)))
        return Effect.tryPromise({
          try: async () => {
            const { charged, stored } = parseReply(await evalScript(names, args), keys.length)
            const { decision } = gcra(nowMs, keys, stored)
            if (decision.allowed !== charged) {
              // The script and `gcra` run the same arithmetic, so this is a bug; it is
              // reported (and counted in-process) like an outage rather than trusted.
              throw new Error(`rate-limit script and gcra disagree (script charged: ${charged})`)
            }
            return decision
          },
          catch: (cause) => cause
        }).pipe(
          Effect.tap(() => onSuccess),
          Effect.catch((cause) => onFailure(cause, keys))
        )
      })
    )

  return RateLimiter.of({ take })
})

/** The Redis limiter; never fails to build (see the failure policy above). */
export const layer = (options: RedisRateLimiterOptions): Layer.Layer<RateLimiter> =>
  Layer.effect(RateLimiter, make(options))
