import { Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { AccountId, AgentId } from "../../src/domain/ids.ts"
import { RegistryStore } from "../../src/ports/RegistryStore.ts"
import type { Submission, SubmissionStatus } from "../../src/services/Service.ts"
import { paged } from "./paging.ts"
import { ReadCache } from "./ReadCache.ts"

/**
 * Registry submissions in SQL. The submission's content is kept as JSON text
 * (it is validated on the way in and only read back whole); a partial unique
 * index keeps slugs unique among pending and approved submissions.
 */

interface Row {
  readonly id: string
  readonly account_id: string
  readonly agent_id: string
  readonly slug: string
  readonly status: string
  readonly content: string
  readonly created_at: Date | string
  readonly reviewed_at: Date | string | null
  readonly review_note: string | null
}

const date = (value: Date | string) => (value instanceof Date ? value : new Date(value))

const toSubmission = (row: Row): Submission => ({
  ...(JSON.parse(row.content) as Omit<Submission, "id" | "accountId" | "agentId" | "status" | "createdAt" | "reviewedAt" | "reviewNote">),
  id: row.id,
  accountId: row.account_id as AccountId,
  agentId: row.agent_id as AgentId,
  status: row.status as SubmissionStatus,
  createdAt: date(row.created_at),
  reviewedAt: row.reviewed_at === null ? null : date(row.reviewed_at),
  reviewNote: row.review_note
})

export const makeSqlRegistryStore = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const cache = yield* ReadCache
  /** Runs once the change has committed, before the store call returns (the catalogue is served from memory). */
  const thenInvalidate = Effect.ensuring(Effect.sync(() => cache.invalidateRegistry()))
  return RegistryStore.of({
    insert: (s) =>
      Effect.gen(function*() {
        const { id, accountId, agentId, status, createdAt, reviewedAt, reviewNote, ...content } = s
        const rows = yield* sql<{ id: string }>`
          INSERT INTO registry_submissions ${
          sql.insert({
            id,
            account_id: accountId,
            agent_id: agentId,
            slug: s.slug,
            status,
            content: JSON.stringify(content),
            created_at: createdAt,
            reviewed_at: reviewedAt,
            review_note: reviewNote
          })
        }
          ON CONFLICT DO NOTHING RETURNING id`
        return rows.length === 1 ? "Inserted" as const : "SlugTaken" as const
      }).pipe(Effect.orDie, thenInvalidate),
    get: (id) =>
      sql<Row>`SELECT * FROM registry_submissions WHERE id = ${id}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toSubmission)),
        Effect.orDie
      ),
    list: (filter, page) =>
      Effect.gen(function*() {
        const conditions = [sql`TRUE`]
        if (filter.accountId !== undefined) conditions.push(sql`account_id = ${filter.accountId}`)
        if (filter.status !== undefined) conditions.push(sql`status = ${filter.status}`)
        return yield* paged(sql, "registry_submissions", sql.and(conditions), toSubmission, page)
      }).pipe(Effect.orDie),
    review: (id, decision) =>
      sql<Row>`
        UPDATE registry_submissions SET status = ${decision.status}, review_note = ${decision.note}, reviewed_at = ${decision.at}
        WHERE id = ${id} AND status = 'pending' RETURNING *`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toSubmission)),
        Effect.orDie,
        thenInvalidate
      ),
    approved: cache.approved(
      sql<Row>`SELECT * FROM registry_submissions WHERE status = 'approved' ORDER BY created_at DESC, id COLLATE "C" DESC LIMIT 1000`
        .pipe(Effect.map((rows) => rows.map(toSubmission)), Effect.orDie)
    )
  })
})

export const layer: Layer.Layer<RegistryStore, never, SqlClient.SqlClient | ReadCache> = Layer.effect(RegistryStore, makeSqlRegistryStore)
