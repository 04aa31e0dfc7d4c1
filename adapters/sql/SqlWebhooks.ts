import { Effect, Option } from "effect"
import type { SqlClient, SqlError } from "effect/sql"
import type { AccountId } from "../../src/domain/ids.ts"
import { endpointDisabled, type EventType, isEventType, type OutboxEvent } from "../../src/webhooks/events.ts"
import type {
  AttemptRecorded,
  ClaimedDelivery,
  DeliveryStatus,
  WebhookDelivery,
  WebhookEndpoint,
  WebhookStoreShape
} from "../../src/ports/WebhookStore.ts"
import { paged } from "./paging.ts"

/**
 * The webhook half of the SQL store: the outbox writer every other write
 * calls inside its own transaction, endpoints, and delivery claims with
 * `FOR UPDATE SKIP LOCKED` and a lease.
 */

type Int = number | string | bigint
const date = (value: Date | string): Date => (value instanceof Date ? value : new Date(value))
const dateOrNull = (value: Date | string | null): Date | null => (value === null ? null : date(value))

interface EndpointRow {
  readonly id: string
  readonly account_id: string
  readonly url: string
  readonly description: string
  readonly events: string
  readonly enabled: boolean
  readonly secret: string
  readonly previous_secret: string | null
  readonly previous_secret_expires_at: Date | string | null
  readonly consecutive_failures: Int
  readonly disabled_at: Date | string | null
  readonly created_at: Date | string
  readonly updated_at: Date | string
}

interface DeliveryRow {
  readonly id: string
  readonly account_id: string
  readonly endpoint_id: string
  readonly event_id: string
  readonly event_type: string
  readonly status: string
  readonly attempts: Int
  readonly next_attempt_at: Date | string | null
  readonly lease_until: Date | string | null
  readonly window_start: Date | string
  readonly last_attempt_at: Date | string | null
  readonly last_status_code: Int | null
  readonly last_error: string | null
  readonly delivered_at: Date | string | null
  readonly created_at: Date | string
}

interface EventRow {
  readonly id: string
  readonly account_id: string
  readonly type: string
  readonly payload: string
  readonly created_at: Date | string
}

export const encodeEvents = (events: ReadonlyArray<EventType>): string => events.join(",")
const decodeEvents = (stored: string): ReadonlyArray<EventType> =>
  stored === "" ? [] : stored.split(",").filter(isEventType)

const toEndpoint = (row: EndpointRow): WebhookEndpoint => ({
  id: row.id,
  accountId: row.account_id as AccountId,
  url: row.url,
  description: row.description,
  events: decodeEvents(row.events),
  enabled: row.enabled,
  secret: row.secret,
  previousSecret: row.previous_secret,
  previousSecretExpiresAt: dateOrNull(row.previous_secret_expires_at),
  consecutiveFailures: Number(row.consecutive_failures),
  disabledAt: dateOrNull(row.disabled_at),
  createdAt: date(row.created_at),
  updatedAt: date(row.updated_at)
})

const toDelivery = (row: DeliveryRow): WebhookDelivery => ({
  id: row.id,
  accountId: row.account_id as AccountId,
  endpointId: row.endpoint_id,
  eventId: row.event_id,
  eventType: row.event_type as EventType,
  status: row.status as DeliveryStatus,
  attempts: Number(row.attempts),
  nextAttemptAt: dateOrNull(row.next_attempt_at),
  windowStart: date(row.window_start),
  lastAttemptAt: dateOrNull(row.last_attempt_at),
  lastStatusCode: row.last_status_code === null ? null : Number(row.last_status_code),
  lastError: row.last_error,
  deliveredAt: dateOrNull(row.delivered_at),
  createdAt: date(row.created_at)
})

const toEvent = (row: EventRow): OutboxEvent => ({
  id: row.id,
  accountId: row.account_id as AccountId,
  type: row.type as EventType,
  payload: row.payload,
  createdAt: date(row.created_at)
})

/**
 * Writes events to the outbox and one pending delivery per enabled endpoint
 * of the account subscribed to each. Runs inside the caller's transaction.
 */
