import { Result } from "effect"
import { tokenCost } from "../capabilities/pricing.ts"
import { ModelNotPriced, ValidationError } from "../domain/errors.ts"
import type { ProxyResponse } from "../ports/ServiceTransport.ts"
import type { EndpointPrice } from "./Service.ts"
import { utf8Length } from "../domain/utf8.ts"

/**
 * The price of an embeddings call (OpenAI's `POST /embeddings`), per 1000
 * input tokens of its model:
 *
 * - the quote bounds the input's tokens before anything is sent: a string
 *   counts one token per UTF-8 byte (a token of a byte-level BPE vocabulary
 *   covers at least one byte, so this never undercounts), and an input given
 *   as token ids counts exactly its ids;
 * - the charge is read from the upstream's `usage.prompt_tokens` (else
 *   `total_tokens`), never more than the quote; an answer without usage is
 *   charged the quote.
 *
 * `input` is a non-empty string, an array of 1 to 2048 non-empty strings, an
 * array of token ids, or an array of 1 to 2048 non-empty arrays of token ids;
 * `encoding_format` (`float` or `base64`) and `dimensions` (1 to the model's
 * own) pass through, as does the rest of the body.
 */

/** The most inputs one call may embed (OpenAI's limit). */
export const MAX_EMBEDDING_INPUTS = 2048

/** The same shape as `ProxyQuote` (quote.ts), without its token-streaming details. */
interface EmbeddingsQuote {
  readonly microUsd: bigint
  readonly body: unknown
  readonly model: string
  readonly meter: (response: ProxyResponse) => bigint
}

const invalid = (path: string, message: string) =>
  new ValidationError({ message: `${path}: ${message}`, issues: [{ path: `body.${path}`, message }] })

const isTokenId = (value: unknown): boolean => typeof value === "number" && Number.isSafeInteger(value) && value >= 0

/** The upper bound of the input's tokens, or what is wrong with it. */
export const embeddingTokenBound = (input: unknown): Result.Result<number, ValidationError> => {
  if (typeof input === "string") {
    return input === "" ? Result.fail(invalid("input", "must not be empty")) : Result.succeed(utf8Length(input))
  }
  if (!Array.isArray(input) || input.length === 0) {
    return Result.fail(invalid("input", "must be a string, an array of strings, or token ids"))
  }
  if (input.length > MAX_EMBEDDING_INPUTS) return Result.fail(invalid("input", `at most ${MAX_EMBEDDING_INPUTS} inputs`))
  if (input.every((item) => typeof item === "string")) {
    if (input.some((item) => item === "")) return Result.fail(invalid("input", "must not hold an empty string"))
    return Result.succeed(input.reduce((sum: number, item: string) => sum + utf8Length(item), 0))
  }
  if (input.every(isTokenId)) return Result.succeed(input.length)
  if (input.every((item) => Array.isArray(item) && item.length > 0 && item.every(isTokenId))) {
    return Result.succeed(input.reduce((sum: number, item: ReadonlyArray<unknown>) => sum + item.length, 0))
  }
  return Result.fail(invalid("input", "must be a string, an array of strings, an array of token ids, or an array of such arrays"))
}

const usageTokens = (body: unknown): number | undefined => {
  const usage = (body as { usage?: unknown } | null)?.usage
  if (typeof usage !== "object" || usage === null) return undefined
  const { prompt_tokens, total_tokens } = usage as Record<string, unknown>
  const tokens = typeof prompt_tokens === "number" ? prompt_tokens : total_tokens
  return typeof tokens === "number" && Number.isFinite(tokens) && tokens >= 0 ? tokens : undefined
}

export const quoteEmbeddings = (
  price: Extract<EndpointPrice, { readonly kind: "embeddings" }>,
  request: Readonly<Record<string, unknown>>
): Result.Result<EmbeddingsQuote, ValidationError | ModelNotPriced> => {
  const modelId = request["model"]
  const model = price.models.find((m) => m.id === modelId)
  if (model === undefined) {
    if (typeof modelId !== "string") {
      return Result.fail(new ValidationError({ message: "model must be a string naming a priced model", issues: [{ path: "model", message: "Expected a string" }] }))
    }
    return Result.fail(new ModelNotPriced({ model: modelId.slice(0, 200) }))
  }
  const bound = embeddingTokenBound(request["input"])
  if (Result.isFailure(bound)) return Result.fail(bound.failure)
  const format = request["encoding_format"]
  if (format !== undefined && format !== null && format !== "float" && format !== "base64") {
    return Result.fail(invalid("encoding_format", "must be float or base64"))
  }
  const dimensions = request["dimensions"]
  if (
    dimensions !== undefined && dimensions !== null &&
    !(typeof dimensions === "number" && Number.isInteger(dimensions) && dimensions >= 1 && dimensions <= model.dimensions)
  ) {
    return Result.fail(invalid("dimensions", `must be a whole number from 1 to ${model.dimensions}`))
  }
  const microUsd = tokenCost(bound.success, model.inputPer1kMicroUsd)
  return Result.succeed({
    microUsd,
    body: Object.fromEntries(Object.entries(request).filter(([, v]) => v !== null)),
    model: model.id,
    meter: (response) => {
      const tokens = usageTokens(response.body)
      if (tokens === undefined) return microUsd
      const cost = tokenCost(tokens, model.inputPer1kMicroUsd)
      return cost < microUsd ? cost : microUsd
    }
  })
}
