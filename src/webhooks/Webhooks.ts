import { Clock, Context, Duration, Effect, Layer, Option, Random, Schedule, Schema } from "effect"
import { requireOwner } from "../agents/Access.ts"
import type { Principal } from "../domain/Agent.ts"
import { type Forbidden, NotFound, ValidationError } from "../domain/errors.ts"
import { sortableRandomId } from "../domain/ids.ts"
import type { UnsafeUrl } from "../ports/Net.ts"
import { Store } from "../ports/Store.ts"
import type { PageRequest } from "../ports/Store.ts"
import type { ClaimedDelivery, EndpointPatch, WebhookDelivery, WebhookEndpoint } from "../ports/WebhookStore.ts"
import { WebhookTransport } from "../ports/WebhookTransport.ts"
import type { EventType } from "./events.ts"
import { defaultRetryRule, nextAttemptAt, type RetryRule } from "./retry.ts"
import { newWebhookSecret, signedHeaders } from "./signing.ts"

/**
 * Webhook endpoints (owners only) and the delivery worker. Events are
 * written by the stores in the transaction of the change they describe
 * (src/webhooks/events.ts); this service only reads the delivery rows they
 * produced, posts them signed (Standard Webhooks), and records each attempt.
 */

export class WebhooksUnavailable extends Schema.TaggedError<WebhooksUnavailable>()("WebhooksUnavailable", {}) {
  readonly code = "WEBHOOKS_UNAVAILABLE"
  override get message() {
    return "Webhook delivery is not configured on this server"
  }
}

export interface WebhookSettings {
  /** Most endpoints per account. */
  readonly maxEndpoints: number
  /** A run of this many failed attempts in a row disables the endpoint. */
  readonly disableAfter: number
  readonly requestTimeoutMs: number
  /** How long a claimed delivery stays leased to its worker (longer than the request timeout). */
  readonly leaseMs: number
  readonly batch: number
  /** Deliveries posted at once by one worker. */
  readonly concurrency: number
  readonly everyMs: number
  readonly retry: RetryRule
  /** Longest overlap of a rotated secret. */
  readonly maxOverlapSeconds: number
}

export const defaultWebhookSettings: WebhookSettings = {
  maxEndpoints: 20,
  disableAfter: 20,
  requestTimeoutMs: 10_000,
  leaseMs: 60_000,
  batch: 50,
  concurrency: 4,
  everyMs: 1_000,
  retry: defaultRetryRule,
  maxOverlapSeconds: 7 * 24 * 60 * 60
}

export const WebhookSettings = Context.Reference<WebhookSettings>("spendgate/WebhookSettings", {
  defaultValue: () => defaultWebhookSettings
})

export interface EndpointInput {
  readonly url: string
  readonly description?: string | undefined
  readonly events?: ReadonlyArray<EventType> | undefined
}

export interface EndpointUpdate {
  readonly url?: string | undefined
  readonly description?: string | undefined
  readonly events?: ReadonlyArray<EventType> | undefined
  readonly enabled?: boolean | undefined
}

export interface EndpointWithSecret {
  readonly endpoint: WebhookEndpoint
  /** Shown once. */
  readonly secret: string
}

export type WebhookError = Forbidden | NotFound | UnsafeUrl | ValidationError | WebhooksUnavailable

export const newEndpointId = () => `whe_${sortableRandomId()}`

/** Event types named once each, in a stable order. */
const uniqueEvents = (events: ReadonlyArray<EventType> | undefined) =>
  events === undefined ? undefined : [...new Set(events)]

