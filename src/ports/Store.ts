import { Context, type Effect, type Option } from "effect"
import type { Agent, Policy } from "../domain/Agent.ts"
import type { Capability } from "../domain/Capability.ts"
import type { AccountId, AgentId } from "../domain/ids.ts"

/**
 * The storage port. Implementations: SQL (PostgreSQL and embedded PGlite,
 * adapters/sql) and in-memory (adapters/memory). Both pass one contract suite
 * (test/ports/store.contract.ts).
 *
 * Storage failures are defects, not typed errors: the core cannot recover
 * from them and the HTTP adapter answers 500 INTERNAL / health "down".
 * Every method is atomic on its own.
 */

export interface Page<A> {
  readonly items: ReadonlyArray<A>
  readonly total: number
}

export interface PageRequest {
  readonly limit: number
  readonly offset: number
}

export interface NewAgent {
  readonly agent: Agent
  readonly keyHash: string
  readonly policy: Policy
}

export interface PolicyPatch {
  readonly maxPerCallMicroUsd?: bigint | null | undefined
  readonly maxPerDayMicroUsd?: bigint | null | undefined
  readonly allowedCapabilities?: ReadonlyArray<Capability> | undefined
}

export interface AgentWithPolicy {
  readonly agent: Agent
  readonly policy: Policy
}

export interface AgentChanges {
  readonly name?: string | undefined
  readonly killed?: boolean | undefined
}

/** Result of an update that must keep at least one live owner per account. */
export type UpdateAgentResult =
  | { readonly _tag: "Updated"; readonly agent: Agent }
  | { readonly _tag: "NotFound" }
  | { readonly _tag: "LastLiveOwner" }

export interface StoreShape {
  /** Cheap liveness check for /health. Fails (defect) when storage is unreachable. */
  readonly ping: Effect.Effect<void>
  /** Creates an account together with its first (owner) agent, atomically. */
  readonly createAccount: (input: {
    readonly accountId: AccountId
    readonly createdAt: Date
    readonly owner: NewAgent
  }) => Effect.Effect<void>
  readonly createAgent: (input: NewAgent) => Effect.Effect<void>
  readonly findAgentByKeyHash: (keyHash: string) => Effect.Effect<Option.Option<Agent>>
  /** The agent only if it belongs to `accountId`. */
  readonly getAgent: (accountId: AccountId, agentId: AgentId) => Effect.Effect<Option.Option<AgentWithPolicy>>
  /** Newest first (createdAt, then id, descending). */
  readonly listAgents: (accountId: AccountId, page: PageRequest) => Effect.Effect<Page<Agent>>
  /**
   * Applies the changes. Killing the account's last live owner is refused
   * with `LastLiveOwner` and changes nothing; the check and the write are one
   * atomic step, so two owners killing each other concurrently cannot both win.
   */
  readonly updateAgent: (
    accountId: AccountId,
    agentId: AgentId,
    changes: AgentChanges
  ) => Effect.Effect<UpdateAgentResult>
  /** Sets lastActiveAt to `at` when it is older than `staleBefore` (or unset). */
  readonly touchAgent: (agentId: AgentId, at: Date, staleBefore: Date) => Effect.Effect<void>
  /** Changes only the given fields, atomically; None when the agent is not in the account. */
  readonly updatePolicy: (
    accountId: AccountId,
    agentId: AgentId,
    patch: PolicyPatch
  ) => Effect.Effect<Option.Option<Policy>>
}

export class Store extends Context.Service<Store, StoreShape>()("spendgate/Store") {}
