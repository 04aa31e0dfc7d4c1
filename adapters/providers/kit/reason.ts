/**
 * What the reason adapters (Chat Completions and Anthropic's Messages) share:
 * their settings and models checked, how their upstream is called, the model
 * and completion cap a quote names, and the usage an answer reports, metered
 * at the model's prices (or the quote's bounds when it reports none).
 */
import { Effect, type Redacted, Result, Schema } from "effect"
import type { Metered, ModelInfo, Quote } from "../../../src/capabilities/Provider.ts"
import { ProviderFailure } from "../../../src/capabilities/Provider.ts"
import { meterReason, promptTokenBound } from "../../../src/capabilities/pricing.ts"
import type { ReasonInput, ReasonOutput } from "../../../src/capabilities/schemas.ts"
import type { ErrorDetail, Upstream } from "./exchange.ts"
import { baseUrlOf, positiveInteger } from "./settings.ts"
import { clip, keySecrets } from "./text.ts"

export const DEFAULT_TIMEOUT_MS = 60_000
export const DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024

/** A token count on the wire: a non-negative safe integer. */
export const TokenCount = Schema.Number.check(
  Schema.makeFilter((value: number) => (Number.isSafeInteger(value) && value >= 0) || "a token count (a non-negative integer)")
)

/** A token count from the wire: a non-negative safe integer, or undefined. */
export const tokenCount = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : undefined

/** Checks the settings every adapter shares; a mistake is a configuration error, hence a defect. */
export const checkSettings = (
  adapter: string,
  options: {
    readonly name: string
    readonly baseUrl: string
    readonly models: ReadonlyArray<ModelInfo>
    readonly timeoutMs?: number | undefined
    readonly maxResponseBytes?: number | undefined
  }
): { readonly baseUrl: string; readonly timeoutMs: number; readonly maxResponseBytes: number } => {
  if (options.name.trim() === "") throw new RangeError(`${adapter}: name must not be empty`)
  const where = `${adapter} ${options.name}`
  const baseUrl = baseUrlOf(where, options.baseUrl, { allowCredentials: true })
  if (options.models.length === 0) throw new RangeError(`${where}: at least one model is required`)
  const ids = new Set(options.models.map((model) => model.id))
  if (ids.size !== options.models.length) throw new RangeError(`${where}: a model is listed twice`)
  for (const model of options.models) {
    if (!Number.isSafeInteger(model.maxTokens) || model.maxTokens < 1) {
      throw new RangeError(`${where}: ${model.id} needs a positive integer maxTokens`)
    }
    if (!Number.isSafeInteger(model.defaultMaxTokens) || model.defaultMaxTokens < 1 || model.defaultMaxTokens > model.maxTokens) {
      throw new RangeError(`${where}: ${model.id} needs a defaultMaxTokens between 1 and its maxTokens`)
    }
  }
  return {
    baseUrl,
    timeoutMs: positiveInteger(where, "timeoutMs", options.timeoutMs, DEFAULT_TIMEOUT_MS),
    maxResponseBytes: positiveInteger(where, "maxResponseBytes", options.maxResponseBytes, DEFAULT_MAX_RESPONSE_BYTES)
  }
}

/**
 * How a reason upstream is called (exchange.ts): a refused connection is
 * `network`, and failures quote the upstream's request id from `requestIdHeader`.
 */
export const reasonUpstream = (
  provider: string,
  settings: { readonly timeoutMs: number; readonly maxResponseBytes: number },
  apiKey: Redacted.Redacted<string> | undefined,
  errorDetail: (body: unknown) => ErrorDetail | undefined,
  requestIdHeader: string
): Upstream => ({
  provider,
  timeoutMs: settings.timeoutMs,
  maxResponseBytes: settings.maxResponseBytes,
  secrets: keySecrets(apiKey),
  unreachable: "network",
  errorDetail,
  requestIdHeader
})

/** The model and completion cap a quote names, checked against this provider's models. */
export const quotedModel = (
  provider: string,
  models: ReadonlyArray<ModelInfo>,
  quote: Quote
): Result.Result<{ readonly model: ModelInfo; readonly maxTokens: number }, ProviderFailure> => {
  const model = models.find((m) => m.id === quote.model)
  if (model === undefined) {
    return Result.fail(
      new ProviderFailure({ provider, reason: "rejected", message: `${provider} does not offer the quoted model ${clip(String(quote.model), 100)}` })
    )
  }
  const maxTokens = quote.maxTokens
  if (maxTokens === undefined || !Number.isSafeInteger(maxTokens) || maxTokens < 1 || maxTokens > model.maxTokens) {
    return Result.fail(
      new ProviderFailure({ provider, reason: "rejected", message: `${provider}: the quote carries no usable max_tokens for ${model.id}` })
    )
  }
  return Result.succeed({ model, maxTokens })
}

/** Usage when the upstream reported none: the bounds the quote charged for. */
export const quotedUsage = (input: ReasonInput, maxTokens: number): ReasonOutput["usage"] => {
  const promptTokens = promptTokenBound(input)
  return { promptTokens, completionTokens: maxTokens, totalTokens: promptTokens + maxTokens }
}

export type ParsedAnswer = {
  readonly output: ReasonOutput
  readonly reported: boolean
  readonly model: string | undefined
  /** Prompt tokens served from the upstream's prompt cache: a part of `output.usage.promptTokens`. */
  readonly cacheReadTokens?: number | undefined
  /** Prompt tokens written to the upstream's prompt cache: a part of `output.usage.promptTokens`. */
  readonly cacheWriteTokens?: number | undefined
}

/**
 * The charge for a parsed answer: its `usage` at the quoted model's prices
 * (prompt tokens read from the cache at the cached-input price, written to it
 * at the cache-write price), or the quote when the upstream reported none. A string is what was wrong
 * with the answer (`malformed`).
 */
export const meteredAnswer = (
  provider: string,
  model: ModelInfo,
  quote: Quote,
  parsed: Result.Result<ParsedAnswer, string>
): Effect.Effect<Metered<ReasonOutput>, ProviderFailure> => {
  if (Result.isFailure(parsed)) {
    return Effect.fail(new ProviderFailure({ provider, reason: "malformed", message: `${provider}: ${parsed.failure}` }))
  }
  const { output, reported } = parsed.success
  return Effect.succeed({
    output,
    actualMicroUsd: reported
      ? meterReason(model, {
        ...output.usage,
        cacheReadTokens: parsed.success.cacheReadTokens,
        cacheWriteTokens: parsed.success.cacheWriteTokens
      })
      : quote.microUsd,
    model: parsed.success.model ?? model.id
  })
}


export type Usage = ReasonOutput["usage"]

/**
 * The usage an answer reports, read by `read` (its counts, or what is wrong
 * with them); when the answer reports none (missing or null), `billed`, the
 * bounds the quote charged for.
 */
export const reportedUsage = <S extends Schema.ConstraintDecoder<unknown>>(
  usage: unknown,
  schema: S,
  read: (usage: S["Type"]) => Result.Result<Usage, string>,
  billed: () => Usage
): Result.Result<{ readonly usage: Usage; readonly reported: boolean }, string> => {
  if (usage === undefined || usage === null) return Result.succeed({ usage: billed(), reported: false })
  const decoded = Schema.decodeUnknownResult(schema)(usage, { errors: "first" })
  if (Result.isFailure(decoded)) return Result.fail(`usage is not as documented: ${clip(decoded.failure.message, 200)}`)
  return Result.map(read(decoded.success), (counted) => ({ usage: counted, reported: true }))
}
