import { Effect, Layer, Option, Result } from "effect"
import { HttpRouter, HttpServerRequest } from "effect/http"
import { HttpApi, type HttpApiEndpoint, type HttpApiGroup } from "effect/http-api"
import { type MatrixEntry, lookupAccess, matrixEntries } from "../../src/access/matrix.ts"
import { checkCapability, refusal } from "../../src/agents/Access.ts"
import type { Capability } from "../../src/domain/Capability.ts"
import type { AgentId } from "../../src/domain/ids.ts"
import { Store } from "../../src/ports/Store.ts"
import { proxyCapability, Services } from "../../src/services/Services.ts"
import { Api } from "./Api.ts"
import { type Forbidden, type NotFound, toHttpError } from "./errors.ts"
import { AccessControl, AdminAuthentication, Authentication, CurrentPrincipal, IdempotencyKeys } from "./middleware.ts"

/**
 * The access matrix (src/access/matrix.ts) enforced in one place: the
 * `AccessControl` middleware, which runs right after authentication and
 * before IdempotencyKeys and the handler, so that no stored answer is ever
 * handed to a caller that could not make the request now.
 *
 * For an agent key it checks, in this order:
 * 1. the route's rule (`refusal`, the same function the core's
 *    `requireOwner`/`requireSelfOrOwner` use): 403 FORBIDDEN; when the route
 *    names an agent in its path and that agent is not in the caller's
 *    account, 404 NOT_FOUND instead, so existence never leaks;
 * 2. on capability and proxy routes, the caller's `allowedCapabilities`:
 *    403 CAPABILITY_NOT_ALLOWED.
 *
 * The core checks again (defence in depth, and atomically with the hold for
 * capabilities); rows whose agent is only known once read (audit records)
 * are checked there with the same rule.
 */

// ---- the API against the matrix, checked at start -----------------------------

const position = (middlewares: ReadonlySet<unknown>, key: unknown) => [...middlewares].indexOf(key)

/** One line per disagreement between an API and the matrix (empty: they agree). */
export const accessMatrixProblems = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>
): ReadonlyArray<string> => {
  const problems: Array<string> = []
  const seen = new Set<string>()
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, group }) => {
      const name = `${group.identifier}.${endpoint.identifier}`
      seen.add(name)
      const entry = lookupAccess(group.identifier, endpoint.identifier)
      if (entry === undefined) {
        problems.push(`${name} (${endpoint.method} ${endpoint.path}) is not in the access matrix`)
        return
      }
      if (entry.method !== endpoint.method || entry.path !== endpoint.path) {
        problems.push(`${name}: the matrix says ${entry.method} ${entry.path}, the API ${endpoint.method} ${endpoint.path}`)
      }
      const middlewares: ReadonlySet<unknown> = endpoint.middlewares
      const access = position(middlewares, AccessControl)
      const idempotency = position(middlewares, IdempotencyKeys)
      const authentication = position(
        middlewares,
        entry.rule.access === "admin" ? AdminAuthentication : Authentication
      )
      if (access < 0) problems.push(`${name} has no AccessControl middleware`)
      // Later in the list runs earlier: authentication, then access, then idempotency.
      if (idempotency >= 0 && idempotency > access) problems.push(`${name}: IdempotencyKeys runs before AccessControl`)
      if (entry.rule.access === "public") {
        if (position(middlewares, Authentication) >= 0 || position(middlewares, AdminAuthentication) >= 0) {
          problems.push(`${name} is public in the matrix but authenticated in the API`)
        }
      } else if (authentication < 0) {
        problems.push(`${name} needs ${entry.rule.access === "admin" ? "AdminAuthentication" : "Authentication"}`)
      } else if (authentication < access) {
        problems.push(`${name}: AccessControl runs before authentication`)
      }
    }
  })
  for (const { group, endpoint } of matrixEntries()) {
    if (!seen.has(`${group}.${endpoint}`)) problems.push(`${group}.${endpoint} is in the access matrix but not in the API`)
  }
  return problems
}

// ---- the middleware -------------------------------------------------------------

const forbidden = (message: string) => toHttpError({ code: "FORBIDDEN", message }) as Forbidden

