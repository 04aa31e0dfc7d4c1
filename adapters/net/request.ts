import { Duration, Effect } from "effect"
import { FetchFailed, type OutboundRequest, type OutboundResponse, type UnsafeUrl } from "../../src/ports/Net.ts"
import type { Options } from "./connection.ts"
import { describeError } from "./describeError.ts"
import { makePinnedRequest } from "./pinnedRequest.ts"

/**
 * `OutboundHttp.request`: one pinned request (pinnedRequest.ts: the URL
 * checked, resolved once, the socket opened to the checked address, no
 * redirect followed), its body read up to `maxBytes` (the rest is cut and
 * `truncated` set) within one deadline covering the whole exchange.
 */
export const makeRequest = (options: Options = {}) => {
  const pinned = makePinnedRequest(options)
  return (request: OutboundRequest): Effect.Effect<OutboundResponse, UnsafeUrl | FetchFailed> =>
    Effect.scoped(Effect.gen(function*() {
      const response = yield* pinned({
        url: request.url,
        method: request.method,
        headers: request.headers,
        body: request.body,
        timeoutMs: request.timeoutMs
      })
      const chunks: Array<Uint8Array> = []
      let size = 0
      let truncated = false
      if (response.body !== null) {
        const reader = response.body.getReader()
        yield* Effect.tryPromise({
          try: async () => {
            try {
              for (;;) {
                const { done, value } = await reader.read()
                if (done) break
                const room = request.maxBytes - size
                if (value.length > room) {
                  chunks.push(value.subarray(0, room))
                  size += room
                  truncated = true
                  break
                }
                chunks.push(value)
                size += value.length
              }
            } finally {
              await reader.cancel().catch(() => undefined)
            }
          },
          catch: (cause) => new FetchFailed({ url: response.url, reason: "network", message: describeError(cause) })
        })
      }
      return {
        url: response.url,
        status: response.status,
        headers: response.headers,
        body: Buffer.concat(chunks, size),
        truncated
      } satisfies OutboundResponse
    })).pipe(
      Effect.timeoutOrElse({
        duration: Duration.millis(request.timeoutMs),
        orElse: () =>
          Effect.fail(
            new FetchFailed({ url: request.url, reason: "timeout", message: `No complete response within ${request.timeoutMs} ms` })
          )
      })
    )
}
