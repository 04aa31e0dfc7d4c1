import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { BadGateway, BadRequest, Forbidden, NotFound, PaymentRequired, ServiceUnavailable, TooManyRequests } from "../errors.ts"
import { AccessControl, Authentication } from "../middleware.ts"

/**
 * The Anthropic-compatible API: `POST /v1/messages`, with the agent's key as
 * the API key (`Authorization: Bearer`, as Anthropic's SDKs send it, or
 * `x-api-key`), so that Anthropic's clients work with `baseURL` set to the
 * server's address (they append `/v1/messages` themselves). Errors on this
 * route are in Anthropic's shape `{ type: "error", error: { type, message,
 * code, details } }` (wire.ts), `code` holding the Spendgate code; the
 * statuses are the API's own (402 for a cap or an empty wallet, 403 for a
 * killed agent or a capability not allowed, 429 with Retry-After).
 */

const HeaderText = Schema.String.check(Schema.isMaxLength(500))

/** A Messages request in Anthropic's format; fields other than these pass through to the upstream untouched. */
export const MessagesRequest = Schema.StructWithRest(
  Schema.Struct({
    model: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(300)).annotate({
      description: "`service/model` (e.g. `anthropic/claude-sonnet-4-5`), or a bare model id: the cheapest configured service pricing it answers"
    }),
    messages: Schema.Array(Schema.Unknown).check(Schema.isMinLength(1), Schema.isMaxLength(10_000)),
    max_tokens: Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)).annotate({
      description: "Required, as in Anthropic's API: the most output tokens; the call is held at this budget"
    }),
    stream: Schema.optional(Schema.Boolean)
  }),
  [Schema.Record(Schema.String, Schema.Unknown)]
).annotate({
  description: "Anthropic's Messages request (system, tools, tool_choice, stream, metadata, temperature, stop_sequences, …)"
})

export const MessagesHeaders = Schema.Struct({
  "anthropic-version": Schema.optional(HeaderText).annotate({
    description: "Sent upstream (default 2023-06-01) unless the operator's service pins its own version"
  }),
  "anthropic-beta": Schema.optional(HeaderText).annotate({ description: "Sent upstream as given" })
})

export const Message = Schema.Record(Schema.String, Schema.Unknown).annotate({
  description:
    "The upstream's message, unchanged (with `stream: true`, its server-sent events, message_start to message_stop). " +
    "Headers: x-spendgate-quoted-usd-cents and x-spendgate-provider, and on a non-streamed answer " +
    "x-spendgate-charged-usd-cents and x-spendgate-audit-id"
})

/** `GET /v1/models` as Anthropic's clients read it (asked with `anthropic-version`): one page holding every model. */
export const AnthropicModelList = Schema.Struct({
  data: Schema.Array(Schema.Struct({
    type: Schema.Literal("model"),
    id: Schema.String,
    display_name: Schema.String,
    created_at: Schema.String
  })),
  has_more: Schema.Boolean,
  first_id: Schema.NullOr(Schema.String),
  last_id: Schema.NullOr(Schema.String)
}).annotate({ description: "With an anthropic-version header: the Messages models, in Anthropic's list shape" })

export class AnthropicApi extends HttpApiGroup.make("anthropic")
  .add(
    HttpApiEndpoint.post("messages", "/v1/messages", {
      payload: MessagesRequest,
      headers: MessagesHeaders,
      success: Message,
      error: [BadRequest, PaymentRequired, Forbidden, NotFound, TooManyRequests, BadGateway, ServiceUnavailable]
    })
  )
  .middleware(AccessControl)
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({
    title: "Anthropic-compatible",
    description:
      "Messages in Anthropic's wire format; the key as `Authorization: Bearer` or `x-api-key`; " +
      "errors as { type: \"error\", error: { type, message, code, details } }"
  }))
{}