/** The agent ids a request names where the matrix says; `undefined` when it names none. */
const targets = (entry: MatrixEntry) =>
  Effect.gen(function*() {
    if (!("target" in entry.rule) || entry.rule.target === undefined) return undefined
    const { in: where, name } = entry.rule.target
    if (where === "path") {
      const value = (yield* HttpRouter.RouteContext).params[name]
      return value === undefined ? undefined : [value as AgentId]
    }
    // A row's agent is known once the row is read: the core checks it.
    if (where === "row") return undefined
    const value = (yield* HttpServerRequest.ParsedSearchParams)[name]
    return value === undefined ? undefined : (Array.isArray(value) ? value : [value]) as ReadonlyArray<string> as ReadonlyArray<AgentId>
  })

/**
 * Needs the Store (policies, and whether a path's agent is in the caller's
 * account) and, where the services group is served, Services (the proxied
 * service's capability).
 */
export const accessControlFor = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>
): Layer.Layer<AccessControl, never, Store> =>
  Layer.effect(
    AccessControl,
    Effect.gen(function*() {
      const problems = accessMatrixProblems(api)
      if (problems.length > 0) {
        return yield* Effect.die(new Error(`The HTTP API and the access matrix disagree:\n- ${problems.join("\n- ")}`))
      }
      const store = yield* Store
      const services = yield* Effect.serviceOption(Services)

      /** The capability a call needs, or None when the route needs none (or names no known service: the handler says 404). */
      const neededCapability = Effect.fnUntraced(function*(entry: MatrixEntry) {
        if (!("capability" in entry.rule) || entry.rule.capability === undefined) return Option.none<Capability>()
        if (entry.rule.capability !== "service") return Option.some(entry.rule.capability)
        if (Option.isNone(services)) return yield* Effect.die(new Error("The proxy is served without Services"))
        const slug = (yield* HttpRouter.RouteContext).params["slug"] ?? ""
        return Option.map(Option.getSuccess(yield* Effect.result(services.value.get(slug))), proxyCapability)
      })

      return AccessControl.of((httpEffect, { endpoint, group }: {
        readonly endpoint: HttpApiEndpoint.Top
        readonly group: HttpApiGroup.Top
      }) =>
        Effect.gen(function*() {
          const entry = lookupAccess(group.identifier, endpoint.identifier)
          if (entry === undefined) return yield* forbidden("This endpoint is not open to anyone")
          const { rule } = entry
          // Admin routes are authenticated by AdminAuthentication (outside this); public ones by nothing.
          if (rule.access === "public" || rule.access === "admin") return yield* httpEffect
          const principal = yield* Effect.serviceOption(CurrentPrincipal)
          if (Option.isNone(principal)) {
            return yield* Effect.die(new Error(`AccessControl must run inside Authentication (${group.identifier}.${endpoint.identifier})`))
          }
          const { agent } = principal.value

          // Most routes name no target and need no capability: no step is spent on them (every request).
          const named = "target" in rule && rule.target !== undefined ? yield* targets(entry) : undefined
          for (const target of named ?? [undefined]) {
            const message = refusal(rule.access, agent, target, entry.action)
            if (message === undefined) continue
            if ("target" in rule && rule.target?.in === "path" && target !== undefined) {
              // Another account's agent (or none at all) is 404 for everyone.
              const found = yield* store.getAgent(agent.accountId, target)
              if (Option.isNone(found)) return yield* (toHttpError({ code: "NOT_FOUND", message: "Agent not found" }) as NotFound)
            }
            return yield* forbidden(message)
          }

          const capability = "capability" in rule && rule.capability !== undefined
            ? yield* neededCapability(entry)
            : Option.none<Capability>()
          if (Option.isSome(capability)) {
            const self = yield* store.getAgent(agent.accountId, agent.id)
            // Gone since authentication: the handler's own lookups answer.
            if (Option.isSome(self)) {
              const allowed = checkCapability(self.value.policy, capability.value)
              if (Result.isFailure(allowed)) return yield* (toHttpError(allowed.failure) as Forbidden)
            }
          }
          return yield* httpEffect
        }))
    })
  )

/** The access matrix over the API of /v1 (server.ts). */
export const AccessControlLive: Layer.Layer<AccessControl, never, Store> = accessControlFor(Api)
