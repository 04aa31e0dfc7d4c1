import { Context, type Effect, Schema } from "effect"

/**
 * Outbound HTTP to addresses a caller chose (pages to read or scrape, audio
 * by URL, ...). Implementations enforce the URL-safety rules: http/https
 * only; the name is resolved once and the connection goes to the checked
 * address; loopback, private, link-local, carrier-grade NAT, metadata and
 * IPv4-mapped addresses are refused in every spelling; every redirect is
 * checked again and their number bounded; size and time are capped.
 */

/** The URL may not be fetched; nothing was sent to it. */
export class UnsafeUrl extends Schema.TaggedError<UnsafeUrl>()("UnsafeUrl", {
  url: Schema.String,
  reason: Schema.String
}) {
  readonly code = "VALIDATION_ERROR"
  override get message() {
    return `This URL may not be fetched: ${this.reason}`
  }
  get details() {
    return { issues: [{ path: "url", message: `not allowed: ${this.reason}` }] }
  }
}

/** The fetch started but did not complete. */
export class FetchFailed extends Schema.TaggedError<FetchFailed>()("FetchFailed", {
  url: Schema.String,
  reason: Schema.Literals(["timeout", "network", "too_many_redirects", "too_large"]),
  message: Schema.String
}) {}

export interface FetchOptions {
  /** Bytes read at most; a longer body is cut there and `truncated` set (or fails when `failIfLarger`). */
  readonly maxBytes: number
  readonly timeoutMs: number
  /** Default 5. */
  readonly maxRedirects?: number | undefined
  readonly failIfLarger?: boolean | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
}

export interface FetchedResponse {
  /** The URL finally answered, after redirects. */
  readonly url: string
  readonly status: number
  readonly contentType: string
  readonly body: Uint8Array
  readonly truncated: boolean
}

/** One request of any method to a caller's address (L402 paywalls); redirects are not followed. */
export interface OutboundRequest {
  readonly url: string
  readonly method: string
  readonly headers: Readonly<Record<string, string>>
  readonly body?: string | undefined
  readonly maxBytes: number
  readonly timeoutMs: number
}

export interface OutboundResponse {
  readonly url: string
  readonly status: number
  /** Names in lower case; repeated headers joined with ", ". */
  readonly headers: Readonly<Record<string, string>>
  readonly body: Uint8Array
  readonly truncated: boolean
}

export class OutboundHttp extends Context.Service<OutboundHttp, {
  /** Resolves and checks a URL without fetching it. */
  readonly check: (url: string) => Effect.Effect<void, UnsafeUrl>
  /** GET, following checked redirects. Any HTTP status is a response (not a failure). */
  readonly get: (url: string, options: FetchOptions) => Effect.Effect<FetchedResponse, UnsafeUrl | FetchFailed>
  /** Any method, under the same address rules, the body cut at `maxBytes`; absent: not offered. */
  readonly request?: ((request: OutboundRequest) => Effect.Effect<OutboundResponse, UnsafeUrl | FetchFailed>) | undefined
}>()("spendgate/OutboundHttp") {}
