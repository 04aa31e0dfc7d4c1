import { Result } from "effect"
import { describe, expect, it } from "vitest"
import { quoteProxy } from "../../src/services/quote.ts"
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
