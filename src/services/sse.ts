import type { CallReceipt } from "../wallet/receipt.ts"
import type { TokenUsage } from "./quote.ts"

/**
 * Server-sent events of a streamed call: what the gateway adds to a stream it
 * passes through (its receipt, or a refusal that came after the answer
 * began), and reading the usage out of the upstream's events.
 */

/** The API's error envelope (decisions §8). */
export interface ErrorEnvelope {
  readonly error: { readonly code: string; readonly message: string; readonly details?: unknown }
}

/** An event the gateway appends to a stream; the last one the caller receives. */
export type GatewayEvent =
  | { readonly event: "spendgate.metadata"; readonly data: CallReceipt }
  | { readonly event: "spendgate.error"; readonly data: ErrorEnvelope }

/**
 * OpenAI's error `type` for a Spendgate error code (its `code` stays the
 * Spendgate code): the routes that speak OpenAI's wire format, and the late
 * refusal of a stream on them.
 */
export const openAiErrorType = (code: string): string => {
  switch (code) {
    case "UNAUTHORIZED":
      return "authentication_error"
    case "BUDGET_EXCEEDED":
    case "PER_CALL_LIMIT_EXCEEDED":
    case "VELOCITY_EXCEEDED":
    case "INSUFFICIENT_BALANCE":
      return "insufficient_quota"
    case "AGENT_KILLED":
    case "CAPABILITY_NOT_ALLOWED":
    case "FORBIDDEN":
      return "permission_error"
    case "NOT_FOUND":
      return "not_found_error"
    case "RATE_LIMITED":
      return "rate_limit_error"
    case "INTERNAL":
    case "PROVIDER_ERROR":
    case "PROVIDER_UNAVAILABLE":
    case "RATE_UNAVAILABLE":
      return "api_error"
    default:
      return "invalid_request_error"
  }
}

/**
 * A refusal after the stream began, in OpenAI's stream shape: a `data:` event
 * holding `{ error: { message, type, code, param } }`, which OpenAI's clients
 * raise as an API error.
 */
export const openAiErrorEvent = (error: { readonly message: string }): Uint8Array => {
  const { code: raw, details } = error as { readonly code?: unknown; readonly details?: unknown }
  const code = typeof raw === "string" ? raw : "PROVIDER_ERROR"
  return encoder.encode(`data: ${
    JSON.stringify({
      error: { message: error.message, type: openAiErrorType(code), code, param: null, ...(details === undefined ? {} : { details }) }
    })
  }\n\n`)
}

/**
 * Anthropic's error `type` for a Spendgate error code, chosen so that the
 * status and the type agree as in Anthropic's own API: the routes that speak
 * Anthropic's wire format, and the late refusal of a stream on them.
 */
export const anthropicErrorType = (code: string): string => {
  switch (code) {
    case "UNAUTHORIZED":
      return "authentication_error"
    case "BUDGET_EXCEEDED":
    case "PER_CALL_LIMIT_EXCEEDED":
    case "INSUFFICIENT_BALANCE":
      return "billing_error"
    case "AGENT_KILLED":
    case "CAPABILITY_NOT_ALLOWED":
    case "FORBIDDEN":
      return "permission_error"
    case "NOT_FOUND":
      return "not_found_error"
    case "RATE_LIMITED":
      return "rate_limit_error"
    case "REQUEST_TIMEOUT":
      return "timeout_error"
    case "IDEMPOTENCY_CONFLICT":
    case "CONFLICT":
      return "conflict_error"
    case "INTERNAL":
    case "PROVIDER_ERROR":
    case "PROVIDER_UNAVAILABLE":
    case "RATE_UNAVAILABLE":
      return "api_error"
    default:
      return "invalid_request_error"
  }
}

/**
 * A Spendgate error in Anthropic's shape: `{ type: "error", error: { type,
 * message, code, details }, request_id: null }`. `code` is the Spendgate code;
 * `details` holds the Spendgate details plus `error_code` (the same code, where
 * Anthropic's clients read an error's code: `errorCode` on their errors).
 */
