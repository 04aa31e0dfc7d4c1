/**
 * `reason` over any OpenAI-compatible Chat Completions API: OpenAI itself,
 * OpenRouter, Groq, or a self-hosted llama.cpp / vLLM / Ollama server, told
 * apart only by `name`, `baseUrl` and the operator's price card.
 *
 * Wire format (POST {baseUrl}/chat/completions, non-streaming):
 *   request  { model, messages: [{ role: "system", content }?, { role: "user", content }],
 *              max_tokens, temperature?, stream: false }
 *   response { id, object: "chat.completion", created, model,
 *              choices: [{ index, message: { role, content }, finish_reason, logprobs }],
 *              usage: { prompt_tokens, completion_tokens, total_tokens,
 *                       prompt_tokens_details?: { cached_tokens } } }
 *   error    { error: { message, type, param, code } } with a 4xx/5xx status
 *
 * Billing (decisions §2): the upstream is always called with the quote's
 * `max_tokens`, so the completion cannot outgrow the quote. The call is
 * metered from the upstream's own `usage` at the quoted model's prices (the
 * `model` an upstream answers with is often a dated alias that is not on the
 * price card). Prompt tokens OpenAI served from its prompt cache
 * (`prompt_tokens_details.cached_tokens`, a part of `prompt_tokens`) are
 * charged at the card's cached-input price; a cached count that is missing or
 * unreadable is none. An upstream that answers without any `usage` is charged the
 * quote, its upper bound, and `usage` then reports the bounds charged; a
 * `usage` that is present but unreadable makes the answer malformed.
 *
 * Every failure is a `ProviderFailure` (never a defect): timeout, 429
 * (rate_limited), 5xx (unavailable), other 4xx (rejected, with the upstream's
 * own message cut to 300 characters and the API key scrubbed from it), an
 * unreadable answer (malformed), an answer larger than `maxResponseBytes`
 * (too_large: the body is read as a stream and the connection dropped at the
 * cap), and a failed connection (network).
 *
 * The exchange is the kit's (../kit/exchange.ts), and what the reason
 * adapters share is in ../kit/reason.ts.
 */
import { Effect, Option, Redacted, Result, Schema } from "effect"
import { HttpClientRequest } from "effect/http"
import type { ModelInfo, Provider, Quote } from "../../../src/capabilities/Provider.ts"
import { quoteReason } from "../../../src/capabilities/pricing.ts"
import type { ReasonInput, ReasonOutput } from "../../../src/capabilities/schemas.ts"
import { clip, exchangeJson, jsonPost, openAiErrorDetail } from "../kit/index.ts"

export { MAX_ERROR_BODY_BYTES, MAX_UPSTREAM_MESSAGE_CHARS } from "../kit/index.ts"
import {
  checkSettings,
  meteredAnswer,
  type ParsedAnswer,
  quotedModel,
  quotedUsage,
  reasonUpstream,
  reportedUsage,
  tokenCount,
  TokenCount
} from "../kit/reason.ts"
import { envOr, env, httpUrl, type Configured, invalid, modelsOf, type ProviderConfig, tokenService } from "../kit/config.ts"
import { UpstreamClient } from "../kit/index.ts"

export { DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_TIMEOUT_MS } from "../kit/reason.ts"

export interface Options {
  /** The provider's name in the catalogue and in failures: "openai", "openrouter", "groq", "local", ... */
  readonly name: string
  /** The API root the paths hang from, e.g. https://api.openai.com/v1 or http://127.0.0.1:8080/v1. */
  readonly baseUrl: string
  /** Sent as `Authorization: Bearer …`; a self-hosted server may need none. */
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /** From the operator's price card; the first is the default. */
  readonly models: ReadonlyArray<ModelInfo>
  /** For connecting, the answer and its whole body; default 60 s. */
  readonly timeoutMs?: number | undefined
  /** Largest answer body read; default 4 MiB. */
  readonly maxResponseBytes?: number | undefined
  /**
   * Extra request headers (e.g. OpenRouter's `HTTP-Referer`, `X-Title`). They never replace the
   * content type or framing headers, nor `Authorization` when `apiKey` is given; without an
   * `apiKey` they may carry a gateway's own credentials (redacted in traces like the key).
   */
  readonly extraHeaders?: Readonly<Record<string, string>> | undefined
  /**
   * The request field that carries the completion cap. `max_tokens` (the
   * default) is what OpenRouter, Groq, llama.cpp, vLLM and Ollama read;
   * OpenAI's reasoning models refuse it and want `max_completion_tokens`,
   * which also bounds their hidden reasoning tokens.
   */
  readonly tokenLimitField?: "max_tokens" | "max_completion_tokens" | undefined
}

// ---------------------------------------------------------------------------
// Shared with the other reason adapters
// ---------------------------------------------------------------------------

// ---------------------------------------------------------------------------
// Chat Completions
// ---------------------------------------------------------------------------

