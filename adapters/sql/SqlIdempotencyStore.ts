import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { type ClaimResult, IdempotencyStore, type IdempotencyStoreShape } from "../../src/ports/IdempotencyStore.ts"

/**
 * Idempotency keys in SQL (table `idempotency_keys`, migration 0003), one
 * dialect for PostgreSQL and PGlite. Storage failures become defects.
 */

interface KeyRow {
  readonly request_hash: string
  readonly response_status: bigint | number | string | null
  readonly response_body: string | null
  readonly expires_at: Date
}

/**
 * A claim whose upsert lost to a live row reads that row to say what holds
 * the key. If the row vanished or lapsed in between (released or expired), the
 * claim is tried again, a few times; after that it reports `InProgress`, and
 * the caller polls as for any busy key.
 */
const CLAIM_ATTEMPTS = 5

export const makeSqlIdempotencyStore = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  const claimOnce = (input: Parameters<IdempotencyStoreShape["claim"]>[0]) =>
    Effect.gen(function*() {
      // Inserts the key, or takes over a row that has expired; a live row is
      // left alone (the conflict's WHERE is false and nothing is returned).
      const taken = yield* sql`
        INSERT INTO idempotency_keys AS k (scope, key, request_hash, created_at, expires_at)
        VALUES (${input.scope}, ${input.key}, ${input.requestHash}, ${input.now}, ${input.expiresAt})
        ON CONFLICT (scope, key) DO UPDATE SET
          request_hash = EXCLUDED.request_hash,
          response_status = NULL,
          response_body = NULL,
          created_at = EXCLUDED.created_at,
          expires_at = EXCLUDED.expires_at
        WHERE k.expires_at <= EXCLUDED.created_at
        RETURNING 1 AS claimed`
      if (taken.length > 0) return { _tag: "Claimed" } satisfies ClaimResult
      const rows = yield* sql<KeyRow>`
        SELECT request_hash, response_status, response_body, expires_at FROM idempotency_keys
        WHERE scope = ${input.scope} AND key = ${input.key}`
      const row = rows[0]
      if (row === undefined || row.expires_at.getTime() <= input.now.getTime()) return undefined
      if (row.request_hash !== input.requestHash) return { _tag: "Mismatch" } satisfies ClaimResult
      if (row.response_status === null || row.response_body === null) {
        return { _tag: "InProgress" } satisfies ClaimResult
      }
      return { _tag: "Replay", status: Number(row.response_status), body: row.response_body } satisfies ClaimResult
    })

  const store: IdempotencyStoreShape = {
    claim: (input) =>
      Effect.gen(function*() {
        for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
          const result = yield* claimOnce(input)
          if (result !== undefined) return result
        }
        return { _tag: "InProgress" } satisfies ClaimResult
      }).pipe(Effect.orDie),
    complete: ({ scope, key, status, body, expiresAt }) =>
      sql`
        UPDATE idempotency_keys
        SET response_status = ${status}, response_body = ${body}, expires_at = ${expiresAt}
        WHERE scope = ${scope} AND key = ${key} AND response_status IS NULL`.pipe(Effect.asVoid, Effect.orDie),
    release: ({ scope, key }) =>
      sql`
        DELETE FROM idempotency_keys
        WHERE scope = ${scope} AND key = ${key} AND response_status IS NULL`.pipe(Effect.asVoid, Effect.orDie),
    purgeExpired: (now, limit) =>
      sql`
        DELETE FROM idempotency_keys
        WHERE (scope, key) IN (
          SELECT scope, key FROM idempotency_keys
          WHERE expires_at <= ${now}
          ORDER BY expires_at
          LIMIT ${limit}
        )
        RETURNING 1 AS purged`.pipe(Effect.map((rows) => rows.length), Effect.orDie)
  }
  return store
})

export const layer: Layer.Layer<IdempotencyStore, never, SqlClient.SqlClient> = Layer.effect(
  IdempotencyStore,
  makeSqlIdempotencyStore
)
