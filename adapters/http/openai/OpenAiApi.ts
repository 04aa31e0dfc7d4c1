import { Schema } from "effect"
import { Multipart } from "effect/http"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { BadGateway, BadRequest, Forbidden, NotFound, PaymentRequired, ServiceUnavailable, TooManyRequests } from "../errors.ts"
import { AnthropicModelList } from "../anthropic/AnthropicApi.ts"
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

const Nullable = <S extends Schema.Top>(schema: S) => Schema.optional(Schema.NullOr(schema))

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

/** The models a chat completion may name; a request with `anthropic-version` gets the Messages models in Anthropic's shape instead. */
export const ModelList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(Schema.Struct({
    id: Schema.String,
    object: Schema.Literal("model"),
    created: Schema.Number,
    owned_by: Schema.String
  }))
})

/** `POST /v1/embeddings`: OpenAI's request, routed by model to an operator upstream; other fields pass through. */
export const EmbeddingsRequest = Schema.StructWithRest(
  Schema.Struct({
    model: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(300)).annotate({
      description: "`service/model` (e.g. `openai-embeddings/text-embedding-3-small`), or a bare model id: the cheapest service pricing it answers"
    }),
    input: Schema.Union([
      Schema.String.check(Schema.isMinLength(1)),
      Schema.Array(Schema.String.check(Schema.isMinLength(1))).check(Schema.isMinLength(1), Schema.isMaxLength(2048)),
      Schema.Array(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))).check(Schema.isMinLength(1)),
      Schema.Array(Schema.Array(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))).check(Schema.isMinLength(1)))
        .check(Schema.isMinLength(1), Schema.isMaxLength(2048))
    ]).annotate({
      description: "A string, up to 2048 strings, token ids, or up to 2048 arrays of token ids. Quoted at one token per UTF-8 byte (token ids: one each), charged from the upstream's usage.prompt_tokens"
    }),
    encoding_format: Nullable(Schema.Literals(["float", "base64"])),
    dimensions: Nullable(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))),
    user: Nullable(Schema.String.check(Schema.isMaxLength(256)))
  }),
  [Schema.Record(Schema.String, Schema.Unknown)]
)

export const Embeddings = Schema.Record(Schema.String, Schema.Unknown).annotate({
  description: "The upstream's answer unchanged ({ object: \"list\", data: [{ object: \"embedding\", index, embedding }], model, usage }). " +
    "Headers: x-spendgate-charged-usd-cents, x-spendgate-quoted-usd-cents, x-spendgate-audit-id, x-spendgate-provider"
})

/** `POST /v1/images/generations`: OpenAI's image request, run as the capability `imagine`. */
export const ImageGenerationRequest = Schema.Struct({
  prompt: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(4000)),
  model: Nullable(Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(200))).annotate({
    description: "The image model of a configured imagine provider (e.g. `dall-e-3`); omitted: the cheapest provider"
  }),
  n: Nullable(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 10 }))).annotate({
    description: "Images in one call, each charged; more than the provider makes per call (4 at most, 1 for dall-e-3) is 400"
  }),
  size: Nullable(Schema.String.check(Schema.isMaxLength(32))).annotate({
    description: "256x256, 512x512, 1024x1024 (default, also for `auto`), 1024x1792 or 1792x1024, as the provider's card prices them"
  }),
  response_format: Nullable(Schema.Literals(["url", "b64_json"])),
  quality: Nullable(Schema.String.check(Schema.isMaxLength(32))).annotate({ description: "Only `auto` or `standard`" }),
  style: Nullable(Schema.String.check(Schema.isMaxLength(32))).annotate({ description: "Not supported: must be omitted" }),
  user: Nullable(Schema.String.check(Schema.isMaxLength(256)))
})

export const ImagesResponse = Schema.Struct({
  created: Schema.Number,
  data: Schema.Array(Schema.Struct({
    b64_json: Schema.optional(Schema.String),
    url: Schema.optional(Schema.String),
    revised_prompt: Schema.optional(Schema.String)
  }))
}).annotate({ description: "Headers: x-spendgate-charged-usd-cents, x-spendgate-quoted-usd-cents, x-spendgate-audit-id, x-spendgate-provider" })

