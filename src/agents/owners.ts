import type { Agent } from "../domain/Agent.ts"

/**
 * The last-live-owner rule as a pure decision: an account keeps at least one
 * live (not killed) owner, so it can always be administered. Storage reads
 * the snapshot under the account's lock and applies the plan in the same
 * transaction, so the check and the write are one atomic step (two owners
 * killing each other concurrently cannot both win), and memory, PGlite and
 * PostgreSQL cannot disagree.
 */

export interface AgentChangeSnapshot {
  /** The agent to change, as stored. */
  readonly agent: Agent
  /** Whether the account has a live owner other than this agent. */
  readonly otherLiveOwner: boolean
}

/** What an update may change (the port's `AgentChanges`). */
export interface AgentChange {
  readonly name?: string | undefined
  readonly killed?: boolean | undefined
  /** Deletes the agent at this time (a deleted agent is never live). */
  readonly deletedAt?: Date | undefined
  /** When the change happens: the time of the events it writes (kill, revive). */
  readonly at?: Date | undefined
}

export type AgentChangePlan =
  /** Write this agent. */
  | { readonly _tag: "Update"; readonly agent: Agent }
  /** The change would leave the account without a live owner: change nothing. */
  | { readonly _tag: "LastLiveOwner" }
  /** The agent is deleted: it is never changed again. */
  | { readonly _tag: "Deleted" }

export const planAgentChange = (snapshot: AgentChangeSnapshot, change: AgentChange): AgentChangePlan => {
  const { agent } = snapshot
  if (agent.deletedAt !== null) return { _tag: "Deleted" }
  const isLiveOwner = agent.role === "owner" && !agent.killed
  const removesLiveOwner = isLiveOwner && (change.killed === true || change.deletedAt !== undefined)
  if (removesLiveOwner && !snapshot.otherLiveOwner) return { _tag: "LastLiveOwner" }
  return {
    _tag: "Update",
    agent: {
      ...agent,
      name: change.name ?? agent.name,
      killed: change.killed ?? agent.killed,
      killReason: change.killed === undefined
        ? agent.killReason
        : change.killed
        ? agent.killed ? agent.killReason : "owner"
        : null,
      deletedAt: change.deletedAt ?? agent.deletedAt
    }
  }
}
