import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { BadGateway, BadRequest, Forbidden, NotFound, PaymentRequired, ServiceUnavailable, TooManyRequests } from "../errors.ts"
import { AccessControl, Authentication } from "../middleware.ts"

/**
 * The OpenAI-compatible API: `POST /v1/chat/completions` and `GET /v1/models`,
 * with the agent's key as the API key, so that OpenAI's clients work with
 * `baseURL` set to `<server>/v1`. Errors on these routes are in OpenAI's shape
 * `{ error: { message, type, code, param } }` (wire.ts), `code` holding the
 * Spendgate code; the statuses are the API's own (402 for a cap or an empty
 * wallet, 403 for a killed agent or a capability not allowed, 429 with
 * Retry-After).
 */

/** A chat completion request in OpenAI's format; fields other than these pass through to the upstream untouched. */
export const ChatCompletionRequest = Schema.StructWithRest(
  Schema.Struct({
    model: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(300)).annotate({
      description: "`service/model` (e.g. `openai/gpt-4o-mini`), or a bare model id: the cheapest configured service pricing it answers"
    }),
    messages: Schema.Array(Schema.Unknown).check(Schema.isMinLength(1), Schema.isMaxLength(10_000)),
    stream: Schema.optional(Schema.NullOr(Schema.Boolean)),
    max_tokens: Schema.optional(Schema.NullOr(Schema.Int)),
    max_completion_tokens: Schema.optional(Schema.NullOr(Schema.Int))
  }),
  [Schema.Record(Schema.String, Schema.Unknown)]
).annotate({
  description: "OpenAI's chat completion request (messages, tools, tool_choice, response_format, stream, stream_options, …)"
})

export const ChatCompletion = Schema.Record(Schema.String, Schema.Unknown).annotate({
  description:
    "The upstream's chat completion, unchanged (with `stream: true`, its server-sent events, ending with the usage chunk and `data: [DONE]`). " +
    "Headers: x-spendgate-quoted-usd-cents, and on a non-streamed answer x-spendgate-charged-usd-cents and x-spendgate-audit-id"
})

export const ModelList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(Schema.Struct({
    id: Schema.String,
    object: Schema.Literal("model"),
    created: Schema.Number,
    owned_by: Schema.String
  }))
})

export class OpenAiApi extends HttpApiGroup.make("openai")
  .add(
    HttpApiEndpoint.post("chatCompletions", "/v1/chat/completions", {
      payload: ChatCompletionRequest,
      success: ChatCompletion,
      error: [BadRequest, PaymentRequired, Forbidden, NotFound, TooManyRequests, BadGateway, ServiceUnavailable]
    }),
    HttpApiEndpoint.get("models", "/v1/models", { success: ModelList, error: BadRequest })
  )
  .middleware(AccessControl)
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({
    title: "OpenAI-compatible",
    description: "Chat completions and models in OpenAI's wire format; errors as { error: { message, type, code, param } }"
  }))
{}
