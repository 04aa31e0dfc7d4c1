import { Config, Context, Effect, Layer, Option, Redacted } from "effect"
import { createHash, timingSafeEqual } from "node:crypto"
import { isIPv4, isIPv6 } from "node:net"
import { HttpEffect, HttpServerRequest, HttpServerResponse } from "effect/http"
import type { Agent } from "../../src/domain/Agent.ts"
import { type Decision, type RateKey, RateLimiter } from "../../src/ports/RateLimiter.ts"
import { check, type InvalidConfig, invalid, load, oneOf, text } from "../config.ts"
import * as MemoryRateLimiter from "../ratelimit/memory.ts"
import { envelopeResponse, type Forbidden, type TooManyRequests, toHttpError, type Unauthorized } from "./errors.ts"
import { AuthenticationLive } from "./handlers.ts"
import { Authentication, CurrentPrincipal, SignupAdmission } from "./middleware.ts"
import { noteAgent } from "./observability.ts"
import { countRateLimited } from "../../src/observability/Metrics.ts"

/**
 * Rate limits on every authenticated request (decisions.md §6): per agent and
 * per account, both charged together after authentication succeeded (so a
 * 401 is never counted), before anything else runs, Idempotency-Key handling
 * included.
 *
 * `RateLimitedAuthenticationLive` is `AuthenticationLive` with the limiter
 * inside it: it provides the same `Authentication` middleware, so the
 * contract (Api.ts) does not change.
 *
 * - Allowed: the request goes on; its response, whatever it turns out to be
 *   (2xx, a typed error, a validation error), carries `X-RateLimit-Limit`,
 *   `X-RateLimit-Remaining` and `X-RateLimit-Reset`, added by a pre-response
 *   handler of the request.
 * - Refused: 429 `RATE_LIMITED` in the error envelope, with details
 *   `{ scope, limit, resetAt }`, `Retry-After` and the same three headers;
 *   the endpoint does not run.
 *
 * The three headers describe the scope closest to exhaustion (or the one that
 * refused): its limit, what it still admits, and the Unix time in seconds,
 * rounded up, at which it admits one more.
 */

export interface RateLimitOptions {
  /** Requests per minute per agent (default 100). */
  readonly agentPerMinute?: number
  /** Requests per minute per account, all its agents together (default 1000). */
  readonly accountPerMinute?: number
  /** Where the counters live. Default: in-process, so one budget per server instance. */
  readonly limiter?: Layer.Layer<RateLimiter>
}

export const DEFAULT_AGENT_PER_MINUTE = 100
export const DEFAULT_ACCOUNT_PER_MINUTE = 1000
const MINUTE_MS = 60_000

export const rateLimitKeys = (agent: Agent, options: RateLimitOptions = {}): ReadonlyArray<RateKey> => [
  { scope: "agent", key: agent.id, limit: options.agentPerMinute ?? DEFAULT_AGENT_PER_MINUTE, windowMs: MINUTE_MS },
  {
    scope: "account",
    key: agent.accountId,
    limit: options.accountPerMinute ?? DEFAULT_ACCOUNT_PER_MINUTE,
    windowMs: MINUTE_MS
  }
]

/** The three X-RateLimit-* headers of a decision. */
export const rateLimitHeaders = (decision: Decision): Record<string, string> => ({
  "x-ratelimit-limit": String(decision.limit),
  "x-ratelimit-remaining": String(decision.remaining),
  "x-ratelimit-reset": String(Math.ceil(decision.resetAtMs / 1000))
})

/** Whole seconds, rounded up, at least 1. */
export const retryAfterSeconds = (decision: Decision): number =>
  Math.max(1, Math.ceil((decision.retryAfterMs ?? decision.resetAtMs) / 1000))

/** The 429 answer to a refused decision. */
export const rateLimitedResponse = (decision: Decision): HttpServerResponse.HttpServerResponse => {
  const retryAfter = retryAfterSeconds(decision)
  const resetAt = new Date(Math.ceil(decision.resetAtMs)).toISOString()
  return envelopeResponse(
    "RATE_LIMITED",
    `Rate limit exceeded: ${decision.limit} requests per minute per ${decision.scope}; retry in ${retryAfter} s`,
    { scope: decision.scope, limit: decision.limit, resetAt },
    { ...rateLimitHeaders(decision), "retry-after": String(retryAfter) }
  )
}

