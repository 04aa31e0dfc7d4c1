import { Effect, Option, Result } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { checkCapability } from "../../../src/agents/Access.ts"
import { Capabilities, Providers } from "../../../src/capabilities/Capabilities.ts"
import type { BuiltCapability, CapabilityIO } from "../../../src/capabilities/schemas.ts"
import type { Capability } from "../../../src/domain/Capability.ts"
import { ValidationError } from "../../../src/domain/errors.ts"
import { Store } from "../../../src/ports/Store.ts"
import { speaksAnthropic } from "../anthropic/wire.ts"
import { CHAT_CAPABILITY, type ChatBody, EMBEDDINGS_CAPABILITY, type EmbeddingsBody, Services } from "../../../src/services/Services.ts"
import { Api } from "../Api.ts"
import { chatResponse, spendHeaders, streamedChatResponse } from "../chatResponses.ts"
import { failAsHttpError } from "../errors.ts"
import { CurrentPrincipal } from "../middleware.ts"
import {
  IMAGE_FIELDS,
  imagesAnswer,
  inOpenAiTerms,
  PROBE_WAV,
  imagineInput,
  mediaModels,
  providerForModel,
  SPEECH_FIELDS,
  speakInput,
  TRANSCRIPTION_FIELDS,
  transcriptionAnswer,
  transcriptionForm,
  unknownModel
} from "./media.ts"

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

const fromResult = <A, E>(result: Result.Result<A, E>): Effect.Effect<A, E> =>
  Result.isSuccess(result) ? Effect.succeed(result.success) : Effect.fail(result.failure)

/** The request's body as a form; a body that is not one is a 400. */
const readForm = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const contentType = request.headers["content-type"] ?? ""
  // A body over the limit is a defect the envelope answers 413.
  const bytes = yield* Effect.orDie(request.arrayBuffer)
  return yield* Effect.tryPromise({
    try: () => new Response(bytes, { headers: { "content-type": contentType } }).formData(),
    catch: () =>
      new ValidationError({
        message: "The request body is not a readable multipart/form-data form",
        issues: [{ path: "", message: "Expected multipart/form-data with a file part" }]
      })
  })
})

export const OpenAiHandlers = HttpApiBuilder.group(
  Api,
  "openai",
  Effect.fn(function*(handlers) {
    const services = yield* Services
    const store = yield* Store
    const capabilities = yield* Capabilities
    const providers = yield* Providers
    const run = <C extends BuiltCapability>(capability: C, input: CapabilityIO[C]["input"]) =>
      Effect.flatMap(CurrentPrincipal, (principal) => capabilities.execute(principal, capability, input))
    // The metered handlers' generators are made once, not per request (docs/performance.md, "Generators made once").
    const chatCompletions = Effect.fnUntraced(function*(body: ChatBody) {
      const principal = yield* CurrentPrincipal
      if (body["stream"] === true) {
        return streamedChatResponse(yield* services.chatStream(principal, { body }).pipe(Effect.catch(failAsHttpError)))
      }
      return chatResponse(yield* services.chat(principal, { body }).pipe(Effect.catch(failAsHttpError)))
    })
    return handlers
      .handle("chatCompletions", ({ payload }) => chatCompletions(chatBody(payload)))
      .handle("embeddings", ({ payload }) =>
        Effect.flatMap(CurrentPrincipal, (principal) =>
          Effect.map(services.embeddings(principal, payload as EmbeddingsBody).pipe(Effect.catch(failAsHttpError)), chatResponse)))
      .handle("models", ({ request }) =>
        Effect.gen(function*() {
          const { agent } = yield* CurrentPrincipal
          const anthropic = speaksAnthropic(request)
          // The models of the capability this agent may use; none when its policy leaves `reason` out.
          const self = yield* store.getAgent(agent.accountId, agent.id)
          const may = (capability: Capability) => Option.isSome(self) && Result.isSuccess(checkCapability(self.value.policy, capability))
          if (anthropic) {
            const messages = may(CHAT_CAPABILITY) ? yield* services.chatModels("anthropic-messages") : []
            return {
              data: messages.map((m) => ({ type: "model" as const, id: m.id, display_name: m.id, created_at: EPOCH })),
              has_more: false,
              first_id: messages[0]?.id ?? null,
              last_id: messages.at(-1)?.id ?? null
            }
          }
          const models = [
            ...(may(CHAT_CAPABILITY) ? yield* services.chatModels("openai-chat") : []),
            ...(may(EMBEDDINGS_CAPABILITY) ? yield* services.embeddingModels : []),
            ...mediaModels(providers.all).filter((m) => may(m.capability))
          ]
          const seen = new Set<string>()
          return {
            object: "list" as const,
            data: models.filter((m) => !seen.has(m.id) && seen.add(m.id) !== undefined)
              .map((m) => ({ id: m.id, object: "model" as const, created: 0, owned_by: m.ownedBy }))
          }
        }))
      .handle("imagesGenerations", ({ payload }) =>
        Effect.gen(function*() {
          const input = yield* fromResult(imagineInput(payload))
          const result = yield* run("imagine", input).pipe(Effect.mapError(inOpenAiTerms(IMAGE_FIELDS)))
          return HttpServerResponse.jsonUnsafe(imagesAnswer(result.data, Math.floor(Date.now() / 1000)), {
            headers: spendHeaders(result.receipt, result.provider)
          })
        }).pipe(Effect.catch(failAsHttpError)))
      .handle("audioSpeech", ({ payload }) =>
        Effect.gen(function*() {
          const sample = { text: "a", voice: payload.voice }
          const provider = providerForModel(providers.all, "speak", payload.model, sample) ??
            providerForModel(providers.all, "speak", payload.model, { text: "a" })
          if (provider === undefined) return yield* unknownModel(payload.model, "speak")
          const input = yield* fromResult(speakInput(provider, payload))
          const result = yield* run("speak", input).pipe(Effect.mapError(inOpenAiTerms(SPEECH_FIELDS)))
          return HttpServerResponse.uint8Array(Buffer.from(result.data.audio, "base64"), {
            contentType: result.data.mimeType,
            headers: spendHeaders(result.receipt, result.provider)
          })
        }).pipe(Effect.catch(failAsHttpError)))
      .handle("audioTranscriptions", () =>
        Effect.gen(function*() {
          const form = yield* readForm
          const read = yield* fromResult(yield* Effect.promise(() => transcriptionForm(form)))
          const provider = providerForModel(providers.all, "transcribe", read.model, PROBE_WAV)
          if (provider === undefined) return yield* unknownModel(read.model, "transcribe")
          const result = yield* run("transcribe", { ...read.input, provider: provider.name }).pipe(
            Effect.mapError(inOpenAiTerms(TRANSCRIPTION_FIELDS))
          )
          const answer = transcriptionAnswer(result.data, read.format)
          const headers = spendHeaders(result.receipt, result.provider)
          return typeof answer === "string"
            ? HttpServerResponse.text(answer, { headers, contentType: "text/plain; charset=utf-8" })
            : HttpServerResponse.jsonUnsafe(answer, { headers })
        }).pipe(Effect.catch(failAsHttpError)))
  })
)
