import { Effect, Option } from "effect"
import type { AccountId } from "../../src/domain/ids.ts"
import { endpointDisabled, type OutboxEvent, subscribes } from "../../src/webhooks/events.ts"
import type {
  AttemptRecorded,
  ClaimedDelivery,
  DeliveryStatus,
  WebhookDelivery,
  WebhookEndpoint,
  WebhookStoreShape
} from "../../src/ports/WebhookStore.ts"

/**
 * The webhook half of the memory store. `emit` is called synchronously by
 * the other writes of the memory store, in the same step as the change it
 * describes; claims are in-process (one step each), with the same lease
 * rule as SQL.
 */

interface DeliveryEntry {
  delivery: WebhookDelivery
  leaseUntil: Date | null
}

const byNewest = (a: { createdAt: Date; id: string }, b: { createdAt: Date; id: string }) =>
  b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0)

const page = <A>(items: ReadonlyArray<A>, request: { limit: number; offset: number }) => ({
  items: items.slice(request.offset, request.offset + request.limit),
  total: items.length
})

export const makeMemoryWebhooks = (): WebhookStoreShape & {
  readonly emit: (events: ReadonlyArray<OutboxEvent>) => void
  readonly lowBalanceThreshold: (accountId: AccountId) => bigint | null
} => {
  const endpoints = new Map<string, WebhookEndpoint>()
  const thresholds = new Map<AccountId, bigint>()
  const dedupeKeys = new Set<string>()
  const events = new Map<string, OutboxEvent>()
  const deliveries = new Map<string, DeliveryEntry>()
  let sequence = 0

  const emit = (batch: ReadonlyArray<OutboxEvent>) => {
    for (const event of batch) {
      if (event.dedupeKey !== undefined) {
        if (dedupeKeys.has(event.dedupeKey)) continue
        dedupeKeys.add(event.dedupeKey)
      }
      events.set(event.id, event)
      for (const endpoint of endpoints.values()) {
        if (endpoint.accountId !== event.accountId || !endpoint.enabled || !subscribes(endpoint.events, event.type)) continue
        const id = `dlv_${(++sequence).toString(36).padStart(8, "0")}${event.id.slice(-16)}`
        deliveries.set(id, {
          leaseUntil: null,
          delivery: {
            id,
            accountId: event.accountId,
            endpointId: endpoint.id,
            eventId: event.id,
            eventType: event.type,
            status: "pending",
            attempts: 0,
            nextAttemptAt: event.createdAt,
            windowStart: event.createdAt,
            lastAttemptAt: null,
            lastStatusCode: null,
            lastError: null,
            deliveredAt: null,
            createdAt: event.createdAt
          }
        })
      }
    }
  }

  const endpointIn = (accountId: AccountId, id: string) => {
    const endpoint = endpoints.get(id)
    return endpoint !== undefined && endpoint.accountId === accountId ? endpoint : undefined
  }

  return {
    emit,
    lowBalanceThreshold: (accountId) => thresholds.get(accountId) ?? null,
    setLowBalanceThreshold: (accountId, threshold) =>
      Effect.sync(() => {
        if (threshold === null) thresholds.delete(accountId)
        else thresholds.set(accountId, threshold)
      }),
    createWebhookEndpoint: (endpoint) =>
      Effect.sync(() => {
        if (endpoints.has(endpoint.id)) throw new Error("duplicate endpoint id")
        endpoints.set(endpoint.id, endpoint)
      }),
    listWebhookEndpoints: (accountId, request) =>
      Effect.sync(() => page([...endpoints.values()].filter((e) => e.accountId === accountId).sort(byNewest), request)),
    getWebhookEndpoint: (accountId, id) => Effect.sync(() => Option.fromNullishOr(endpointIn(accountId, id))),
    updateWebhookEndpoint: (accountId, id, patch, now) =>
      Effect.sync(() => {
        const endpoint = endpointIn(accountId, id)
        if (endpoint === undefined) return Option.none()
        const rotation = patch.rotation
        const next: WebhookEndpoint = {
          ...endpoint,
          url: patch.url ?? endpoint.url,
          description: patch.description ?? endpoint.description,
          events: patch.events ?? endpoint.events,
          ...(patch.enabled === true ? { enabled: true, consecutiveFailures: 0, disabledAt: null } : {}),
          ...(patch.enabled === false ? { enabled: false, disabledAt: endpoint.disabledAt ?? now } : {}),
          ...(rotation === undefined
            ? {}
            : rotation.previousExpiresAt === null
            ? { secret: rotation.secret, previousSecret: null, previousSecretExpiresAt: null }
            : { secret: rotation.secret, previousSecret: endpoint.secret, previousSecretExpiresAt: rotation.previousExpiresAt }),
          updatedAt: now
        }
        endpoints.set(id, next)
        return Option.some(next)
      }),
    deleteWebhookEndpoint: (accountId, id) =>
      Effect.sync(() => {
        if (endpointIn(accountId, id) === undefined) return false
        endpoints.delete(id)
        for (const [key, entry] of deliveries) if (entry.delivery.endpointId === id) deliveries.delete(key)
        return true
      }),
    listWebhookDeliveries: (accountId, endpointId, request) =>
      Effect.sync(() =>
        page(
          [...deliveries.values()].map((e) => e.delivery)
            .filter((d) => d.accountId === accountId && d.endpointId === endpointId)
            .sort(byNewest),
          request
        )
      ),
    retryWebhookDelivery: (accountId, endpointId, deliveryId, now) =>
      Effect.sync(() => {
        const entry = deliveries.get(deliveryId)
        if (entry === undefined || entry.delivery.accountId !== accountId || entry.delivery.endpointId !== endpointId) {
          return Option.none()
        }
        entry.delivery = { ...entry.delivery, status: "pending", nextAttemptAt: now, windowStart: now }
        return Option.some(entry.delivery)
      }),
    claimWebhookDeliveries: (now, limit, leaseUntil) =>
      Effect.sync(() => {
        const due = [...deliveries.values()].filter((entry) => {
          const d = entry.delivery
          const endpoint = endpoints.get(d.endpointId)
          return d.status === "pending" && d.nextAttemptAt !== null && d.nextAttemptAt.getTime() <= now.getTime() &&
            (entry.leaseUntil === null || entry.leaseUntil.getTime() <= now.getTime()) && endpoint?.enabled === true
        }).sort((a, b) =>
          a.delivery.nextAttemptAt!.getTime() - b.delivery.nextAttemptAt!.getTime() ||
          (a.delivery.id < b.delivery.id ? -1 : 1)
        ).slice(0, limit)
        return due.map((entry): ClaimedDelivery => {
          entry.leaseUntil = leaseUntil
          entry.delivery = { ...entry.delivery, attempts: entry.delivery.attempts + 1 }
          const endpoint = endpoints.get(entry.delivery.endpointId)!
          const previousLive = endpoint.previousSecret !== null && endpoint.previousSecretExpiresAt !== null &&
            endpoint.previousSecretExpiresAt.getTime() > now.getTime()
          return {
            delivery: entry.delivery,
            attempt: entry.delivery.attempts,
            url: endpoint.url,
            payload: events.get(entry.delivery.eventId)!.payload,
            secrets: previousLive ? [endpoint.secret, endpoint.previousSecret!] : [endpoint.secret]
          }
        })
      }),
    recordWebhookAttempt: (result) =>
      Effect.sync((): AttemptRecorded => {
        const entry = deliveries.get(result.deliveryId)
        if (
          entry === undefined || entry.delivery.attempts !== result.attempt || entry.delivery.status !== "pending" ||
          entry.leaseUntil === null
        ) return "stale"
        const status: DeliveryStatus = result.ok ? "succeeded" : result.nextAttemptAt === null ? "failed" : "pending"
        entry.leaseUntil = null
        entry.delivery = {
          ...entry.delivery,
          status,
          nextAttemptAt: result.ok ? null : result.nextAttemptAt,
          lastAttemptAt: result.at,
          lastStatusCode: result.statusCode,
          lastError: result.error,
          deliveredAt: result.ok ? result.at : null
        }
        const endpoint = endpoints.get(entry.delivery.endpointId)
        if (endpoint === undefined) return "recorded"
        if (result.ok) {
          endpoints.set(endpoint.id, { ...endpoint, consecutiveFailures: 0 })
          return "recorded"
        }
        const failures = endpoint.consecutiveFailures + 1
        if (!endpoint.enabled || failures < result.disableAfter) {
          endpoints.set(endpoint.id, { ...endpoint, consecutiveFailures: failures })
          return "recorded"
        }
        endpoints.set(endpoint.id, {
          ...endpoint,
          consecutiveFailures: failures,
          enabled: false,
          disabledAt: result.at,
          updatedAt: result.at
        })
        emit([endpointDisabled(endpoint.accountId, endpoint, failures, result.at)])
        return "disabled"
      }),
    listWebhookEvents: (accountId, request) =>
      Effect.sync(() => page([...events.values()].filter((e) => e.accountId === accountId).sort(byNewest), request))
  }
}
