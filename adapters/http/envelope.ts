import { ByteSize, Cause, Effect, Option, SchemaIssue } from "effect"
import { HttpIncomingMessage, HttpRouter, HttpServerError, HttpServerRequest, type HttpServerResponse } from "effect/http"
import { HttpApiError } from "effect/http-api"
import { envelopeResponse } from "./errors.ts"

/**
 * A global router middleware that puts every failure the endpoints did not
 * answer themselves into the error envelope: unknown routes, bodies that are
 * not JSON or fail their schema, wrong content types, bodies over the limit,
 * and defects (answered 500 INTERNAL with no internals in the body).
 */

export const DEFAULT_BODY_LIMIT_BYTES = 1024 * 1024

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()

const pathString = (path: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined): string =>
  (path ?? []).map((segment) => String(typeof segment === "object" ? segment.key : segment)).join(".")

const validationResponse = (error: HttpApiError.HttpApiSchemaError) => {
  const issues = formatIssues(error.cause.issue).issues.map((issue) => ({
    path: pathString(issue.path),
    message: issue.message === "Expected no excess property" ? "Unknown field" : issue.message
  }))
  const where = error.kind === "Payload" ? "request body" : error.kind === "Query" ? "query string" : error.kind === "Params" ? "path" : "headers"
  const first = issues[0]
  const message = first === undefined
    ? `Invalid ${where}`
    : `Invalid ${where}: ${first.path === "" ? "" : `${first.path}: `}${first.message}`
  return envelopeResponse("VALIDATION_ERROR", message, { issues })
}

const isBodyTooLarge = (error: HttpServerError.RequestParseError): boolean =>
  error.reason === "BodyTooLarge" || /maxBytes|too large/i.test(String((error.cause as Error | undefined)?.message ?? ""))

const fromCause = (
  cause: Cause.Cause<unknown>,
  limitBytes: number
): Effect.Effect<HttpServerResponse.HttpServerResponse, unknown> => {
  for (const reason of cause.reasons) {
    const value = reason._tag === "Fail" ? reason.error : reason._tag === "Die" ? reason.defect : undefined
    if (HttpApiError.HttpApiSchemaError.is(value)) {
      if (value.kind === "Body" || value.kind === "ResponseHeaders") break
      return Effect.succeed(validationResponse(value))
    }
    if (HttpApiError.HttpApiPayloadTooLarge.is(value)) {
      return Effect.succeed(envelopeResponse("PAYLOAD_TOO_LARGE", "Request body is too large", { limitBytes }))
    }
    if (value instanceof HttpServerError.HttpServerError) {
      const inner = value.reason
      if (inner._tag === "RouteNotFound") {
        return Effect.succeed(envelopeResponse("NOT_FOUND", `No route for ${inner.request.method} ${inner.request.url.split("?")[0]}`))
      }
      if (inner._tag === "RequestParseError") {
        return Effect.succeed(
          isBodyTooLarge(inner)
            ? envelopeResponse("PAYLOAD_TOO_LARGE", "Request body is too large", { limitBytes }, { connection: "close" })
            : envelopeResponse("VALIDATION_ERROR", "The request body could not be read", { issues: [] })
        )
      }
    }
  }
  if (Cause.hasInterruptsOnly(cause)) return Effect.failCause(cause)
  return Effect.as(
    Effect.logError("Unhandled failure answered 500", cause),
    envelopeResponse("INTERNAL", "Internal error")
  )
}

/** Answers that the framework produced without a body of ours (e.g. 415). */
const wrapBareResponse = (response: HttpServerResponse.HttpServerResponse, limitBytes: number) => {
  if (response.status < 400) return response
  const contentType = response.headers["content-type"] ?? ""
  if (contentType.startsWith("application/json")) return response
  switch (response.status) {
    case 400:
      return envelopeResponse("VALIDATION_ERROR", "Bad request", { issues: [] })
    case 404:
    case 405:
      return envelopeResponse("NOT_FOUND", "Not found")
    case 413:
      return envelopeResponse("PAYLOAD_TOO_LARGE", "Request body is too large", { limitBytes })
    case 415:
      return envelopeResponse("UNSUPPORTED_MEDIA_TYPE", "Request bodies must be JSON (Content-Type: application/json)")
    default:
      return response.status >= 500 ? envelopeResponse("INTERNAL", "Internal error") : response
  }
}

export const envelopeMiddleware = (options: { readonly bodyLimitBytes?: number } = {}) => {
  const limitBytes = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES
  const maxBodySize = ByteSize.bytes(limitBytes)
  return HttpRouter.middleware((app) =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const declared = Option.getOrUndefined(Option.fromNullishOr(request.headers["content-length"]))
      if (declared !== undefined && Number(declared) > limitBytes) {
        return envelopeResponse("PAYLOAD_TOO_LARGE", "Request body is too large", { limitBytes }, { connection: "close" })
      }
      const response = yield* app.pipe(
        Effect.provideService(HttpIncomingMessage.MaxBodySize, maxBodySize),
        Effect.catchCause((cause) => fromCause(cause, limitBytes))
      )
      return wrapBareResponse(response, limitBytes)
    }), { global: true })
}