export const writeEvents = (
  sql: SqlClient.SqlClient,
  events: ReadonlyArray<OutboxEvent>
): Effect.Effect<void, SqlError.SqlError> =>
  Effect.forEach(events, (event) =>
    Effect.gen(function*() {
      const inserted = yield* sql`INSERT INTO webhook_events ${
        sql.insert({
          id: event.id,
          account_id: event.accountId,
          type: event.type,
          payload: event.payload,
          dedupe_key: event.dedupeKey ?? null,
          created_at: event.createdAt
        })
      } ON CONFLICT (dedupe_key) DO NOTHING RETURNING id`
      if (inserted.length === 0) return
      yield* sql`
        INSERT INTO webhook_deliveries
          (id, account_id, endpoint_id, event_id, event_type, status, attempts, next_attempt_at, window_start, created_at)
        SELECT 'dlv_' || substr(md5(${event.id} || e.id), 1, 24), e.account_id, e.id, ${event.id}, ${event.type},
          'pending', 0, ${event.createdAt}, ${event.createdAt}, ${event.createdAt}
        FROM webhook_endpoints e
        WHERE e.account_id = ${event.accountId} AND e.enabled
          AND (e.events = '' OR position(${`,${event.type},`} IN ',' || e.events || ',') > 0)`
    }), { discard: true })

