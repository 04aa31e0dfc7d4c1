import { Effect, Result, Schema } from "effect"
import { describe, expect, it } from "vitest"
import type { AccountId, AgentId } from "../../src/domain/ids.ts"
import { MicroUsd } from "../../src/domain/Money.ts"
import { canonicalJson, checkQuoteUse, newQuoteId, QuoteId, requestHash, type StoredQuote } from "../../src/quotes/Quote.ts"

/** The pure rule every store applies when a call names a quote, and what a quote is bound to. */

const agentId = "agt_000000000000000000000001" as AgentId
const created = new Date("2026-06-01T12:00:00Z")
const quote: StoredQuote = {
  id: newQuoteId(),
  accountId: "acc_000000000000000000000001" as AccountId,
  agentId,
  capability: "search",
  provider: "p",
  model: null,
  requestHash: "a".repeat(64),
  quotedMicroUsd: MicroUsd.make(50_000n),
  createdAt: created,
  expiresAt: new Date(created.getTime() + 60_000),
  usedAt: null,
  reservationId: null
}
const use = { quoteId: quote.id, agentId, capability: "search" as const, requestHash: quote.requestHash, now: created }
const code = (result: Result.Result<unknown, { readonly code: string }>) => Result.isFailure(result) ? result.failure.code : "OK"

describe("checkQuoteUse", () => {
  it("allows the quote's own agent, capability and input before expiry", () => {
    expect(code(checkQuoteUse(quote, use))).toBe("OK")
    expect(code(checkQuoteUse(quote, { ...use, now: new Date(quote.expiresAt.getTime() - 1) }))).toBe("OK")
  })

  it("refuses, in order: not the caller's (404), used, expired (at expiresAt), another capability, another input", () => {
    expect(code(checkQuoteUse(null, use))).toBe("NOT_FOUND")
    expect(code(checkQuoteUse(quote, { ...use, agentId: "agt_000000000000000000000002" as AgentId }))).toBe("NOT_FOUND")
    expect(code(checkQuoteUse(quote, { ...use, quoteId: newQuoteId() }))).toBe("NOT_FOUND")
    const used = { ...quote, usedAt: created, reservationId: "rsv_x" }
    // Used and expired and for another input: used is what the caller needs to hear.
    expect(code(checkQuoteUse(used, { ...use, requestHash: "b".repeat(64), now: quote.expiresAt }))).toBe("QUOTE_USED")
    expect(code(checkQuoteUse(quote, { ...use, capability: "read", now: quote.expiresAt }))).toBe("QUOTE_EXPIRED")
    expect(code(checkQuoteUse(quote, { ...use, capability: "read", requestHash: "b".repeat(64) }))).toBe("QUOTE_MISMATCH")
    const mismatch = checkQuoteUse(quote, { ...use, requestHash: "b".repeat(64) })
    expect(Result.isFailure(mismatch) && mismatch.failure._tag === "QuoteMismatch" && mismatch.failure.details)
      .toEqual({ quoteId: quote.id, field: "input" })
  })
})

describe("what a quote is bound to", () => {
  it("is the same for the same input whatever its key order, and differs for any other value", async () => {
    const hash = (input: unknown) => Effect.runPromise(requestHash("reason", input))
    const a = await hash({ prompt: "p", maxTokens: 10 })
    expect(await hash({ maxTokens: 10, prompt: "p" })).toBe(a)
    expect(await hash({ maxTokens: 10, prompt: "p", model: undefined })).toBe(a)
    expect(await hash({ prompt: "p", maxTokens: 11 })).not.toBe(a)
    expect(await hash({ prompt: "p" })).not.toBe(a)
    expect(await Effect.runPromise(requestHash("search", { prompt: "p", maxTokens: 10 }))).not.toBe(a)
    expect(a).toMatch(/^[0-9a-f]{64}$/)
    expect(canonicalJson({ b: [1, { d: "x", c: null }], a: "é" })).toBe('{"a":"é","b":[1,{"c":null,"d":"x"}]}')
  })

  it("ids are quo_ and 24 characters", () => {
    const id = newQuoteId()
    expect(Schema.is(QuoteId)(id)).toBe(true)
    expect(Schema.is(QuoteId)("quo_short")).toBe(false)
  })
})
