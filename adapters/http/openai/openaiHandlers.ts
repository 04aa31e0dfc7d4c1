import { Effect, Option, Result } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { checkCapability } from "../../../src/agents/Access.ts"
import { microUsdToCents } from "../../../src/domain/Money.ts"
import { Store } from "../../../src/ports/Store.ts"
import { CHAT_CAPABILITY, type ChatBody, Services } from "../../../src/services/Services.ts"
import { Api } from "../Api.ts"
import { failAsHttpError } from "../errors.ts"
import { CurrentPrincipal } from "../middleware.ts"

/** The handlers of the OpenAI-compatible routes (OpenAiApi.ts). */

/** Fields OpenAI's clients may send as null to mean "not set": dropped, so that the quote applies its defaults. */
const NULLABLE = ["stream", "stream_options", "max_tokens", "max_completion_tokens"] as const

export const chatBody = (payload: Readonly<Record<string, unknown>> & { readonly model: string }): ChatBody =>
  Object.fromEntries(Object.entries(payload).filter(([k, v]) => !(v === null && (NULLABLE as ReadonlyArray<string>).includes(k)))) as ChatBody

const cents = (microUsd: bigint) => String(microUsdToCents(microUsd))

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
            const streamed = yield* services.chatStream(principal, body).pipe(Effect.catch(failAsHttpError))
            return HttpServerResponse.stream(streamed.body, {
              status: streamed.status,
              headers: {
                ...streamed.headers,
                "cache-control": "no-cache",
                "x-spendgate-quoted-usd-cents": cents(streamed.quotedMicroUsd),
                "x-spendgate-provider": streamed.service
              },
              contentType: streamed.headers["content-type"] ?? "text/event-stream"
            })
          }
          const result = yield* services.chat(principal, body).pipe(Effect.catch(failAsHttpError))
          const { status, headers, body: answer } = result.response
          const { ["content-type"]: _contentType, ...rest } = headers
          const options = {
            status,
            headers: {
              ...rest,
              "x-spendgate-charged-usd-cents": cents(result.receipt.chargedMicroUsd),
              "x-spendgate-quoted-usd-cents": cents(result.receipt.quotedMicroUsd),
              "x-spendgate-audit-id": result.receipt.auditId,
              "x-spendgate-provider": result.service
            }
          }
          return typeof answer === "string"
            ? HttpServerResponse.text(answer, { ...options, contentType: headers["content-type"] ?? "text/plain" })
            : HttpServerResponse.jsonUnsafe(answer, options)
        }))
      .handle("models", () =>
        Effect.gen(function*() {
          const { agent } = yield* CurrentPrincipal
          // The models of the capability this agent may use; none when its policy leaves `reason` out.
          const self = yield* store.getAgent(agent.accountId, agent.id)
          const allowed = Option.isSome(self) && Result.isSuccess(checkCapability(self.value.policy, CHAT_CAPABILITY))
          const models = allowed ? yield* services.chatModels : []
          return {
            object: "list" as const,
            data: models.map((m) => ({ id: m.id, object: "model" as const, created: 0, owned_by: m.ownedBy }))
          }
        }))
  })
)