const checkLimit = (name: string, value: number | undefined) => {
  if (value !== undefined && (!Number.isSafeInteger(value) || value < 1)) {
    throw new Error(`${name} must be a positive integer, got ${value}`)
  }
}

/**
 * `Authentication` with rate limits: authenticates exactly like
 * `AuthenticationLive`, then charges the caller's agent and account.
 * Replaces `AuthenticationLive` where the routes are assembled.
 */
export const RateLimitedAuthenticationLive = (options: RateLimitOptions = {}) => {
  checkLimit("agentPerMinute", options.agentPerMinute)
  checkLimit("accountPerMinute", options.accountPerMinute)
  return Layer.effect(
    Authentication,
    Effect.gen(function*() {
      const authentication = yield* Authentication
      const limiter = yield* RateLimiter

      // Runs once CurrentPrincipal is known, in place of the endpoint.
      // (A generator made once, not per request: docs/performance.md, "Generators made once".)
      const limited = Effect.fnUntraced(function*<E>(
        endpoint: Effect.Effect<HttpServerResponse.HttpServerResponse, E, CurrentPrincipal>
      ) {
        const { agent } = yield* CurrentPrincipal
        yield* noteAgent(agent.id)
        const decision = yield* limiter.take(rateLimitKeys(agent, options))
        if (!decision.allowed) {
          yield* countRateLimited(decision.scope)
          return rateLimitedResponse(decision)
        }
        const headers = rateLimitHeaders(decision)
        yield* HttpEffect.appendPreResponseHandler((_request, response) =>
          Effect.succeed(HttpServerResponse.setHeaders(response, headers))
        )
        return yield* endpoint
      })

      return Authentication.of({
        bearer: (endpoint, context) =>
          Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
            authentication.bearer(
              Effect.provideService(limited(endpoint), HttpServerRequest.HttpServerRequest, request),
              context
            ))
      })
    })
  ).pipe(Layer.provide([AuthenticationLive, options.limiter ?? MemoryRateLimiter.layer()]))
}

// ---- configuration -----------------------------------------------------------

/**
 * `RATE_LIMIT_AGENT_PER_MINUTE` (default 100), `RATE_LIMIT_ACCOUNT_PER_MINUTE`
 * (default 1000), `REDIS_URL` (unset: counters in-process).
 */
export interface RateLimitConfig {
  readonly agentPerMinute: number
  readonly accountPerMinute: number
  readonly redisUrl: Option.Option<Redacted.Redacted<string>>
}

const perMinute = (name: string, fallback: number) =>
  Config.Int(name).pipe(check(name, (n) => n >= 1 || "must be at least 1"), Config.withDefault(fallback))

const rateLimitConfig: Config.Config<RateLimitConfig> = Config.all({
  agentPerMinute: perMinute("RATE_LIMIT_AGENT_PER_MINUTE", DEFAULT_AGENT_PER_MINUTE),
  accountPerMinute: perMinute("RATE_LIMIT_ACCOUNT_PER_MINUTE", DEFAULT_ACCOUNT_PER_MINUTE),
  redisUrl: Config.option(
    text("REDIS_URL", (url) => /^rediss?:\/\/./.test(url) || "must be a redis:// or rediss:// URL (unset it to count in-process)")
      .pipe(Config.map(Redacted.make))
  )
})

/** Reads and checks the rate-limit settings; fails with one message naming the bad variable. */
export const loadRateLimitConfig: Effect.Effect<RateLimitConfig, InvalidConfig> = load(rateLimitConfig)

/** The options for `RateLimitedAuthenticationLive` from the configuration. */
export const rateLimitOptions = (config: RateLimitConfig): RateLimitOptions => ({
  agentPerMinute: config.agentPerMinute,
  accountPerMinute: config.accountPerMinute,
  limiter: Option.match(config.redisUrl, {
    onNone: () => MemoryRateLimiter.layer(),
    // The Redis client (a large module tree) is loaded only when REDIS_URL is set.
    onSome: (url) =>
      Layer.unwrap(Effect.map(Effect.promise(() => import("../ratelimit/redis.ts")), (redis) => redis.layer({ url })))
  })
})