/** `POST /v1/audio/speech`: OpenAI's speech request, run as the capability `speak`. */
export const SpeechRequest = Schema.Struct({
  model: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(200)).annotate({
    description: "A configured speak provider's model (e.g. `tts-1`) or name (e.g. `espeak`)"
  }),
  input: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(4096)),
  voice: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(64)).annotate({
    description: "The provider's voice; OpenAI's named voices (alloy, echo, …) mean the default voice of a provider that has none of them"
  }),
  response_format: Nullable(Schema.Literals(["mp3", "opus", "aac", "flac", "wav", "pcm"])).annotate({
    description: "mp3, opus, flac or wav (aac and pcm are refused); omitted: mp3 where the provider makes it, else wav"
  }),
  speed: Nullable(Schema.Number.check(Schema.isBetween({ minimum: 0.25, maximum: 4 }))).annotate({ description: "Only 1" }),
  instructions: Nullable(Schema.String.check(Schema.isMaxLength(4096))).annotate({ description: "Not supported: must be omitted" }),
  stream_format: Nullable(Schema.Literals(["audio", "sse"])).annotate({ description: "Only `audio` (the whole file)" })
})

export const SpeechAudio = Schema.Uint8Array.pipe(HttpApiSchema.asUint8Array({ contentType: "audio/mpeg" })).annotate({
  description: "The audio bytes, Content-Type per format (audio/mpeg, audio/wav, …)"
})

/** `POST /v1/audio/transcriptions`: OpenAI's multipart upload, run as the capability `transcribe`. */
export const TranscriptionRequest = Schema.Struct({
  file: Multipart.SingleFileSchema,
  model: Schema.String,
  language: Schema.optional(Schema.String),
  prompt: Schema.optional(Schema.String),
  response_format: Schema.optional(Schema.Literals(["json", "text", "verbose_json"])),
  temperature: Schema.optional(Schema.String)
}).pipe(HttpApiSchema.asMultipartStream()).annotate({
  description: "multipart/form-data; `file` at most 750000 bytes (wav, mp3, m4a, mp4, webm, ogg or flac)"
})

export const Transcription = Schema.Record(Schema.String, Schema.Unknown).annotate({
  description: "`{ text }` (json), `{ task, language, duration, text }` (verbose_json), or the text itself (text)"
})

export class OpenAiApi extends HttpApiGroup.make("openai")
  .add(
    HttpApiEndpoint.post("chatCompletions", "/v1/chat/completions", {
      payload: ChatCompletionRequest,
      success: ChatCompletion,
      error: [BadRequest, PaymentRequired, Forbidden, NotFound, TooManyRequests, BadGateway, ServiceUnavailable]
    }),
    HttpApiEndpoint.get("models", "/v1/models", { success: Schema.Union([ModelList, AnthropicModelList]), error: BadRequest }),
    HttpApiEndpoint.post("embeddings", "/v1/embeddings", {
      payload: EmbeddingsRequest,
      success: Embeddings,
      error: [BadRequest, PaymentRequired, Forbidden, NotFound, TooManyRequests, BadGateway, ServiceUnavailable]
    }),
    HttpApiEndpoint.post("imagesGenerations", "/v1/images/generations", {
      payload: ImageGenerationRequest,
      success: ImagesResponse,
      error: [BadRequest, PaymentRequired, Forbidden, NotFound, TooManyRequests, BadGateway, ServiceUnavailable]
    }),
    HttpApiEndpoint.post("audioSpeech", "/v1/audio/speech", {
      payload: SpeechRequest,
      success: SpeechAudio,
      error: [BadRequest, PaymentRequired, Forbidden, NotFound, TooManyRequests, BadGateway, ServiceUnavailable]
    }),
    HttpApiEndpoint.post("audioTranscriptions", "/v1/audio/transcriptions", {
      payload: TranscriptionRequest,
      success: Transcription,
      error: [BadRequest, PaymentRequired, Forbidden, NotFound, TooManyRequests, BadGateway, ServiceUnavailable]
    })
  )
  .middleware(AccessControl)
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({
    title: "OpenAI-compatible",
    description: "Chat completions and models in OpenAI's wire format; errors as { error: { message, type, code, param } }"
  }))
{}
