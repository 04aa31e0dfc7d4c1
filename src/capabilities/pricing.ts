import { ModelNotPriced, ValidationError } from "../domain/errors.ts"
import { ceilDivide } from "../domain/Money.ts"
import { Result } from "effect"
import type { ModelInfo, Quote } from "./Provider.ts"
import type { ReasonInput } from "./schemas.ts"
import { utf8Length } from "../domain/utf8.ts"

/**
 * Quoting and metering `reason` calls (decisions §2). The quote is an upper
 * bound: prompt tokens are bounded by the UTF-8 byte length of system prompt
 * and prompt plus a per-message overhead (no tokenizer yields more tokens
 * than bytes), completion tokens by the `max_tokens` the upstream is always
 * called with. Prices round up to the micro-dollar.
 */

/** Tokens a chat format adds per message (role markers, separators), generously. */
export const PER_MESSAGE_OVERHEAD_TOKENS = 16

export const tokenCost = (tokens: number, per1kMicroUsd: bigint): bigint =>
  ceilDivide(BigInt(Math.max(0, Math.ceil(tokens))) * per1kMicroUsd, 1000n)

export const promptTokenBound = (input: ReasonInput): number => {
  const messages = input.systemPrompt === undefined || input.systemPrompt === "" ? 1 : 2
  return utf8Length(input.prompt) + utf8Length(input.systemPrompt ?? "") + messages * PER_MESSAGE_OVERHEAD_TOKENS
}

/** Picks the model (the first is the default), checks `maxTokens`, and bounds the cost. */
export const quoteReason = (
  models: ReadonlyArray<ModelInfo>,
  input: ReasonInput,
  provider?: string
): Result.Result<Quote & { readonly model: string; readonly maxTokens: number }, ModelNotPriced | ValidationError> => {
  const model = input.model === undefined ? models[0] : models.find((m) => m.id === input.model)
  if (model === undefined) {
    return Result.fail(new ModelNotPriced({ model: input.model ?? "", ...(provider === undefined ? {} : { provider }) }))
  }
  const maxTokens = input.maxTokens ?? model.defaultMaxTokens
  if (maxTokens > model.maxTokens) {
    return Result.fail(
      new ValidationError({
        message: `maxTokens is above ${model.maxTokens} for ${model.id}`,
        issues: [{ path: "maxTokens", message: `must be at most ${model.maxTokens} for ${model.id}` }]
      })
    )
  }
  const microUsd = tokenCost(promptTokenBound(input), promptBoundPer1k(model)) +
    tokenCost(maxTokens, model.outputPer1kMicroUsd)
  return Result.succeed({ microUsd, model: model.id, maxTokens })
}

/**
 * The price per 1000 tokens a quote bounds prompt tokens at: the input price,
 * or the cache-write price when that is higher (a caller of the proxy may ask
 * Anthropic to write its prompt to the cache). Cached reads are never above
 * the input price, so a quote at this price bounds every mix of the three.
 */
export const promptBoundPer1k = (model: ModelInfo): bigint => {
  const write = model.cacheWritePer1kMicroUsd
  return write !== undefined && write > model.inputPer1kMicroUsd ? write : model.inputPer1kMicroUsd
}

/**
 * The prompt tokens of a call, split by how they are billed: `total` is every
 * prompt token (cached or not); `cacheRead` and `cacheWrite` are parts of it.
 */
export interface PromptTokens {
  readonly total: number
  readonly cacheRead?: number | undefined
  readonly cacheWrite?: number | undefined
}

const whole = (n: number | undefined): bigint => BigInt(Math.max(0, Math.ceil(n ?? 0)))

/**
 * The cost of a call's prompt: tokens read from the cache at the cached-input
 * price, tokens written to it at the cache-write price, the rest at the input
 * price (a missing price is the input price). The parts are clamped so they
 * never exceed the total, and the sum is rounded up once, so the cost is never
 * above what `promptBoundPer1k` prices the same total at.
 */
export const promptCost = (model: ModelInfo, tokens: PromptTokens): bigint => {
  const total = whole(tokens.total)
  const read = whole(tokens.cacheRead) < total ? whole(tokens.cacheRead) : total
  const written = whole(tokens.cacheWrite) < total - read ? whole(tokens.cacheWrite) : total - read
  const plain = total - read - written
  const cost = plain * model.inputPer1kMicroUsd +
    read * (model.cachedInputPer1kMicroUsd ?? model.inputPer1kMicroUsd) +
    written * (model.cacheWritePer1kMicroUsd ?? model.inputPer1kMicroUsd)
  return ceilDivide(cost, 1000n)
}

/**
 * The actual cost of a call from the upstream's token counts. `promptTokens`
 * is every prompt token; `cacheReadTokens` and `cacheWriteTokens` are the
 * parts of it the upstream served from or wrote to its prompt cache.
 */
export const meterReason = (
  model: ModelInfo,
  usage: {
    readonly promptTokens: number
    readonly completionTokens: number
    readonly cacheReadTokens?: number | undefined
    readonly cacheWriteTokens?: number | undefined
  }
): bigint =>
  promptCost(model, { total: usage.promptTokens, cacheRead: usage.cacheReadTokens, cacheWrite: usage.cacheWriteTokens }) +
  tokenCost(usage.completionTokens, model.outputPer1kMicroUsd)