/** One line for the start-up log. */
export const describeRateLimits = (config: RateLimitConfig): string =>
  `${config.agentPerMinute}/min per agent, ${config.accountPerMinute}/min per account, counters ${
    Option.isSome(config.redisUrl) ? "in Redis" : "in-process"
  }`

// ---- signup ------------------------------------------------------------------

/**
 * Who may sign up (`POST /v1/signup`, which creates an account, its owner
 * agent and its wallet):
 *
 * - `open` (default): anyone, at most `perHour` signups per client address
 *   (GCRA over one hour: a burst of `perHour`, then one every 60/`perHour`
 *   minutes), counted by the same RateLimiter as the other limits, so
 *   instances sharing Redis share it. Over the limit: 429 `RATE_LIMITED` with
 *   `Retry-After`, details `{ scope: "signup", limit, resetAt }`.
 * - `token`: only with `Authorization: Bearer <SIGNUP_TOKEN>`; a missing or
 *   wrong token is 401 `UNAUTHORIZED`. Not rate-limited: whoever has the
 *   token is trusted to provision accounts.
 * - `closed`: 403 `FORBIDDEN`; accounts are created by other means (an
 *   operator's own script over the core, or a short `token` window).
 *
 * The check runs in the handler, after the route and the body were matched
 * and decoded (so a malformed request costs no signup), and before anything
 * is written.
 *
 * The client address is the TCP peer's. Behind reverse proxies the peer is
 * the nearest proxy, so every client would share one budget: `trustProxyHops`
 * (TRUST_PROXY) says how many proxies in front of the server append to
 * `X-Forwarded-For`, and the client is the address that many entries from the
 * right of (X-Forwarded-For, peer); entries further left were written by the
 * client and are ignored, so a forged header cannot buy a fresh budget. IPv6
 * clients are counted per /64 (what one subscriber usually gets), IPv4 per
 * address, IPv4-mapped IPv6 as IPv4.
 */

export type SignupMode = "open" | "closed" | "token"

export interface SignupOptions {
  /** Default `open`. */
  readonly mode?: SignupMode
  /** Required with `token`. */
  readonly token?: Redacted.Redacted<string>
  /** Open signups per client address per hour (default 10). */
  readonly perHour?: number
  /** Reverse proxies in front of the server whose X-Forwarded-For is trusted (default 0: none). */
  readonly trustProxyHops?: number
}

export const DEFAULT_SIGNUP_PER_HOUR = 10
const HOUR_MS = 3_600_000

export class SignupGate extends Context.Service<SignupGate, {
  /** Succeeds when this request may sign up; charges the open-signup limit. */
  readonly admit: (
    request: HttpServerRequest.HttpServerRequest
  ) => Effect.Effect<void, Unauthorized | Forbidden | TooManyRequests>
}>()("spendgate/http/SignupGate") {}

/** Expands an IPv6 address (no zone) to its eight groups, or undefined. */
const ipv6Groups = (address: string): ReadonlyArray<number> | undefined => {
  let text = address
  const groups: Array<number> = []
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  let tailV4: Array<number> = []
  if (v4 !== null) {
    const bytes = v4[1]!.split(".").map(Number)
    tailV4 = [(bytes[0]! << 8) | bytes[1]!, (bytes[2]! << 8) | bytes[3]!]
    text = text.slice(0, -v4[1]!.length)
    if (text.endsWith(":") && !text.endsWith("::")) text = text.slice(0, -1)
  }
  const halves = text.split("::")
  if (halves.length > 2) return undefined
  const parse = (part: string) => (part === "" ? [] : part.split(":").map((g) => parseInt(g, 16)))
  const head = parse(halves[0]!)
  const tail = halves.length === 2 ? parse(halves[1]!) : []
  const missing = 8 - head.length - tail.length - tailV4.length
  if (halves.length === 2 ? missing < 0 : missing !== 0) return undefined
  groups.push(...head, ...Array<number>(halves.length === 2 ? missing : 0).fill(0), ...tail, ...tailV4)
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : undefined
}

