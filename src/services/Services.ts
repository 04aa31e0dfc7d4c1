import { type Cause, Clock, Context, Deferred, Effect, Layer, Option, Queue, Result, Schema, Stream } from "effect"
import { requireOwner } from "../agents/Access.ts"
import { promptTokenBound, tokenCost } from "../capabilities/pricing.ts"
import { ProviderFailure } from "../capabilities/Provider.ts"
import type { Principal } from "../domain/Agent.ts"
import type { Capability } from "../domain/Capability.ts"
import { Conflict, type Forbidden, NotFound, type SpendRefusal, ValidationError } from "../domain/errors.ts"
import { centsToMicroUsd } from "../domain/Money.ts"
import { OutboundHttp, UnsafeUrl } from "../ports/Net.ts"
import { RegistryStore } from "../ports/RegistryStore.ts"
import { type ProxyResponse, ServiceTransport } from "../ports/ServiceTransport.ts"
import type { Page, PageRequest } from "../ports/Store.ts"
import { Spend, type SpendReceipt } from "../wallet/Spend.ts"
import { callReceipt } from "../wallet/receipt.ts"
import { errorEvent, metadataEvent, usageTracker } from "./sse.ts"
import {
  type EndpointPrice,
  HTTP_METHODS,
  newSubmissionId,
  type Service,
  type ServiceEndpoint,
  type Submission,
  type SubmissionInput
} from "./Service.ts"

/** The capability a proxied call counts as (policies, caps, the ledger): the service's first. */
export const proxyCapability = (service: Pick<Service, "capabilities">): Capability => service.capabilities[0] ?? "reason"

/**
 * The service catalogue (operator services + approved registry submissions),
 * the registry, and the proxy. A proxied call is metered and charged through
 * the same spend pipeline as capabilities: policies, caps and the kill switch
 * apply, and an endpoint without a price is refused.
 */


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
  body: Schema.optional(Schema.Unknown)
})
export type ProxyCall = typeof ProxyCall.Type

export interface ProxyResult {
  readonly response: ProxyResponse
  readonly receipt: SpendReceipt
  readonly model: string | undefined
}

/** Request headers a caller may send on to a service; everything else is dropped. */
const FORWARDABLE = new Set(["accept", "accept-language", "content-type", "user-agent", "openai-beta", "anthropic-beta"])
const isForwardable = (name: string) =>
  FORWARDABLE.has(name) ||
  (name.startsWith("x-") && !/(auth|key|token|secret|cookie|signature)/.test(name))

export const filterRequestHeaders = (headers: Readonly<Record<string, string>> | undefined): Record<string, string> =>
  Object.fromEntries(Object.entries(headers ?? {}).map(([k, v]) => [k.toLowerCase(), v] as const).filter(([k]) => isForwardable(k)))

const DEFAULT_PROXY_MAX_TOKENS = 1024

interface ProxyQuote {
  readonly microUsd: bigint
  readonly body: unknown
  readonly model: string | undefined
  readonly meter: (response: ProxyResponse) => bigint
  /** Token-priced endpoints: the streaming details. */
  readonly tokens?: {
    readonly format: "openai-chat" | "anthropic-messages"
    readonly stream: boolean
    /** The prompt part of the quote: the least a stream that ends without a usage report is charged. */
    readonly inputMicroUsd: bigint
    readonly cost: (usage: { readonly input: number; readonly output: number }) => bigint
    /** What a stream that ends without a usable usage report is charged, from what it streamed (see `countedStreamCost`). */
    readonly counted: (streamedBytes: number) => bigint
  }
}

/**
 * The charge of a stream whose upstream reported no usable usage (none, or a
 * malformed one) or whose caller went away before it arrived: the prompt part
 * of the quote plus the completion tokens bounded by what was streamed, at
 * one token per UTF-8 byte of streamed content (a token is at least one byte
 * of text, so this never undercounts), capped at the completion budget. So it
 * is never less than the prompt part and never more than the quote; an
 * upstream (or a registry service) that omits usage cannot make output free,
 * and a stream that produced little is not charged its whole budget.
 */
