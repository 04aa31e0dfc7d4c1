import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type { Agent } from "../../src/domain/Agent.ts"
import type { AuditRecord, Transaction } from "../../src/domain/Ledger.ts"
import { AdminStore } from "../../src/ports/AdminStore.ts"
import { type AuditRow, toAuditRecord, toTransaction, type TransactionRow } from "./SqlLedger.ts"
import { paged } from "./paging.ts"
import { type AgentRow, rowToAgent } from "./SqlStore.ts"

/** The operator's cross-account reads, in SQL. */

type Int8 = bigint | string | number
const num = (value: Int8 | null | undefined) => Number(value ?? 0)
const big = (value: Int8 | null | undefined) => BigInt(value ?? 0)

export const makeSqlAdminStore = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  return AdminStore.of({
    stats: ({ from, until }) =>
      Effect.gen(function*() {
        const [accounts] = yield* sql<{ n: Int8 }>`SELECT count(*) AS n FROM accounts`
        const [agents] = yield* sql<{ total: Int8; killed: Int8; owners: Int8 }>`
          SELECT count(*) AS total,
                 count(*) FILTER (WHERE killed) AS killed,
                 count(*) FILTER (WHERE role = 'owner') AS owners
          FROM agents`
        const [balances] = yield* sql<{ usd: Int8 | null; sats: Int8 | null }>`
          SELECT sum(usd_micro) AS usd, sum(sats_msat) AS sats FROM wallets`
        const spend = yield* sql<{ day: string; capability: string; provider: string; calls: Int8; amount: Int8 }>`
          SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, capability, provider,
                 count(*) AS calls, sum(amount_micro_usd) AS amount
          FROM transactions
          WHERE type = 'charge' AND created_at >= ${from} AND created_at < ${until}
          GROUP BY 1, 2, 3 ORDER BY 1 DESC, 2, 3`
        const funding = yield* sql<{ day: string; pocket: string; credits: Int8; usd: Int8; sats: Int8 }>`
          SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
                 CASE WHEN sats_msat > 0 THEN 'sats' ELSE 'usd' END AS pocket,
                 count(*) AS credits, sum(usd_micro) AS usd, sum(sats_msat) AS sats
          FROM transactions
          WHERE type = 'credit' AND created_at >= ${from} AND created_at < ${until}
          GROUP BY 1, 2 ORDER BY 1 DESC, 2`
        return {
          accounts: num(accounts?.n),
          agents: { total: num(agents?.total), killed: num(agents?.killed), owners: num(agents?.owners) },
          balances: { usdMicroUsd: big(balances?.usd), satsMsat: big(balances?.sats) },
          spend: spend.map((r) => ({
            day: r.day,
            capability: r.capability,
            provider: r.provider,
            calls: num(r.calls),
            amountMicroUsd: big(r.amount)
          })),
          funding: funding.map((r) => ({
            day: r.day,
            pocket: r.pocket === "sats" ? "sats" as const : "usd" as const,
            credits: num(r.credits),
            usdMicroUsd: big(r.usd),
            satsMsat: big(r.sats)
          }))
        }
      }).pipe(Effect.orDie),

    agents: (filter, page) => {
      const conditions = [sql`TRUE`]
      if (filter.accountId !== undefined) conditions.push(sql`account_id = ${filter.accountId}`)
      if (filter.role !== undefined) conditions.push(sql`role = ${filter.role}`)
      if (filter.killed !== undefined) conditions.push(sql`killed = ${filter.killed}`)
      return paged<AgentRow, Agent>(sql, "agents", sql.and(conditions), rowToAgent, page)
        .pipe(Effect.orDie)
    },

    transactions: (filter, page) => {
      const conditions = [sql`TRUE`]
      if (filter.accountId !== undefined) conditions.push(sql`account_id = ${filter.accountId}`)
      if (filter.agentId !== undefined) conditions.push(sql`agent_id = ${filter.agentId}`)
      if (filter.type !== undefined) conditions.push(sql`type = ${filter.type}`)
      if (filter.from !== undefined) conditions.push(sql`created_at >= ${filter.from}`)
      if (filter.until !== undefined) conditions.push(sql`created_at < ${filter.until}`)
      return paged<TransactionRow, Transaction>(sql, "transactions", sql.and(conditions), toTransaction, page)
        .pipe(Effect.orDie)
    },

    auditLogs: (filter, page) => {
      const conditions = [sql`TRUE`]
      if (filter.accountId !== undefined) conditions.push(sql`account_id = ${filter.accountId}`)
      if (filter.kind !== undefined) conditions.push(sql`kind = ${filter.kind}`)
      if (filter.from !== undefined) conditions.push(sql`created_at >= ${filter.from}`)
      if (filter.until !== undefined) conditions.push(sql`created_at < ${filter.until}`)
      return paged<AuditRow, AuditRecord>(sql, "audit_log", sql.and(conditions), toAuditRecord, page)
        .pipe(Effect.orDie)
    }
  })
})

export const layer: Layer.Layer<AdminStore, never, SqlClient.SqlClient> = Layer.effect(AdminStore, makeSqlAdminStore)