/**
 * The rate-limit key of a client address: `ip:a.b.c.d`, or `ip6:x:x:x:x::/64`
 * for IPv6; undefined when `address` is not an IP address.
 */
export const clientKey = (address: string): string | undefined => {
  const bare = address.trim().replace(/^\[(.*)\]$/, "$1").split("%")[0]!
  if (isIPv4(bare)) return `ip:${bare}`
  if (!isIPv6(bare)) return undefined
  const groups = ipv6Groups(bare.toLowerCase())
  if (groups === undefined) return undefined
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return `ip:${groups[6]! >> 8}.${groups[6]! & 0xff}.${groups[7]! >> 8}.${groups[7]! & 0xff}`
  }
  return `ip6:${groups.slice(0, 4).map((g) => g.toString(16)).join(":")}::/64`
}

/** The client's address: the peer's, or with trusted proxies the one they forwarded. */
export const clientAddress = (request: HttpServerRequest.HttpServerRequest, trustProxyHops: number): string => {
  const peer = Option.getOrElse(request.peerAddress, () => "unknown")
  if (trustProxyHops <= 0) return peer
  const forwarded = request.headers["x-forwarded-for"] ?? ""
  const chain = [...forwarded.split(",").map((entry) => entry.trim()).filter((entry) => entry !== ""), peer]
  return chain[Math.max(0, chain.length - 1 - trustProxyHops)]!
}

const digest = (text: string) => createHash("sha256").update(text).digest()

export const SignupGateLive = (options: SignupOptions = {}): Layer.Layer<SignupGate, never, RateLimiter> => {
  const mode = options.mode ?? "open"
  const perHour = options.perHour ?? DEFAULT_SIGNUP_PER_HOUR
  const hops = options.trustProxyHops ?? 0
  checkLimit("perHour", perHour)
  if (mode === "token" && (options.token === undefined || Redacted.value(options.token) === "")) {
    throw new Error("SignupGateLive: mode token needs a token")
  }
  const expected = options.token === undefined ? undefined : digest(Redacted.value(options.token))
  return Layer.effect(
    SignupGate,
    Effect.gen(function*() {
      const limiter = yield* RateLimiter
      const fail = (code: "UNAUTHORIZED" | "FORBIDDEN" | "RATE_LIMITED", message: string, details?: Record<string, unknown>) =>
        Effect.fail(toHttpError({ code, message, details }) as Unauthorized | Forbidden | TooManyRequests)

      return SignupGate.of({
        admit: (request) =>
          Effect.gen(function*() {
            if (mode === "closed") return yield* fail("FORBIDDEN", "Signup is closed on this server")
            if (mode === "token") {
              const match = /^Bearer +(\S+) *$/i.exec(request.headers["authorization"] ?? "")
              // Compared as SHA-256 digests in constant time: no length or prefix leaks.
              if (match === null || !timingSafeEqual(digest(match[1]!), expected!)) {
                return yield* fail("UNAUTHORIZED", "Signup on this server needs Authorization: Bearer <signup token>")
              }
              return
            }
            const address = clientAddress(request, hops)
            const key = clientKey(address) ?? `other:${address.slice(0, 100)}`
            const decision = yield* limiter.take([{ scope: "signup", key, limit: perHour, windowMs: HOUR_MS }])
            const headers = rateLimitHeaders(decision)
            if (!decision.allowed) {
              yield* countRateLimited("signup")
              const retryAfter = retryAfterSeconds(decision)
              yield* HttpEffect.appendPreResponseHandler((_request, response) =>
                Effect.succeed(HttpServerResponse.setHeaders(response, { ...headers, "retry-after": String(retryAfter) }))
              )
              return yield* fail(
                "RATE_LIMITED",
                `Too many signups from this address: ${perHour} an hour; retry in ${retryAfter} s`,
                { scope: "signup", limit: perHour, resetAt: new Date(Math.ceil(decision.resetAtMs)).toISOString() }
              )
            }
            yield* HttpEffect.appendPreResponseHandler((_request, response) =>
              Effect.succeed(HttpServerResponse.setHeaders(response, headers))
            )
          }).pipe(Effect.provideService(HttpServerRequest.HttpServerRequest, request))
      })
    })
  )
}

