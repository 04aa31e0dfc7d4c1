import { Result } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { meterReason, promptTokenBound, quoteReason } from "../../src/capabilities/pricing.ts"
import type { ModelInfo } from "../../src/capabilities/Provider.ts"
import { quoteProxy, usageOf } from "../../src/services/quote.ts"
import { usageTracker } from "../../src/services/sse.ts"
import type { EndpointPrice } from "../../src/services/Service.ts"

/** The quote of a token-priced chat call bounds everything the call can produce. */

const price: EndpointPrice = {
  kind: "tokens",
  format: "openai-chat",
  models: [{ id: "m-1", inputPer1kMicroUsd: 1_000n, outputPer1kMicroUsd: 2_000n, maxTokens: 1000, defaultMaxTokens: 100 }]
}

const body = (extra: Record<string, unknown>) => ({ model: "m-1", messages: [{ role: "user", content: "hi" }], max_tokens: 100, ...extra })

describe("quoteProxy", () => {
  it("n choices are held n completion budgets: the charge is clamped to the quote, so output beyond it would be free", () => {
    const one = quoteProxy(price, body({}))
    const three = quoteProxy(price, body({ n: 3 }))
    if (Result.isFailure(one) || Result.isFailure(three)) throw new Error("expected quotes")
    // 100 tokens × 2000 µUSD / 1000 = 200 µUSD per choice.
    expect(three.success.microUsd - one.success.microUsd).toBeGreaterThanOrEqual(2n * 200n)
    const usage = { body: { usage: { prompt_tokens: 10, completion_tokens: 300 } }, status: 200, headers: {} }
    expect(three.success.meter(usage)).toBeLessThanOrEqual(three.success.microUsd)
  })

  it("n must be a whole number from 1 to 128", () => {
    for (const n of [0, -1, 1.5, "2", 129]) {
      const quoted = quoteProxy(price, body({ n }))
      expect(Result.isFailure(quoted) && quoted.failure._tag).toBe("ValidationError")
    }
    expect(Result.isSuccess(quoteProxy(price, body({ n: null })))).toBe(true)
  })
})

/** Input 1000 µUSD/1k, cached 100, cache writes 1250, output 2000. */
const cachedModel: ModelInfo = {
  id: "m-1",
  inputPer1kMicroUsd: 1_000n,
  cachedInputPer1kMicroUsd: 100n,
  cacheWritePer1kMicroUsd: 1_250n,
  outputPer1kMicroUsd: 2_000n,
  maxTokens: 1000,
  defaultMaxTokens: 100
}
const openAiPrice: EndpointPrice = { kind: "tokens", format: "openai-chat", models: [cachedModel] }
const anthropicPrice: EndpointPrice = { kind: "tokens", format: "anthropic-messages", models: [cachedModel] }

const quoted = (p: EndpointPrice, extra: Record<string, unknown> = {}) => {
  const q = quoteProxy(p, body(extra))
  if (Result.isFailure(q)) throw new Error(q.failure.message)
  return q.success
}
const answer = (usage: unknown) => ({ body: { usage }, status: 200, headers: {} })

describe("cached-input metering of proxied calls", () => {
  it("OpenAI: prompt_tokens_details.cached_tokens, a part of prompt_tokens, at the cached price", () => {
    const q = quoted(openAiPrice)
    // (200 × 1000 + 800 × 100) / 1000 = 280 µUSD of prompt; 50 × 2000 / 1000 = 100 of output.
    expect(q.meter(answer({ prompt_tokens: 1000, completion_tokens: 50, prompt_tokens_details: { cached_tokens: 800 } }))).toBe(380n)
    // No details, or an unreadable count: every prompt token at the input price.
    expect(q.meter(answer({ prompt_tokens: 1000, completion_tokens: 50 }))).toBe(1_100n)
    expect(q.meter(answer({ prompt_tokens: 1000, completion_tokens: 50, prompt_tokens_details: { cached_tokens: "800" } }))).toBe(1_100n)
    // More cached than prompt tokens is read as all of them cached, never as a negative rest.
    expect(q.meter(answer({ prompt_tokens: 1000, completion_tokens: 50, prompt_tokens_details: { cached_tokens: 5000 } }))).toBe(200n)
  })

  it("Anthropic: cache reads and cache writes are added to input_tokens, each at its own price", () => {
    const q = quoted(anthropicPrice)
    // (10 × 1000 + 1000 × 100 + 100 × 1250) / 1000 = 235; 50 × 2000 / 1000 = 100.
    expect(q.meter(answer({ input_tokens: 10, output_tokens: 50, cache_read_input_tokens: 1000, cache_creation_input_tokens: 100 }))).toBe(335n)
    expect(usageOf("anthropic-messages", { input_tokens: 10, output_tokens: 50, cache_read_input_tokens: 1000, cache_creation_input_tokens: 100 }))
      .toEqual({ input: 1110, output: 50, cacheRead: 1000, cacheWrite: 100 })
    expect(usageOf("anthropic-messages", { input_tokens: 10, output_tokens: 50, cache_read_input_tokens: null })).toEqual({ input: 10, output: 50 })
  })

  it("the quote bounds prompt tokens at the dearest prompt price (a cache write), never at the cached one", () => {
    const q = quoted(anthropicPrice)
    const plain = quoted({ kind: "tokens", format: "anthropic-messages", models: [{ ...cachedModel, cacheWritePer1kMicroUsd: undefined }] })
    expect(q.tokens!.inputMicroUsd * 1_000n).toBeGreaterThanOrEqual(plain.tokens!.inputMicroUsd * 1_250n - 1_000n)
    expect(q.tokens!.inputMicroUsd).toBeGreaterThan(plain.tokens!.inputMicroUsd)
  })

  it("streams: the trackers read the cache counts of both formats", () => {
    const encode = (text: string) => new TextEncoder().encode(text)
    const openai = usageTracker("openai-chat")
    openai.push(encode(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: "hi" } }] })}\n\n`))
    openai.push(encode(`data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 1000, completion_tokens: 5, prompt_tokens_details: { cached_tokens: 900 } } })}\n\ndata: [DONE]\n\n`))
    expect(openai.usage()).toEqual({ input: 1000, output: 5, cacheRead: 900 })
    expect(quoted(openAiPrice).tokens!.cost(openai.usage()!)).toBe(190n + 10n)

    const anthropic = usageTracker("anthropic-messages")
    const event = (type: string, data: Record<string, unknown>) => encode(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`)
    anthropic.push(event("message_start", { message: { usage: { input_tokens: 10, output_tokens: 1, cache_read_input_tokens: 1000, cache_creation_input_tokens: 100 } } }))
    anthropic.push(event("content_block_delta", { index: 0, delta: { type: "text_delta", text: "hi" } }))
    anthropic.push(event("message_delta", { delta: { stop_reason: "end_turn" }, usage: { output_tokens: 50 } }))
    expect(anthropic.usage()).toEqual({ input: 1110, output: 50, cacheRead: 1000, cacheWrite: 100 })
    expect(quoted(anthropicPrice).tokens!.cost(anthropic.usage()!)).toBe(335n)
  })
})

