import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option, Result } from "effect"
import { SqlClient } from "effect/sql"
import type { Agent, KillReason, Policy, Role } from "../../src/domain/Agent.ts"
import { type Capability, isCapability } from "../../src/domain/Capability.ts"
import type { AccountId, AgentId } from "../../src/domain/ids.ts"
import { planAgentChange } from "../../src/agents/owners.ts"
import { paged } from "./paging.ts"
import { makeSqlLedger, type LedgerOptions } from "./SqlLedger.ts"
import { makeSqlWebhookStore, writeEvents } from "./SqlWebhooks.ts"
import { agentChangeEvents, agentCreated } from "../../src/webhooks/events.ts"
import { type NewAgent, type PolicyPatch, Store, type StoreShape, type UpdateAgentResult } from "../../src/ports/Store.ts"
import { refusalKillsAgent } from "../../src/wallet/decide.ts"
import { type CachedAgent, ReadCache } from "./ReadCache.ts"

/**
 * The SQL store: one set of queries for PostgreSQL and PGlite, through
 * effect's SqlClient. Storage failures become defects (see the Store port).
 */

export interface AgentRow {
  readonly id: string
  readonly account_id: string
  readonly name: string
  readonly role: string
  readonly killed: boolean
  readonly created_at: Date | string
  readonly last_active_at: Date | string | null
  readonly max_per_call_micro_usd: string | bigint | null
  readonly max_per_day_micro_usd: string | bigint | null
  readonly max_per_month_micro_usd: string | bigint | null
  readonly max_per_hour_micro_usd: string | bigint | null
  readonly max_calls_per_minute: number | string | null
  readonly auto_kill: boolean
  readonly kill_reason: string | null
  readonly allowed_capabilities: string
  readonly deleted_at: Date | string | null
  /** Present when the row was read with `SELECT *` (every store query reads it so). */
  readonly key_hash?: string
  readonly prev_key_hash?: string | null
  readonly prev_key_expires_at?: Date | string | null
}

const toDate = (value: Date | string): Date => (value instanceof Date ? value : new Date(value))
const toBigIntOrNull = (value: string | bigint | null): bigint | null => (value === null ? null : BigInt(value))

export const rowToAgent = (row: AgentRow): Agent => ({
  id: row.id as AgentId,
  accountId: row.account_id as AccountId,
  name: row.name,
  role: row.role as Role,
  killed: row.killed,
  killReason: row.kill_reason as KillReason | null,
  createdAt: toDate(row.created_at),
  lastActiveAt: row.last_active_at === null ? null : toDate(row.last_active_at),
  deletedAt: row.deleted_at === null ? null : toDate(row.deleted_at)
})

const encodeCapabilities = (capabilities: ReadonlyArray<Capability>): string => capabilities.join(",")
const decodeCapabilities = (stored: string): ReadonlyArray<Capability> =>
  stored === "" ? [] : stored.split(",").filter(isCapability)

const rowToPolicy = (row: AgentRow): Policy => ({
  maxPerCallMicroUsd: toBigIntOrNull(row.max_per_call_micro_usd),
  maxPerDayMicroUsd: toBigIntOrNull(row.max_per_day_micro_usd),
  maxPerMonthMicroUsd: toBigIntOrNull(row.max_per_month_micro_usd),
  maxPerHourMicroUsd: toBigIntOrNull(row.max_per_hour_micro_usd),
  maxCallsPerMinute: row.max_calls_per_minute === null ? null : Number(row.max_calls_per_minute),
  autoKill: row.auto_kill,
  allowedCapabilities: decodeCapabilities(row.allowed_capabilities)
})

const rowToCached = (row: AgentRow): CachedAgent => ({
  agent: rowToAgent(row),
  policy: rowToPolicy(row),
  keyHash: row.key_hash ?? "",
  prevKeyHash: row.prev_key_hash ?? null,
  prevKeyExpiresAt: row.prev_key_expires_at === null || row.prev_key_expires_at === undefined
    ? null
    : toDate(row.prev_key_expires_at)
})

/** Whether a presented key with this hash finds the agent at `now` (findAgentByKeyHash's rule). */
const keyFinds = (entry: CachedAgent, keyHash: string, now: Date): boolean =>
  entry.agent.deletedAt === null && (
    entry.keyHash === keyHash ||
    (entry.prevKeyHash === keyHash && entry.prevKeyExpiresAt !== null && entry.prevKeyExpiresAt.getTime() > now.getTime())
  )

/** The SQL store's options: those of its ledger's settles (SqlLedger.ts). */
export type SqlStoreOptions = LedgerOptions