/** The signup endpoint's middleware: the gate, before Idempotency-Key replays and the handler. */
export const SignupAdmissionLive: Layer.Layer<SignupAdmission, never, SignupGate> = Layer.effect(
  SignupAdmission,
  Effect.gen(function*() {
    const gate = yield* SignupGate
    return SignupAdmission.of((httpEffect) =>
      Effect.gen(function*() {
        yield* gate.admit(yield* HttpServerRequest.HttpServerRequest)
        return yield* httpEffect
      }))
  })
)

/** `SIGNUP`, `SIGNUP_TOKEN`, `SIGNUP_RATE_PER_HOUR`, `TRUST_PROXY`. */
export interface SignupConfig {
  readonly mode: SignupMode
  readonly token: Option.Option<Redacted.Redacted<string>>
  readonly perHour: number
  readonly trustProxyHops: number
}

const MIN_SIGNUP_TOKEN_LENGTH = 24
const MAX_SIGNUP_PER_HOUR = 1_000_000
const MAX_PROXY_HOPS = 10

const wholeNumber = (name: string, min: number, max: number, fallback: number, why: string) =>
  text(name).pipe(
    check(name, (value) => (/^\d+$/.test(value) && Number(value) >= min && Number(value) <= max) || why),
    Config.map(Number),
    Config.withDefault(fallback)
  )

const signupSettings = Config.all({
  mode: oneOf("SIGNUP", ["open", "closed", "token"]).pipe(Config.withDefault<SignupMode>("open")),
  token: Config.option(text("SIGNUP_TOKEN")),
  perHour: wholeNumber(
    "SIGNUP_RATE_PER_HOUR",
    1,
    MAX_SIGNUP_PER_HOUR,
    DEFAULT_SIGNUP_PER_HOUR,
    `must be a whole number from 1 to ${MAX_SIGNUP_PER_HOUR}`
  ),
  trustProxyHops: wholeNumber(
    "TRUST_PROXY",
    0,
    MAX_PROXY_HOPS,
    0,
    `must be the number of reverse proxies in front of the server, 0 to ${MAX_PROXY_HOPS} (0: ignore X-Forwarded-For)`
  )
})

/** Reads and checks the signup settings; fails with one message naming the bad variable. */
export const loadSignupConfig: Effect.Effect<SignupConfig, InvalidConfig> = Effect.gen(function*() {
  const { mode, token, perHour, trustProxyHops } = yield* load(signupSettings)
  if (mode === "token") {
    if (Option.isNone(token)) {
      return yield* invalid("SIGNUP_TOKEN is required when SIGNUP=token")
    }
    if (token.value.length < MIN_SIGNUP_TOKEN_LENGTH || /\s/.test(token.value)) {
      return yield* invalid(`SIGNUP_TOKEN must be at least ${MIN_SIGNUP_TOKEN_LENGTH} characters, without spaces`)
    }
  } else if (Option.isSome(token)) {
    // A token with signup still open would be a false sense of safety.
    return yield* invalid(`SIGNUP_TOKEN is set but SIGNUP=${mode}; set SIGNUP=token to require it, or unset it`)
  }
  return {
    mode,
    token: mode === "token" ? Option.map(token, Redacted.make) : Option.none(),
    perHour,
    trustProxyHops
  }
})

/** The options for `SignupGateLive` from the configuration. */
export const signupOptions = (config: SignupConfig): SignupOptions => ({
  mode: config.mode,
  perHour: config.perHour,
  trustProxyHops: config.trustProxyHops,
  ...(Option.isSome(config.token) ? { token: config.token.value } : {})
})

/** One line for the start-up log. */
export const describeSignup = (config: SignupConfig): string =>
  config.mode === "open"
    ? `open, ${config.perHour}/hour per client address (${
      config.trustProxyHops === 0 ? "the TCP peer" : `X-Forwarded-For through ${config.trustProxyHops} trusted proxies`
    })`
    : config.mode === "token"
    ? "with SIGNUP_TOKEN only"
    : "closed"
