import { ByteSize, Cause, Effect, Option, SchemaIssue } from "effect"
import { HttpIncomingMessage, HttpRouter, HttpServerError, HttpServerRequest, type HttpServerResponse } from "effect/http"
import { HttpApiError } from "effect/http-api"
import { envelopeResponse } from "./errors.ts"

/**
 * A global router middleware that puts every failure the endpoints did not
 * answer themselves into the error envelope: unknown routes, bodies that are
 * not JSON or fail their schema, wrong content types, bodies over the limit,
 * and defects (answered 500 INTERNAL with no internals in the body).
 *
 * Before routing, it also refuses (400 VALIDATION_ERROR) text that PostgreSQL
 * cannot store or that is not Unicode: a NUL (U+0000) or a lone surrogate in
 * the decoded path, query string or JSON body, a raw NUL byte in any body,
 * and percent-encodings that do not decode to UTF-8.
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

/** The answer to a failure no endpoint answered itself; also used for the routes the rails own. */
export const fromCause = (
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

// ---- text PostgreSQL cannot store, refused before routing -------------------

/**
 * Rail webhooks deliver signed bytes that are verified and read by the rail,
 * never stored as text; refusing one for its content would only make the rail
 * retry it forever. Their bodies are left to the rail (paths and queries are
 * still checked).
 */
const OPAQUE_BODY_PREFIX = "/v1/webhooks/"

interface TextRefusal {
  readonly where: "path" | "query string" | "request body"
  readonly path: string
  readonly message: string
}

const NUL_MESSAGE = "must not contain the NUL character (U+0000)"

// A high surrogate not followed by a low one, or a low one not preceded by a high one (code units).
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** The problem with one decoded text, if any: NUL, or a lone surrogate (not Unicode text). */
const textProblem = (text: string): string | undefined =>
  text.includes("\u0000")
    ? NUL_MESSAGE
    : LONE_SURROGATE.test(text)
    ? "must be valid Unicode text (no lone surrogates)"
    : undefined

const decodeComponent = (raw: string): string | undefined => {
  try {
    return decodeURIComponent(raw)
  } catch {
    return undefined
  }
}

/**
 * Checks the path and the query string of a raw request target: every
 * percent-encoding must decode to UTF-8, and the decoded text must hold no NUL
 * and no lone surrogate.
 */
export const targetRefusal = (target: string): TextRefusal | undefined => {
  const queryAt = target.indexOf("?")
  const rawPath = queryAt === -1 ? target : target.slice(0, queryAt)
  const path = decodeComponent(rawPath)
  if (path === undefined) return { where: "path", path: "", message: "has an invalid percent-encoding" }
  const pathProblem = textProblem(path)
  if (pathProblem !== undefined) return { where: "path", path: "", message: pathProblem }
  if (queryAt === -1) return undefined
  for (const pair of target.slice(queryAt + 1).split("&")) {
    const equals = pair.indexOf("=")
    const rawName = (equals === -1 ? pair : pair.slice(0, equals)).replace(/\+/g, " ")
    const name = decodeComponent(rawName)
    const value = equals === -1 ? "" : decodeComponent(pair.slice(equals + 1).replace(/\+/g, " "))
    const shownName = name !== undefined && textProblem(name) === undefined ? name : ""
    if (name === undefined || value === undefined) {
      return { where: "query string", path: shownName, message: "has an invalid percent-encoding" }
    }
    const problem = textProblem(name) ?? textProblem(value)
    if (problem !== undefined) return { where: "query string", path: shownName, message: problem }
  }
  return undefined
}

// A raw NUL byte, a \u0000 escape, or a surrogate escape (\uD800-\uDFFF): the
// cheap test that decides whether the body is looked at closely.
const SUSPECT_BODY = /\u0000|\\u0000|\\u[dD][89a-fA-F]/

/**
 * The first string (key or value) in a parsed JSON value with a problem, and
 * where. Iterative: a deeply nested body cannot exhaust the stack.
 */
const jsonProblem = (root: unknown): TextRefusal | undefined => {
  const pending: Array<readonly [unknown, string]> = [[root, ""]]
  const at = (path: string, key: string) => (path === "" ? key : `${path}.${key}`)
  while (pending.length > 0) {
    const [value, path] = pending.pop()!
    if (typeof value === "string") {
      const problem = textProblem(value)
      if (problem !== undefined) return { where: "request body", path, message: problem }
    } else if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) pending.push([value[i], at(path, String(i))])
    } else if (typeof value === "object" && value !== null) {
      const entries = Object.entries(value)
      for (const [key] of entries) {
        const problem = textProblem(key)
        if (problem !== undefined) return { where: "request body", path, message: `has a field name that ${problem}` }
      }
      for (let i = entries.length - 1; i >= 0; i--) pending.push([entries[i]![1], at(path, entries[i]![0])])
    }
  }
  return undefined
}

/**
 * Checks a request body: a raw NUL byte is refused whatever the content type;
 * in JSON, a string (or field name) that decodes to NUL or holds a lone
 * surrogate is refused. An escaped backslash followed by "u0000" is text, not
 * NUL, and passes. A body that is not JSON is left to the endpoint.
 */
export const bodyRefusal = (text: string): TextRefusal | undefined => {
  if (!SUSPECT_BODY.test(text)) return undefined
  if (text.includes("\u0000")) return { where: "request body", path: "", message: NUL_MESSAGE }
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return undefined
  }
  return jsonProblem(parsed)
}

const refusalResponse = (refusal: TextRefusal) =>
  envelopeResponse("VALIDATION_ERROR", `Invalid ${refusal.where}: ${refusal.path === "" ? "" : `${refusal.path}: `}${refusal.message}`, {
    issues: [{ path: refusal.path, message: refusal.message }]
  })

/**
 * An uploaded file (OpenAI's multipart transcription form) is binary: its
 * bytes are never stored as text, and the endpoint checks the form's text
 * fields itself.
 */
const OPAQUE_MULTIPART_PATHS: ReadonlySet<string> = new Set(["/v1/audio/transcriptions"])

const isOpaqueBody = (request: HttpServerRequest.HttpServerRequest): boolean =>
  request.url.startsWith(OPAQUE_BODY_PREFIX) ||
  (OPAQUE_MULTIPART_PATHS.has(request.url.split("?")[0]!.replace(/\/+$/, "")) &&
    (request.headers["content-type"] ?? "").toLowerCase().startsWith("multipart/form-data"))

const hasBody = (request: HttpServerRequest.HttpServerRequest): boolean => {
  const length = request.headers["content-length"]
  return request.headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0")
}

/** The body checked (read once here; the endpoint reads the same cached bytes), then the endpoint. Made once, not per request. */
const readThenRun = Effect.fnUntraced(function*<E, R>(
  request: HttpServerRequest.HttpServerRequest,
  app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
) {
  if (hasBody(request) && !isOpaqueBody(request)) {
    const body = bodyRefusal(yield* request.text)
    if (body !== undefined) return refusalResponse(body)
  }
  return yield* app
})

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
      const target = targetRefusal(request.url)
      if (target !== undefined) return refusalResponse(target)
      const response = yield* readThenRun(request, app).pipe(
        Effect.provideService(HttpIncomingMessage.MaxBodySize, maxBodySize),
        Effect.catchCause((cause) => fromCause(cause, limitBytes))
      )
      return wrapBareResponse(response, limitBytes)
    }), { global: true })
}
