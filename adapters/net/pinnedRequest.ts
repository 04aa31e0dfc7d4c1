import { Effect, type Scope } from "effect"
import { fetch } from "undici"
import { FetchFailed, type UnsafeUrl } from "../../src/ports/Net.ts"
import { type Options, pinnedAgent, requestHeaders, settingsOf } from "./connection.ts"
import { describeError } from "./describeError.ts"
import { resolveTarget } from "./resolve.ts"
import { checkUrl } from "./urlPolicy.ts"

export interface PinnedRequest {
  readonly url: string
  readonly method: string
  /** Transport headers (`host`, `connection`, `content-length`, ...) are dropped; the URL's host is the `Host`. */
  readonly headers: Readonly<Record<string, string>>
  readonly body?: string | undefined
  /** Undici's connect, headers and body-idle backstop; the caller's own deadline should fire first. */
  readonly timeoutMs: number
}

export interface PinnedResponse {
  readonly url: string
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  /** The body as it arrives (not decoded, not bounded: the caller bounds it); null when there is none. */
  readonly body: ReadableStream<Uint8Array> | null
}

/**
 * One request of any method, under the same rules as `get`: the URL is
 * checked, its name resolved exactly once, every answer classified, and the
 * socket opened to the checked address by the pinned connector (the `Host`
 * header and, over TLS, the SNI name and certificate check keep the URL's
 * name). Redirects are not followed: a 3xx is the answer, so no unchecked
 * address is ever reached. The connection lives until the scope closes (the
 * caller streams the body meanwhile). For callers that forward requests
 * elsewhere than to pages, such as the proxy to registry services.
 */
export const makePinnedRequest = (options: Options = {}) => {
  const { allowHosts, lookup, userAgent } = settingsOf(options)
  return (request: PinnedRequest): Effect.Effect<PinnedResponse, UnsafeUrl | FetchFailed, Scope.Scope> =>
    Effect.gen(function*() {
      const checked = yield* Effect.fromResult(checkUrl(request.url, allowHosts))
      const target = yield* resolveTarget(checked, lookup).pipe(
        Effect.catchTag("ResolveFailed", (failure) =>
          Effect.fail(
            new FetchFailed({
              url: checked.url.href,
              reason: "network",
              message: `${failure.host} does not resolve (${failure.message})`
            })
          ))
      )
      const backstopMs = request.timeoutMs + 1_000
      const agent = yield* Effect.acquireRelease(
        Effect.sync(() => pinnedAgent(target, backstopMs)),
        (dispatcher) => Effect.promise(() => dispatcher.destroy().catch(() => undefined))
      )
      const response = yield* Effect.tryPromise({
        try: (signal) =>
          fetch(target.url.href, {
            dispatcher: agent,
            method: request.method,
            redirect: "manual",
            headers: requestHeaders(userAgent, request.headers, true),
            ...(request.body === undefined ? {} : { body: request.body }),
            signal
          }),
        catch: (cause) => new FetchFailed({ url: target.url.href, reason: "network", message: describeError(cause) })
      })
      const headers: Record<string, string> = {}
      response.headers.forEach((value, name) => {
        headers[name] = value
      })
      return {
        url: target.url.href,
        status: response.status,
        headers,
        body: response.body as ReadableStream<Uint8Array> | null
      }
    }).pipe(Effect.withSpan("SafeHttp.pinnedRequest"))
}
