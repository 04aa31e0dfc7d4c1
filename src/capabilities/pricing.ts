import { NotFound, ValidationError } from "../domain/errors.ts"
import { ceilDivide } from "../domain/Money.ts"
import { Result } from "effect"
import type { ModelInfo, Quote } from "./Provider.ts"
import type { ReasonInput } from "./schemas.ts"

/**
 * Quoting and metering `reason` calls (decisions §2). The quote is an upper
 * bound: prompt tokens are bounded by the UTF-8 byte length of system prompt
 * and prompt plus a per-message overhead (no tokenizer yields more tokens
 * than bytes), completion tokens by the `max_tokens` the upstream is always
 * called with. Prices round up to the micro-dollar.
 */

/** Tokens a chat format adds per message (role markers, separators), generously. */
export const PER_MESSAGE_OVERHEAD_TOKENS = 16

const utf8Bytes = (text: string): number => new TextEncoder().encode(text).length

export const tokenCost = (tokens: number, per1kMicroUsd: bigint): bigint =>
  ceilDivide(BigInt(Math.max(0, Math.ceil(tokens))) * per1kMicroUsd, 1000n)

export const promptTokenBound = (input: ReasonInput): number => {
  const messages = input.systemPrompt === undefined || input.systemPrompt === "" ? 1 : 2
  return utf8Bytes(input.prompt) + utf8Bytes(input.systemPrompt ?? "") + messages * PER_MESSAGE_OVERHEAD_TOKENS
}

/** Picks the model (the first is the default), checks `maxTokens`, and bounds the cost. */
export const quoteReason = (
  models: ReadonlyArray<ModelInfo>,
  input: ReasonInput
): Result.Result<Quote & { readonly model: string; readonly maxTokens: number }, NotFound | ValidationError> => {
  const model = input.model === undefined ? models[0] : models.find((m) => m.id === input.model)
  if (model === undefined) return Result.fail(new NotFound({ resource: `Model ${input.model ?? ""}` }))
  const maxTokens = input.maxTokens ?? model.defaultMaxTokens
  if (maxTokens > model.maxTokens) {
    return Result.fail(
      new ValidationError({
        message: `maxTokens is above ${model.maxTokens} for ${model.id}`,
        issues: [{ path: "maxTokens", message: `must be at most ${model.maxTokens} for ${model.id}` }]
      })
    )
  }
  const microUsd = tokenCost(promptTokenBound(input), model.inputPer1kMicroUsd) +
    tokenCost(maxTokens, model.outputPer1kMicroUsd)
  return Result.succeed({ microUsd, model: model.id, maxTokens })
}

/** The actual cost of a call from the upstream's token counts. */
export const meterReason = (model: ModelInfo, usage: { readonly promptTokens: number; readonly completionTokens: number }): bigint =>
  tokenCost(usage.promptTokens, model.inputPer1kMicroUsd) + tokenCost(usage.completionTokens, model.outputPer1kMicroUsd)