export const makeSqlWebhookStore = (sql: SqlClient.SqlClient): WebhookStoreShape => ({
  createWebhookEndpoint: (endpoint) =>
    sql`INSERT INTO webhook_endpoints ${
      sql.insert({
        id: endpoint.id,
        account_id: endpoint.accountId,
        url: endpoint.url,
        description: endpoint.description,
        events: encodeEvents(endpoint.events),
        enabled: endpoint.enabled,
        secret: endpoint.secret,
        previous_secret: endpoint.previousSecret,
        previous_secret_expires_at: endpoint.previousSecretExpiresAt,
        consecutive_failures: endpoint.consecutiveFailures,
        disabled_at: endpoint.disabledAt,
        created_at: endpoint.createdAt,
        updated_at: endpoint.updatedAt
      })
    }`.pipe(Effect.asVoid, Effect.orDie),

  listWebhookEndpoints: (accountId, page) =>
    paged(sql, "webhook_endpoints", sql`account_id = ${accountId}`, toEndpoint, page).pipe(Effect.orDie),

  getWebhookEndpoint: (accountId, endpointId) =>
    sql<EndpointRow>`SELECT * FROM webhook_endpoints WHERE id = ${endpointId} AND account_id = ${accountId}`.pipe(
      Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toEndpoint)),
      Effect.orDie
    ),

  updateWebhookEndpoint: (accountId, endpointId, patch, now) =>
    Effect.gen(function*() {
      const sets = [sql`updated_at = ${now}`]
      if (patch.url !== undefined) sets.push(sql`url = ${patch.url}`)
      if (patch.description !== undefined) sets.push(sql`description = ${patch.description}`)
      if (patch.events !== undefined) sets.push(sql`events = ${encodeEvents(patch.events)}`)
      if (patch.enabled === true) sets.push(sql`enabled = TRUE, consecutive_failures = 0, disabled_at = NULL`)
      if (patch.enabled === false) sets.push(sql`enabled = FALSE, disabled_at = COALESCE(disabled_at, ${now})`)
      if (patch.rotation !== undefined) {
        sets.push(
          patch.rotation.previousExpiresAt === null
            ? sql`secret = ${patch.rotation.secret}, previous_secret = NULL, previous_secret_expires_at = NULL`
            : sql`previous_secret = secret, previous_secret_expires_at = ${patch.rotation.previousExpiresAt},
                  secret = ${patch.rotation.secret}`
        )
      }
      const rows = yield* sql<EndpointRow>`
        UPDATE webhook_endpoints SET ${sql.csv(sets)}
        WHERE id = ${endpointId} AND account_id = ${accountId} RETURNING *`
      return Option.map(Option.fromNullishOr(rows[0]), toEndpoint)
    }).pipe(Effect.orDie),

  deleteWebhookEndpoint: (accountId, endpointId) =>
    sql.withTransaction(Effect.gen(function*() {
      yield* sql`DELETE FROM webhook_deliveries WHERE endpoint_id = ${endpointId} AND account_id = ${accountId}`
      const rows = yield* sql`DELETE FROM webhook_endpoints WHERE id = ${endpointId} AND account_id = ${accountId} RETURNING id`
      return rows.length > 0
    })).pipe(Effect.orDie),

  listWebhookDeliveries: (accountId, endpointId, page) =>
    paged(
      sql,
      "webhook_deliveries",
      sql`account_id = ${accountId} AND endpoint_id = ${endpointId}`,
      toDelivery,
      page
    ).pipe(Effect.orDie),

  retryWebhookDelivery: (accountId, endpointId, deliveryId, now) =>
    sql<DeliveryRow>`
      UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = ${now}, window_start = ${now}
      WHERE id = ${deliveryId} AND endpoint_id = ${endpointId} AND account_id = ${accountId}
      RETURNING *`.pipe(
      Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toDelivery)),
      Effect.orDie
    ),

  claimWebhookDeliveries: (now, limit, leaseUntil) =>
    sql.withTransaction(Effect.gen(function*() {
      const rows = yield* sql<DeliveryRow & { url: string; payload: string; secret: string; previous_secret: string | null; previous_secret_expires_at: Date | string | null }>`
        WITH due AS (
          SELECT d.id FROM webhook_deliveries d
          JOIN webhook_endpoints e ON e.id = d.endpoint_id
          WHERE d.status = 'pending' AND d.next_attempt_at <= ${now}
            AND (d.lease_until IS NULL OR d.lease_until <= ${now}) AND e.enabled
          ORDER BY d.next_attempt_at, d.id
          LIMIT ${limit}
          FOR UPDATE OF d SKIP LOCKED
        ), claimed AS (
          UPDATE webhook_deliveries w SET lease_until = ${leaseUntil}, attempts = w.attempts + 1
          FROM due WHERE w.id = due.id
          RETURNING w.*
        )
        SELECT c.*, e.url, e.secret, e.previous_secret, e.previous_secret_expires_at, v.payload
        FROM claimed c
        JOIN webhook_endpoints e ON e.id = c.endpoint_id
        JOIN webhook_events v ON v.id = c.event_id`
      return rows.map((row): ClaimedDelivery => {
        const previousExpires = dateOrNull(row.previous_secret_expires_at)
        const previousLive = row.previous_secret !== null && previousExpires !== null &&
          previousExpires.getTime() > now.getTime()
        return {
          delivery: toDelivery(row),
          attempt: Number(row.attempts),
          url: row.url,
          payload: row.payload,
          secrets: previousLive ? [row.secret, row.previous_secret!] : [row.secret]
        }
      })
    })).pipe(Effect.orDie),

  recordWebhookAttempt: (result) =>
    sql.withTransaction(Effect.gen(function*() {
      const status: DeliveryStatus = result.ok ? "succeeded" : result.nextAttemptAt === null ? "failed" : "pending"
      const updated = yield* sql<DeliveryRow>`
        UPDATE webhook_deliveries SET status = ${status}, lease_until = NULL,
          next_attempt_at = ${result.ok ? null : result.nextAttemptAt},
          last_attempt_at = ${result.at}, last_status_code = ${result.statusCode}, last_error = ${result.error},
          delivered_at = ${result.ok ? result.at : null}
        WHERE id = ${result.deliveryId} AND attempts = ${result.attempt} AND status = 'pending'
          AND lease_until IS NOT NULL
        RETURNING *`
      const delivery = updated[0]
      if (delivery === undefined) return "stale" as AttemptRecorded
      if (result.ok) {
        yield* sql`UPDATE webhook_endpoints SET consecutive_failures = 0 WHERE id = ${delivery.endpoint_id}`
        return "recorded" as AttemptRecorded
      }
      const [endpoint] = yield* sql<EndpointRow>`
        UPDATE webhook_endpoints SET consecutive_failures = consecutive_failures + 1
        WHERE id = ${delivery.endpoint_id} RETURNING *`
      if (endpoint === undefined || !endpoint.enabled || Number(endpoint.consecutive_failures) < result.disableAfter) {
        return "recorded" as AttemptRecorded
      }
      yield* sql`
        UPDATE webhook_endpoints SET enabled = FALSE, disabled_at = ${result.at}, updated_at = ${result.at}
        WHERE id = ${endpoint.id}`
      yield* writeEvents(sql, [
        endpointDisabled(endpoint.account_id as AccountId, endpoint, Number(endpoint.consecutive_failures), result.at)
      ])
      return "disabled" as AttemptRecorded
    })).pipe(Effect.orDie),

  setLowBalanceThreshold: (accountId, thresholdMicroUsd) =>
    sql`UPDATE wallets SET low_balance_threshold_micro_usd = ${thresholdMicroUsd} WHERE account_id = ${accountId}`
      .pipe(Effect.asVoid, Effect.orDie),

  listWebhookEvents: (accountId, page) =>
    paged(sql, "webhook_events", sql`account_id = ${accountId}`, toEvent, page).pipe(Effect.orDie)
})
