import Anthropic from "@anthropic-ai/sdk"
import { Stream } from "@anthropic-ai/sdk/streaming"
import { describe, expect, it } from "vitest"
import { toAnthropicError } from "../../adapters/http/anthropic/wire.ts"
import { BudgetExceeded } from "../../src/domain/errors.ts"
import { anthropicErrorEvent } from "../../src/services/sse.ts"

/** The pieces of Anthropic's wire format the Anthropic-compatible route writes, read back by the official client. */

describe("Anthropic's wire format", () => {
  it("a refusal after a stream began is an `event: error` the official client raises with its type and the code", async () => {
    const start = `event: message_start\ndata: ${
      JSON.stringify({
        type: "message_start",
        message: { id: "m", type: "message", role: "assistant", model: "x", content: [], usage: { input_tokens: 1, output_tokens: 0 } }
      })
    }\n\n`
    const refusal = new BudgetExceeded({ dailySpentMicroUsd: 10_000n, dailyCapMicroUsd: 20_000n, quotedMicroUsd: 15_000n })
    const error = new TextDecoder().decode(anthropicErrorEvent(refusal))
    expect(error.startsWith("event: error\ndata: ")).toBe(true)
    const response = new Response(start + error, { headers: { "content-type": "text/event-stream" } })
    const seen: Array<unknown> = []
    const raised = await (async () => {
      for await (const item of Stream.fromSSEResponse(response, new AbortController())) seen.push(item)
    })().catch((e: unknown) => e)
    expect(seen).toHaveLength(1)
    expect(raised).toBeInstanceOf(Anthropic.APIError)
    expect(raised).toMatchObject({
      type: "billing_error",
      errorCode: "BUDGET_EXCEEDED",
      details: { dailySpent: 1, dailyCap: 2, quotedCost: 1.5, error_code: "BUDGET_EXCEEDED" }
    })
  })

  it("the envelope becomes { type: error, error: { type, message, code, details } }; other bodies are left alone", () => {
    expect(toAnthropicError({ error: { code: "VALIDATION_ERROR", message: "Invalid", details: { issues: [{ path: "messages", message: "x" }] } } }))
      .toEqual({
        type: "error",
        error: {
          type: "invalid_request_error",
          message: "Invalid",
          code: "VALIDATION_ERROR",
          details: { issues: [{ path: "messages", message: "x" }], error_code: "VALIDATION_ERROR" }
        },
        request_id: null
      })
    expect(toAnthropicError({ error: { code: "AGENT_KILLED", message: "killed" } })).toEqual({
      type: "error",
      error: { type: "permission_error", message: "killed", code: "AGENT_KILLED", details: { error_code: "AGENT_KILLED" } },
      request_id: null
    })
    const upstream = { type: "error", error: { type: "overloaded_error", message: "Overloaded" }, request_id: "req_1" }
    expect(toAnthropicError(upstream)).toBe(upstream)
    expect(toAnthropicError("text")).toBe("text")
    expect(toAnthropicError(null)).toBe(null)
  })
})
