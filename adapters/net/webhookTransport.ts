import { Effect, Layer } from "effect"
import { WebhookTransport } from "../../src/ports/WebhookTransport.ts"
import { type Options, settingsOf } from "./connection.ts"
import { makePinnedRequest } from "./pinnedRequest.ts"
import { checkUrl } from "./urlPolicy.ts"

/**
 * Webhook deliveries over the pinned connection of `read` (pinnedRequest.ts):
 * the URL is checked again on every delivery (a name may have moved to a
 * private address since the endpoint was created), redirects are answers,
 * never followed, and at most `MAX_RESPONSE_BYTES` of the receiver's body are
 * read before the connection is dropped.
 */

const MAX_RESPONSE_BYTES = 64 * 1024
const USER_AGENT = "Spendgate-Webhooks/0.1"

const drain = (body: ReadableStream<Uint8Array> | null) =>
  Effect.promise(async () => {
    if (body === null) return
    const reader = body.getReader()
    let read = 0
    try {
      while (read < MAX_RESPONSE_BYTES) {
        const chunk = await reader.read()
        if (chunk.done) return
        read += chunk.value.byteLength
      }
    } catch {
      // The answer's status is what counts; a broken body changes nothing.
    } finally {
      await reader.cancel().catch(() => undefined)
    }
  })

export const make = (options: Options = {}): WebhookTransport["Service"] => {
  const { allowHosts } = settingsOf(options)
  const request = makePinnedRequest({ ...options, userAgent: options.userAgent ?? USER_AGENT })
  return WebhookTransport.of({
    check: (url) => Effect.asVoid(Effect.fromResult(checkUrl(url, allowHosts))),
    post: (post) =>
      Effect.scoped(Effect.gen(function*() {
        const response = yield* request({
          url: post.url,
          method: "POST",
          headers: post.headers,
          body: post.body,
          timeoutMs: post.timeoutMs
        })
        yield* drain(response.body)
        return { status: response.status }
      }))
  })
}

export const layer = (options: Options = {}): Layer.Layer<WebhookTransport> =>
  Layer.sync(WebhookTransport, () => make(options))
