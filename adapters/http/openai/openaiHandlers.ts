import { Effect, Option, Result } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { checkCapability } from "../../../src/agents/Access.ts"
import { Capabilities, Providers } from "../../../src/capabilities/Capabilities.ts"
import type { BuiltCapability, CapabilityIO } from "../../../src/capabilities/schemas.ts"
import type { Capability } from "../../../src/domain/Capability.ts"
import { ValidationError } from "../../../src/domain/errors.ts"
import type { SpendReceipt } from "../../../src/wallet/Spend.ts"
import { microUsdToCents } from "../../../src/domain/Money.ts"
import { Store } from "../../../src/ports/Store.ts"
import { CHAT_CAPABILITY, type ChatBody, EMBEDDINGS_CAPABILITY, type EmbeddingsBody, Services } from "../../../src/services/Services.ts"
import { Api } from "../Api.ts"
import { toHttpError } from "../errors.ts"
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

/** The handlers of the OpenAI-compatible routes (OpenAiApi.ts). */

/** Fields OpenAI's clients may send as null to mean "not set": dropped, so that the quote applies its defaults. */
const NULLABLE = ["stream", "stream_options", "max_tokens", "max_completion_tokens"] as const

export const chatBody = (payload: Readonly<Record<string, unknown>> & { readonly model: string }): ChatBody =>
  Object.fromEntries(Object.entries(payload).filter(([k, v]) => !(v === null && (NULLABLE as ReadonlyArray<string>).includes(k)))) as ChatBody

const cents = (microUsd: bigint) => String(microUsdToCents(microUsd))

/** The Spendgate headers of a settled call. */
export const spendHeaders = (receipt: SpendReceipt, provider: string) => ({
  "x-spendgate-charged-usd-cents": cents(receipt.chargedMicroUsd),
  "x-spendgate-quoted-usd-cents": cents(receipt.quotedMicroUsd),
  "x-spendgate-audit-id": receipt.auditId,
  "x-spendgate-provider": provider
})

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
    return handlers
      .handle("chatCompletions", ({ payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const body = chatBody(payload)
          if (body["stream"] === true) {
            const streamed = yield* services.chatStream(principal, body).pipe(Effect.mapError(toHttpError))
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
          const result = yield* services.chat(principal, body).pipe(Effect.mapError(toHttpError))
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
      .handle("embeddings", ({ payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const result = yield* services.embeddings(principal, payload as EmbeddingsBody).pipe(Effect.mapError(toHttpError))
          const { status, headers, body: answer } = result.response
          const { ["content-type"]: _contentType, ...rest } = headers
          const options = { status, headers: { ...rest, ...spendHeaders(result.receipt, result.service) } }
          return typeof answer === "string"
            ? HttpServerResponse.text(answer, { ...options, contentType: headers["content-type"] ?? "text/plain" })
            : HttpServerResponse.jsonUnsafe(answer, options)
        }))
      .handle("models", () =>
        Effect.gen(function*() {
          const { agent } = yield* CurrentPrincipal
          // The models of the capability this agent may use; none when its policy leaves `reason` out.
          const self = yield* store.getAgent(agent.accountId, agent.id)
          const may = (capability: Capability) => Option.isSome(self) && Result.isSuccess(checkCapability(self.value.policy, capability))
          const models = [
            ...(may(CHAT_CAPABILITY) ? yield* services.chatModels : []),
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
        }).pipe(Effect.mapError(toHttpError)))
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
        }).pipe(Effect.mapError(toHttpError)))
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
        }).pipe(Effect.mapError(toHttpError)))
  })
)
