/**
 * How the MCP server reaches Spendgate: the HTTP API itself, with the agent's
 * own key. Every tool call is a request the rest of the API would get, so it
 * meets the same authentication, rate limits, kill switch, access matrix and
 * spend pipeline (policy, caps, hold, settle) — there is no second way in.
 */

export interface ApiAnswer {
  readonly status: number
  readonly body: unknown
  readonly retryAfter: string | null
}

export interface Backend {
  readonly get: (path: string) => Promise<ApiAnswer>
  readonly post: (path: string, body: unknown) => Promise<ApiAnswer>
}

/** At most this long for one API call (a code run is at most 60 s, plus the provider's own latency). */
export const CALL_TIMEOUT_MS = 120_000

export const httpBackend = (baseUrl: string, key: string, timeoutMs: number = CALL_TIMEOUT_MS): Backend => {
  const root = baseUrl.replace(/\/+$/, "")
  const call = async (method: "GET" | "POST", path: string, body?: unknown): Promise<ApiAnswer> => {
    const headers: Record<string, string> = { authorization: `Bearer ${key}`, accept: "application/json" }
    if (body !== undefined) headers["content-type"] = "application/json"
    const response = await fetch(`${root}${path}`, {
      method,
      headers,
      signal: AbortSignal.timeout(timeoutMs),
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    const text = await response.text()
    let parsed: unknown = text
    try {
      parsed = text === "" ? null : JSON.parse(text)
    } catch {
      // Not JSON: handed on as text.
    }
    return { status: response.status, body: parsed, retryAfter: response.headers.get("retry-after") }
  }
  return { get: (path) => call("GET", path), post: (path, body) => call("POST", path, body) }
}