export const anthropicErrorBody = (code: string, message: string, details?: unknown) => ({
  type: "error" as const,
  error: {
    type: anthropicErrorType(code),
    message,
    code,
    details: { ...(details !== null && typeof details === "object" ? details : {}), error_code: code }
  },
  request_id: null
})

/** A refusal after the stream began, in Anthropic's stream shape: `event: error` with its error body. */
export const anthropicErrorEvent = (error: { readonly message: string }): Uint8Array => {
  const { code: raw, details } = error as { readonly code?: unknown; readonly details?: unknown }
  const code = typeof raw === "string" ? raw : "PROVIDER_ERROR"
  return encoder.encode(`event: error\ndata: ${JSON.stringify(anthropicErrorBody(code, error.message, details))}\n\n`)
}

/** The one writer of the gateway's own events. */
export const gatewayEvent = (event: GatewayEvent): Uint8Array =>
  encoder.encode(`event: ${event.event}\ndata: ${JSON.stringify(event.data)}\n\n`)

/** `event: spendgate.metadata`: the call's receipt (the same view as a JSON answer's `metadata`). */
export const metadataEvent = (receipt: CallReceipt): Uint8Array => gatewayEvent({ event: "spendgate.metadata", data: receipt })

/** `event: spendgate.error` with the API's error envelope, for a refusal after the stream began. */
export const errorEvent = (error: { readonly message: string }): Uint8Array => {
  const { code, details } = error as { readonly code?: unknown; readonly details?: unknown }
  return gatewayEvent({
    event: "spendgate.error",
    data: {
      error: {
        code: typeof code === "string" ? code : "PROVIDER_ERROR",
        message: error.message,
        ...(details === undefined ? {} : { details })
      }
    }
  })
}

/**
 * Reads the token usage out of a chat completion streamed as server-sent
 * events, chunk by chunk, without holding the stream: OpenAI sends it in the
 * last `data:` chunk (when `stream_options.include_usage` is set); Anthropic
 * sends the input tokens in `message_start` and a running output count in
 * `message_delta`. Tokens served from or written to the upstream's prompt
 * cache are read too (OpenAI's `prompt_tokens_details.cached_tokens`, a part
 * of `prompt_tokens`; Anthropic's `cache_read_input_tokens` and
 * `cache_creation_input_tokens`, added to its `input_tokens`), so a stream is
 * charged the cached price exactly as a JSON answer is (see `usageOf`).
 * Lines are bounded so a hostile stream cannot grow the buffer.
 *
 * It also counts what was streamed, for a stream that ends without a usable
 * usage report (the upstream sent none, sent a malformed one, or the caller
 * went away first): the UTF-8 bytes of every string and number in each event
 * except the envelope (ids, object and type names, model, roles, finish
 * reasons, indexes, timestamps, usage), plus the whole of any line that is not
 * an SSE field we know. The content and tool-call deltas are in that count
 * whatever fields an upstream puts them in, and a token is at least one byte
 * of text, so the count is an upper bound on the completion tokens streamed.
 */

const MAX_LINE = 1024 * 1024
/** Nesting visited per event; anything deeper is counted by its JSON length. */
const MAX_DEPTH = 32

/** Event fields that carry no completion text: not counted. */
const ENVELOPE_KEYS: ReadonlySet<string> = new Set([
  "id",
  "object",
  "created",
  "model",
  "system_fingerprint",
  "service_tier",
  "usage",
  "type",
  "index",
  "role",
  "finish_reason",
  "stop_reason",
  "stop_sequence",
  "obfuscation"
])

export interface UsageTracker {
  readonly push: (chunk: Uint8Array) => void
  /** The usage seen so far, if the upstream reported any (both counts, well-formed); `input` counts cached tokens too. */
  readonly usage: () => TokenUsage | undefined
  /** UTF-8 bytes of completion content streamed so far (see above): an upper bound on its tokens. */
  readonly streamedBytes: () => number
}

const count = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : undefined

const encoder = new TextEncoder()
const utf8Bytes = (text: string) => encoder.encode(text).length

