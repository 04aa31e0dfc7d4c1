import { Effect } from "effect"
import type { Agent, Principal } from "../domain/Agent.ts"
import { Forbidden } from "../domain/errors.ts"
import type { AgentId } from "../domain/ids.ts"

/**
 * Roles (docs/roles.md): an `owner` may read and change everything of its own
 * account; an `agent` may read itself and its own policy, and nothing else
 * of the account's management surface.
 */

export const requireOwner = (principal: Principal, action: string): Effect.Effect<void, Forbidden> =>
  principal.agent.role === "owner"
    ? Effect.void
    : Effect.fail(new Forbidden({ message: `Only an owner agent may ${action}` }))

/** Reading an agent or its policy: owners any of their account, agents only themselves. */
export const requireSelfOrOwner = (
  principal: Principal,
  agentId: AgentId,
  action: string
): Effect.Effect<void, Forbidden> =>
  principal.agent.role === "owner" || principal.agent.id === agentId
    ? Effect.void
    : Effect.fail(new Forbidden({ message: `An agent may only ${action} itself` }))

export const isLiveOwner = (agent: Agent): boolean => agent.role === "owner" && !agent.killed