describe("the charge never exceeds the quote (property)", () => {
  const price = fc.bigInt({ min: 0n, max: 10_000_000n })
  /** A part of a bound: often all or none of it, the edges where a wrong bound shows. */
  const share = fc.oneof(fc.constant(1), fc.constant(0), fc.double({ min: 0, max: 1, noNaN: true }))
  const model = fc.record({ input: price, cachedShare: fc.integer({ min: 0, max: 100 }), write: fc.option(price, { nil: undefined }), output: price })
    .map(({ input, cachedShare, write, output }): ModelInfo => ({
      id: "m-1",
      inputPer1kMicroUsd: input,
      cachedInputPer1kMicroUsd: (input * BigInt(cachedShare)) / 100n,
      cacheWritePer1kMicroUsd: write,
      outputPer1kMicroUsd: output,
      maxTokens: 4096,
      defaultMaxTokens: 256
    }))

  it("reason: any usage within the bounds (prompt ≤ its bound, completion ≤ maxTokens, any cache split) costs at most the quote", () => {
    fc.assert(fc.property(
      model,
      fc.string({ maxLength: 200 }),
      fc.integer({ min: 1, max: 4096 }),
      share,
      share,
      share,
      share,
      (m, prompt, maxTokens, promptShare, readShare, writeShare, completionShare) => {
        const input = { prompt: prompt === "" ? "x" : prompt, maxTokens }
        const q = quoteReason([m], input)
        if (Result.isFailure(q)) throw new Error(q.failure.message)
        const promptTokens = Math.floor(promptTokenBound(input) * promptShare)
        const cacheReadTokens = Math.floor(promptTokens * readShare)
        const cacheWriteTokens = Math.floor((promptTokens - cacheReadTokens) * writeShare)
        const completionTokens = Math.floor(maxTokens * completionShare)
        const charge = meterReason(m, { promptTokens, completionTokens, cacheReadTokens, cacheWriteTokens })
        return charge <= q.success.microUsd
      }
    ), { numRuns: 500 })
  })

  it("proxy: a usage within the bounds costs at most the quote, in both formats, JSON or streamed", () => {
    fc.assert(fc.property(
      model,
      fc.constantFrom("openai-chat" as const, "anthropic-messages" as const),
      fc.string({ maxLength: 200 }),
      fc.integer({ min: 1, max: 4096 }),
      share,
      share,
      share,
      share,
      (m, format, content, maxTokens, promptShare, readShare, writeShare, completionShare) => {
        const request = { model: "m-1", messages: [{ role: "user", content }], max_tokens: maxTokens }
        const q = quoteProxy({ kind: "tokens", format, models: [m] }, request)
        if (Result.isFailure(q)) throw new Error(q.failure.message)
        const bound = promptTokenBound({ prompt: JSON.stringify({ ...request, max_tokens: undefined }) })
        const promptTokens = Math.floor(bound * promptShare)
        const read = Math.floor(promptTokens * readShare)
        const write = format === "anthropic-messages" ? Math.floor((promptTokens - read) * writeShare) : 0
        const output = Math.floor(maxTokens * completionShare)
        const usage = format === "openai-chat"
          ? { prompt_tokens: promptTokens, completion_tokens: output, prompt_tokens_details: { cached_tokens: read } }
          : { input_tokens: promptTokens - read - write, output_tokens: output, cache_read_input_tokens: read, cache_creation_input_tokens: write }
        const charge = q.success.meter(answer(usage))
        const streamed = q.success.tokens!.cost(usageOf(format, usage)!)
        return charge === streamed && charge <= q.success.microUsd
      }
    ), { numRuns: 500 })
  })
})
