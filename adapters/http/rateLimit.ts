import { Config, Effect, Layer, Option, Redacted } from "effect"
import { HttpEffect, HttpServerRequest, HttpServerResponse } from "effect/http"
import type { Agent } from "../../src/domain/Agent.ts"
import { type Decision, type RateKey, RateLimiter } from "../../src/ports/RateLimiter.ts"
import { InvalidConfig } from "../config.ts"
import * as MemoryRateLimiter from "../ratelimit/memory.ts"
import * as RedisRateLimiter from "../ratelimit/redis.ts"
import { envelopeResponse } from "./errors.ts"
import { AuthenticationLive } from "./handlers.ts"
import { Authentication, CurrentPrincipal } from "./middleware.ts"

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
      const limited = <E>(endpoint: Effect.Effect<HttpServerResponse.HttpServerResponse, E, CurrentPrincipal>) =>
        Effect.gen(function*() {
          const { agent } = yield* CurrentPrincipal
          const decision = yield* limiter.take(rateLimitKeys(agent, options))
          if (!decision.allowed) return rateLimitedResponse(decision)
          const headers = rateLimitHeaders(decision)
          yield* HttpEffect.appendPreResponseHandler((_request, response) =>
            Effect.succeed(HttpServerResponse.setHeaders(response, headers))
          )
          return yield* endpoint
        })

      return Authentication.of({
        bearer: (endpoint, context) =>
          Effect.gen(function*() {
            const request = yield* HttpServerRequest.HttpServerRequest
            return yield* authentication.bearer(
              Effect.provideService(limited(endpoint), HttpServerRequest.HttpServerRequest, request),
              context
            )
          })
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

const rawConfig = Config.all({
  agentPerMinute: Config.Int("RATE_LIMIT_AGENT_PER_MINUTE").pipe(Config.withDefault(DEFAULT_AGENT_PER_MINUTE)),
  accountPerMinute: Config.Int("RATE_LIMIT_ACCOUNT_PER_MINUTE").pipe(Config.withDefault(DEFAULT_ACCOUNT_PER_MINUTE)),
  redisUrl: Config.option(Config.Redacted("REDIS_URL"))
})

/** Reads and checks the rate-limit settings; fails with one message naming the bad variable. */
export const loadRateLimitConfig: Effect.Effect<RateLimitConfig, InvalidConfig> = Effect.gen(function*() {
  const config = yield* Effect.mapError(
    rawConfig,
    (error) =>
      new InvalidConfig({
        message: `Invalid configuration: ${error.message.replace(/\s+/g, " ").trim()}`
      })
  )
  for (const [name, value] of [
    ["RATE_LIMIT_AGENT_PER_MINUTE", config.agentPerMinute],
    ["RATE_LIMIT_ACCOUNT_PER_MINUTE", config.accountPerMinute]
  ] as const) {
    if (value < 1) return yield* new InvalidConfig({ message: `Invalid configuration: ${name} must be at least 1` })
  }
  if (Option.isSome(config.redisUrl)) {
    if (!/^rediss?:\/\/./.test(Redacted.value(config.redisUrl.value))) {
      return yield* new InvalidConfig({
        message: "Invalid configuration: REDIS_URL must be a redis:// or rediss:// URL (unset it to count in-process)"
      })
    }
  }
  return config
})

/** The options for `RateLimitedAuthenticationLive` from the configuration. */
export const rateLimitOptions = (config: RateLimitConfig): RateLimitOptions => ({
  agentPerMinute: config.agentPerMinute,
  accountPerMinute: config.accountPerMinute,
  limiter: Option.match(config.redisUrl, {
    onNone: () => MemoryRateLimiter.layer(),
    onSome: (url) => RedisRateLimiter.layer({ url })
  })
})

/** One line for the start-up log. */
export const describeRateLimits = (config: RateLimitConfig): string =>
  `${config.agentPerMinute}/min per agent, ${config.accountPerMinute}/min per account, counters ${
    Option.isSome(config.redisUrl) ? "in Redis" : "in-process"
  }`
