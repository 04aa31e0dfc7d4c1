import { Effect } from "effect"
import { HttpBody, HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { openAiErrorType } from "../../../src/services/sse.ts"
import { DEFAULT_BODY_LIMIT_BYTES, fromCause } from "../envelope.ts"

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

const isOpenAiPath = (url: string) => OPENAI_PATHS.has(url.split("?")[0]!.replace(/\/+$/, ""))

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

const reshape = (response: HttpServerResponse.HttpServerResponse, path: string) => {
  // The framework's bare 415 (a body of the wrong type), answered here in OpenAI's shape.
  if (response.status === 415 && !(response.headers["content-type"] ?? "").startsWith("application/json")) {
    const message = path === "/v1/audio/transcriptions"
      ? "Request bodies must be multipart/form-data (file, model, …), as OpenAI's are"
      : "Request bodies must be JSON (Content-Type: application/json)"
    return HttpServerResponse.jsonUnsafe(
      { error: { message, type: openAiErrorType("UNSUPPORTED_MEDIA_TYPE"), code: "UNSUPPORTED_MEDIA_TYPE", param: null } },
      { status: 415 }
    )
  }
  if (response.status < 400 || response.body._tag !== "Uint8Array") return response
  if (!(response.headers["content-type"] ?? "").startsWith("application/json")) return response
  if (response.headers["x-spendgate-audit-id"] !== undefined) return response // the upstream's own answer
  let parsed: unknown
  try {
    parsed = JSON.parse(new TextDecoder().decode(response.body.body))
  } catch {
    return response
  }
  const shaped = toOpenAiError(parsed)
  return shaped === parsed ? response : HttpServerResponse.setBody(response, HttpBody.jsonUnsafe(shaped))
}

export const openAiErrorsMiddleware = (options: { readonly bodyLimitBytes?: number } = {}) => {
  const limitBytes = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES
  return HttpRouter.middleware((app) =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      if (!isOpenAiPath(request.url)) return yield* app
      // Failures no endpoint answered (a body failing its schema, an unknown method) get
      // the API's envelope first (envelope.ts), then OpenAI's shape.
      const response = yield* app.pipe(Effect.catchCause((cause) => fromCause(cause, limitBytes)))
      return reshape(response, request.url.split("?")[0]!.replace(/\/+$/, ""))
    }), { global: true })
}
