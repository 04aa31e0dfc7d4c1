import { Effect, Layer, Option, Redacted } from "effect"
import { HttpServerRequest } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Agents } from "../../src/agents/Agents.ts"
import { Policies, type PolicyView } from "../../src/agents/Policies.ts"
import type { Agent } from "../../src/domain/Agent.ts"
import { capabilityNames } from "../../src/domain/Capability.ts"
import type { AgentId } from "../../src/domain/ids.ts"
import { microUsdToCents } from "../../src/domain/Money.ts"
import { remainingUnder } from "../../src/wallet/Spend.ts"
import type { PolicyPatch } from "../../src/ports/Store.ts"
import { Health } from "../../src/Health.ts"
import { currentSpans } from "../../src/observability/Tracing.ts"
import {
  Api,
  Authentication,
  CurrentPrincipal,
  HealthDegraded,
  type PolicyPatch as PolicyPatchBody,
  type PolicyReplace
} from "./Api.ts"
import { type CodedError, toHttpError } from "./errors.ts"
import { cookieSession, sessionPrincipal, Sessions } from "./sessions.ts"

/**
 * Handlers translate between the wire and the core: decode is done by the
 * contract, every rule by src/. Nothing here decides anything.
 */

const iso = (date: Date) => date.toISOString()

export const agentJson = (agent: Agent) => ({
  id: agent.id,
  name: agent.name,
  role: agent.role,
  killed: agent.killed,
  killReason: agent.killReason,
  createdAt: iso(agent.createdAt),
  lastActiveAt: agent.lastActiveAt === null ? null : iso(agent.lastActiveAt),
  deletedAt: agent.deletedAt === null ? null : iso(agent.deletedAt)
})

export const policyJson = ({ recent: _, ...policy }: PolicyView) => ({
  maxPerCallUsdCents: policy.maxPerCallMicroUsd === null ? 0 : microUsdToCents(policy.maxPerCallMicroUsd),
  maxPerDayUsdCents: policy.maxPerDayMicroUsd === null ? 0 : microUsdToCents(policy.maxPerDayMicroUsd),
  maxPerMonthUsdCents: policy.maxPerMonthMicroUsd === null ? 0 : microUsdToCents(policy.maxPerMonthMicroUsd),
  maxPerHourUsdCents: policy.maxPerHourMicroUsd === null ? 0 : microUsdToCents(policy.maxPerHourMicroUsd),
  maxCallsPerMinute: policy.maxCallsPerMinute ?? 0,
  autoKill: policy.autoKill,
  allowedCapabilities: policy.allowedCapabilities,
  dailySpentUsdCents: microUsdToCents(policy.dailySpentMicroUsd),
  monthlySpentUsdCents: microUsdToCents(policy.monthlySpentMicroUsd)
})

const toPatch = (payload: typeof PolicyReplace.Type | typeof PolicyPatchBody.Type): PolicyPatch => ({
  ...(payload.maxPerCallUsdCents !== undefined ? { maxPerCallMicroUsd: payload.maxPerCallUsdCents } : {}),
  ...(payload.maxPerDayUsdCents !== undefined ? { maxPerDayMicroUsd: payload.maxPerDayUsdCents } : {}),
  ...(payload.maxPerMonthUsdCents !== undefined ? { maxPerMonthMicroUsd: payload.maxPerMonthUsdCents } : {}),
  ...(payload.maxPerHourUsdCents !== undefined ? { maxPerHourMicroUsd: payload.maxPerHourUsdCents } : {}),
  ...(payload.maxCallsPerMinute !== undefined ? { maxCallsPerMinute: payload.maxCallsPerMinute } : {}),
  ...(payload.autoKill !== undefined ? { autoKill: payload.autoKill } : {}),
  ...(payload.allowedCapabilities !== undefined ? { allowedCapabilities: payload.allowedCapabilities ?? [] } : {})
})

const mapCore = <A, R>(effect: Effect.Effect<A, CodedError, R>) => Effect.mapError(effect, toHttpError)

export const PublicHandlers = HttpApiBuilder.group(
  Api,
  "public",
  Effect.fn(function*(handlers) {
    const agents = yield* Agents
    const health = yield* Health
    return handlers
      .handle("health", () =>
        Effect.flatMap(health.check, (report) =>
          report.status === "ok" ? Effect.succeed(report) : Effect.fail(new HealthDegraded(report))))
      // Who may sign up (SIGNUP) is decided before this by the SignupAdmission middleware (rateLimit.ts).
      .handle("signup", ({ payload }) =>
        Effect.map(agents.signup({ name: payload.name }), (result) => ({
          apiKey: result.apiKey,
          agentId: result.agent.id,
          accountId: result.accountId
        })))
  })
)

