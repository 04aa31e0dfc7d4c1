import { Result } from "effect"
import { describe, expect, it } from "vitest"
import { embeddingModels, embeddingRoutes, embeddingRoutesFor } from "../../src/services/embeddings.ts"
import { embeddingTokenBound, MAX_EMBEDDING_INPUTS } from "../../src/services/embeddingsQuote.ts"
import { quoteProxy } from "../../src/services/quote.ts"
import type { EndpointPrice, Service } from "../../src/services/Service.ts"

/** Embeddings: the quote bounds the input's tokens before the call; the charge is the upstream's usage, never above the quote. */

const price: EndpointPrice = {
  kind: "embeddings",
  models: [{ id: "e-1", inputPer1kMicroUsd: 1_000n, dimensions: 64 }]
}

const quote = (body: Record<string, unknown>) => {
  const quoted = quoteProxy(price, { model: "e-1", ...body })
  if (Result.isFailure(quoted)) throw new Error(`refused: ${quoted.failure.message}`)
  return quoted.success
}

const refusal = (body: Record<string, unknown>) => {
  const quoted = quoteProxy(price, { model: "e-1", ...body })
  if (Result.isSuccess(quoted)) throw new Error(`expected ${JSON.stringify(body).slice(0, 80)} to be refused`)
  return quoted.failure
}

const answer = (usage: unknown) => ({ status: 200, headers: {}, body: { object: "list", data: [], usage } })

describe("embeddings quote", () => {
  it("a string is bounded at one token per UTF-8 byte; token ids count one each", () => {
    expect(Result.getOrThrow(embeddingTokenBound("hello"))).toBe(5)
    // é is 2 bytes, 日本 is 6, 😀 is 4.
    expect(Result.getOrThrow(embeddingTokenBound(["é", "日本", "😀"]))).toBe(12)
    expect(Result.getOrThrow(embeddingTokenBound([1, 2, 3]))).toBe(3)
    expect(Result.getOrThrow(embeddingTokenBound([[1, 2], [3]]))).toBe(3)
    // 2000 bytes × 1000 µUSD / 1000.
    expect(quote({ input: "x".repeat(2000) }).microUsd).toBe(2_000n)
  })

  it("the charge is the upstream's prompt_tokens (else total_tokens), never above the quote; no usage is the quote", () => {
    const q = quote({ input: "x".repeat(2000) })
    expect(q.meter(answer({ prompt_tokens: 500, total_tokens: 500 }))).toBe(500n)
    expect(q.meter(answer({ total_tokens: 700 }))).toBe(700n)
    expect(q.meter(answer({ prompt_tokens: 999_999 }))).toBe(2_000n)
    expect(q.meter(answer(undefined))).toBe(2_000n)
    expect(q.meter(answer({ prompt_tokens: -1 }))).toBe(2_000n)
    expect(q.meter(answer({ prompt_tokens: "12" }))).toBe(2_000n)
  })

  it("refuses empty, mixed, oversized and malformed input, a bad encoding_format or dimensions; an unknown model is NotFound", () => {
    for (
      const input of [undefined, "", [], [""], ["a", 1], [[1], []], [1.5], [-1], { text: "a" }, Array.from({ length: MAX_EMBEDDING_INPUTS + 1 }, () => "a")]
    ) {
      expect(refusal({ input })._tag, JSON.stringify(input)?.slice(0, 40)).toBe("ValidationError")
    }
    expect(refusal({ input: "a", encoding_format: "hex" })._tag).toBe("ValidationError")
    for (const dimensions of [0, 65, 1.5, "8"]) expect(refusal({ input: "a", dimensions })._tag).toBe("ValidationError")
    expect(quote({ input: "a", dimensions: 64, encoding_format: "base64" }).body).toEqual({ model: "e-1", input: "a", dimensions: 64, encoding_format: "base64" })
    const unknown = quoteProxy(price, { model: "e-2", input: "a" })
    expect(Result.isFailure(unknown) && unknown.failure._tag).toBe("NotFound")
  })
})

describe("embeddings routing", () => {
  const service = (slug: string, per1k: bigint, origin: Service["origin"] = "operator"): Service => ({
    slug,
    name: slug,
    description: "",
    baseUrl: "http://127.0.0.1:1",
    capabilities: ["reason"],
    origin,
    endpoints: [{ path: "/embeddings", method: "POST", description: "", price: { kind: "embeddings", models: [{ id: "e-1", inputPer1kMicroUsd: per1k, dimensions: 8 }] } }]
  })

  it("a bare model goes to the cheapest operator service first; service/model names one; registry services are not routed to", () => {
    const routes = embeddingRoutes([service("dear", 50n), service("cheap", 10n), service("community", 1n, "registry")])
    expect(embeddingRoutesFor(routes, "e-1").map((r) => r.service.slug)).toEqual(["cheap", "dear"])
    expect(embeddingRoutesFor(routes, "dear/e-1").map((r) => r.service.slug)).toEqual(["dear"])
    expect(embeddingRoutesFor(routes, "e-2")).toEqual([])
    expect(embeddingModels(routes)).toEqual([
      { id: "e-1", ownedBy: "cheap" },
      { id: "dear/e-1", ownedBy: "dear" },
      { id: "cheap/e-1", ownedBy: "cheap" }
    ])
  })
})
