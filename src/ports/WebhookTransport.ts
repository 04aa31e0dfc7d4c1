import { Context, type Effect } from "effect"
import type { FetchFailed, UnsafeUrl } from "./Net.ts"

/**
 * How webhook deliveries leave the process: the same URL-safety rules as
 * `read` (adapters/net: http/https only, loopback, private and metadata
 * addresses refused unless the operator allows the host, the name resolved
 * once and the connection pinned to the checked address, no redirects
 * followed, time-bounded). Without it, endpoints cannot be created and
 * nothing is delivered.
 */
export interface WebhookPost {
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  readonly timeoutMs: number
}

export class WebhookTransport extends Context.Service<WebhookTransport, {
  /** The rules that need no resolution (scheme, credentials, local names, IP literals, the allow-list). */
  readonly check: (url: string) => Effect.Effect<void, UnsafeUrl>
  /** One POST; any HTTP status is an answer. The response body is read up to a small bound and dropped. */
  readonly post: (request: WebhookPost) => Effect.Effect<{ readonly status: number }, UnsafeUrl | FetchFailed>
}>()("spendgate/WebhookTransport") {}
