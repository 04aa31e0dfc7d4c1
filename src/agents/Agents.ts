import { Clock, Context, Effect, Layer, Option } from "effect"
import type { Agent, Policy, Principal, Role } from "../domain/Agent.ts"
import { unlimitedPolicy } from "../domain/Agent.ts"
import { AgentKilled, Conflict, type Forbidden, NotFound, Unauthorized } from "../domain/errors.ts"
import {
  type AccountId,
  type AgentId,
  hashApiKey,
  isApiKeyFormat,
  newAccountId,
  newAgentId,
  newApiKey
} from "../domain/ids.ts"
import type { Page, PageRequest } from "../ports/Store.ts"
import { Store } from "../ports/Store.ts"
import { spanned } from "../observability/Tracing.ts"
import { requireOwner, requireSelfOrOwner } from "./Access.ts"
import { publishAgentEvent } from "./events.ts"

export interface SignupResult {
  readonly apiKey: string
  readonly accountId: AccountId
  readonly agent: Agent
}

export interface CreatedAgent {
  readonly apiKey: string
  readonly agent: Agent
}

export interface RotatedKey {
  readonly apiKey: string
  readonly agent: Agent
  /** When the previous key stops working; null when it stopped at once. */
  readonly previousKeyExpiresAt: Date | null
}

/** The longest grace a rotated key may keep: 7 days. */
export const MAX_KEY_GRACE_SECONDS = 7 * 24 * 60 * 60

export interface AgentUpdate {
  readonly name?: string | undefined
  readonly killed?: boolean | undefined
}

/** lastActiveAt is written at most once per this many milliseconds per agent. */
export const LAST_ACTIVE_RESOLUTION_MS = 60_000

