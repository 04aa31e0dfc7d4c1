/**
 * Reads the token usage out of a chat completion streamed as server-sent
 * events, chunk by chunk, without holding the stream: OpenAI sends it in the
 * last `data:` chunk (when `stream_options.include_usage` is set); Anthropic
 * sends the input tokens in `message_start` and a running output count in
 * `message_delta`. Lines are bounded so a hostile stream cannot grow the buffer.
 */

const MAX_LINE = 1024 * 1024

export interface UsageTracker {
  readonly push: (chunk: Uint8Array) => void
  /** The usage seen so far, if the upstream reported any. */
  readonly usage: () => { readonly input: number; readonly output: number } | undefined
}

const count = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : undefined

export const usageTracker = (format: "openai-chat" | "anthropic-messages"): UsageTracker => {
  const decoder = new TextDecoder()
  let pending = ""
  let input: number | undefined
  let output: number | undefined

  const line = (text: string) => {
    if (!text.startsWith("data:")) return
    const data = text.slice(5).trim()
    if (data === "" || data === "[DONE]") return
    let event: Record<string, unknown>
    try {
      event = JSON.parse(data) as Record<string, unknown>
    } catch {
      return
    }
    if (typeof event !== "object" || event === null) return
    if (format === "openai-chat") {
      const usage = event["usage"] as Record<string, unknown> | null | undefined
      if (usage !== null && typeof usage === "object") {
        input = count(usage["prompt_tokens"]) ?? input
        output = count(usage["completion_tokens"]) ?? output
      }
      return
    }
    if (event["type"] === "message_start") {
      const usage = (event["message"] as { usage?: Record<string, unknown> } | undefined)?.usage
      input = count(usage?.["input_tokens"]) ?? input
      output = count(usage?.["output_tokens"]) ?? output
    } else if (event["type"] === "message_delta") {
      const usage = event["usage"] as Record<string, unknown> | undefined
      output = count(usage?.["output_tokens"]) ?? output
      input = count(usage?.["input_tokens"]) ?? input
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
      if (pending.length > MAX_LINE) pending = ""
    },
    usage: () => (input === undefined || output === undefined ? undefined : { input, output })
  }
}