/** Set by the client from the body and the connection; an operator's header must not change them. */
const RESERVED_HEADERS = new Set(["content-type", "content-length", "transfer-encoding", "host", "connection"])

const OptionalText = Schema.optional(Schema.NullOr(Schema.String))

/** The parts of a chat.completion object read here; other fields are not looked at. */
const Completion = Schema.Struct({
  choices: Schema.Array(Schema.Unknown),
  usage: Schema.optional(Schema.Unknown),
  model: Schema.optional(Schema.Unknown)
})
const Choice = Schema.Struct({
  message: Schema.Struct({ content: OptionalText }),
  finish_reason: OptionalText
})
const Usage = Schema.Struct({
  prompt_tokens: TokenCount,
  completion_tokens: TokenCount,
  total_tokens: Schema.optional(Schema.Unknown),
  prompt_tokens_details: Schema.optional(Schema.Unknown)
})

/** `prompt_tokens_details.cached_tokens`, at most the prompt tokens; anything unreadable is none. */
const cachedTokensOf = (details: unknown, promptTokens: number): number | undefined => {
  if (details === null || typeof details !== "object") return undefined
  const cached = tokenCount((details as Record<string, unknown>)["cached_tokens"])
  return cached === undefined || cached === 0 ? undefined : Math.min(cached, promptTokens)
}
const decodeCompletion = Schema.decodeUnknownResult(Completion)
const decodeChoice = Schema.decodeUnknownResult(Choice)

/** Reads a chat.completion object; a string is what was wrong with it. */
const parseCompletion = (raw: unknown, billedUsage: () => ReasonOutput["usage"]): Result.Result<ParsedAnswer, string> => {
  const body = decodeCompletion(raw, { errors: "first" })
  if (Result.isFailure(body)) {
    const detail = openAiErrorDetail(raw)
    return Result.fail(detail === undefined ? `the answer is not a chat completion: ${clip(body.failure.message, 200)}` : `the answer is an error: ${clip(detail.message)}`)
  }
  if (body.success.choices.length === 0) return Result.fail("the answer has no first choice")
  const choice = decodeChoice(body.success.choices[0], { errors: "first" })
  if (Result.isFailure(choice)) return Result.fail(`the first choice is not as documented: ${clip(choice.failure.message, 200)}`)
  const content = choice.success.message.content
  const finish = choice.success.finish_reason
  const usage = reportedUsage(body.success.usage, Usage, (counts) =>
    Result.succeed({
      promptTokens: counts.prompt_tokens,
      completionTokens: counts.completion_tokens,
      totalTokens: tokenCount(counts.total_tokens) ?? counts.prompt_tokens + counts.completion_tokens
    }), billedUsage)
  if (Result.isFailure(usage)) return Result.fail(usage.failure)
  const model = body.success.model
  const reported = body.success.usage as { readonly prompt_tokens_details?: unknown } | null | undefined
  const cacheReadTokens = usage.success.reported && reported !== null && typeof reported === "object"
    ? cachedTokensOf(reported.prompt_tokens_details, usage.success.usage.promptTokens)
    : undefined
  return Result.succeed({
    cacheReadTokens,
    output: {
      content: content ?? "",
      // Compatible servers sometimes leave it null; the caller still gets a string.
      finishReason: typeof finish === "string" && finish !== "" ? finish : "unknown",
      usage: usage.success.usage
    },
    reported: usage.success.reported,
    model: typeof model === "string" && model !== "" ? model : undefined
  })
}

export const make = (options: Options): Effect.Effect<Provider<"reason">, never, UpstreamClient> =>
  Effect.gen(function*() {
    const settings = yield* Effect.try({
      try: () => checkSettings("openaiCompatible", options),
      catch: (error) => error
    }).pipe(Effect.orDie)
    const client = yield* UpstreamClient
    const { name, models } = options
    const url = `${settings.baseUrl}/chat/completions`
    const tokenLimitField = options.tokenLimitField ?? "max_tokens"
    const upstream = reasonUpstream(name, settings, options.apiKey, openAiErrorDetail, "x-request-id")
    const extraHeaders = Object.fromEntries(
      Object.entries(options.extraHeaders ?? {}).filter(([header]) => !RESERVED_HEADERS.has(header.toLowerCase()))
    )

    const quote = (input: ReasonInput) => quoteReason(models, input, name)

    const run = Effect.fn("OpenAiCompatible.run")(function*(input: ReasonInput, quote: Quote) {
      const checked = quotedModel(name, models, quote)
      if (Result.isFailure(checked)) return yield* checked.failure
      const { model, maxTokens } = checked.success
      yield* Effect.annotateCurrentSpan({ provider: name, model: model.id, maxTokens })
      const messages: Array<{ readonly role: "system" | "user"; readonly content: string }> = []
      if (input.systemPrompt !== undefined && input.systemPrompt !== "") {
        messages.push({ role: "system", content: input.systemPrompt })
      }
      messages.push({ role: "user", content: input.prompt })
      const body = {
        model: model.id,
        messages,
        [tokenLimitField]: maxTokens,
        ...(input.temperature === undefined ? {} : { temperature: input.temperature }),
        stream: false
      }
      let request = jsonPost(url, body, extraHeaders)
      if (options.apiKey !== undefined) request = HttpClientRequest.bearerToken(request, options.apiKey)
      const answer = yield* exchangeJson(client, upstream, request)
      return yield* meteredAnswer(name, model, quote, parseCompletion(answer, () => quotedUsage(input, maxTokens)))
    })

    return { name, capability: "reason", models, quote, run } satisfies Provider<"reason">
  })

