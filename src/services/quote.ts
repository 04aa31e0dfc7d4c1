import { Result } from "effect"
import { promptBoundPer1k, promptCost, promptTokenBound, tokenCost } from "../capabilities/pricing.ts"
import { ModelNotPriced, ValidationError } from "../domain/errors.ts"
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
    readonly cost: (usage: TokenUsage) => bigint
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

/**
 * The tokens a token-priced call used: `input` is every prompt token, cached
 * or not; `cacheRead` (served from the upstream's prompt cache) and
 * `cacheWrite` (written to it) are parts of `input`, priced by the model's
 * card (see `promptCost`).
 */
export interface TokenUsage {
  readonly input: number
  readonly output: number
  readonly cacheRead?: number | undefined
  readonly cacheWrite?: number | undefined
}

const tokens = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : undefined

/**
 * The usage of an answer in either format. OpenAI's `prompt_tokens` counts
 * cached tokens too (`prompt_tokens_details.cached_tokens` says how many);
 * Anthropic's `input_tokens` does not: its `cache_read_input_tokens` and
 * `cache_creation_input_tokens` are added to it. A cache count that is
 * missing or unreadable is none (the tokens are then priced as plain input,
 * the higher price).
 */
export const usageOf = (format: "openai-chat" | "anthropic-messages", usage: unknown): TokenUsage | undefined => {
  if (usage === undefined || usage === null || typeof usage !== "object") return undefined
  const u = usage as Record<string, unknown>
  if (format === "openai-chat") {
    const input = tokens(u["prompt_tokens"])
    const output = tokens(u["completion_tokens"])
    if (input === undefined || output === undefined) return undefined
    const details = u["prompt_tokens_details"]
    const cached = details !== null && typeof details === "object" ? tokens((details as Record<string, unknown>)["cached_tokens"]) : undefined
    return cached === undefined || cached === 0 ? { input, output } : { input, output, cacheRead: Math.min(cached, input) }
  }
  const plain = tokens(u["input_tokens"])
  const output = tokens(u["output_tokens"])
  if (plain === undefined || output === undefined) return undefined
  const cacheRead = tokens(u["cache_read_input_tokens"]) ?? 0
  const cacheWrite = tokens(u["cache_creation_input_tokens"]) ?? 0
  return {
    input: plain + cacheRead + cacheWrite,
    output,
    ...(cacheRead > 0 ? { cacheRead } : {}),
    ...(cacheWrite > 0 ? { cacheWrite } : {})
  }
}

const readUsage = (format: "openai-chat" | "anthropic-messages", body: unknown) =>
  usageOf(format, (body as { usage?: unknown } | null)?.usage)

/** The upper bound of a proxied call and how its actual cost is read back. */
export const quoteProxy = (
  price: EndpointPrice,
  body: unknown,
  service?: string
): Result.Result<ProxyQuote, ValidationError | ModelNotPriced> => {
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
  if (model === undefined) {
    if (typeof modelId !== "string") {
      return Result.fail(new ValidationError({ message: "model must be a string naming a priced model", issues: [{ path: "body.model", message: "Expected a string" }] }))
    }
    return Result.fail(new ModelNotPriced({ model: modelId, ...(service === undefined ? {} : { provider: service }) }))
  }
  const stream = request["stream"] === true
  // The caller's own field; when it gives none, the field the upstream reads (OpenAI's reasoning models refuse max_tokens).
  const maxKey = price.format !== "openai-chat"
    ? "max_tokens"
    : request["max_completion_tokens"] !== undefined
    ? "max_completion_tokens"
    : request["max_tokens"] !== undefined
    ? "max_tokens"
    : price.tokenLimitField ?? "max_tokens"
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
  // Bounded at the highest price a prompt token may cost (a cache write may cost more than input).
  const inputMicroUsd = tokenCost(inputBound, promptBoundPer1k(model))
  const completionBound = maxTokens * choices
  const microUsd = inputMicroUsd + tokenCost(completionBound, model.outputPer1kMicroUsd)
  const cost = (usage: TokenUsage) =>
    promptCost(model, { total: usage.input, cacheRead: usage.cacheRead, cacheWrite: usage.cacheWrite }) +
    tokenCost(usage.output, model.outputPer1kMicroUsd)
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
