import type { Effect, Option } from "effect"
import type { AccountId } from "../domain/ids.ts"
import type { EventType, OutboxEvent } from "../webhooks/events.ts"

/**
 * The webhook half of the storage port (part of `StoreShape`, so that the
 * outbox rows are written by the same store, in the same transaction, as the
 * change they describe). Endpoints, the outbox and one delivery row per
 * (event, endpoint) written with the event; workers claim due rows (SQL:
 * `FOR UPDATE SKIP LOCKED` plus a lease), so two instances never run one
 * attempt twice.
 */

export interface WebhookEndpoint {
  readonly id: string
  readonly accountId: AccountId
  readonly url: string
  readonly description: string
  /** Empty: every event. */
  readonly events: ReadonlyArray<EventType>
  readonly enabled: boolean
  /** `whsec_…`; it signs, so it is kept as given (never shown again after creation or rotation). */
  readonly secret: string
  readonly previousSecret: string | null
  readonly previousSecretExpiresAt: Date | null
  readonly consecutiveFailures: number
  readonly disabledAt: Date | null
  readonly createdAt: Date
  readonly updatedAt: Date
}

export type DeliveryStatus = "pending" | "succeeded" | "failed"

export interface WebhookDelivery {
  readonly id: string
  readonly accountId: AccountId
  readonly endpointId: string
  readonly eventId: string
  readonly eventType: EventType
  readonly status: DeliveryStatus
  readonly attempts: number
  /** When the next attempt is due (null once succeeded or given up). */
  readonly nextAttemptAt: Date | null
  /** Retries stop 3 days after this instant (the event's time, or a manual retry's). */
  readonly windowStart: Date
  readonly lastAttemptAt: Date | null
  readonly lastStatusCode: number | null
  readonly lastError: string | null
  readonly deliveredAt: Date | null
  readonly createdAt: Date
}

/** A delivery a worker holds the lease of: everything needed to post it. */
export interface ClaimedDelivery {
  readonly delivery: WebhookDelivery
  /** The attempt number this claim owns (the delivery's `attempts` after the claim). */
  readonly attempt: number
  readonly url: string
  readonly payload: string
  /** The current secret, and the previous one while its overlap lasts. */
  readonly secrets: ReadonlyArray<string>
}

export interface EndpointPatch {
  readonly url?: string | undefined
  readonly description?: string | undefined
  readonly events?: ReadonlyArray<EventType> | undefined
  /** true also clears the failure run. */
  readonly enabled?: boolean | undefined
  readonly rotation?: { readonly secret: string; readonly previousExpiresAt: Date | null } | undefined
}

export interface AttemptResult {
  readonly deliveryId: string
  /** The attempt the claim owns; a result for any other attempt is ignored ("stale"). */
  readonly attempt: number
  readonly at: Date
  readonly ok: boolean
  readonly statusCode: number | null
  readonly error: string | null
  /** On failure: when to try again; null gives up (status `failed`). */
  readonly nextAttemptAt: Date | null
  /** The endpoint is disabled when its run of failed attempts reaches this. */
  readonly disableAfter: number
}

export type AttemptRecorded = "recorded" | "stale" | "disabled"

export interface WebhookStoreShape {
  readonly createWebhookEndpoint: (endpoint: WebhookEndpoint) => Effect.Effect<void>
  /** Newest first. */
  readonly listWebhookEndpoints: (
    accountId: AccountId,
    page: { readonly limit: number; readonly offset: number }
  ) => Effect.Effect<{ readonly items: ReadonlyArray<WebhookEndpoint>; readonly total: number }>
  readonly getWebhookEndpoint: (accountId: AccountId, endpointId: string) => Effect.Effect<Option.Option<WebhookEndpoint>>
  readonly updateWebhookEndpoint: (
    accountId: AccountId,
    endpointId: string,
    patch: EndpointPatch,
    now: Date
  ) => Effect.Effect<Option.Option<WebhookEndpoint>>
  /** Deletes the endpoint and its deliveries (the events stay). */
  readonly deleteWebhookEndpoint: (accountId: AccountId, endpointId: string) => Effect.Effect<boolean>
  /** Newest first. */
  readonly listWebhookDeliveries: (
    accountId: AccountId,
    endpointId: string,
    page: { readonly limit: number; readonly offset: number }
  ) => Effect.Effect<{ readonly items: ReadonlyArray<WebhookDelivery>; readonly total: number }>
  /**
   * Makes the delivery due now (pending, a new 3-day window). A lease held by
   * a worker still stands: the retry runs once that attempt is recorded.
   */
  readonly retryWebhookDelivery: (
    accountId: AccountId,
    endpointId: string,
    deliveryId: string,
    now: Date
  ) => Effect.Effect<Option.Option<WebhookDelivery>>
  /**
   * Up to `limit` pending deliveries due at `now`, of enabled endpoints, whose
   * lease is free: each is leased until `leaseUntil` and its attempt count
   * raised, atomically, so no other worker claims it meanwhile.
   */
  readonly claimWebhookDeliveries: (now: Date, limit: number, leaseUntil: Date) => Effect.Effect<ReadonlyArray<ClaimedDelivery>>
  /**
   * Records the outcome of a claimed attempt and frees the lease; updates the
   * endpoint's failure run, disabling it (and writing a
   * `webhook_endpoint.disabled` event, in the same step) when it reaches
   * `disableAfter`.
   */
  readonly recordWebhookAttempt: (result: AttemptResult) => Effect.Effect<AttemptRecorded>
  /** The owner's low-balance alert (µUSD; null: none). A debit that crosses it writes `wallet.low_balance`. */
  readonly setLowBalanceThreshold: (accountId: AccountId, thresholdMicroUsd: bigint | null) => Effect.Effect<void>
  /** The outbox, newest first (operators and tests). */
  readonly listWebhookEvents: (
    accountId: AccountId,
    page: { readonly limit: number; readonly offset: number }
  ) => Effect.Effect<{ readonly items: ReadonlyArray<OutboxEvent>; readonly total: number }>
}
