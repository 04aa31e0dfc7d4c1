import { Schema } from "effect"
import type { SpendRefusal } from "../domain/errors.ts"
import { ValidationError } from "../domain/errors.ts"
import type { AccountId } from "../domain/ids.ts"
import { ceilDivide, MSAT_PER_BTC } from "../domain/Money.ts"
import type { OutboundResponse, UnsafeUrl } from "../ports/Net.ts"
import type { SpendReceipt } from "../wallet/Spend.ts"

/**
 * The rules and shapes of outbound L402 (Pay.ts): limits, the fee limit,
 * pricing, the payee-host list, which headers go out and come back, the
 * token cache key, and the errors. Pure.
 */

export const PAY_PROVIDER = "l402"

/** The routing fee limit: 1 % of the invoice, at least 1 sat. */
export const FEE_LIMIT_PPM = 10_000n
export const MIN_FEE_LIMIT_MSAT = 1_000n
/** The node gives a payment up after this long. */
export const PAYMENT_TIMEOUT_SECONDS = 60
export const MAX_SATS = 10_000_000
export const MAX_BODY_BYTES = 1024 * 1024
export const MAX_RESPONSE_BYTES = 4 * 1024 * 1024
export const REQUEST_TIMEOUT_MS = 30_000
export const MAX_HEADERS = 32
export const MAX_PAYEE_HOSTS = 100
/** Tokens kept at most (the oldest is forgotten first). */
export const MAX_CACHED_TOKENS = 10_000
/** After an unknown outcome: how often and how long the node is asked before the call gives up waiting. */
export const TRACK_TRIES = 5
export const TRACK_EVERY_MS = 1_000
/** The periodic resolver leaves younger payments to the call that made them. */
export const RESOLVE_AFTER_MS = 5 * 60_000

export const METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"] as const

/** Request headers the caller may not set: transport ones, and the credential the gateway adds. */
export const FORBIDDEN_HEADERS = new Set([
  "authorization", "host", "connection", "content-length", "transfer-encoding", "te", "trailer", "upgrade",
  "keep-alive", "proxy-authorization", "proxy-connection", "expect", "cookie"
])

/** Response headers returned to the caller: a safe subset. */
export const RETURNED_HEADERS = new Set([
  "content-type", "content-language", "cache-control", "etag", "last-modified", "expires", "retry-after",
  "location", "www-authenticate", "x-request-id", "date", "vary"
])

export type L402Code =
  | "L402_HOST_NOT_ALLOWED"
  | "L402_PRICE_ABOVE_MAX"
  | "L402_BAD_CHALLENGE"
  | "L402_PAYMENT_FAILED"
  | "L402_PAYMENT_PENDING"
  | "L402_UNAVAILABLE"

/** Why an L402 payment was refused or did not happen (one code each, docs/l402.md). */
export class L402Refused extends Schema.TaggedError<L402Refused>()("L402Refused", {
  code: Schema.Literals([
    "L402_HOST_NOT_ALLOWED",
    "L402_PRICE_ABOVE_MAX",
    "L402_BAD_CHALLENGE",
    "L402_PAYMENT_FAILED",
    "L402_PAYMENT_PENDING",
    "L402_UNAVAILABLE"
  ]),
  message: Schema.String,
  details: Schema.optional(Schema.Record(Schema.String, Schema.Unknown))
}) {}

/** The upstream could not be reached or did not answer in time. */
export class UpstreamFailed extends Schema.TaggedError<UpstreamFailed>()("UpstreamFailed", {
  host: Schema.String,
  message: Schema.String,
  /**
   * Set when the request failed after its invoice was paid: the payment and
   * its charge stand (the token is kept for the next call), and the caller is
   * told what it paid.
   */
  paid: Schema.optional(Schema.Struct({
    paymentHash: Schema.String,
    amountSats: Schema.Number,
    routingFeeSats: Schema.Number,
    chargedUsdCents: Schema.Number,
    transactionId: Schema.String,
    auditId: Schema.String
  }))
}) {
  readonly code = "PROVIDER_ERROR"
  get details() {
    return this.paid === undefined ? { provider: this.host } : { provider: this.host, paid: this.paid }
  }
}

export interface PayInput {
  readonly url: string
  readonly method: string
  readonly headers?: Readonly<Record<string, string>> | undefined
  readonly body?: string | undefined
  /** The most the invoice may ask, in sats (the routing fee comes on top, within its limit). */
  readonly maxSats: number
}

export interface PaymentMade {
  readonly paymentHash: string
  readonly preimage: string
  readonly amountMsat: bigint
  readonly routingFeeMsat: bigint
}

export interface PayResult {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: Uint8Array
  readonly truncated: boolean
  /** `paid`: this call paid; `token`: a token paid earlier was used; `none`: no paywall met. */
  readonly l402: "paid" | "token" | "none"
  readonly payment: PaymentMade | null
  readonly receipt: SpendReceipt | null
}

export type PayError = L402Refused | UpstreamFailed | ValidationError | UnsafeUrl | SpendRefusal

export interface CachedToken {
  readonly scheme: "L402" | "LSAT"
  readonly macaroon: string
  readonly preimage: string
}

/** The token cache key: the account, the URL's origin and its path up to the last "/". */
export const tokenKey = (accountId: AccountId, url: URL): string =>
  `${accountId} ${url.origin}${url.pathname.slice(0, url.pathname.lastIndexOf("/") + 1)}`

/** A payee-host entry: a host name or IP, with an optional port; lower case. */
export const normalizePayeeHost = (entry: string): string | undefined => {
  const trimmed = entry.trim().toLowerCase()
  if (trimmed === "" || trimmed.length > 261 || /[\s/@?#]/.test(trimmed)) return undefined
  try {
    const url = new URL(`http://${trimmed}`)
    return url.host === trimmed || url.host === trimmed.replace(/:80$/, "") ? trimmed : undefined
  } catch {
    return undefined
  }
}

export const hostAllowed = (hosts: ReadonlyArray<string>, url: URL) =>
  hosts.includes(url.host.toLowerCase()) || hosts.includes(url.hostname.toLowerCase())

/** µUSD for msat at the rate, rounded up (a charge never undercounts). */
export const msatToMicroUsdCharge = (msat: bigint, microUsdPerBtc: bigint): bigint =>
  ceilDivide(msat * microUsdPerBtc, MSAT_PER_BTC)

export const feeLimitFor = (amountMsat: bigint): bigint => {
  const share = ceilDivide(amountMsat * FEE_LIMIT_PPM, 1_000_000n)
  return share > MIN_FEE_LIMIT_MSAT ? share : MIN_FEE_LIMIT_MSAT
}

export const refused = (code: L402Code, message: string, details?: Record<string, unknown>) =>
  new L402Refused({ code, message, ...(details === undefined ? {} : { details }) })

export const invalid = (path: string, message: string) => new ValidationError({ message, issues: [{ path, message }] })

export const challengeHeaders = (response: OutboundResponse): ReadonlyArray<string> => {
  const value = response.headers["www-authenticate"]
  return value === undefined ? [] : [value]
}

export const returnedHeaders = (headers: Readonly<Record<string, string>>): Record<string, string> =>
  Object.fromEntries(Object.entries(headers).filter(([name]) => RETURNED_HEADERS.has(name.toLowerCase())))

