import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Cents } from "../../src/domain/Money.ts"
import { EventType } from "../../src/webhooks/events.ts"
import { BadRequest, Forbidden, NotFound, ServiceUnavailable } from "./errors.ts"
import { AccessControl, Authentication, IdempotencyKeys } from "./middleware.ts"

/** Webhook endpoints of the account (owners), their deliveries and the secret rotation. */

const Timestamp = Schema.String.annotate({ description: "ISO 8601 timestamp (UTC)" })
const PathId = Schema.String.check(Schema.isMaxLength(64))

const WebhookUrl = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(2048)).annotate({
  description: "http(s) URL the events are posted to; the same address rules as `read` (no loopback, private or metadata addresses)"
})
const Description = Schema.String.check(Schema.isMaxLength(200))
const Events = Schema.Array(EventType).check(Schema.isMaxLength(20)).annotate({
  description: "Event types to receive; [] or absent means every event"
})
const ListQuery = {
  limit: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100 }))),
  offset: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 1_000_000_000 })))
}

export const WebhookEndpointResponse = Schema.Struct({
  id: Schema.String,
  url: Schema.String,
  description: Schema.String,
  events: Schema.Array(EventType),
  enabled: Schema.Boolean,
  consecutiveFailures: Schema.Number,
  disabledAt: Schema.NullOr(Timestamp),
  previousSecretExpiresAt: Schema.NullOr(Timestamp).annotate({
    description: "While set and in the future, deliveries carry a signature with the previous secret too"
  }),
  createdAt: Timestamp,
  updatedAt: Timestamp
})

export const WebhookEndpointWithSecret = Schema.Struct({
  ...WebhookEndpointResponse.fields,
  secret: Schema.String.annotate({ description: "whsec_…: the signing secret. Shown once; store it now" })
})

export const WebhookDeliveryResponse = Schema.Struct({
  id: Schema.String,
  endpointId: Schema.String,
  eventId: Schema.String,
  eventType: EventType,
  status: Schema.Literals(["pending", "succeeded", "failed"]),
  attempts: Schema.Number,
  nextAttemptAt: Schema.NullOr(Timestamp),
  lastAttemptAt: Schema.NullOr(Timestamp),
  lastStatusCode: Schema.NullOr(Schema.Number),
  lastError: Schema.NullOr(Schema.String),
  deliveredAt: Schema.NullOr(Timestamp),
  createdAt: Timestamp
})

const errors = [BadRequest, Forbidden, NotFound, ServiceUnavailable] as const

export class WebhooksApi extends HttpApiGroup.make("webhooks")
  .add(
    HttpApiEndpoint.get("list", "/", {
      query: ListQuery,
      success: Schema.Struct({
        webhooks: Schema.Array(WebhookEndpointResponse),
        total: Schema.Number,
        limit: Schema.Number,
        offset: Schema.Number
      }),
      error: errors
    }),
    HttpApiEndpoint.post("create", "/", {
      payload: Schema.Struct({ url: WebhookUrl, description: Schema.optional(Description), events: Schema.optional(Events) }),
      success: WebhookEndpointWithSecret.pipe(HttpApiSchema.status(201)),
      error: errors
    }).middleware(IdempotencyKeys),
    HttpApiEndpoint.get("get", "/:id", {
      params: { id: PathId },
      success: WebhookEndpointResponse,
      error: errors
    }),
    HttpApiEndpoint.patch("update", "/:id", {
      params: { id: PathId },
      payload: Schema.Struct({
        url: Schema.optional(WebhookUrl),
        description: Schema.optional(Description),
        events: Schema.optional(Events),
        enabled: Schema.optional(Schema.Boolean.annotate({ description: "true also clears the failure run" }))
      }),
      success: WebhookEndpointResponse,
      error: errors
    }),
    HttpApiEndpoint.delete("delete", "/:id", {
      params: { id: PathId },
      success: WebhookEndpointResponse,
      error: errors
    }),
    HttpApiEndpoint.post("rotateSecret", "/:id/rotate-secret", {
      params: { id: PathId },
      payload: Schema.Struct({
        overlapSeconds: Schema.optional(
          Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 604_800 })).annotate({
            description: "How long the previous secret keeps signing too (both signatures are sent), 0 to 604800; default 86400"
          })
        )
      }),
      success: WebhookEndpointWithSecret,
      error: errors
    }).middleware(IdempotencyKeys),
    HttpApiEndpoint.get("deliveries", "/:id/deliveries", {
      params: { id: PathId },
      query: ListQuery,
      success: Schema.Struct({
        deliveries: Schema.Array(WebhookDeliveryResponse),
        total: Schema.Number,
        limit: Schema.Number,
        offset: Schema.Number
      }),
      error: errors
    }),
    HttpApiEndpoint.put("lowBalance", "/alerts/low-balance", {
      payload: Schema.Struct({
        thresholdUsdCents: Schema.NullOr(Cents).annotate({
          description: "wallet.low_balance is sent when a call takes the wallet's value below this (USD cents); 0 or null turns the alert off"
        })
      }),
      success: Schema.Struct({ thresholdUsdCents: Schema.NullOr(Schema.Number) }),
      error: errors
    }),
    HttpApiEndpoint.post("retry", "/:id/deliveries/:deliveryId/retry", {
      params: { id: PathId, deliveryId: PathId },
      success: WebhookDeliveryResponse,
      error: errors
    })
  )
  .middleware(AccessControl)
  .middleware(Authentication)
  .prefix("/v1/webhooks")
  .annotateMerge(OpenApi.annotations({
    title: "Webhooks",
    description: "Signed event deliveries (Standard Webhooks) to the account's endpoints; see docs/webhooks.md"
  }))
{}