export const AgentsHandlers = HttpApiBuilder.group(
  Api,
  "agents",
  Effect.fn(function*(handlers) {
    const agents = yield* Agents
    const policies = yield* Policies
    return handlers
      .handle("list", ({ query }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const page = { limit: query.limit ?? 50, offset: query.offset ?? 0 }
          const result = yield* mapCore(agents.list(principal, page))
          return { agents: result.items.map(agentJson), total: result.total, ...page }
        }))
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const created = yield* mapCore(agents.create(principal, payload))
          const { lastActiveAt: _, deletedAt: __, killReason: ___, ...agent } = agentJson(created.agent)
          return { ...agent, apiKey: created.apiKey }
        }))
      .handle("me", () =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          // Always the caller's own id: no parameter names another agent.
          const self = principal.agent.id
          const agent = yield* mapCore(agents.get(principal, self))
          const policy = yield* mapCore(policies.get(principal, self))
          const remainingToday = remainingUnder(policy.maxPerDayMicroUsd, policy.dailySpentMicroUsd)
          const remainingThisMonth = remainingUnder(policy.maxPerMonthMicroUsd, policy.monthlySpentMicroUsd)
          const remainingThisHour = remainingUnder(policy.maxPerHourMicroUsd, policy.recent.spentLastHourMicroUsd)
          const callsLeft = policy.maxCallsPerMinute === null
            ? null
            : Math.max(0, policy.maxCallsPerMinute - policy.recent.callsLastMinute)
          return {
            ...agentJson(agent),
            policy: policyJson(policy),
            spentTodayUsdCents: microUsdToCents(policy.dailySpentMicroUsd),
            remainingTodayUsdCents: remainingToday === null ? null : microUsdToCents(remainingToday),
            spentThisMonthUsdCents: microUsdToCents(policy.monthlySpentMicroUsd),
            remainingThisMonthUsdCents: remainingThisMonth === null ? null : microUsdToCents(remainingThisMonth),
            spentLastHourUsdCents: microUsdToCents(policy.recent.spentLastHourMicroUsd),
            remainingThisHourUsdCents: remainingThisHour === null ? null : microUsdToCents(remainingThisHour),
            callsLastMinute: policy.recent.callsLastMinute,
            callsLeftThisMinute: callsLeft,
            allowedCapabilities: policy.allowedCapabilities.length === 0 ? [...capabilityNames] : policy.allowedCapabilities
          }
        }))
      .handle("get", ({ params }) =>
        Effect.flatMap(CurrentPrincipal, (principal) =>
          mapCore(agents.get(principal, params.id as AgentId)).pipe(Effect.map(agentJson))))
      .handle("update", ({ params, payload }) =>
        Effect.flatMap(CurrentPrincipal, (principal) =>
          mapCore(agents.update(principal, params.id as AgentId, payload)).pipe(Effect.map(agentJson))))
      .handle("delete", ({ params }) =>
        Effect.flatMap(CurrentPrincipal, (principal) =>
          mapCore(agents.delete(principal, params.id as AgentId)).pipe(Effect.map(agentJson))))
      .handle("rotateKey", ({ params, payload }) =>
        Effect.flatMap(CurrentPrincipal, (principal) =>
          mapCore(agents.rotateKey(principal, params.id as AgentId, payload)).pipe(
            Effect.map((rotated) => ({
              id: rotated.agent.id,
              apiKey: rotated.apiKey,
              previousKeyExpiresAt: rotated.previousKeyExpiresAt === null ? null : iso(rotated.previousKeyExpiresAt)
            }))
          )))
      .handle("getPolicy", ({ params }) =>
        Effect.flatMap(CurrentPrincipal, (principal) =>
          mapCore(policies.get(principal, params.id as AgentId)).pipe(Effect.map(policyJson))))
      .handle("replacePolicy", ({ params, payload }) =>
        Effect.flatMap(CurrentPrincipal, (principal) =>
          mapCore(policies.replace(principal, params.id as AgentId, toPatch(payload))).pipe(Effect.map(policyJson))))
      .handle("patchPolicy", ({ params, payload }) =>
        Effect.flatMap(CurrentPrincipal, (principal) =>
          mapCore(policies.patch(principal, params.id as AgentId, toPatch(payload))).pipe(Effect.map(policyJson))))
  })
)

/**
 * The agent's key: `Authorization: Bearer <key>`, or, when a request has no
 * Authorization header, `x-api-key: <key>` (the header Anthropic's API and
 * older Anthropic clients use). Either is taken on every agent route; when
 * both are sent, Authorization is the one checked. The access matrix then
 * decides what the agent may do, whichever header carried its key.
 */
export const API_KEY_HEADER = "x-api-key"

export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.gen(function*() {
    const agents = yield* Agents
    // Dashboard sessions (sessions.ts), where the server has them.
    const sessions = yield* Effect.serviceOption(Sessions)
    // Made once, not per request (docs/performance.md, "Generators made once").
    const authenticateBearer = Effect.fnUntraced(function*<A, E, R>(
      httpEffect: Effect.Effect<A, E, R>,
      credential: Redacted.Redacted<string>
    ) {
      const request = yield* HttpServerRequest.HttpServerRequest
      if (Option.isSome(sessions)) {
        // No Authorization or X-API-Key header: the session cookie, checked for CSRF on changes.
        const session = yield* cookieSession(sessions.value, request)
        if (Option.isSome(session)) {
          const principal = yield* sessionPrincipal(agents, session.value)
          return yield* Effect.provideService(httpEffect, CurrentPrincipal, principal)
        }
      }
      const bearer = Redacted.value(credential)
      const key = bearer === "" && request.headers["authorization"] === undefined
        ? request.headers[API_KEY_HEADER] ?? ""
        : bearer
      // Its own span, beside the handler's (not around it); the key is never an attribute.
      const spans = yield* currentSpans
      const principal = yield* agents.authenticate(key).pipe(
        spans.annotateWith((found) => ({ "spendgate.agent_id": found.agent.id })),
        Effect.mapError(toHttpError),
        spans.span("Authentication", () => ({
          attributes: { "spendgate.auth.scheme": bearer === "" && request.headers["authorization"] === undefined ? "x-api-key" : "bearer" }
        }))
      )
      return yield* Effect.provideService(httpEffect, CurrentPrincipal, principal)
    })
    return Authentication.of({
      bearer: (httpEffect, { credential }) => authenticateBearer(httpEffect, credential)
    })
  })
)