export const makeSqlStoreWith = (options: SqlStoreOptions = {}) => Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const cache = yield* ReadCache
  /** Runs once the change has committed (or failed), before the store call returns. */
  const thenInvalidate = (agentId: AgentId) => Effect.ensuring(Effect.sync(() => cache.invalidateAgent(agentId)))

  const insertAgent = (input: NewAgent) =>
    sql`INSERT INTO agents ${
      sql.insert({
        id: input.agent.id,
        account_id: input.agent.accountId,
        name: input.agent.name,
        role: input.agent.role,
        killed: input.agent.killed,
        key_hash: input.keyHash,
        created_at: input.agent.createdAt,
        last_active_at: input.agent.lastActiveAt,
        max_per_call_micro_usd: input.policy.maxPerCallMicroUsd,
        max_per_day_micro_usd: input.policy.maxPerDayMicroUsd,
        max_per_month_micro_usd: input.policy.maxPerMonthMicroUsd,
        max_per_hour_micro_usd: input.policy.maxPerHourMicroUsd,
        max_calls_per_minute: input.policy.maxCallsPerMinute,
        auto_kill: input.policy.autoKill,
        kill_reason: input.agent.killReason,
        deleted_at: input.agent.deletedAt,
        allowed_capabilities: encodeCapabilities(input.policy.allowedCapabilities)
      })
    }`

  const selectAgent = (accountId: AccountId, agentId: AgentId) =>
    Effect.map(
      sql<AgentRow>`SELECT * FROM agents WHERE id = ${agentId} AND account_id = ${accountId}`,
      (rows) => Option.fromNullishOr(rows[0])
    )

  // A settle with no hold coming goes at once on PostgreSQL, where another connection and another
  // core take it off the next call's path; on PGlite (one connection, in this process) it would
  // only add a commit on the same thread, so there it waits for a hold to carry it
  // (docs/performance.md, "Settles at once when no hold is coming").
  const onPostgres = Option.isSome(yield* Effect.serviceOption(PgClient.PgClient))
  const { settleWriter, ...ledger } = makeSqlLedger(
    sql,
    (row: AgentRow) => ({ agent: rowToAgent(row), policy: rowToPolicy(row) }),
    { ...options, settleWhenIdle: options.settleWhenIdle ?? (onPostgres ? "now" : "wait") }
  )
  yield* settleWriter

  const store: StoreShape = {
    ...ledger,
    // A refusal that killed the agent (velocity with autoKill) changed it; one
    // that found it killed means this process's copy was stale.
    reserve: (input) =>
      ledger.reserve(input).pipe(Effect.tap((result) =>
        Effect.sync(() => {
          if (Result.isFailure(result)) {
            const refusal = result.failure
            if (refusal._tag === "AgentKilled" || ("killsAgent" in refusal && refusalKillsAgent(refusal))) {
              cache.invalidateAgent(input.agentId)
            }
          }
        })
      )),
    ...makeSqlWebhookStore(sql),
    ping: Effect.orDie(Effect.asVoid(sql`SELECT 1`)),
    createAccount: ({ accountId, createdAt, owner }) =>
      sql.withTransaction(Effect.gen(function*() {
        yield* sql`INSERT INTO accounts ${sql.insert({ id: accountId, created_at: createdAt })}`
        yield* sql`INSERT INTO wallets (account_id) VALUES (${accountId})`
        yield* insertAgent(owner)
        yield* writeEvents(sql, [agentCreated(owner.agent)])
      })).pipe(Effect.asVoid, Effect.orDie),
    createAgent: (input) =>
      sql.withTransaction(Effect.gen(function*() {
        yield* insertAgent(input)
        yield* writeEvents(sql, [agentCreated(input.agent)])
      })).pipe(Effect.asVoid, Effect.orDie),
    // Both read through the cache: the row as stored, the rule applied here.
    findAgentByKeyHash: (keyHash, now) =>
      cache.agentByKey(
        keyHash,
        sql<AgentRow>`SELECT * FROM agents WHERE key_hash = ${keyHash} OR prev_key_hash = ${keyHash}`.pipe(
          Effect.map((rows) =>
            // The current key first (a hash is never both in practice: keys are random).
            Option.map(Option.fromNullishOr(rows.find((row) => row.key_hash === keyHash) ?? rows[0]), rowToCached)
          ),
          Effect.orDie
        )
      ).pipe(Effect.map(Option.flatMap((entry) => keyFinds(entry, keyHash, now) ? Option.some(entry.agent) : Option.none()))),
    getAgent: (accountId, agentId) =>
      cache.agentById(agentId, selectAgent(accountId, agentId).pipe(Effect.map(Option.map(rowToCached)), Effect.orDie)).pipe(
        Effect.map(Option.flatMap((entry) =>
          entry.agent.accountId === accountId ? Option.some({ agent: entry.agent, policy: entry.policy }) : Option.none()
        ))
      ),
    agentNames: (accountId, agentIds) =>
      agentIds.length === 0
        ? Effect.succeed(new Map<AgentId, string>())
        : sql<{ readonly id: string; readonly name: string }>`
            SELECT id, name FROM agents WHERE account_id = ${accountId} AND ${sql.in("id", [...new Set(agentIds)])}`.pipe(
            Effect.map((rows) => new Map(rows.map((row) => [row.id as AgentId, row.name]))),
            Effect.orDie
          ),
    rotateKey: (accountId, agentId, rotation) =>
      (rotation.previousExpiresAt === null
        ? sql<AgentRow>`
            UPDATE agents SET key_hash = ${rotation.keyHash}, prev_key_hash = NULL, prev_key_expires_at = NULL
            WHERE id = ${agentId} AND account_id = ${accountId} AND deleted_at IS NULL RETURNING *`
        : sql<AgentRow>`
            UPDATE agents SET key_hash = ${rotation.keyHash}, prev_key_hash = key_hash,
              prev_key_expires_at = ${rotation.previousExpiresAt}
            WHERE id = ${agentId} AND account_id = ${accountId} AND deleted_at IS NULL RETURNING *`).pipe(
        Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), rowToAgent)),
        Effect.orDie,
        thenInvalidate(agentId)
      ),
    listAgents: (accountId, page) =>
      paged(sql, "agents", sql`account_id = ${accountId} AND deleted_at IS NULL`, rowToAgent, page).pipe(Effect.orDie),
    updateAgent: (accountId, agentId, changes) =>
      sql.withTransaction(Effect.gen(function*() {
        // Serialise changes per account: the last-live-owner rule must see
        // every concurrent kill of the same account.
        const locked = yield* sql`SELECT id FROM accounts WHERE id = ${accountId} FOR UPDATE`
        if (locked.length === 0) return { _tag: "NotFound" } satisfies UpdateAgentResult
        const current = yield* selectAgent(accountId, agentId)
        if (Option.isNone(current)) return { _tag: "NotFound" } satisfies UpdateAgentResult
        const others = yield* sql`
          SELECT 1 FROM agents
          WHERE account_id = ${accountId} AND role = 'owner' AND NOT killed AND deleted_at IS NULL
            AND id <> ${agentId} LIMIT 1`
        const plan = planAgentChange({ agent: rowToAgent(current.value), otherLiveOwner: others.length > 0 }, changes)
        if (plan._tag === "LastLiveOwner") return plan satisfies UpdateAgentResult
        if (plan._tag === "Deleted") return { _tag: "NotFound" } satisfies UpdateAgentResult
        const updated = yield* sql<AgentRow>`
          UPDATE agents SET name = ${plan.agent.name}, killed = ${plan.agent.killed},
            kill_reason = ${plan.agent.killReason}, deleted_at = ${plan.agent.deletedAt}
          WHERE id = ${agentId} AND account_id = ${accountId} RETURNING *`
        const agent = rowToAgent(updated[0]!)
        yield* writeEvents(sql, agentChangeEvents(rowToAgent(current.value), agent, changes.at ?? new Date()))
        return { _tag: "Updated", agent } satisfies UpdateAgentResult
      })).pipe(Effect.orDie, thenInvalidate(agentId)),
    touchAgent: (agentId, at, staleBefore) =>
      sql`
        UPDATE agents SET last_active_at = ${at}
        WHERE id = ${agentId} AND (last_active_at IS NULL OR last_active_at < ${staleBefore})`.pipe(
        Effect.asVoid,
        Effect.orDie,
        Effect.tap(() => Effect.sync(() => cache.touched(agentId, at, staleBefore)))
      ),
    updatePolicy: (accountId, agentId, patch: PolicyPatch) =>
      Effect.gen(function*() {
        const sets = []
        if (patch.maxPerCallMicroUsd !== undefined) {
          sets.push(sql`max_per_call_micro_usd = ${patch.maxPerCallMicroUsd}`)
        }
        if (patch.maxPerDayMicroUsd !== undefined) {
          sets.push(sql`max_per_day_micro_usd = ${patch.maxPerDayMicroUsd}`)
        }
        if (patch.maxPerMonthMicroUsd !== undefined) {
          sets.push(sql`max_per_month_micro_usd = ${patch.maxPerMonthMicroUsd}`)
        }
        if (patch.maxPerHourMicroUsd !== undefined) {
          sets.push(sql`max_per_hour_micro_usd = ${patch.maxPerHourMicroUsd}`)
        }
        if (patch.maxCallsPerMinute !== undefined) {
          sets.push(sql`max_calls_per_minute = ${patch.maxCallsPerMinute}`)
        }
        if (patch.autoKill !== undefined) {
          sets.push(sql`auto_kill = ${patch.autoKill}`)
        }
        if (patch.allowedCapabilities !== undefined) {
          sets.push(sql`allowed_capabilities = ${encodeCapabilities(patch.allowedCapabilities)}`)
        }
        const rows = sets.length === 0
          ? yield* sql<AgentRow>`
              SELECT * FROM agents WHERE id = ${agentId} AND account_id = ${accountId} AND deleted_at IS NULL`
          : yield* sql<AgentRow>`
              UPDATE agents SET ${sql.csv(sets)}
              WHERE id = ${agentId} AND account_id = ${accountId} AND deleted_at IS NULL RETURNING *`
        return Option.map(Option.fromNullishOr(rows[0]), rowToPolicy)
      }).pipe(Effect.orDie, thenInvalidate(agentId))
  }
  return store
})

export const makeSqlStore = makeSqlStoreWith()

export const layerWith = (options: SqlStoreOptions = {}): Layer.Layer<Store, never, SqlClient.SqlClient | ReadCache> =>
  Layer.effect(Store, makeSqlStoreWith(options))

export const layer: Layer.Layer<Store, never, SqlClient.SqlClient | ReadCache> = layerWith()
