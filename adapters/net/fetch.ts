import { Duration, Effect, Layer } from "effect"
import { fetch } from "undici"
import { FetchFailed, type FetchedResponse, type FetchOptions, OutboundHttp, UnsafeUrl } from "../../src/ports/Net.ts"
import { type Options, pinnedAgent, requestHeaders, settingsOf } from "./connection.ts"
import { describeError } from "./describeError.ts"
import { makeRequest } from "./request.ts"
import { resolveTarget, type Target } from "./resolve.ts"
import { checkUrl, unsafe } from "./urlPolicy.ts"

/**
 * The `OutboundHttp` service: `check` a URL, and `get` it under one deadline
 * (resolution, every hop and the body), following redirects by hand (each
 * target checked again) and cutting the decoded body at `maxBytes`.
 */

const REDIRECT_STATUSES: ReadonlySet<number> = new Set([301, 302, 303, 307, 308])
const DEFAULT_MAX_REDIRECTS = 5

type HopOutcome =
  | { readonly _tag: "Redirect"; readonly location: string }
  | { readonly _tag: "TooLarge" }
  | { readonly _tag: "Response"; readonly response: FetchedResponse }

const exchange = async (
  target: Target,
  headers: Record<string, string>,
  options: FetchOptions,
  signal: AbortSignal
): Promise<HopOutcome> => {
  // Undici's own timers are a backstop only; the caller's deadline fires first.
  const backstopMs = options.timeoutMs + 1_000
  const agent = pinnedAgent(target, backstopMs)
  try {
    const response = await fetch(target.url.href, { dispatcher: agent, redirect: "manual", headers, signal })
    const location = response.headers.get("location")
    if (REDIRECT_STATUSES.has(response.status) && location !== null) {
      void response.body?.cancel().catch(() => undefined)
      return { _tag: "Redirect", location }
    }
    const encoded = (response.headers.get("content-encoding") ?? "identity").trim().toLowerCase() !== "identity"
    const declared = Number(response.headers.get("content-length") ?? Number.NaN)
    if (options.failIfLarger === true && !encoded && declared > options.maxBytes) {
      void response.body?.cancel().catch(() => undefined)
      return { _tag: "TooLarge" }
    }
    const chunks: Array<Uint8Array> = []
    let received = 0
    let truncated = false
    if (response.body !== null) {
      const reader = response.body.getReader()
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        const chunk = value as Uint8Array
        if (received + chunk.byteLength > options.maxBytes) {
          // Past the cap: stop reading; the agent is destroyed below, which drops the connection.
          void reader.cancel().catch(() => undefined)
          if (options.failIfLarger === true) return { _tag: "TooLarge" }
          chunks.push(chunk.subarray(0, options.maxBytes - received))
          received = options.maxBytes
          truncated = true
          break
        }
        chunks.push(chunk)
        received += chunk.byteLength
      }
    }
    const body = new Uint8Array(received)
    let offset = 0
    for (const chunk of chunks) {
      body.set(chunk, offset)
      offset += chunk.byteLength
    }
    return {
      _tag: "Response",
      response: {
        url: target.url.href,
        status: response.status,
        contentType: response.headers.get("content-type") ?? "",
        body,
        truncated
      }
    }
  } finally {
    void agent.destroy().catch(() => undefined)
  }
}


const validateLimits = (options: FetchOptions): string | undefined => {
  if (!Number.isSafeInteger(options.maxBytes) || options.maxBytes < 0) return "maxBytes must be a non-negative integer"
  if (!Number.isFinite(options.timeoutMs) || options.timeoutMs <= 0) return "timeoutMs must be a positive number"
  const redirects = options.maxRedirects
  if (redirects !== undefined && (!Number.isSafeInteger(redirects) || redirects < 0)) {
    return "maxRedirects must be a non-negative integer"
  }
  return undefined
}

export const make = (options: Options = {}): OutboundHttp["Service"] => {
  const { allowHosts, lookup, userAgent } = settingsOf(options)

  const check = (url: string): Effect.Effect<void, UnsafeUrl> =>
    Effect.fromResult(checkUrl(url, allowHosts)).pipe(
      Effect.flatMap((checked) => resolveTarget(checked, lookup)),
      Effect.catchTag("ResolveFailed", (failure) =>
        Effect.fail(unsafe(url, `${failure.host} does not resolve (${failure.message})`))),
      Effect.asVoid,
      Effect.withSpan("OutboundHttp.check")
    )

  const get = (url: string, fetchOptions: FetchOptions): Effect.Effect<FetchedResponse, UnsafeUrl | FetchFailed> =>
    Effect.suspend(() => {
      const invalid = validateLimits(fetchOptions)
      if (invalid !== undefined) return Effect.die(new RangeError(`OutboundHttp.get: ${invalid}`))
      const maxRedirects = fetchOptions.maxRedirects ?? DEFAULT_MAX_REDIRECTS
      // The hop in progress, for the timeout's error.
      let current = url

      const hops = Effect.gen(function*() {
        let checked = yield* Effect.fromResult(checkUrl(url, allowHosts))
        const origin = checked.url.origin
        let redirects = 0
        for (;;) {
          current = checked.url.href
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
          const headers = requestHeaders(userAgent, fetchOptions.headers, checked.url.origin === origin)
          const outcome = yield* Effect.tryPromise({
            try: (signal) => exchange(target, headers, fetchOptions, signal),
            catch: (cause) =>
              new FetchFailed({ url: target.url.href, reason: "network", message: describeError(cause) })
          })
          switch (outcome._tag) {
            case "Response":
              return outcome.response
            case "TooLarge":
              return yield* new FetchFailed({
                url: target.url.href,
                reason: "too_large",
                message: `The response body is larger than ${fetchOptions.maxBytes} bytes`
              })
            case "Redirect": {
              if (redirects >= maxRedirects) {
                return yield* new FetchFailed({
                  url: target.url.href,
                  reason: "too_many_redirects",
                  message: `More than ${maxRedirects} redirects`
                })
              }
              redirects++
              let next: URL
              try {
                next = new URL(outcome.location, target.url)
              } catch {
                return yield* unsafe(outcome.location, `redirect from ${target.url.href} to an invalid URL`)
              }
              checked = yield* Effect.fromResult(checkUrl(next, allowHosts))
            }
          }
        }
      })

      return hops.pipe(
        Effect.timeoutOrElse({
          duration: Duration.millis(fetchOptions.timeoutMs),
          orElse: () =>
            Effect.fail(
              new FetchFailed({
                url: current,
                reason: "timeout",
                message: `No complete response within ${fetchOptions.timeoutMs} ms`
              })
            )
        })
      )
    }).pipe(Effect.withSpan("OutboundHttp.get"))

  return OutboundHttp.of({ check, get, request: makeRequest(options) })
}

/** `OutboundHttp` with the URL-safety rules, over undici. */
export const layer = (options: Options = {}): Layer.Layer<OutboundHttp> => Layer.sync(OutboundHttp, () => make(options))