/** Bytes of the strings and numbers of a parsed event outside its envelope; iterative, so depth cannot overflow. */
export const contentBytes = (event: unknown): number => {
  let total = 0
  const stack: Array<{ readonly value: unknown; readonly depth: number }> = [{ value: event, depth: 0 }]
  while (stack.length > 0) {
    const { value, depth } = stack.pop()!
    if (typeof value === "string") total += utf8Bytes(value)
    else if (typeof value === "number") total += String(value).length
    else if (value !== null && typeof value === "object") {
      if (depth >= MAX_DEPTH) {
        total += utf8Bytes(JSON.stringify(value))
        continue
      }
      if (Array.isArray(value)) {
        for (const item of value) stack.push({ value: item, depth: depth + 1 })
      } else {
        for (const [key, item] of Object.entries(value)) {
          if (!ENVELOPE_KEYS.has(key)) stack.push({ value: item, depth: depth + 1 })
        }
      }
    }
  }
  return total
}

export const usageTracker = (format: "openai-chat" | "anthropic-messages"): UsageTracker => {
  const decoder = new TextDecoder()
  let pending = ""
  let input: number | undefined
  let output: number | undefined
  /** OpenAI: cached tokens, a part of `input`. Anthropic: cache reads and writes, apart from `input`. */
  let cacheRead: number | undefined
  let cacheWrite: number | undefined
  let streamed = 0

  const line = (text: string) => {
    if (text === "" || text.startsWith(":")) return
    if (/^(event|id|retry):/.test(text)) return
    if (!text.startsWith("data:")) {
      // Not an SSE field: whatever it says reached the caller, so it counts.
      streamed += utf8Bytes(text)
      return
    }
    const data = text.slice(5).trim()
    if (data === "" || data === "[DONE]") return
    let event: Record<string, unknown>
    try {
      event = JSON.parse(data) as Record<string, unknown>
    } catch {
      streamed += utf8Bytes(data)
      return
    }
    streamed += contentBytes(event)
    if (typeof event !== "object" || event === null) return
    if (format === "openai-chat") {
      const usage = event["usage"] as Record<string, unknown> | null | undefined
      if (usage !== null && typeof usage === "object") {
        input = count(usage["prompt_tokens"]) ?? input
        output = count(usage["completion_tokens"]) ?? output
        const details = usage["prompt_tokens_details"]
        if (details !== null && typeof details === "object") {
          cacheRead = count((details as Record<string, unknown>)["cached_tokens"]) ?? cacheRead
        }
      }
      return
    }
    const anthropicUsage = (usage: Record<string, unknown> | undefined) => {
      input = count(usage?.["input_tokens"]) ?? input
      output = count(usage?.["output_tokens"]) ?? output
      cacheRead = count(usage?.["cache_read_input_tokens"]) ?? cacheRead
      cacheWrite = count(usage?.["cache_creation_input_tokens"]) ?? cacheWrite
    }
    if (event["type"] === "message_start") {
      anthropicUsage((event["message"] as { usage?: Record<string, unknown> } | undefined)?.usage)
    } else if (event["type"] === "message_delta") {
      const usage = event["usage"]
      anthropicUsage(usage !== null && typeof usage === "object" ? usage as Record<string, unknown> : undefined)
    }
  }

  return {
    push: (chunk) => {
      pending += decoder.decode(chunk, { stream: true })
      let newline = pending.indexOf("\n")
      while (newline >= 0) {
        line(pending.slice(0, newline).replace(/\r$/, ""))
        pending = pending.slice(newline + 1)
        newline = pending.indexOf("\n")
      }
      if (pending.length > MAX_LINE) {
        // An over-long line reached the caller all the same: count it, then drop it.
        streamed += utf8Bytes(pending)
        pending = ""
      }
    },
    usage: () => {
      if (input === undefined || output === undefined) return undefined
      if (format === "openai-chat") {
        return cacheRead === undefined || cacheRead === 0 ? { input, output } : { input, output, cacheRead: Math.min(cacheRead, input) }
      }
      const read = cacheRead ?? 0
      const written = cacheWrite ?? 0
      return {
        input: input + read + written,
        output,
        ...(read > 0 ? { cacheRead: read } : {}),
        ...(written > 0 ? { cacheWrite: written } : {})
      }
    },
    streamedBytes: () => streamed + (pending.length > 0 ? utf8Bytes(pending) : 0)
  }
}
