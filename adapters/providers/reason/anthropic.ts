/**
 * `reason` over Anthropic's Messages API.
 *
 * Wire format (POST {baseUrl}/v1/messages, non-streaming; headers `x-api-key`,
 * `anthropic-version`, `content-type: application/json`):
 *   request  { model, max_tokens, system?, messages: [{ role: "user", content }], temperature? }
 *   response { id, type: "message", role: "assistant", model, content: [{ type: "text", text }, …],
 *              stop_reason, stop_sequence, usage: { input_tokens, output_tokens,
 *              cache_creation_input_tokens?, cache_read_input_tokens? } }
 *   error    { type: "error", error: { type, message }, request_id } with a 4xx/5xx status;
 *            529 `overloaded_error` is treated like a 5xx (unavailable).
 * The key goes in `x-api-key`, which every API version takes (the official
 * SDKs from 1.0 send `Authorization: Bearer` instead; the API accepts both).
 *
 * Mapping:
 * - `content` is the text of the `text` blocks, joined in order; other blocks
 *   (thinking, tool use) carry nothing the caller asked for and are skipped.
 * - `finishReason` is Anthropic's own `stop_reason` (`end_turn`, `max_tokens`,
 *   `stop_sequence`, `refusal`, …), not translated to OpenAI's names: the
 *   values do not map one to one, and the provider is named in the answer.
 * - Prompt tokens are `input_tokens` plus any cache creation and cache read
 *   tokens (Anthropic counts those apart; no cache is asked for, so they are
 *   normally zero). Cache reads are charged at the card's cached-input price,
 *   cache writes at its cache-write price (Anthropic bills writes above
 *   input: 1.25× for the 5-minute cache), the rest at the input price.
 * - Temperature: Anthropic takes 0–1 while the API accepts up to 2, so a
 *   higher value is refused when quoting (ValidationError) rather than
 *   silently clamped: the caller's sampling would not be what it asked for.
 *   API version 2026-10-21 removed the sampling parameters altogether (any
 *   `temperature` is a 400 there, even 1.0); with that version or a later
 *   one configured, a call that gives a temperature is refused the same way.
 *   The default version, 2023-06-01, still takes it.
 *
 * Billing, limits and failures are those of the OpenAI-compatible adapter
 * (see openaiCompatible.ts): metered from `usage` at the quoted model's prices,
 * the quote charged when no `usage` is reported, timeout / 429 / 5xx / other
 * 4xx / malformed / too_large / network as `ProviderFailure`, never a defect.
 */
import { Effect, Option, Redacted, Result, Schema } from "effect"
import type { ModelInfo, Provider, Quote } from "../../../src/capabilities/Provider.ts"
import { ProviderFailure } from "../../../src/capabilities/Provider.ts"
import { quoteReason } from "../../../src/capabilities/pricing.ts"
import type { ReasonInput, ReasonOutput } from "../../../src/capabilities/schemas.ts"
import { ValidationError } from "../../../src/domain/errors.ts"
import { clip, decodeOrUndefined, type ErrorDetail, exchangeJson, jsonPost, NonEmptyText } from "../kit/index.ts"
import {
  checkSettings,
  meteredAnswer,
  type ParsedAnswer,
  quotedModel,
  quotedUsage,
  reasonUpstream,
  reportedUsage,
  TokenCount
} from "../kit/reason.ts"
import { env, modelsOf, nothing, type ProviderConfig, tokenService } from "../kit/config.ts"
import { UpstreamClient } from "../kit/index.ts"

export const DEFAULT_BASE_URL = "https://api.anthropic.com"
export const DEFAULT_VERSION = "2023-06-01"
/** Anthropic's sampling temperature range is 0–1. */
export const MAX_TEMPERATURE = 1
/** The API version that removed `temperature`, `top_p` and `top_k` from the Messages API. */
export const SAMPLING_REMOVED_IN = "2026-10-21"

/** Versions are dates (YYYY-MM-DD), so they order as strings. */
export const takesTemperature = (version: string): boolean => version < SAMPLING_REMOVED_IN

