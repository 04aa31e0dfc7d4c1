import { Effect } from "effect"
import { HttpBody, HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { DEFAULT_BODY_LIMIT_BYTES, fromCause } from "./envelope.ts"

/**
 * Errors of the routes that speak another API's wire format (OpenAI's,
 * Anthropic's): the API's envelope `{ error: { code, message, details? } }`
 * rewritten into that format's error shape by `shape`, on the requests
 * `speaks` picks. Status and headers (Retry-After) are kept. An upstream's
 * own error (an answer that carries `x-spendgate-audit-id`) passes through as
 * it came.
 */

const reshape = (
  response: HttpServerResponse.HttpServerResponse,
  shape: (body: unknown) => unknown,
  mediaTypeMessage: string
) => {
  // The framework's bare 415 (a body of the wrong type), answered in the format's shape.
  if (response.status === 415 && !(response.headers["content-type"] ?? "").startsWith("application/json")) {
    return HttpServerResponse.jsonUnsafe(shape({ error: { code: "UNSUPPORTED_MEDIA_TYPE", message: mediaTypeMessage } }), {
      status: 415
    })
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
  const shaped = shape(parsed)
  return shaped === parsed ? response : HttpServerResponse.setBody(response, HttpBody.jsonUnsafe(shaped))
}

export const wireErrorsMiddleware = (options: {
  readonly speaks: (request: HttpServerRequest.HttpServerRequest) => boolean
  readonly shape: (body: unknown) => unknown
  /** What a 415 says on a path (default: bodies must be JSON). */
  readonly mediaTypeMessage?: ((path: string) => string) | undefined
  readonly bodyLimitBytes?: number | undefined
}) => {
  const limitBytes = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES
  // Made once, not per request (docs/performance.md, "Generators made once").
  const inFormat = Effect.fnUntraced(function*<E, R>(
    app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>,
    request: HttpServerRequest.HttpServerRequest
  ) {
    // Failures no endpoint answered (a body failing its schema, an unknown method) get
    // the API's envelope first (envelope.ts), then the format's shape.
    const response = yield* app.pipe(Effect.catchCause((cause) => fromCause(cause, limitBytes)))
    const path = request.url.split("?")[0]!.replace(/\/+$/, "")
    const mediaType = options.mediaTypeMessage?.(path) ?? "Request bodies must be JSON (Content-Type: application/json)"
    return reshape(response, options.shape, mediaType)
  })
  return HttpRouter.middleware((app) =>
    // A request of another format runs as it is, in as few fiber steps as it can (every request).
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => !options.speaks(request) ? app : inFormat(app, request)), {
      global: true
    })
}
