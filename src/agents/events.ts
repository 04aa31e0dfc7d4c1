import { Effect } from "effect"
import type { AccountId, AgentId } from "../domain/ids.ts"

/**
 * Events about agents, as the control operations produce them. Every
 * operation that changes an agent's standing (a key rotation, a deletion)
 * hands its event to `publishAgentEvent` and nowhere else, so delivery
 * (webhooks, an event log) has exactly one place to start from.
 *
 * Delivery is not built: `publishAgentEvent` records nothing yet.
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

/** The single place agent events are handed to delivery (not built: nothing is written yet). */
export const publishAgentEvent = (_event: AgentEvent): Effect.Effect<void> => Effect.void