export const countedStreamCost = (input: {
  readonly inputMicroUsd: bigint
  readonly maxTokens: number
  readonly outputPer1kMicroUsd: bigint
  readonly streamedBytes: number
}): bigint => {
  const tokens = Math.min(Math.max(0, input.streamedBytes), input.maxTokens)
  return input.inputMicroUsd + tokenCost(tokens, input.outputPer1kMicroUsd)
}

const readUsage = (format: "openai-chat" | "anthropic-messages", body: unknown) => {
  const usage = (body as { usage?: Record<string, unknown> } | null)?.usage
  if (usage === undefined || usage === null || typeof usage !== "object") return undefined
  const input = format === "openai-chat" ? usage["prompt_tokens"] : usage["input_tokens"]
  const output = format === "openai-chat" ? usage["completion_tokens"] : usage["output_tokens"]
  return typeof input === "number" && typeof output === "number" && input >= 0 && output >= 0
    ? { input, output }
    : undefined
}

/** The upper bound of a proxied call and how its actual cost is read back. */
export const quoteProxy = (
  price: EndpointPrice,
  body: unknown
): Result.Result<ProxyQuote, ValidationError | NotFound> => {
  if (price.kind === "perCall") {
    return Result.succeed({ microUsd: price.priceMicroUsd, body, model: undefined, meter: () => price.priceMicroUsd })
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return Result.fail(new ValidationError({ message: "This endpoint takes a JSON object body", issues: [{ path: "body", message: "Expected an object" }] }))
  }
  const request = body as Record<string, unknown>
  const modelId = request["model"]
  const model = price.models.find((m) => m.id === modelId)
  if (model === undefined) return Result.fail(new NotFound({ resource: `Model ${String(modelId).slice(0, 100)}` }))
  const stream = request["stream"] === true
  const maxKey = price.format === "openai-chat" && request["max_completion_tokens"] !== undefined ? "max_completion_tokens" : "max_tokens"
  const asked = request[maxKey]
  const maxTokens = asked === undefined ? Math.min(DEFAULT_PROXY_MAX_TOKENS, model.defaultMaxTokens) : asked
  if (typeof maxTokens !== "number" || !Number.isInteger(maxTokens) || maxTokens < 1 || maxTokens > model.maxTokens) {
    return Result.fail(new ValidationError({
      message: `${maxKey} must be a whole number from 1 to ${model.maxTokens}`,
      issues: [{ path: `body.${maxKey}`, message: `must be 1 to ${model.maxTokens}` }]
    }))
  }
  // The prompt is bounded by the bytes of everything but the answer's budget.
  const promptText = JSON.stringify({ ...request, [maxKey]: undefined })
  const inputBound = promptTokenBound({ prompt: promptText.length === 0 ? " " : promptText })
  const inputMicroUsd = tokenCost(inputBound, model.inputPer1kMicroUsd)
  const microUsd = inputMicroUsd + tokenCost(maxTokens, model.outputPer1kMicroUsd)
  const cost = (usage: { readonly input: number; readonly output: number }) =>
    tokenCost(usage.input, model.inputPer1kMicroUsd) + tokenCost(usage.output, model.outputPer1kMicroUsd)
  const forwarded: Record<string, unknown> = { ...request, [maxKey]: maxTokens }
  // OpenAI reports a stream's usage only when asked; the last chunk then carries it.
  if (stream && price.format === "openai-chat") forwarded["stream_options"] = { include_usage: true }
  return Result.succeed({
    microUsd,
    body: forwarded,
    model: model.id,
    meter: (response) => {
      const usage = readUsage(price.format, response.body)
      // An upstream that reports no usage is charged its upper bound.
      return usage === undefined ? microUsd : cost(usage)
    },
    tokens: {
      format: price.format,
      stream,
      inputMicroUsd,
      cost,
      counted: (streamedBytes) =>
        countedStreamCost({ inputMicroUsd, maxTokens, outputPer1kMicroUsd: model.outputPer1kMicroUsd, streamedBytes })
    }
  })
}