// ---------------------------------------------------------------------------
// Configuration

/** The hosted Chat Completions upstreams: each on with its API key, priced by its price card, reachable through the proxy. */
const HOSTED = [
  // OpenAI's reasoning models (GPT-5, o-series) refuse `max_tokens`; every OpenAI chat model reads `max_completion_tokens`.
  {
    name: "openai",
    label: "OpenAI",
    keyVar: "OPENAI_API_KEY",
    baseUrlVar: "OPENAI_BASE_URL",
    baseUrl: "https://api.openai.com/v1",
    tokenLimitField: "max_completion_tokens"
  },
  { name: "openrouter", label: "OpenRouter", keyVar: "OPENROUTER_API_KEY", baseUrlVar: undefined, baseUrl: "https://openrouter.ai/api/v1", tokenLimitField: undefined },
  { name: "groq", label: "Groq", keyVar: "GROQ_API_KEY", baseUrlVar: undefined, baseUrl: "https://api.groq.com/openai/v1", tokenLimitField: undefined }
] as const

/** The path of a chat completion under the base URL. */
export const CHAT_PATH = "/chat/completions"

/** What a self-hosted server's name must be: it is also its slug at /v1/proxy/{slug}. */
const SLUG = /^[a-z0-9][a-z0-9-]{1,39}$/

/**
 * OPENAI_API_KEY (OPENAI_BASE_URL), OPENROUTER_API_KEY, GROQ_API_KEY; and a
 * self-hosted server at LLM_BASE_URL (LLM_NAME, default "local"; LLM_API_KEY).
 * Each is a `reason` provider and a chat upstream offered at
 * /v1/proxy/{name} and, by model, at /v1/chat/completions and GET /v1/models,
 * priced by the price card of its name (for the self-hosted server, LLM_NAME's).
 */
export const fromConfig: ProviderConfig = (cards) =>
  Effect.gen(function*() {
    const providers: Array<Configured> = []
    const services = []
    for (const hosted of HOSTED) {
      const key = yield* env(hosted.keyVar)
      if (Option.isNone(key)) continue
      const baseUrl = hosted.baseUrlVar === undefined ? hosted.baseUrl : yield* envOr(hosted.baseUrlVar, hosted.baseUrl)
      const models = yield* modelsOf(cards, hosted.name)
      const { tokenLimitField } = hosted
      providers.push({
        name: hosted.name,
        capability: "reason",
        build: make({ name: hosted.name, baseUrl, apiKey: Redacted.make(key.value), models, tokenLimitField })
      })
      services.push(tokenService({
        slug: hosted.name,
        name: hosted.label,
        baseUrl,
        path: CHAT_PATH,
        format: "openai-chat",
        models,
        credentials: { authorization: `Bearer ${key.value}` },
        tokenLimitField
      }))
    }
    const local = yield* env("LLM_BASE_URL")
    if (Option.isSome(local)) {
      const baseUrl = yield* httpUrl("LLM_BASE_URL", local.value)
      const name = yield* envOr("LLM_NAME", "local")
      const models = yield* modelsOf(cards, name)
      if (!SLUG.test(name)) {
        return yield* invalid(`LLM_NAME must be 2-40 characters of a-z, 0-9 and -, starting with a letter or digit (it names the server at /v1/proxy/{name}): ${JSON.stringify(name.slice(0, 60))}`)
      }
      if (services.some((s) => s.service.slug === name)) {
        return yield* invalid(`LLM_NAME "${name}" is already the name of a configured provider; choose another`)
      }
      const key = yield* env("LLM_API_KEY")
      providers.push({
        name,
        capability: "reason",
        build: make({ name, baseUrl, ...(Option.isSome(key) ? { apiKey: Redacted.make(key.value) } : {}), models })
      })
      services.push(tokenService({
        slug: name,
        name: `Self-hosted model server (${name})`,
        baseUrl,
        path: CHAT_PATH,
        format: "openai-chat",
        models,
        credentials: Option.isSome(key) ? { authorization: `Bearer ${key.value}` } : {}
      }))
    }
    return { providers, services }
  })
