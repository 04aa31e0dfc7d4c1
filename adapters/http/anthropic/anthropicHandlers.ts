import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { type ChatRequest, Services } from "../../../src/services/Services.ts"
import { Api } from "../Api.ts"
import { chatResponse, streamedChatResponse } from "../chatResponses.ts"
import { failAsHttpError } from "../errors.ts"
import { CurrentPrincipal } from "../middleware.ts"

/**
 * The handler of the Anthropic-compatible route (AnthropicApi.ts): the body
 * goes through as a chat call in the `anthropic-messages` format, with the
 * caller's `anthropic-version` and `anthropic-beta` for the upstream.
 */
export const AnthropicHandlers = HttpApiBuilder.group(
  Api,
  "anthropic",
  Effect.fn(function*(handlers) {
    const services = yield* Services
    // Made once, not per request (docs/performance.md, "Generators made once").
    const messages = Effect.fnUntraced(function*(request: ChatRequest) {
      const principal = yield* CurrentPrincipal
      if (request.body["stream"] === true) {
        return streamedChatResponse(yield* services.chatStream(principal, request).pipe(Effect.catch(failAsHttpError)))
      }
      return chatResponse(yield* services.chat(principal, request).pipe(Effect.catch(failAsHttpError)))
    })
    return handlers.handle("messages", ({ payload, headers }) =>
      messages({ body: payload, format: "anthropic-messages" as const, headers }))
  })
)