export class Webhooks extends Context.Service<Webhooks, {
  readonly create: (principal: Principal, input: EndpointInput) => Effect.Effect<EndpointWithSecret, WebhookError>
  readonly list: (
    principal: Principal,
    page: PageRequest
  ) => Effect.Effect<{ readonly items: ReadonlyArray<WebhookEndpoint>; readonly total: number }, WebhookError>
  readonly get: (principal: Principal, id: string) => Effect.Effect<WebhookEndpoint, WebhookError>
  readonly update: (principal: Principal, id: string, input: EndpointUpdate) => Effect.Effect<WebhookEndpoint, WebhookError>
  readonly remove: (principal: Principal, id: string) => Effect.Effect<WebhookEndpoint, WebhookError>
  /** A new secret, shown once; the previous one keeps signing for `overlapSeconds` (0: replaced at once). */
  readonly rotateSecret: (
    principal: Principal,
    id: string,
    overlapSeconds: number
  ) => Effect.Effect<EndpointWithSecret & { readonly previousSecretExpiresAt: Date | null }, WebhookError>
  readonly deliveries: (
    principal: Principal,
    id: string,
    page: PageRequest
  ) => Effect.Effect<{ readonly items: ReadonlyArray<WebhookDelivery>; readonly total: number }, WebhookError>
  readonly retry: (principal: Principal, id: string, deliveryId: string) => Effect.Effect<WebhookDelivery, WebhookError>
  /** The owner's low-balance alert (µUSD; null or 0 turns it off); returns what is now set. */
  readonly setLowBalanceThreshold: (principal: Principal, thresholdMicroUsd: bigint | null) => Effect.Effect<bigint | null, WebhookError>
  /** One pass of the worker: claims due deliveries, posts them, records each attempt; returns how many were attempted. */
  readonly deliverDue: Effect.Effect<number>
}>()("spendgate/Webhooks") {
  static readonly layer = Layer.effect(
    Webhooks,
    Effect.gen(function*() {
      const store = yield* Store
      const transport = yield* Effect.serviceOption(WebhookTransport)
      const settings = yield* WebhookSettings
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

      const checkUrl = (url: string) =>
        Option.match(transport, {
          onNone: () => Effect.fail(new WebhooksUnavailable()),
          onSome: (t) => t.check(url)
        })

      const owned = (principal: Principal, id: string, action: string) =>
        Effect.gen(function*() {
          yield* requireOwner(principal, action)
          const found = yield* store.getWebhookEndpoint(principal.agent.accountId, id)
          if (Option.isNone(found)) return yield* new NotFound({ resource: "Webhook endpoint" })
          return found.value
        })

      const create = Effect.fn("Webhooks.create")(function*(principal: Principal, input: EndpointInput) {
        yield* requireOwner(principal, "manage webhooks")
        yield* checkUrl(input.url)
        const existing = yield* store.listWebhookEndpoints(principal.agent.accountId, { limit: 1, offset: 0 })
        if (existing.total >= settings.maxEndpoints) {
          return yield* new ValidationError({
            message: `An account has at most ${settings.maxEndpoints} webhook endpoints`,
            issues: [{ path: "url", message: `at most ${settings.maxEndpoints} endpoints per account` }]
          })
        }
        const at = yield* now
        const secret = newWebhookSecret()
        const endpoint: WebhookEndpoint = {
          id: newEndpointId(),
          accountId: principal.agent.accountId,
          url: input.url,
          description: input.description ?? "",
          events: uniqueEvents(input.events) ?? [],
          enabled: true,
          secret,
          previousSecret: null,
          previousSecretExpiresAt: null,
          consecutiveFailures: 0,
          disabledAt: null,
          createdAt: at,
          updatedAt: at
        }
        yield* store.createWebhookEndpoint(endpoint)
        return { endpoint, secret }
      })

      const list = Effect.fn("Webhooks.list")(function*(principal: Principal, page: PageRequest) {
        yield* requireOwner(principal, "manage webhooks")
        return yield* store.listWebhookEndpoints(principal.agent.accountId, page)
      })

      const get = Effect.fn("Webhooks.get")(function*(principal: Principal, id: string) {
        return yield* owned(principal, id, "manage webhooks")
      })

      const update = Effect.fn("Webhooks.update")(function*(principal: Principal, id: string, input: EndpointUpdate) {
        yield* owned(principal, id, "manage webhooks")
        if (input.url !== undefined) yield* checkUrl(input.url)
        const patch: EndpointPatch = {
          url: input.url,
          description: input.description,
          events: uniqueEvents(input.events),
          enabled: input.enabled
        }
        const updated = yield* store.updateWebhookEndpoint(principal.agent.accountId, id, patch, yield* now)
        if (Option.isNone(updated)) return yield* new NotFound({ resource: "Webhook endpoint" })
        return updated.value
      })

      const remove = Effect.fn("Webhooks.delete")(function*(principal: Principal, id: string) {
        const endpoint = yield* owned(principal, id, "manage webhooks")
        const deleted = yield* store.deleteWebhookEndpoint(principal.agent.accountId, id)
        if (!deleted) return yield* new NotFound({ resource: "Webhook endpoint" })
        return endpoint
      })

      const rotateSecret = Effect.fn("Webhooks.rotateSecret")(function*(
        principal: Principal,
        id: string,
        overlapSeconds: number
      ) {
        yield* owned(principal, id, "manage webhooks")
        const at = yield* now
        const seconds = Math.min(Math.max(Math.floor(overlapSeconds), 0), settings.maxOverlapSeconds)
        const previousSecretExpiresAt = seconds === 0 ? null : new Date(at.getTime() + seconds * 1000)
        const secret = newWebhookSecret()
        const updated = yield* store.updateWebhookEndpoint(
          principal.agent.accountId,
          id,
          { rotation: { secret, previousExpiresAt: previousSecretExpiresAt } },
          at
        )
        if (Option.isNone(updated)) return yield* new NotFound({ resource: "Webhook endpoint" })
        return { endpoint: updated.value, secret, previousSecretExpiresAt }
      })

      const deliveries = Effect.fn("Webhooks.deliveries")(function*(principal: Principal, id: string, page: PageRequest) {
        yield* owned(principal, id, "manage webhooks")
        return yield* store.listWebhookDeliveries(principal.agent.accountId, id, page)
      })

      const retry = Effect.fn("Webhooks.retry")(function*(principal: Principal, id: string, deliveryId: string) {
        yield* owned(principal, id, "manage webhooks")
        const retried = yield* store.retryWebhookDelivery(principal.agent.accountId, id, deliveryId, yield* now)
        if (Option.isNone(retried)) return yield* new NotFound({ resource: "Webhook delivery" })
        return retried.value
      })

      const setLowBalanceThreshold = Effect.fn("Webhooks.setLowBalanceThreshold")(function*(
        principal: Principal,
        thresholdMicroUsd: bigint | null
      ) {
        yield* requireOwner(principal, "set the low-balance alert")
        const threshold = thresholdMicroUsd === null || thresholdMicroUsd <= 0n ? null : thresholdMicroUsd
        yield* store.setLowBalanceThreshold(principal.agent.accountId, threshold)
        return threshold
      })

      /** Posts one claimed delivery and records the attempt (never fails: a failure is a recorded attempt). */
      const attempt = (sender: WebhookTransport["Service"], claimed: ClaimedDelivery) =>
        Effect.gen(function*() {
          const sentAt = yield* now
          const headers = yield* signedHeaders(
            claimed.secrets,
            claimed.delivery.eventId,
            Math.floor(sentAt.getTime() / 1000),
            claimed.payload
          )
          const outcome = yield* sender.post({
            url: claimed.url,
            headers,
            body: claimed.payload,
            timeoutMs: settings.requestTimeoutMs
          }).pipe(
            Effect.timeout(Duration.millis(settings.requestTimeoutMs)),
            Effect.map((response) => ({
              ok: response.status >= 200 && response.status < 300,
              statusCode: response.status as number | null,
              error: response.status >= 200 && response.status < 300 ? null : `HTTP ${response.status}`
            })),
            Effect.catch((error) =>
              Effect.succeed({
                ok: false,
                statusCode: null,
                error: String((error as { message?: unknown }).message ?? error).slice(0, 500)
              })
            )
          )
          const at = yield* now
          const random = yield* Random.next
          yield* store.recordWebhookAttempt({
            deliveryId: claimed.delivery.id,
            attempt: claimed.attempt,
            at,
            ok: outcome.ok,
            statusCode: outcome.statusCode,
            error: outcome.error,
            nextAttemptAt: outcome.ok
              ? null
              : nextAttemptAt(settings.retry, claimed.attempt, claimed.delivery.windowStart, at, random),
            disableAfter: settings.disableAfter
          })
        })

      const deliverDue = Option.match(transport, {
        onNone: () => Effect.succeed(0),
        onSome: (sender) =>
          Effect.gen(function*() {
            const at = yield* now
            const claimed = yield* store.claimWebhookDeliveries(
              at,
              settings.batch,
              new Date(at.getTime() + settings.leaseMs)
            )
            yield* Effect.forEach(claimed, (c) => attempt(sender, c), {
              concurrency: settings.concurrency,
              discard: true
            })
            return claimed.length
          }).pipe(Effect.withSpan("Webhooks.deliverDue"))
      })

      return Webhooks.of({
        create,
        list,
        get,
        update,
        remove,
        rotateSecret,
        deliveries,
        retry,
        setLowBalanceThreshold,
        deliverDue
      })
    })
  )

  /** The delivery worker: a pass every `everyMs` (sooner while passes are full), for the life of the layer. */
  static readonly worker = () =>
    Layer.effectDiscard(
      Effect.gen(function*() {
        const webhooks = yield* Webhooks
        const settings = yield* WebhookSettings
        const pass = Effect.gen(function*() {
          for (let round = 0; round < 20; round++) {
            const attempted = yield* webhooks.deliverDue
            if (attempted < settings.batch) break
          }
        }).pipe(Effect.catchCause((cause) => Effect.logError("Webhook delivery pass failed", cause)))
        yield* pass.pipe(Effect.repeat(Schedule.spaced(Duration.millis(settings.everyMs))), Effect.forkScoped)
      })
    )
}
