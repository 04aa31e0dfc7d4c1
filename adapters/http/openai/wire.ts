import type { HttpServerRequest } from "effect/http"
import { openAiErrorType } from "../../../src/services/sse.ts"
import { speaksAnthropic } from "../anthropic/wire.ts"
import { wireErrorsMiddleware } from "../wireErrors.ts"

/**
 * Errors on the OpenAI-compatible routes in OpenAI's shape:
 * `{ error: { message, type, code, param } }`, `code` holding the Spendgate
 * code, `type` OpenAI's kind for it (openAiErrorType), `param` the first
 * field a validation error names (else null), and `details` kept. The status
 * and headers (Retry-After) are unchanged, so OpenAI's clients raise their
 * usual typed errors: 401 AuthenticationError, 403 PermissionDeniedError,
 * 404 NotFoundError, 429 RateLimitError, 402 an APIError with status 402.
 * An upstream's own error (a 4xx it answered) passes through as it came.
 */

/** The routes that speak OpenAI's wire format. */
export const OPENAI_PATHS: ReadonlySet<string> = new Set([
  "/v1/chat/completions",
  "/v1/models",
  "/v1/embeddings",
  "/v1/images/generations",
  "/v1/audio/speech",
  "/v1/audio/transcriptions"
])

/** Whether a request is answered in OpenAI's wire format (a request Anthropic's clients send is not: anthropic/wire.ts). */
const speaksOpenAi = (request: HttpServerRequest.HttpServerRequest) =>
  OPENAI_PATHS.has(request.url.split("?")[0]!.replace(/\/+$/, "")) && !speaksAnthropic(request)

/** An envelope `{ error: { code, message, details? } }` as OpenAI's error; anything else unchanged. */
export const toOpenAiError = (body: unknown): unknown => {
  const error = (body as { error?: unknown } | null)?.error
  if (typeof error !== "object" || error === null) return body
  const { code, message, details, type } = error as Record<string, unknown>
  if (typeof code !== "string" || typeof message !== "string" || type !== undefined) return body
  const issues = (details as { issues?: ReadonlyArray<{ path?: unknown }> } | undefined)?.issues
  const first = Array.isArray(issues) ? issues[0]?.path : undefined
  return {
    error: {
      message,
      type: openAiErrorType(code),
      code,
      param: typeof first === "string" && first !== "" ? first : null,
      ...(details === undefined ? {} : { details })
    }
  }
}

export const openAiErrorsMiddleware = (options: { readonly bodyLimitBytes?: number } = {}) =>
  wireErrorsMiddleware({
    speaks: speaksOpenAi,
    shape: toOpenAiError,
    mediaTypeMessage: (path) =>
      path === "/v1/audio/transcriptions"
        ? "Request bodies must be multipart/form-data (file, model, …), as OpenAI's are"
        : "Request bodies must be JSON (Content-Type: application/json)",
    bodyLimitBytes: options.bodyLimitBytes
  })