export interface Options {
  /** Default "anthropic". */
  readonly name?: string | undefined
  /** Default https://api.anthropic.com; `/v1/messages` is appended. */
  readonly baseUrl?: string | undefined
  readonly apiKey: Redacted.Redacted<string>
  /** From the operator's price card; the first is the default. */
  readonly models: ReadonlyArray<ModelInfo>
  /** For connecting, the answer and its whole body; default 60 s. */
  readonly timeoutMs?: number | undefined
  /** Largest answer body read; default 4 MiB. */
  readonly maxResponseBytes?: number | undefined
  /** The `anthropic-version` header (YYYY-MM-DD); default 2023-06-01. */
  readonly version?: string | undefined
}

/** `{ "type": "error", "error": { "type": "overloaded_error", "message": "Overloaded" }, "request_id": "req_…" }` */
const errorBodyOf = decodeOrUndefined(Schema.Struct({ error: Schema.Struct({ message: NonEmptyText, type: Schema.optional(Schema.Unknown) }) }))

const anthropicErrorDetail = (body: unknown): ErrorDetail | undefined => {
  const error = errorBodyOf(body)?.error
  if (error === undefined) return undefined
  return { message: error.message, type: typeof error.type === "string" && error.type !== "" ? error.type : undefined }
}

const OptionalText = Schema.optional(Schema.NullOr(Schema.String))
/** A cache count: absent or null when no cache was involved. */
const CacheCount = Schema.optional(Schema.NullOr(TokenCount))

/** The parts of a Messages answer read here; other fields (and blocks other than text) are not looked at. */
const Message = Schema.Struct({
  content: Schema.Array(Schema.Unknown),
  stop_reason: OptionalText,
  usage: Schema.optional(Schema.Unknown),
  model: Schema.optional(Schema.Unknown)
})
const Block = Schema.Struct({ type: Schema.optional(Schema.Unknown), text: Schema.optional(Schema.Unknown) })
const TextBlock = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })
const Usage = Schema.Struct({
  input_tokens: TokenCount,
  output_tokens: TokenCount,
  cache_creation_input_tokens: CacheCount,
  cache_read_input_tokens: CacheCount
})
const decodeMessage = Schema.decodeUnknownResult(Message)
const decodeBlock = Schema.decodeUnknownResult(Block)
const decodeTextBlock = Schema.decodeUnknownResult(TextBlock)
const ErrorType = Schema.Struct({ type: Schema.Literal("error") })
const isErrorAnswer = Schema.is(ErrorType)

const parseMessage = (raw: unknown, billedUsage: () => ReasonOutput["usage"]): Result.Result<ParsedAnswer, string> => {
  if (isErrorAnswer(raw)) {
    const detail = anthropicErrorDetail(raw)
    return Result.fail(detail === undefined ? "the answer is an error" : `the answer is an error: ${clip(detail.message)}`)
  }
  const body = decodeMessage(raw, { errors: "first" })
  if (Result.isFailure(body)) return Result.fail(`the answer is not a message: ${clip(body.failure.message, 200)}`)
  let content = ""
  for (const item of body.success.content) {
    const block = decodeBlock(item)
    if (Result.isFailure(block)) return Result.fail("a content block is not an object")
    if (block.success.type !== "text") continue
    const text = decodeTextBlock(item)
    if (Result.isFailure(text)) return Result.fail("a text block has no text")
    content += text.success.text
  }
  const stop = body.success.stop_reason
  let cacheReadTokens: number | undefined
  let cacheWriteTokens: number | undefined
  const usage = reportedUsage(body.success.usage, Usage, (counts) => {
    cacheReadTokens = counts.cache_read_input_tokens ?? undefined
    cacheWriteTokens = counts.cache_creation_input_tokens ?? undefined
    const promptTokens = counts.input_tokens + (counts.cache_creation_input_tokens ?? 0) + (counts.cache_read_input_tokens ?? 0)
    return Result.succeed({ promptTokens, completionTokens: counts.output_tokens, totalTokens: promptTokens + counts.output_tokens })
  }, billedUsage)
  if (Result.isFailure(usage)) return Result.fail(usage.failure)
  const model = body.success.model
  return Result.succeed({
    cacheReadTokens,
    cacheWriteTokens,
    output: { content, finishReason: typeof stop === "string" && stop !== "" ? stop : "unknown", usage: usage.success.usage },
    reported: usage.success.reported,
    model: typeof model === "string" && model !== "" ? model : undefined
  })
}

