import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Services } from "../../../src/services/Services.ts"
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
    return handlers.handle("messages", ({ payload, headers }) =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        const request = { body: payload, format: "anthropic-messages" as const, headers }
        if (payload.stream === true) {
          return streamedChatResponse(yield* services.chatStream(principal, request).pipe(Effect.catch(failAsHttpError)))
        }
        return chatResponse(yield* services.chat(principal, request).pipe(Effect.catch(failAsHttpError)))
      }))
  })
)
