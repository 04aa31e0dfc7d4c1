import { Schema } from "effect"
import type { Capability } from "./Capability.ts"
import type { AccountId, AgentId } from "./ids.ts"

export const Role = Schema.Literals(["owner", "agent"])
export type Role = typeof Role.Type

/** A display name: 1 to 100 characters after trimming, no control characters. */
export const AgentName = Schema.Trim.check(
  Schema.isMinLength(1, { message: "name must not be empty" }),
  Schema.isMaxLength(100, { message: "name must be at most 100 characters" }),
  Schema.isPattern(/^[^\u0000-\u001f\u007f]*$/, { message: "name must not contain control characters" })
)

export const KillReason = Schema.Literals(["owner", "velocity"])
export type KillReason = typeof KillReason.Type

export interface Agent {
  readonly id: AgentId
  readonly accountId: AccountId
  readonly name: string
  readonly role: Role
  readonly killed: boolean
  /**
   * Why a killed agent was killed: `owner` by an owner's PATCH, `velocity`
   * by its policy's `autoKill` when a call went past a velocity limit;
   * null while it is not killed.
   */
  readonly killReason: KillReason | null
  readonly createdAt: Date
  readonly lastActiveAt: Date | null
  /**
   * When the agent was deleted: its keys no longer authenticate, it is left
   * out of the account's agent list, and it cannot be changed; its
   * transactions and audit records keep naming it. `null` while it exists.
   */
  readonly deletedAt: Date | null
}

/**
 * An agent's policy in internal units. `null` means "no limit" for the caps
 * and an empty list means "all capabilities"; the API's `0` and `null` both
 * decode to `null`, and `null`/`[]` to `[]`.
 */
export interface Policy {
  readonly maxPerCallMicroUsd: bigint | null
  readonly maxPerDayMicroUsd: bigint | null
  /** Spend of a calendar month (UTC), held reservations included. */
  readonly maxPerMonthMicroUsd: bigint | null
  /** Spend of the last 60 minutes (rolling), held reservations included. */
  readonly maxPerHourMicroUsd: bigint | null
  /** Calls (holds) started in the last 60 seconds (rolling). */
  readonly maxCallsPerMinute: number | null
  /** Kill the agent (reason `velocity`) when a call goes past either velocity limit. */
  readonly autoKill: boolean
  readonly allowedCapabilities: ReadonlyArray<Capability>
}

export const unlimitedPolicy: Policy = {
  maxPerCallMicroUsd: null,
  maxPerDayMicroUsd: null,
  maxPerMonthMicroUsd: null,
  maxPerHourMicroUsd: null,
  maxCallsPerMinute: null,
  autoKill: false,
  allowedCapabilities: []
}

/** The caller of an operation, as established by authentication. */
export interface Principal {
  readonly agent: Agent
}