export class Agents extends Context.Service<Agents, {
  /** Creates an account, its owner agent and that agent's key (returned once). */
  readonly signup: (input: { readonly name: string }) => Effect.Effect<SignupResult>
  /**
   * Resolves a presented API key to its agent. Unknown or malformed keys are
   * Unauthorized; a killed agent is AgentKilled. The store may answer from
   * its read cache: a kill takes effect on the next request of the instance
   * that made it and, on PostgreSQL, on the other instances as soon as they
   * are notified (docs/performance.md, "Caches"); the reserve checks the
   * killed flag again under the wallet lock whatever the cache said.
   */
  readonly authenticate: (apiKey: string) => Effect.Effect<Principal, Unauthorized | AgentKilled>
  /**
   * `authenticate` for a key known only by its hash (`hashApiKey`): a
   * dashboard session keeps the hash of the key it was opened with, never
   * the key, and is authenticated again by it on every request.
   */
  readonly authenticateKeyHash: (keyHash: string) => Effect.Effect<Principal, Unauthorized | AgentKilled>
  readonly create: (
    principal: Principal,
    input: { readonly name: string; readonly role?: Role | undefined }
  ) => Effect.Effect<CreatedAgent, Forbidden>
  readonly list: (principal: Principal, page: PageRequest) => Effect.Effect<Page<Agent>, Forbidden>
  readonly get: (principal: Principal, agentId: AgentId) => Effect.Effect<Agent, Forbidden | NotFound>
  readonly update: (
    principal: Principal,
    agentId: AgentId,
    changes: AgentUpdate
  ) => Effect.Effect<Agent, Forbidden | NotFound | Conflict>
  /**
   * A new key for the agent, returned once. The current key keeps working
   * for `graceSeconds` (0 to MAX_KEY_GRACE_SECONDS, default 0: revoked at
   * once); a key still in the grace of an earlier rotation is revoked now.
   * Owners for any agent of the account, an agent for itself.
   */
  readonly rotateKey: (
    principal: Principal,
    agentId: AgentId,
    input: { readonly graceSeconds?: number | undefined }
  ) => Effect.Effect<RotatedKey, Forbidden | NotFound>
  /**
   * Deletes the agent: its keys stop working at once, it leaves the agent
   * list, its transactions and audit records keep naming it, and its
   * in-flight calls settle normally. Owner only; the last live owner of an
   * account cannot be deleted (Conflict).
   */
  readonly delete: (principal: Principal, agentId: AgentId) => Effect.Effect<Agent, Forbidden | NotFound | Conflict>
}>()("spendgate/Agents") {
  static readonly layer = Layer.effect(
    Agents,
    Effect.gen(function*() {
      const store = yield* Store
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

      const newAgent = (accountId: AccountId, name: string, role: Role, createdAt: Date, policy: Policy) =>
        Effect.gen(function*() {
          const apiKey = newApiKey()
          const agent: Agent = {
            id: newAgentId(),
            accountId,
            name,
            role,
            killed: false,
            killReason: null,
            createdAt,
            lastActiveAt: null,
            deletedAt: null
          }
          const keyHash = yield* hashApiKey(apiKey)
          return { apiKey, agent, keyHash, policy }
        })

      const signup = Effect.fn("Agents.signup")(function*(input: { readonly name: string }) {
        const createdAt = yield* now
        const accountId = newAccountId()
        const owner = yield* newAgent(accountId, input.name, "owner", createdAt, unlimitedPolicy)
        yield* store.createAccount({ accountId, createdAt, owner })
        return { apiKey: owner.apiKey, accountId, agent: owner.agent }
      })

      // On every request: spans only when they are recorded (`spanned`), no per-call stack capture.
      const findByKeyHash = Effect.fnUntraced(function*(keyHash: string) {
        const at = yield* now
        const found = yield* store.findAgentByKeyHash(keyHash, at)
        if (Option.isNone(found)) {
          return yield* new Unauthorized({ message: "Missing or invalid API key" })
        }
        const agent = found.value
        if (agent.killed) return yield* new AgentKilled()
        if (agent.lastActiveAt === null || at.getTime() - agent.lastActiveAt.getTime() >= LAST_ACTIVE_RESOLUTION_MS) {
          yield* store.touchAgent(agent.id, at, new Date(at.getTime() - LAST_ACTIVE_RESOLUTION_MS))
        }
        return { agent } satisfies Principal
      })
      const authenticateKeyHash = (keyHash: string) =>
        findByKeyHash(keyHash).pipe(spanned("Agents.authenticateKeyHash"))

      const authenticateUntraced = Effect.fnUntraced(function*(apiKey: string) {
        if (!isApiKeyFormat(apiKey)) {
          return yield* new Unauthorized({ message: "Missing or invalid API key" })
        }
        return yield* authenticateKeyHash(yield* hashApiKey(apiKey))
      })
      const authenticate = (apiKey: string) => authenticateUntraced(apiKey).pipe(spanned("Agents.authenticate"))

      const create = Effect.fn("Agents.create")(function*(
        principal: Principal,
        input: { readonly name: string; readonly role?: Role | undefined }
      ) {
        yield* requireOwner(principal, "create agents")
        const created = yield* newAgent(
          principal.agent.accountId,
          input.name,
          input.role ?? "agent",
          yield* now,
          unlimitedPolicy
        )
        yield* store.createAgent(created)
        return { apiKey: created.apiKey, agent: created.agent }
      })

      const list = Effect.fn("Agents.list")(function*(principal: Principal, page: PageRequest) {
        yield* requireOwner(principal, "list agents")
        return yield* store.listAgents(principal.agent.accountId, page)
      })

      const get = Effect.fn("Agents.get")(function*(principal: Principal, agentId: AgentId) {
        // Another account's agent is NOT_FOUND before any role check, so that
        // existence is never leaked across accounts.
        const found = yield* store.getAgent(principal.agent.accountId, agentId)
        if (Option.isNone(found)) return yield* new NotFound({ resource: "Agent" })
        yield* requireSelfOrOwner(principal, agentId, "read")
        return found.value.agent
      })

      const update = Effect.fn("Agents.update")(function*(
        principal: Principal,
        agentId: AgentId,
        changes: AgentUpdate
      ) {
        const found = yield* store.getAgent(principal.agent.accountId, agentId)
        if (Option.isNone(found)) return yield* new NotFound({ resource: "Agent" })
        yield* requireOwner(principal, "change agents")
        const result = yield* store.updateAgent(principal.agent.accountId, agentId, { ...changes, at: yield* now })
        switch (result._tag) {
          case "Updated":
            return result.agent
          case "NotFound":
            return yield* new NotFound({ resource: "Agent" })
          case "LastLiveOwner":
            return yield* new Conflict({
              message: "The last live owner of an account cannot be killed; create or revive another owner first"
            })
        }
      })

      const rotateKey = Effect.fn("Agents.rotateKey")(function*(
        principal: Principal,
        agentId: AgentId,
        input: { readonly graceSeconds?: number | undefined }
      ) {
        const found = yield* store.getAgent(principal.agent.accountId, agentId)
        if (Option.isNone(found) || found.value.agent.deletedAt !== null) return yield* new NotFound({ resource: "Agent" })
        yield* requireSelfOrOwner(principal, agentId, "rotate the key of")
        const at = yield* now
        const graceSeconds = Math.min(Math.max(Math.floor(input.graceSeconds ?? 0), 0), MAX_KEY_GRACE_SECONDS)
        const previousKeyExpiresAt = graceSeconds === 0 ? null : new Date(at.getTime() + graceSeconds * 1000)
        const apiKey = newApiKey()
        const rotated = yield* store.rotateKey(principal.agent.accountId, agentId, {
          keyHash: yield* hashApiKey(apiKey),
          previousExpiresAt: previousKeyExpiresAt
        })
        if (Option.isNone(rotated)) return yield* new NotFound({ resource: "Agent" })
        yield* publishAgentEvent({
          type: "agent.key_rotated",
          accountId: principal.agent.accountId,
          agentId,
          at,
          previousKeyExpiresAt
        })
        return { apiKey, agent: rotated.value, previousKeyExpiresAt } satisfies RotatedKey
      })

      const remove = Effect.fn("Agents.delete")(function*(principal: Principal, agentId: AgentId) {
        const found = yield* store.getAgent(principal.agent.accountId, agentId)
        if (Option.isNone(found) || found.value.agent.deletedAt !== null) return yield* new NotFound({ resource: "Agent" })
        yield* requireOwner(principal, "delete agents")
        const at = yield* now
        const result = yield* store.updateAgent(principal.agent.accountId, agentId, { deletedAt: at })
        switch (result._tag) {
          case "Updated":
            yield* publishAgentEvent({ type: "agent.deleted", accountId: principal.agent.accountId, agentId, at })
            return result.agent
          case "NotFound":
            return yield* new NotFound({ resource: "Agent" })
          case "LastLiveOwner":
            return yield* new Conflict({
              message: "The last live owner of an account cannot be deleted; create or revive another owner first"
            })
        }
      })

      return Agents.of({ signup, authenticate, authenticateKeyHash, create, list, get, update, rotateKey, delete: remove })
    })
  )
}
