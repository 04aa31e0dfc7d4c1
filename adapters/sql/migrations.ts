import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Schema migrations, PostgreSQL dialect, run unchanged on a PostgreSQL server
 * and on embedded PGlite. Append new numbered entries; never edit a shipped one.
 *
 * Amounts are BIGINT in micro-dollars / millisatoshis (docs/money.md).
 */
export const migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = {
  "0001_accounts_agents": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`
      CREATE TABLE accounts (
        id          TEXT PRIMARY KEY,
        created_at  TIMESTAMPTZ NOT NULL
      )`
    yield* sql`
      CREATE TABLE agents (
        id                       TEXT PRIMARY KEY,
        account_id               TEXT NOT NULL REFERENCES accounts (id),
        name                     TEXT NOT NULL,
        role                     TEXT NOT NULL CHECK (role IN ('owner', 'agent')),
        killed                   BOOLEAN NOT NULL DEFAULT FALSE,
        key_hash                 TEXT NOT NULL UNIQUE CHECK (key_hash ~ '^[0-9a-f]{64}$'),
        created_at               TIMESTAMPTZ NOT NULL,
        last_active_at           TIMESTAMPTZ,
        max_per_call_micro_usd   BIGINT CHECK (max_per_call_micro_usd > 0),
        max_per_day_micro_usd    BIGINT CHECK (max_per_day_micro_usd > 0),
        allowed_capabilities     TEXT NOT NULL DEFAULT ''
      )`
    yield* sql`CREATE INDEX agents_account_created ON agents (account_id, created_at DESC, id DESC)`
  })
}
