import { Effect, Result, Schema } from "effect"
import { ProviderFailure } from "../capabilities/Provider.ts"
import type { Principal } from "../domain/Agent.ts"
import type { Capability } from "../domain/Capability.ts"
import { type Forbidden, type ModelNotPriced, NotFound, type SpendRefusal, ValidationError } from "../domain/errors.ts"
import type { L402Payments, L402Refused, UpstreamFailed } from "../l402/Pay.ts"
import { UnsafeUrl } from "../ports/Net.ts"
import type { ProxyResponse, ServiceTransport } from "../ports/ServiceTransport.ts"
import type { Spend, SpendReceipt } from "../wallet/Spend.ts"
import type { Catalogue } from "./catalogue.ts"
import { type ProxyQuote, quoteProxy } from "./quote.ts"
import { HTTP_METHODS, type Service } from "./Service.ts"

/**
 * The proxy: a call to a catalogued service's priced endpoint, metered and
 * charged through the same spend pipeline as capabilities (policies, caps and
 * the kill switch apply; an endpoint without a price is refused).
 */

/** The capability a proxied call counts as (policies, caps, the ledger): the service's first. */
export const proxyCapability = (service: Pick<Service, "capabilities">): Capability => service.capabilities[0] ?? "reason"

export const ProxyCall = Schema.Struct({
  method: Schema.Literals(HTTP_METHODS),
  path: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(200)),
  query: Schema.optional(
    Schema.Record(Schema.String.check(Schema.isMaxLength(100)), Schema.String.check(Schema.isMaxLength(2000)))
      .check(Schema.isMaxProperties(50))
  ),
  headers: Schema.optional(
    Schema.Record(Schema.String.check(Schema.isMaxLength(100)), Schema.String.check(Schema.isMaxLength(2000)))
      .check(Schema.isMaxProperties(50))
  ),
  body: Schema.optional(Schema.Unknown),
  maxSats: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 10_000_000 }))).annotate({
    description: "L402 services: the most an invoice the service asks may be, in sats (default 10,000,000; the policy's caps apply)"
  })
})
export type ProxyCall = typeof ProxyCall.Type

export interface ProxyResult {
  readonly response: ProxyResponse
  /** The charge; the API shows it through `callReceipt` (src/wallet/receipt.ts). */
  readonly receipt: SpendReceipt
  readonly model: string | undefined
}

export type ProxyError =
  | SpendRefusal
  | ProviderFailure
  | NotFound
  | ModelNotPriced
  | ValidationError
  | UnsafeUrl
  | L402Refused
  | UpstreamFailed
  | Forbidden

/** Request headers a caller may send on to a service; everything else is dropped. */
const FORWARDABLE = new Set(["accept", "accept-language", "content-type", "user-agent", "openai-beta", "anthropic-beta", "anthropic-version"])
const isForwardable = (name: string) =>
  FORWARDABLE.has(name) ||
  (name.startsWith("x-") && !/(auth|key|token|secret|cookie|signature)/.test(name))

export const filterRequestHeaders = (headers: Readonly<Record<string, string>> | undefined): Record<string, string> =>
  Object.fromEntries(Object.entries(headers ?? {}).map(([k, v]) => [k.toLowerCase(), v] as const).filter(([k]) => isForwardable(k)))

/** The service, endpoint price and quote of a call, or why it cannot be made. */
export const resolveCall = Effect.fnUntraced(function*(catalogue: Catalogue, slug: string, call: ProxyCall) {
  const service = yield* catalogue.get(slug)
  const endpoint = service.endpoints.find((e) => e.method === call.method && e.path === call.path)
  if (endpoint === undefined) {
    return yield* new NotFound({ resource: `Endpoint ${call.method} ${call.path.slice(0, 100)} of ${slug}` })
  }
  if (endpoint.price === null) {
    return yield* new ValidationError({
      message: "This endpoint has no price, so it cannot be called through the proxy",
      issues: [{ path: "path", message: "unpriced endpoint" }]
    })
  }
  const quoted = quoteProxy(endpoint.price, call.body, slug)
  if (Result.isFailure(quoted)) return yield* Effect.fail(quoted.failure)
  return { service, quote: quoted.success }
})

/** What is sent to the service: the caller's call with forwardable headers and the quoted body. */
export const upstreamRequest = (call: ProxyCall, quote: ProxyQuote) => ({
  method: call.method,
  path: call.path,
  query: call.query ?? {},
  headers: filterRequestHeaders(call.headers),
  body: quote.body
})
type UpstreamRequest = ReturnType<typeof upstreamRequest>

