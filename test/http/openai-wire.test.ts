import OpenAI from "openai"
import { Stream } from "openai/streaming"
import { describe, expect, it } from "vitest"
import { toOpenAiError } from "../../adapters/http/openai/wire.ts"
import { openAiErrorEvent } from "../../src/services/sse.ts"
import { AgentKilled } from "../../src/domain/errors.ts"

/** The pieces of OpenAI's wire format the OpenAI-compatible routes write, read back by the official client. */

describe("OpenAI's wire format", () => {
  it("a refusal after a stream began is an event the official client raises as an APIError with the code", async () => {
    const chunk = `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { content: "Hi" } }] })}\n\n`
    const error = new TextDecoder().decode(openAiErrorEvent(new AgentKilled()))
    const response = new Response(chunk + error, { headers: { "content-type": "text/event-stream" } })
    const seen: Array<unknown> = []
    const raised = await (async () => {
      for await (const item of Stream.fromSSEResponse(response, new AbortController())) seen.push(item)
    })().catch((e: unknown) => e)
    expect(seen).toHaveLength(1)
    expect(raised).toBeInstanceOf(OpenAI.APIError)
    expect(raised).toMatchObject({ code: "AGENT_KILLED", type: "permission_error", param: null })
  })

  it("the envelope becomes { message, type, code, param } with details kept; other bodies are left alone", () => {
    expect(toOpenAiError({ error: { code: "VALIDATION_ERROR", message: "Invalid", details: { issues: [{ path: "messages", message: "x" }] } } }))
      .toEqual({
        error: {
          message: "Invalid",
          type: "invalid_request_error",
          code: "VALIDATION_ERROR",
          param: "messages",
          details: { issues: [{ path: "messages", message: "x" }] }
        }
      })
    expect(toOpenAiError({ error: { code: "BUDGET_EXCEEDED", message: "cap" } }))
      .toEqual({ error: { message: "cap", type: "insufficient_quota", code: "BUDGET_EXCEEDED", param: null } })
    const upstream = { error: { message: "m", type: "invalid_request_error", code: "x", param: null } }
    expect(toOpenAiError(upstream)).toBe(upstream)
    expect(toOpenAiError("text")).toBe("text")
  })
})
