import { Effect, Option, Result } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { checkCapability } from "../../../src/agents/Access.ts"
import { Store } from "../../../src/ports/Store.ts"
import { CHAT_CAPABILITY, type ChatBody, Services } from "../../../src/services/Services.ts"
import { speaksAnthropic } from "../anthropic/wire.ts"
import { Api } from "../Api.ts"
import { chatResponse, streamedChatResponse } from "../chatResponses.ts"
import { toHttpError } from "../errors.ts"
import { CurrentPrincipal } from "../middleware.ts"

/**
 * The handlers of the OpenAI-compatible routes (OpenAiApi.ts). `GET /v1/models`
 * also answers Anthropic's clients (a request with `anthropic-version`): the
 * Messages models, in Anthropic's list shape.
 */

/** Fields OpenAI's clients may send as null to mean "not set": dropped, so that the quote applies its defaults. */
const NULLABLE = ["stream", "stream_options", "max_tokens", "max_completion_tokens"] as const

export const chatBody = (payload: Readonly<Record<string, unknown>> & { readonly model: string }): ChatBody =>
  Object.fromEntries(Object.entries(payload).filter(([k, v]) => !(v === null && (NULLABLE as ReadonlyArray<string>).includes(k)))) as ChatBody

/** Anthropic's model objects carry a creation time; the gateway knows none (OpenAI's list says 0). */
const EPOCH = new Date(0).toISOString()

export const OpenAiHandlers = HttpApiBuilder.group(
  Api,
  "openai",
  Effect.fn(function*(handlers) {
    const services = yield* Services
    const store = yield* Store
    return handlers
      .handle("chatCompletions", ({ payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const body = chatBody(payload)
          if (body["stream"] === true) {
            return streamedChatResponse(yield* services.chatStream(principal, { body }).pipe(Effect.mapError(toHttpError)))
          }
          return chatResponse(yield* services.chat(principal, { body }).pipe(Effect.mapError(toHttpError)))
        }))
      .handle("models", ({ request }) =>
        Effect.gen(function*() {
          const { agent } = yield* CurrentPrincipal
          const anthropic = speaksAnthropic(request)
          // The models of the capability this agent may use; none when its policy leaves `reason` out.
          const self = yield* store.getAgent(agent.accountId, agent.id)
          const allowed = Option.isSome(self) && Result.isSuccess(checkCapability(self.value.policy, CHAT_CAPABILITY))
          const models = allowed ? yield* services.chatModels(anthropic ? "anthropic-messages" : "openai-chat") : []
          if (anthropic) {
            return {
              data: models.map((m) => ({ type: "model" as const, id: m.id, display_name: m.id, created_at: EPOCH })),
              has_more: false,
              first_id: models[0]?.id ?? null,
              last_id: models.at(-1)?.id ?? null
            }
          }
          return {
            object: "list" as const,
            data: models.map((m) => ({ id: m.id, object: "model" as const, created: 0, owned_by: m.ownedBy }))
          }
        }))
  })
)
