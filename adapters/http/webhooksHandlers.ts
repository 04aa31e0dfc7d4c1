import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import type { WebhookDelivery, WebhookEndpoint } from "../../src/ports/WebhookStore.ts"
import { Webhooks } from "../../src/webhooks/Webhooks.ts"
import { microUsdToCents } from "../../src/domain/Money.ts"
import { Api } from "./Api.ts"
import { toHttpError } from "./errors.ts"
import { CurrentPrincipal } from "./middleware.ts"

const iso = (date: Date | null) => (date === null ? null : date.toISOString())

export const endpointJson = (endpoint: WebhookEndpoint) => ({
  id: endpoint.id,
  url: endpoint.url,
  description: endpoint.description,
  events: endpoint.events,
  enabled: endpoint.enabled,
  consecutiveFailures: endpoint.consecutiveFailures,
  disabledAt: iso(endpoint.disabledAt),
  previousSecretExpiresAt: iso(endpoint.previousSecretExpiresAt),
  createdAt: endpoint.createdAt.toISOString(),
  updatedAt: endpoint.updatedAt.toISOString()
})

export const deliveryJson = (delivery: WebhookDelivery) => ({
  id: delivery.id,
  endpointId: delivery.endpointId,
  eventId: delivery.eventId,
  eventType: delivery.eventType,
  status: delivery.status,
  attempts: delivery.attempts,
  nextAttemptAt: iso(delivery.nextAttemptAt),
  lastAttemptAt: iso(delivery.lastAttemptAt),
  lastStatusCode: delivery.lastStatusCode,
  lastError: delivery.lastError,
  deliveredAt: iso(delivery.deliveredAt),
  createdAt: delivery.createdAt.toISOString()
})

/** Default overlap of a rotated secret: one day. */
const DEFAULT_OVERLAP_SECONDS = 86_400

export const WebhooksHandlers = HttpApiBuilder.group(
  Api,
  "webhooks",
  Effect.fn(function*(handlers) {
    const webhooks = yield* Webhooks
    return handlers
      .handle("list", ({ query }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const page = { limit: query.limit ?? 50, offset: query.offset ?? 0 }
          const result = yield* webhooks.list(principal, page).pipe(Effect.mapError(toHttpError))
          return { webhooks: result.items.map(endpointJson), total: result.total, ...page }
        }))
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const created = yield* webhooks.create(principal, payload).pipe(Effect.mapError(toHttpError))
          return { ...endpointJson(created.endpoint), secret: created.secret }
        }))
      .handle("get", ({ params }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          return endpointJson(yield* webhooks.get(principal, params.id).pipe(Effect.mapError(toHttpError)))
        }))
      .handle("update", ({ params, payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          return endpointJson(yield* webhooks.update(principal, params.id, payload).pipe(Effect.mapError(toHttpError)))
        }))
      .handle("delete", ({ params }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          return endpointJson(yield* webhooks.remove(principal, params.id).pipe(Effect.mapError(toHttpError)))
        }))
      .handle("rotateSecret", ({ params, payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const rotated = yield* webhooks.rotateSecret(
            principal,
            params.id,
            payload.overlapSeconds ?? DEFAULT_OVERLAP_SECONDS
          ).pipe(Effect.mapError(toHttpError))
          return { ...endpointJson(rotated.endpoint), secret: rotated.secret }
        }))
      .handle("deliveries", ({ params, query }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const page = { limit: query.limit ?? 50, offset: query.offset ?? 0 }
          const result = yield* webhooks.deliveries(principal, params.id, page).pipe(Effect.mapError(toHttpError))
          return { deliveries: result.items.map(deliveryJson), total: result.total, ...page }
        }))
      .handle("lowBalance", ({ payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const threshold = yield* webhooks.setLowBalanceThreshold(principal, payload.thresholdUsdCents)
            .pipe(Effect.mapError(toHttpError))
          return { thresholdUsdCents: threshold === null ? null : microUsdToCents(threshold) }
        }))
      .handle("retry", ({ params }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          return deliveryJson(
            yield* webhooks.retry(principal, params.id, params.deliveryId).pipe(Effect.mapError(toHttpError))
          )
        }))
  })
)