/** Why this provider cannot take the input's temperature; undefined when it can. */
const temperatureRefusal = (version: string, temperature: number | undefined): ValidationError | undefined => {
  if (temperature === undefined) return undefined
  if (!takesTemperature(version)) {
    return new ValidationError({
      message: `temperature is not accepted by Anthropic API version ${version}; leave it out`,
      issues: [{ path: "temperature", message: `not supported by Anthropic API version ${version}` }]
    })
  }
  if (temperature > MAX_TEMPERATURE) {
    return new ValidationError({
      message: `temperature ${temperature} is above ${MAX_TEMPERATURE}, the most Anthropic models accept`,
      issues: [{ path: "temperature", message: `must be between 0 and ${MAX_TEMPERATURE} for Anthropic models` }]
    })
  }
  return undefined
}

export const make = (options: Options): Effect.Effect<Provider<"reason">, never, UpstreamClient> =>
  Effect.gen(function*() {
    const name = options.name ?? "anthropic"
    const settings = yield* Effect.try({
      try: () => checkSettings("anthropic", { ...options, name, baseUrl: options.baseUrl ?? DEFAULT_BASE_URL }),
      catch: (error) => error
    }).pipe(Effect.orDie)
    const version = options.version ?? DEFAULT_VERSION
    if (!/^\d{4}-\d{2}-\d{2}$/.test(version)) {
      return yield* Effect.die(new RangeError(`anthropic ${name}: version is not a version string: ${JSON.stringify(version)}`))
    }
    const client = yield* UpstreamClient
    const { models } = options
    const url = `${settings.baseUrl}/v1/messages`
    const upstream = reasonUpstream(name, settings, options.apiKey, anthropicErrorDetail, "request-id")

    const quote = (input: ReasonInput) => {
      const refusal = temperatureRefusal(version, input.temperature)
      return refusal === undefined ? quoteReason(models, input, name) : Result.fail(refusal)
    }

    const run = Effect.fn("Anthropic.run")(function*(input: ReasonInput, quote: Quote) {
      const checked = quotedModel(name, models, quote)
      if (Result.isFailure(checked)) return yield* checked.failure
      const { model, maxTokens } = checked.success
      yield* Effect.annotateCurrentSpan({ provider: name, model: model.id, maxTokens })
      const refusal = temperatureRefusal(version, input.temperature)
      if (refusal !== undefined) {
        // Not reachable through `quote`; spares the upstream a request it would refuse.
        return yield* new ProviderFailure({ provider: name, reason: "rejected", message: refusal.message })
      }
      const body = {
        model: model.id,
        max_tokens: maxTokens,
        ...(input.systemPrompt === undefined || input.systemPrompt === "" ? {} : { system: input.systemPrompt }),
        messages: [{ role: "user", content: input.prompt }],
        ...(input.temperature === undefined ? {} : { temperature: input.temperature })
      }
      const request = jsonPost(url, body, { "x-api-key": Redacted.value(options.apiKey), "anthropic-version": version })
      const answer = yield* exchangeJson(client, upstream, request)
      return yield* meteredAnswer(name, model, quote, parseMessage(answer, () => quotedUsage(input, maxTokens)))
    })

    return { name, capability: "reason", models, quote, run } satisfies Provider<"reason">
  })

// ---------------------------------------------------------------------------
// Configuration

export const MESSAGES_PATH = "/v1/messages"

/** ANTHROPIC_API_KEY (ANTHROPIC_BASE_URL): the `anthropic` price card; the proxy offers the Messages API. */
export const fromConfig: ProviderConfig = (cards) =>
  Effect.gen(function*() {
    const key = yield* env("ANTHROPIC_API_KEY")
    if (Option.isNone(key)) return nothing
    const models = yield* modelsOf(cards, "anthropic")
    const baseUrl = yield* env("ANTHROPIC_BASE_URL")
    return {
      providers: [{
        name: "anthropic",
        capability: "reason",
        build: make({ apiKey: Redacted.make(key.value), models, ...(Option.isSome(baseUrl) ? { baseUrl: baseUrl.value } : {}) })
      }],
      services: [tokenService({
        slug: "anthropic",
        name: "Anthropic",
        baseUrl: Option.getOrElse(baseUrl, () => DEFAULT_BASE_URL),
        path: MESSAGES_PATH,
        format: "anthropic-messages",
        models,
        credentials: { "x-api-key": key.value, "anthropic-version": DEFAULT_VERSION }
      })]
    }
  })