/** A refused address found while calling is the caller's problem, not the provider's. */
export const blockedAsFailure = (service: Service) => (error: ProviderFailure | UnsafeUrl): ProviderFailure =>
  error instanceof UnsafeUrl
    ? new ProviderFailure({ provider: service.slug, reason: "blocked", message: error.reason })
    : error

export const blockedAsCallerError = <E extends ProxyError>(error: E): ProxyError =>
  error instanceof ProviderFailure && error.reason === "blocked"
    ? new ValidationError({
      message: `This service may not be reached: ${error.message}`,
      issues: [{ path: "slug", message: error.message }]
    })
    : error

/** The ledger's description of a proxied call. */
export const describeCall = (service: Service, call: ProxyCall, quote: ProxyQuote, suffix: string) =>
  `proxy ${service.slug} ${call.method} ${call.path}${suffix}${quote.model === undefined ? "" : ` (${quote.model})`}`

/** The default `maxSats` of a proxied call to an L402 service. */
export const PROXY_MAX_SATS = 10_000_000

export const makeProxy = (deps: {
  readonly catalogue: Catalogue
  readonly transport: ServiceTransport["Service"]
  readonly spend: Spend["Service"]
  /** Pays the challenges of L402 services (absent: their 402 is the answer). */
  readonly l402?: L402Payments["Service"] | undefined
}): (principal: Principal, slug: string, call: ProxyCall) => Effect.Effect<ProxyResult, ProxyError> => {
  const { catalogue, transport, spend, l402 } = deps
  const send = (service: Service, request: UpstreamRequest, authorization: string | undefined) =>
    transport.send(service, authorization === undefined ? request : { ...request, headers: { ...request.headers, authorization } })
      .pipe(Effect.mapError(blockedAsFailure(service)))
  /**
   * An L402 service: the cached token goes with the request; a 402 with a
   * challenge is paid (its own charge, capability `pay`) and the request
   * sent again with the new token, once.
   */
  const paidExchange = Effect.fnUntraced(function*(
    payments: L402Payments["Service"],
    principal: Principal,
    service: Service,
    request: UpstreamRequest,
    target: URL,
    maxSats: number
  ) {
    const accountId = principal.agent.accountId
    const cached = payments.tokenFor(accountId, target)
    const first = yield* send(service, request, cached)
    if (first.status !== 402) return first
    if (cached !== undefined) payments.forgetToken(accountId, target)
    const paid = yield* payments.payChallenge(principal, target, first.headers["www-authenticate"], maxSats)
    if (paid === undefined) return first
    const retried = yield* send(service, request, paid.authorization)
    if (retried.status === 402) payments.forgetToken(accountId, target)
    return retried
  })
  // Generators made once, not per call (docs/performance.md, "Generators made once").
  return Effect.fnUntraced(function*(principal: Principal, slug: string, call: ProxyCall) {
    const { service, quote } = yield* resolveCall(catalogue, slug, call)
    const request = upstreamRequest(call, quote)
    const exchange: Effect.Effect<ProxyResponse, ProxyError> = service.l402 === true && l402 !== undefined
      ? paidExchange(l402, principal, service, request, new URL(service.baseUrl.replace(/\/+$/, "") + call.path), call.maxSats ?? PROXY_MAX_SATS)
      : Effect.suspend(() => send(service, request, undefined))
    const run: Effect.Effect<{ readonly value: ProxyResponse; readonly actualMicroUsd: bigint }, ProxyError> = Effect.flatMap(
      exchange,
      (answer) =>
        answer.status >= 500
          ? Effect.fail(new ProviderFailure({ provider: service.slug, reason: "unavailable", message: `answered ${answer.status}` }))
          // A refusal by the upstream (4xx) did no billable work: nothing is charged.
          : Effect.succeed({ value: answer, actualMicroUsd: answer.status >= 400 ? 0n : quote.meter(answer) })
    )
    const spent = yield* Effect.mapError(
      spend.spend(principal, {
        capability: proxyCapability(service),
        provider: `proxy:${service.slug}`,
        quotedMicroUsd: quote.microUsd,
        description: describeCall(service, call, quote, ""),
        run
      }),
      blockedAsCallerError
    )
    return { response: spent.value, receipt: spent.receipt, model: quote.model }
  })
}
