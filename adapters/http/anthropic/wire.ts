import type { HttpServerRequest } from "effect/http"
import { anthropicErrorBody } from "../../../src/services/sse.ts"
import { wireErrorsMiddleware } from "../wireErrors.ts"

/**
 * Errors on the Anthropic-compatible routes in Anthropic's shape:
 * `{ type: "error", error: { type, message, code, details }, request_id: null }`,
 * `type` Anthropic's kind for the Spendgate code (anthropicErrorType),
 * `code` the Spendgate code, `details` the Spendgate details plus
 * `error_code` (read by Anthropic's clients as the error's `errorCode`). The
 * status and headers (Retry-After) are unchanged, so Anthropic's clients
 * raise their usual typed errors: 401 AuthenticationError, 402
 * PaymentRequiredError, 403 PermissionDeniedError, 404 NotFoundError, 429
 * RateLimitError. An upstream's own error (a 4xx it answered) passes
 * through as it came.
 *
 * The routes: `POST /v1/messages` (and the 404 of anything under it, such as
 * `count_tokens`, which is not served), and `GET /v1/models` when the request
 * carries `anthropic-version` (Anthropic's clients always send it; the
 * models are then listed in Anthropic's shape too).
 */

const pathOf = (url: string) => url.split("?")[0]!.replace(/\/+$/, "")

/** Whether a request is answered in Anthropic's wire format. */
export const speaksAnthropic = (request: HttpServerRequest.HttpServerRequest): boolean => {
  const path = pathOf(request.url)
  return path === "/v1/messages" || path.startsWith("/v1/messages/") ||
    (path === "/v1/models" && request.headers["anthropic-version"] !== undefined)
}

/** An envelope `{ error: { code, message, details? } }` as Anthropic's error; anything else unchanged. */
export const toAnthropicError = (body: unknown): unknown => {
  const error = (body as { error?: unknown } | null)?.error
  if (typeof error !== "object" || error === null || (body as { type?: unknown }).type !== undefined) return body
  const { code, message, details, type } = error as Record<string, unknown>
  if (typeof code !== "string" || typeof message !== "string" || type !== undefined) return body
  return anthropicErrorBody(code, message, details)
}

export const anthropicErrorsMiddleware = (options: { readonly bodyLimitBytes?: number } = {}) =>
  wireErrorsMiddleware({ speaks: speaksAnthropic, shape: toAnthropicError, bodyLimitBytes: options.bodyLimitBytes })
