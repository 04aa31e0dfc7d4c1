import { Effect, Result } from "effect"
import type { Agent, Policy, Principal, Role } from "../domain/Agent.ts"
import type { Capability } from "../domain/Capability.ts"
import { CapabilityNotAllowed, Forbidden } from "../domain/errors.ts"
import type { AgentId } from "../domain/ids.ts"

/**
 * Roles (decisions.md §3, docs/access.md): an `owner` may read and change
 * everything of its own account; an `agent` may use capabilities and the
 * proxy, read itself, its own policy, the wallet balance, its own
 * transactions and the audit records of its own transactions, and nothing
 * else of the account's management surface.
 *
 * `refusal` is the one rule. The HTTP access middleware applies it to every
 * route of the access matrix (src/access/matrix.ts) before anything else
 * runs; the core applies it again, through `requireOwner` and
 * `requireSelfOrOwner`, as defence in depth and for rows whose agent is known
 * only once they are read (audit records).
 */

/** Who may call something that is not public or the operator's. */
export type AgentAccess =
  /** Any live agent of the account. */
  | "agent"
  /** Owner agents only. */
  | "owner"
  /** Owners, and an agent when the agent named (path, query or row) is itself. */
  | "selfOrOwner"

export interface Caller {
  readonly id: AgentId
  readonly role: Role
}

/**
 * Why `caller` may not act with `access` on `target`, or `undefined` when it
 * may. `target` is the agent the request names (a path id, a query filter,
 * the agent of a row); `undefined` when it names none, `null` for a row of no
 * agent (a wallet credit). `action` completes "may only …" in the message.
 */
export const refusal = (
  access: AgentAccess,
  caller: Caller,
  target: AgentId | null | undefined,
  action: string
): string | undefined => {
  if (caller.role === "owner") return undefined
  switch (access) {
    case "agent":
      return undefined
    case "owner":
      return `Only an owner agent may ${action}`
    case "selfOrOwner":
      return target === undefined || target === caller.id ? undefined : `An agent may only ${action} itself`
  }
}

const check = (
  access: AgentAccess,
  principal: Principal,
  target: AgentId | null | undefined,
  action: string
): Effect.Effect<void, Forbidden> => {
  const message = refusal(access, principal.agent, target, action)
  return message === undefined ? Effect.void : Effect.fail(new Forbidden({ message }))
}

export const requireOwner = (principal: Principal, action: string): Effect.Effect<void, Forbidden> =>
  check("owner", principal, undefined, action)

/**
 * Reading an agent, its policy, its transactions or its audit records:
 * owners any of their account, agents only their own (`null`: a row of no
 * agent, which only owners read).
 */
export const requireSelfOrOwner = (
  principal: Principal,
  agentId: AgentId | null,
  action: string
): Effect.Effect<void, Forbidden> => check("selfOrOwner", principal, agentId, action)

/** The capability list of a policy: empty allows every capability. */
export const checkCapability = (
  policy: Pick<Policy, "allowedCapabilities">,
  capability: Capability
): Result.Result<void, CapabilityNotAllowed> =>
  policy.allowedCapabilities.length > 0 && !policy.allowedCapabilities.includes(capability)
    ? Result.fail(new CapabilityNotAllowed({ capability, allowedCapabilities: policy.allowedCapabilities }))
    : Result.void

export const isLiveOwner = (agent: Agent): boolean => agent.role === "owner" && !agent.killed && agent.deletedAt === null
