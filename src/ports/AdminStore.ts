import { Context, type Effect } from "effect"
import type { Agent, Role } from "../domain/Agent.ts"
import type { AccountId, AgentId } from "../domain/ids.ts"
import type { AuditKind, AuditRecord, Transaction, TransactionType } from "../domain/Ledger.ts"
import type { Page, PageRequest } from "./Store.ts"

/**
 * What the operator reads across accounts (/v1/admin/*). Read-only; every
 * list is newest first and paged like the rest of the API.
 */

export interface StatsQuery {
  /** Inclusive lower bound of the days reported. */
  readonly from: Date
  /** Exclusive upper bound. */
  readonly until: Date
}

export interface Stats {
  readonly accounts: number
  readonly agents: { readonly total: number; readonly killed: number; readonly owners: number }
  readonly balances: { readonly usdMicroUsd: bigint; readonly satsMsat: bigint }
  /** Charges (what agents spent) per UTC day, capability and provider. */
  readonly spend: ReadonlyArray<{
    readonly day: string
    readonly capability: string
    readonly provider: string
    readonly calls: number
    readonly amountMicroUsd: bigint
  }>
  /** Credits (funding that arrived) per UTC day and pocket. */
  readonly funding: ReadonlyArray<{
    readonly day: string
    readonly pocket: "usd" | "sats"
    readonly credits: number
    readonly usdMicroUsd: bigint
    readonly satsMsat: bigint
  }>
}

export interface AdminAgentFilter {
  readonly accountId?: AccountId | undefined
  readonly role?: Role | undefined
  readonly killed?: boolean | undefined
}

export interface AdminTransactionFilter {
  readonly accountId?: AccountId | undefined
  readonly agentId?: AgentId | undefined
  readonly type?: TransactionType | undefined
  readonly from?: Date | undefined
  readonly until?: Date | undefined
}

export interface AdminAuditFilter {
  readonly accountId?: AccountId | undefined
  readonly kind?: AuditKind | undefined
  readonly from?: Date | undefined
  readonly until?: Date | undefined
}

export class AdminStore extends Context.Service<AdminStore, {
  readonly stats: (query: StatsQuery) => Effect.Effect<Stats>
  readonly agents: (filter: AdminAgentFilter, page: PageRequest) => Effect.Effect<Page<Agent>>
  readonly transactions: (filter: AdminTransactionFilter, page: PageRequest) => Effect.Effect<Page<Transaction>>
  readonly auditLogs: (filter: AdminAuditFilter, page: PageRequest) => Effect.Effect<Page<AuditRecord>>
}>()("spendgate/AdminStore") {}