const priceFromSubmission = (price: SubmissionInput["pricing"][string]): EndpointPrice | null => {
  if ("perCallUsdCents" in price) {
    const micro = centsToMicroUsd(price.perCallUsdCents)
    return Result.isSuccess(micro) ? { kind: "perCall", priceMicroUsd: micro.success } : null
  }
  const models = []
  for (const [id, m] of Object.entries(price.models)) {
    const input = centsToMicroUsd(m.inputPer1kTokens)
    const output = centsToMicroUsd(m.outputPer1kTokens)
    if (Result.isFailure(input) || Result.isFailure(output)) return null
    models.push({
      id,
      inputPer1kMicroUsd: input.success,
      outputPer1kMicroUsd: output.success,
      maxTokens: m.maxTokens,
      defaultMaxTokens: Math.min(DEFAULT_PROXY_MAX_TOKENS, m.maxTokens)
    })
  }
  return { kind: "tokens", format: price.format, models }
}

export const serviceFromSubmission = (s: Submission): Service => ({
  slug: s.slug,
  name: s.name,
  description: s.description,
  baseUrl: s.baseUrl,
  capabilities: s.capabilities,
  origin: "registry",
  endpoints: s.endpoints.map((e): ServiceEndpoint => {
    const price = s.pricing[e.path]
    return { ...e, price: price === undefined ? null : priceFromSubmission(price) }
  })
})

export type ProxyError = SpendRefusal | ProviderFailure | NotFound | ValidationError | UnsafeUrl

export interface StreamedProxy {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  /**
   * The upstream's events as they arrive, then one last event
   * `event: spendgate.metadata` with the charge. Ending the stream early (the
   * client went away) stops the upstream; the call is then charged what the
   * upstream reported or, when no usable usage arrived, by `countedStreamCost`:
   * the prompt part plus what had been streamed. A refusal after the answer
   * began (a call that outlived its hold and could not be charged) ends the
   * stream with `event: spendgate.error` instead of the metadata.
   */
  readonly body: Stream.Stream<Uint8Array>
}

