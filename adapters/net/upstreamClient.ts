/**
 * The client of metered upstream calls (a provider's exchange, a proxied
 * request to an operator service): one request over an undici dispatcher,
 * its answer read into memory up to a bound, all within one deadline — as
 * one callback, with no stream, scope, race or abort controller of its own.
 *
 * A metered call spends most of its own CPU on this exchange when it goes
 * through Effect's `HttpClient` (a scope, an AbortController aborted after
 * every exchange, a response stream read chunk by chunk, a timeout race):
 * about twice what undici itself costs (docs/performance.md). Streamed
 * answers (server-sent events) still go through `HttpClient`, whose body
 * stream they need.
 *
 * Nothing of the caller's trace context is sent; redirects are answers
 * (undici's dispatcher follows none); the answer is not decompressed (no
 * `accept-encoding` is sent unless the caller sends one).
 */
import { Context, Data, Effect, Layer } from "effect"
import type { IncomingHttpHeaders } from "node:http"
import { Agent, type Dispatcher, FormData as UndiciFormData } from "undici"
import { declaredLength } from "./declaredLength.ts"

export interface UpstreamRequest {
  readonly url: URL
  readonly method: string
  /** Lower- or mixed-case names; `host` comes from the URL. */
  readonly headers: Readonly<Record<string, string>>
  readonly body?: string | Uint8Array | globalThis.FormData | undefined
  /** The whole exchange — connecting, the answer's head and its whole body — within this long. */
  readonly timeoutMs: number
  /**
   * How much of the body is read for an answer of this status. An answer
   * that declares (Content-Length) or sends more is `overflow`: reading
   * stops at the bound (a declared excess is not read at all) and the
   * connection is dropped.
   */
  readonly maxBytes: (status: number) => number
}

export interface UpstreamAnswer {
  readonly status: number
  /** Lower-case names; a repeated header's values joined with ", ". */
  readonly headers: Readonly<Record<string, string>>
  /** The body, or its first `maxBytes(status)` bytes when `overflow`. */
  readonly bytes: Uint8Array
  readonly overflow: boolean
}

/** No answer came: the connection could not be made, or broke before the answer's head. */
export class UpstreamUnreachable extends Data.TaggedError("UpstreamUnreachable")<{ readonly cause: unknown }> {}
/** The answer's head came (with `status`), then the connection broke, or the body was not what the head declared. */
export class UpstreamBroken extends Data.TaggedError("UpstreamBroken")<{ readonly status: number; readonly cause: unknown }> {}
/** No complete answer within `timeoutMs`. */
export class UpstreamTimeout extends Data.TaggedError("UpstreamTimeout")<{}> {}

export type UpstreamFailure = UpstreamUnreachable | UpstreamBroken | UpstreamTimeout

const flatHeaders = (headers: IncomingHttpHeaders): Record<string, string> => {
  const flat: Record<string, string> = {}
  for (const name in headers) {
    const value = headers[name]
    if (value === undefined) continue
    flat[name.toLowerCase()] = typeof value === "string" ? value : value.join(", ")
  }
  return flat
}

/** Undici takes only FormData of its own instance: the entries copied over. */
const undiciBody = (body: UpstreamRequest["body"]): string | Uint8Array | UndiciFormData | null => {
  if (body === undefined) return null
  if (typeof body === "string" || body instanceof Uint8Array) return body
  const form = new UndiciFormData()
  for (const [name, value] of body) form.append(name, value)
  return form
}

/** Why the connection is dropped when the caller stops waiting; never seen by the caller. */
const interrupted = () => new Error("the upstream request was interrupted")
const timedOut = () => new Error("the upstream request timed out")
const overflowed = () => new Error("the upstream answer is larger than its bound")

/** One exchange over `dispatcher`. */
export const sendWith = (dispatcher: Dispatcher) => (request: UpstreamRequest): Effect.Effect<UpstreamAnswer, UpstreamFailure> =>
  Effect.callback<UpstreamAnswer, UpstreamFailure>((resume) => {
    let finished = false
    let controller: Dispatcher.DispatchController | undefined
    /** Set when the connection must go before undici has started the request. */
    let dropReason: Error | undefined
    let status = 0
    let headers: Record<string, string> = {}
    let limit = 0
    let size = 0
    let chunks: Array<Buffer> = []

    const drop = (reason: Error) => {
      dropReason ??= reason
      if (controller !== undefined && !controller.aborted) controller.abort(reason)
    }
    const finish = (outcome: Effect.Effect<UpstreamAnswer, UpstreamFailure>) => {
      if (finished) return
      finished = true
      clearTimeout(timer)
      resume(outcome)
    }
    const answer = (overflow: boolean) => {
      const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)
      chunks = []
      finish(Effect.succeed({ status, headers, bytes, overflow }))
    }

    const timer = setTimeout(() => {
      finish(Effect.fail(new UpstreamTimeout()))
      drop(timedOut())
    }, request.timeoutMs)

    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(started) {
        controller = started
        if (dropReason !== undefined) started.abort(dropReason)
      },
      onResponseStart(_, statusCode, responseHeaders) {
        // 1xx (100 Continue, 103 Early Hints): the answer is still to come.
        if (statusCode < 200 || finished) return
        status = statusCode
        headers = flatHeaders(responseHeaders)
        limit = request.maxBytes(statusCode)
        const length = declaredLength(headers)
        if (length !== undefined && length > limit) {
          answer(true)
          drop(overflowed())
        }
      },
      onResponseData(_, chunk) {
        if (finished) return
        if (size + chunk.length > limit) {
          if (limit > size) chunks.push(chunk.subarray(0, limit - size))
          size = limit
          answer(true)
          drop(overflowed())
          return
        }
        chunks.push(chunk)
        size += chunk.length
      },
      onResponseEnd() {
        if (!finished) answer(false)
      },
      onResponseError(_, error) {
        finish(Effect.fail(status === 0 ? new UpstreamUnreachable({ cause: error }) : new UpstreamBroken({ status, cause: error })))
      }
    }

    try {
      dispatcher.dispatch({
        origin: request.url.origin,
        path: request.url.pathname + request.url.search,
        method: request.method as Dispatcher.HttpMethod,
        headers: request.headers,
        body: undiciBody(request.body),
        // Backstops only: the deadline above comes first.
        headersTimeout: request.timeoutMs + 1_000,
        bodyTimeout: request.timeoutMs + 1_000
      }, handler)
    } catch (error) {
      finish(Effect.fail(new UpstreamUnreachable({ cause: error })))
    }
    // Interrupted: the caller stopped waiting, so the connection goes.
    return Effect.sync(() => {
      finished = true
      clearTimeout(timer)
      drop(interrupted())
    })
  })

/**
 * Metered upstream calls: `send` over one keep-alive connection pool for the
 * life of the layer (closed with it).
 */
export class UpstreamClient extends Context.Service<UpstreamClient, {
  readonly send: (request: UpstreamRequest) => Effect.Effect<UpstreamAnswer, UpstreamFailure>
}>()("spendgate/net/UpstreamClient") {
  static readonly layer: Layer.Layer<UpstreamClient> = Layer.effect(
    UpstreamClient,
    Effect.map(
      Effect.acquireRelease(
        Effect.sync(() => new Agent()),
        (agent) => Effect.promise(() => agent.destroy().catch(() => undefined))
      ),
      (agent) => UpstreamClient.of({ send: sendWith(agent) })
    )
  )
}
