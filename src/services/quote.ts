import { Result } from "effect"
import { promptTokenBound, tokenCost } from "../capabilities/pricing.ts"
import { NotFound, ValidationError } from "../domain/errors.ts"
import type { ProxyResponse } from "../ports/ServiceTransport.ts"
import { quoteEmbeddings } from "./embeddingsQuote.ts"
import type { EndpointPrice } from "./Service.ts"

/**
 * The price of a proxied call: its upper bound, held before the call, and how
 * its actual cost is read back from the answer (the usage a token-priced
 * upstream reports, or what a stream streamed when it reported none).
 */

/** Completion tokens asked for when a token-priced call names no budget. */
export const DEFAULT_PROXY_MAX_TOKENS = 1024

/** The most choices (OpenAI's `n`) a proxied chat call may ask for; each is held its completion budget. */
export const MAX_PROXY_CHOICES = 128

export interface ProxyQuote {
  readonly microUsd: bigint
  readonly body: unknown
  readonly model: string | undefined
  readonly meter: (response: ProxyResponse) => bigint
  /** Token-priced endpoints: the streaming details. */
  readonly tokens?: {
    readonly format: "openai-chat" | "anthropic-messages"
    readonly stream: boolean
    /** The prompt part of the quote: the least a stream that ends without a usage report is charged. */
    readonly inputMicroUsd: bigint
    readonly cost: (usage: { readonly input: number; readonly output: number }) => bigint
    /** What a stream that ends without a usable usage report is charged, from what it streamed (see `countedStreamCost`). */
    readonly counted: (streamedBytes: number) => bigint
  }
}

/**
 * The charge of a stream whose upstream reported no usable usage (none, or a
 * malformed one) or whose caller went away before it arrived: the prompt part
 * of the quote plus the completion tokens bounded by what was streamed, at
 * one token per UTF-8 byte of streamed content (a token is at least one byte
 * of text, so this never undercounts), capped at the completion budget. So it
 * is never less than the prompt part and never more than the quote; an
 * upstream (or a registry service) that omits usage cannot make output free,
 * and a stream that produced little is not charged its whole budget.
 */
export const countedStreamCost = (input: {
  readonly inputMicroUsd: bigint
  readonly maxTokens: number
  readonly outputPer1kMicroUsd: bigint
  readonly streamedBytes: number
}): bigint => {
  const tokens = Math.min(Math.max(0, input.streamedBytes), input.maxTokens)
  return input.inputMicroUsd + tokenCost(tokens, input.outputPer1kMicroUsd)
}

const readUsage = (format: "openai-chat" | "anthropic-messages", body: unknown) => {
  const usage = (body as { usage?: Record<string, unknown> } | null)?.usage
  if (usage === undefined || usage === null || typeof usage !== "object") return undefined
  const input = format === "openai-chat" ? usage["prompt_tokens"] : usage["input_tokens"]
  const output = format === "openai-chat" ? usage["completion_tokens"] : usage["output_tokens"]
  return typeof input === "number" && typeof output === "number" && input >= 0 && output >= 0
    ? { input, output }
    : undefined
}

/** The upper bound of a proxied call and how its actual cost is read back. */
export const quoteProxy = (
  price: EndpointPrice,
  body: unknown
): Result.Result<ProxyQuote, ValidationError | NotFound> => {
  if (price.kind === "perCall") {
    return Result.succeed({ microUsd: price.priceMicroUsd, body, model: undefined, meter: () => price.priceMicroUsd })
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return Result.fail(new ValidationError({ message: "This endpoint takes a JSON object body", issues: [{ path: "body", message: "Expected an object" }] }))
  }
  if (price.kind === "embeddings") return quoteEmbeddings(price, body as Record<string, unknown>)
  const request = body as Record<string, unknown>
  const modelId = request["model"]
  const model = price.models.find((m) => m.id === modelId)
  if (model === undefined) return Result.fail(new NotFound({ resource: `Model ${String(modelId).slice(0, 100)}` }))
  const stream = request["stream"] === true
  const maxKey = price.format === "openai-chat" && request["max_completion_tokens"] !== undefined ? "max_completion_tokens" : "max_tokens"
  const asked = request[maxKey]
  const maxTokens = asked === undefined ? Math.min(DEFAULT_PROXY_MAX_TOKENS, model.defaultMaxTokens) : asked
  if (typeof maxTokens !== "number" || !Number.isInteger(maxTokens) || maxTokens < 1 || maxTokens > model.maxTokens) {
    return Result.fail(new ValidationError({
      message: `${maxKey} must be a whole number from 1 to ${model.maxTokens}`,
      issues: [{ path: `body.${maxKey}`, message: `must be 1 to ${model.maxTokens}` }]
    }))
  }
  // OpenAI's `n`: that many choices, each with its own completion budget. The charge is
  // clamped to the quote, so an unbounded `n` would make every choice past the first free.
  const choicesAsked = price.format === "openai-chat" ? request["n"] : undefined
  const choices = choicesAsked === undefined || choicesAsked === null ? 1 : choicesAsked
  if (typeof choices !== "number" || !Number.isInteger(choices) || choices < 1 || choices > MAX_PROXY_CHOICES) {
    return Result.fail(new ValidationError({
      message: `n must be a whole number from 1 to ${MAX_PROXY_CHOICES}`,
      issues: [{ path: "body.n", message: `must be 1 to ${MAX_PROXY_CHOICES}` }]
    }))
  }
  // The prompt is bounded by the bytes of everything but the answer's budget.
  const promptText = JSON.stringify({ ...request, [maxKey]: undefined })
  const inputBound = promptTokenBound({ prompt: promptText.length === 0 ? " " : promptText })
  const inputMicroUsd = tokenCost(inputBound, model.inputPer1kMicroUsd)
  const completionBound = maxTokens * choices
  const microUsd = inputMicroUsd + tokenCost(completionBound, model.outputPer1kMicroUsd)
  const cost = (usage: { readonly input: number; readonly output: number }) =>
    tokenCost(usage.input, model.inputPer1kMicroUsd) + tokenCost(usage.output, model.outputPer1kMicroUsd)
  const forwarded: Record<string, unknown> = { ...request, [maxKey]: maxTokens }
  // OpenAI reports a stream's usage only when asked; the last chunk then carries it.
  if (stream && price.format === "openai-chat") forwarded["stream_options"] = { include_usage: true }
  return Result.succeed({
    microUsd,
    body: forwarded,
    model: model.id,
    meter: (response) => {
      const usage = readUsage(price.format, response.body)
      // An upstream that reports no usage is charged its upper bound.
      return usage === undefined ? microUsd : cost(usage)
    },
    tokens: {
      format: price.format,
      stream,
      inputMicroUsd,
      cost,
      counted: (streamedBytes) =>
        countedStreamCost({ inputMicroUsd, maxTokens: completionBound, outputPer1kMicroUsd: model.outputPer1kMicroUsd, streamedBytes })
    }
  })
}