export class Services extends Context.Service<Services, {
  readonly list: Effect.Effect<ReadonlyArray<Service>>
  readonly get: (slug: string) => Effect.Effect<Service, NotFound>
  readonly submit: (principal: Principal, input: SubmissionInput) => Effect.Effect<Submission, Forbidden | ValidationError | UnsafeUrl | Conflict>
  readonly submissions: (principal: Principal, page: PageRequest) => Effect.Effect<Page<Submission>, Forbidden>
  /** Operator: every submission, by status. */
  readonly allSubmissions: (status: Submission["status"] | undefined, page: PageRequest) => Effect.Effect<Page<Submission>>
  readonly review: (id: string, status: "approved" | "rejected", note: string | null) => Effect.Effect<Submission, NotFound | Conflict>
  readonly proxy: (principal: Principal, slug: string, call: ProxyCall) => Effect.Effect<ProxyResult, ProxyError>
  /** A `stream: true` chat call: the answer streams through as it arrives. */
  readonly proxyStream: (principal: Principal, slug: string, call: ProxyCall) => Effect.Effect<StreamedProxy, ProxyError>
}>()("spendgate/Services") {
  static readonly layer = Layer.effect(
    Services,
    Effect.gen(function*() {
      const transport = yield* ServiceTransport
      const registry = yield* RegistryStore
      const spend = yield* Spend
      const outbound = yield* Effect.serviceOption(OutboundHttp)
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

      const list = Effect.map(registry.approved, (approved) => [
        ...transport.operatorServices,
        ...approved.map(serviceFromSubmission).filter((s) => !transport.operatorServices.some((o) => o.slug === s.slug))
      ])

      const get = (slug: string) =>
        Effect.flatMap(list, (all) => {
          const found = all.find((s) => s.slug === slug)
          return found === undefined ? Effect.fail(new NotFound({ resource: `Service ${slug.slice(0, 64)}` })) : Effect.succeed(found)
        })

      const submit = Effect.fn("Services.submit")(function*(principal: Principal, input: SubmissionInput) {
        yield* requireOwner(principal, "submit services")
        const issues: Array<{ path: string; message: string }> = []
        let url: URL | undefined
        try {
          url = new URL(input.baseUrl)
        } catch {
          issues.push({ path: "baseUrl", message: "Expected an absolute URL" })
        }
        if (url !== undefined && url.protocol !== "https:") issues.push({ path: "baseUrl", message: "Must be https" })
        if (url !== undefined && (url.username !== "" || url.password !== "" || url.search !== "" || url.hash !== "")) {
          issues.push({ path: "baseUrl", message: "No credentials, query or fragment" })
        }
        const seen = new Set<string>()
        input.endpoints.forEach((e, i) => {
          const key = `${e.method} ${e.path}`
          if (seen.has(key)) issues.push({ path: `endpoints.${i}`, message: `${key} is listed twice` })
          seen.add(key)
          const price = input.pricing[e.path]
          if (price === undefined) issues.push({ path: `pricing.${e.path}`, message: "Every endpoint needs a price" })
          else if (priceFromSubmission(price) === null) issues.push({ path: `pricing.${e.path}`, message: "Prices are USD cents with at most 4 decimals" })
        })
        for (const path of Object.keys(input.pricing)) {
          if (!input.endpoints.some((e) => e.path === path)) issues.push({ path: `pricing.${path}`, message: "Not a listed endpoint" })
        }
        if (issues.length > 0) return yield* new ValidationError({ message: `Invalid submission: ${issues[0]!.path}: ${issues[0]!.message}`, issues })
        if (Option.isSome(outbound)) yield* outbound.value.check(input.baseUrl)
        if (transport.operatorServices.some((s) => s.slug === input.slug)) {
          return yield* new Conflict({ message: `The slug ${input.slug} is taken` })
        }
        const submission: Submission = {
          ...input,
          id: newSubmissionId(),
          accountId: principal.agent.accountId,
          agentId: principal.agent.id,
          status: "pending",
          createdAt: yield* now,
          reviewedAt: null,
          reviewNote: null
        }
        const inserted = yield* registry.insert(submission)
        if (inserted === "SlugTaken") return yield* new Conflict({ message: `The slug ${input.slug} is taken` })
        return submission
      })

      const submissions = (principal: Principal, page: PageRequest) =>
        Effect.andThen(
          requireOwner(principal, "list registry submissions"),
          registry.list({ accountId: principal.agent.accountId }, page)
        )

      const allSubmissions = (status: Submission["status"] | undefined, page: PageRequest) => registry.list({ status }, page)

      const review = Effect.fn("Services.review")(function*(id: string, status: "approved" | "rejected", note: string | null) {
        const current = yield* registry.get(id)
        if (Option.isNone(current)) return yield* new NotFound({ resource: "Submission" })
        const reviewed = yield* registry.review(id, { status, note, at: yield* now })
        if (Option.isNone(reviewed)) return yield* new Conflict({ message: `The submission is already ${current.value.status}` })
        return reviewed.value
      })

      const resolve = (slug: string, call: ProxyCall) =>
        Effect.gen(function*() {
          const service = yield* get(slug)
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
          const quoted = quoteProxy(endpoint.price, call.body)
          if (Result.isFailure(quoted)) return yield* Effect.fail(quoted.failure)
          return { service, quote: quoted.success }
        })

      const upstreamRequest = (call: ProxyCall, quote: ProxyQuote) => ({
        method: call.method,
        path: call.path,
        query: call.query ?? {},
        headers: filterRequestHeaders(call.headers),
        body: quote.body
      })

      /** A refused address found while calling is the caller's problem, not the provider's. */
      const blockedAsFailure = (service: Service) => (error: ProviderFailure | UnsafeUrl): ProviderFailure =>
        error instanceof UnsafeUrl
          ? new ProviderFailure({ provider: service.slug, reason: "blocked", message: error.reason })
          : error

      const describe = (service: Service, call: ProxyCall, quote: ProxyQuote, suffix: string) =>
        `proxy ${service.slug} ${call.method} ${call.path}${suffix}${quote.model === undefined ? "" : ` (${quote.model})`}`

      const blockedAsCallerError = (error: SpendRefusal | ProviderFailure): ProxyError =>
        error instanceof ProviderFailure && error.reason === "blocked"
          ? new ValidationError({
            message: `This service may not be reached: ${error.message}`,
            issues: [{ path: "slug", message: error.message }]
          })
          : error

      const proxyStream = (principal: Principal, slug: string, call: ProxyCall): Effect.Effect<StreamedProxy, ProxyError> =>
        Effect.gen(function*() {
          const { service, quote } = yield* resolve(slug, call)
          const tokens = quote.tokens
          if (tokens === undefined || !tokens.stream) {
            return yield* new ValidationError({
              message: "Only token-priced chat endpoints stream; send stream: true to one of them",
              issues: [{ path: "body.stream", message: "not a streaming call" }]
            })
          }
          const queue = yield* Queue.bounded<Uint8Array, Cause.Done>(64)
          const head = yield* Deferred.make<{ readonly status: number; readonly headers: Readonly<Record<string, string>> }, ProxyError>()
          const tracker = usageTracker(tokens.format)
          const gone = yield* Deferred.make<void>()
          const run: Effect.Effect<{ readonly value: undefined; readonly actualMicroUsd: bigint }, ProviderFailure> = Effect.scoped(
            Effect.gen(function*() {
              const upstream = yield* transport.stream(service, upstreamRequest(call, quote)).pipe(
                Effect.mapError(blockedAsFailure(service))
              )
              if (upstream.status >= 500) {
                return yield* new ProviderFailure({ provider: service.slug, reason: "unavailable", message: `answered ${upstream.status}` })
              }
              yield* Deferred.succeed(head, { status: upstream.status, headers: upstream.headers })
              yield* upstream.body.pipe(
                Stream.runForEachWhile((chunk) => {
                  tracker.push(chunk)
                  return Queue.offer(queue, chunk)
                }),
                // Output already reached the caller: a broken stream is settled, not retried.
                Effect.catch(() => Effect.void),
                // The caller went away: stop reading (the upstream connection closes with the scope).
                Effect.raceFirst(Deferred.await(gone))
              )
              if (upstream.status >= 400) return { value: undefined, actualMicroUsd: 0n }
              const usage = tracker.usage()
              return {
                value: undefined,
                actualMicroUsd: usage === undefined ? tokens.counted(tracker.streamedBytes()) : tokens.cost(usage)
              }
            })
          )
          yield* spend.spend(principal, {
            capability: proxyCapability(service),
            provider: `proxy:${service.slug}`,
            quotedMicroUsd: quote.microUsd,
            description: describe(service, call, quote, " stream"),
            run
          }).pipe(
            Effect.flatMap(({ receipt }) =>
              Queue.offer(queue, metadataEvent(callReceipt(receipt, { provider: service.slug, model: quote.model })))
            ),
            Effect.catch((error) =>
              Deferred.fail(head, blockedAsCallerError(error)).pipe(
                // The answer already started (e.g. the call outlived its hold and could not be
                // charged): the refusal ends the stream as its last event, in the error envelope.
                Effect.flatMap((first) => first ? Effect.void : Queue.offer(queue, errorEvent(error)).pipe(Effect.asVoid))
              )),
            Effect.ensuring(Queue.end(queue)),
            Effect.forkDetach
          )
          const started = yield* Deferred.await(head)
          return {
            ...started,
            body: Stream.fromQueue(queue).pipe(
              Stream.ensuring(Effect.andThen(Queue.shutdown(queue), Deferred.succeed(gone, undefined)))
            )
          }
        })

      const proxy = (principal: Principal, slug: string, call: ProxyCall): Effect.Effect<ProxyResult, ProxyError> =>
        Effect.gen(function*() {
          const { service, quote } = yield* resolve(slug, call)
          const run: Effect.Effect<{ readonly value: ProxyResponse; readonly actualMicroUsd: bigint }, ProviderFailure> = Effect.gen(
            function*() {
              const answer = yield* transport.send(service, upstreamRequest(call, quote)).pipe(Effect.mapError(blockedAsFailure(service)))
              if (answer.status >= 500) {
                return yield* new ProviderFailure({ provider: service.slug, reason: "unavailable", message: `answered ${answer.status}` })
              }
              // A refusal by the upstream (4xx) did no billable work: nothing is charged.
              return { value: answer, actualMicroUsd: answer.status >= 400 ? 0n : quote.meter(answer) }
            }
          )
          const spent = yield* Effect.mapError(
            spend.spend(principal, {
              capability: proxyCapability(service),
              provider: `proxy:${service.slug}`,
              quotedMicroUsd: quote.microUsd,
              description: describe(service, call, quote, ""),
              run
            }),
            blockedAsCallerError
          )
          return { response: spent.value, receipt: spent.receipt, model: quote.model }
        })

      return Services.of({ list, get, submit, submissions, allSubmissions, review, proxy, proxyStream })
    })
  )
}
