import { Effect } from "effect"
import type { AccountId, AgentId } from "../domain/ids.ts"

/**
 * Events about agents, as the control operations produce them. Every
 * operation that changes an agent's standing (a key rotation, a deletion)
 * hands its event to `publishAgentEvent` and nowhere else, so delivery
 * (webhooks, an event log) has exactly one place to start from.
 *
 * The webhook events of agents (`agent.created`, `agent.killed`,
 * `agent.revived`) are not published here: the stores write them to the
 * outbox in the transaction of the change (src/webhooks/events.ts). These two
 * (a key rotation, a deletion) are not webhook events yet, and
 * `publishAgentEvent` still records nothing.
 */
export type AgentEvent =
  | {
    readonly type: "agent.key_rotated"
    readonly accountId: AccountId
    readonly agentId: AgentId
    readonly at: Date
    /** When the previous key stops working (null: it stopped at once). */
    readonly previousKeyExpiresAt: Date | null
  }
  | { readonly type: "agent.deleted"; readonly accountId: AccountId; readonly agentId: AgentId; readonly at: Date }

/** Where key-rotation and deletion events are handed on (nothing is written yet; see above). */
export const publishAgentEvent = (_event: AgentEvent): Effect.Effect<void> => Effect.void
