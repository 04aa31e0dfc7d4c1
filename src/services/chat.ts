import { Effect } from "effect"
import type { Principal } from "../domain/Agent.ts"
import type { Capability } from "../domain/Capability.ts"
import { ProviderFailure } from "../capabilities/Provider.ts"
import { ModelNotPriced, NotFound, ValidationError } from "../domain/errors.ts"
import type { Catalogue } from "./catalogue.ts"
import { type ProxyCall, proxyCapability, type ProxyError, type ProxyResult } from "./proxy.ts"
import type { Service } from "./Service.ts"
import type { StreamedProxy } from "./stream.ts"

/**
 * Chat calls by model, in one of two wire formats: OpenAI's chat completions
 * (`POST /v1/chat/completions`, format `openai-chat`) and Anthropic's Messages
 * (`POST /v1/messages`, format `anthropic-messages`). The model named in the
 * body is resolved to one of the operator's services that prices it in that
 * format, and the call runs through the proxy of that service unchanged: the
 * same quote, hold, metering from the upstream's usage, settlement and
 * receipt, under the capability `reason`.
 *
 * A model is named `service/model` (e.g. `openai/gpt-4o-mini`), or bare
 * (`gpt-4o-mini`): the cheapest service that prices it then answers (input
 * plus output price per 1000 tokens; ties go to the first configured), and
 * when it cannot be reached or answers 5xx (nothing charged), the next
 * cheapest, and so on. Only
 * the operator's services are routed to (registry services stay behind
 * /v1/proxy/:slug), and only endpoints priced in the format of the call: a
 * chat completion never reaches a Messages endpoint, nor the reverse.
 */

/** The wire formats a chat call may speak (the `format` of a token-priced endpoint). */
export type ChatFormat = "openai-chat" | "anthropic-messages"

/**
 * The `anthropic-version` sent upstream on a Messages call whose caller named
 * none (the version the Messages API was first published under). A service
 * whose credentials set the header sends its own instead.
 */
export const DEFAULT_ANTHROPIC_VERSION = "2023-06-01"

/** Request headers of a Messages call that go on to the upstream (the API version and beta flags). */
const ANTHROPIC_HEADERS = ["anthropic-version", "anthropic-beta"] as const
const MAX_HEADER_CHARS = 500

/** The capability a chat completion counts as. */
export const CHAT_CAPABILITY: Capability = "reason"

export interface ChatRoute {
  readonly service: Service
  readonly path: string
  /** The model id the service prices (what is sent upstream). */
  readonly model: string
  readonly inputPer1kMicroUsd: bigint
  readonly outputPer1kMicroUsd: bigint
}

/** Every (service, endpoint, model) a chat call in `format` may be routed to, in configuration order. */
export const chatRoutes = (services: ReadonlyArray<Service>, format: ChatFormat = "openai-chat"): ReadonlyArray<ChatRoute> =>
  services
    .filter((s) => s.origin === "operator" && proxyCapability(s) === CHAT_CAPABILITY)
    .flatMap((service) =>
      service.endpoints.flatMap((e) =>
        e.method === "POST" && e.price !== null && e.price.kind === "tokens" && e.price.format === format
          ? e.price.models.map((m) => ({
            service,
            path: e.path,
            model: m.id,
            inputPer1kMicroUsd: m.inputPer1kMicroUsd,
            outputPer1kMicroUsd: m.outputPer1kMicroUsd
          }))
          : []
      )
    )

const perKilo = (r: ChatRoute) => r.inputPer1kMicroUsd + r.outputPer1kMicroUsd

/**
 * The routes of a model name, in the order they are tried: `service/model`
 * names one route (a model id that itself holds a `/`, as OpenRouter's do,
 * is tried whole as a bare name when no service has that slug and model);
 * a bare name every service pricing it, cheapest first (input plus output
 * price per 1000 tokens; ties in configuration order). Empty: no service
 * prices it.
 */
export const chatRoutesFor = (routes: ReadonlyArray<ChatRoute>, name: string): ReadonlyArray<ChatRoute> => {
  const slash = name.indexOf("/")
  if (slash > 0) {
    const slug = name.slice(0, slash)
    const model = name.slice(slash + 1)
    const named = routes.find((r) => r.service.slug === slug && r.model === model)
    if (named !== undefined) return [named]
  }
  return routes
    .map((r, i) => [r, i] as const)
    .filter(([r]) => r.model === name)
    .sort(([a, i], [b, j]) => (perKilo(a) < perKilo(b) ? -1 : perKilo(a) > perKilo(b) ? 1 : i - j))
    .map(([r]) => r)
}

/** The route a model name is answered by first (see `chatRoutesFor`). */
export const resolveChatModel = (routes: ReadonlyArray<ChatRoute>, name: string): ChatRoute | undefined =>
  chatRoutesFor(routes, name)[0]

/**
 * Whether a failed call may be tried at the next service pricing the model:
 * only when the upstream could not be reached or answered 5xx, which did no
 * billable work (nothing was charged: a failed call's hold is released). A
 * timeout is not retried elsewhere (the first upstream may still be working).
 */
export const fallsBack = (error: ProxyError): boolean =>
  error instanceof ProviderFailure && (error.reason === "unavailable" || error.reason === "network")

export interface ChatModel {
  /** `service/model`, or the bare model id (then answered by the cheapest service pricing it). */
  readonly id: string
  /** The service that answers it. */
  readonly ownedBy: string
}

/** The models a chat completion may name: each bare id once, then each `service/model`. */
export const chatModels = (routes: ReadonlyArray<ChatRoute>): ReadonlyArray<ChatModel> => {
  const bare = new Map<string, ChatModel>()
  for (const r of routes) {
    const route = resolveChatModel(routes, r.model)
    if (route !== undefined && !bare.has(r.model)) bare.set(r.model, { id: r.model, ownedBy: route.service.slug })
  }
  const named = routes.map((r) => ({ id: `${r.service.slug}/${r.model}`, ownedBy: r.service.slug }))
  return [...bare.values(), ...named.filter((m) => !bare.has(m.id))]
}

/** The body of a chat call: a JSON object naming its model. */
export type ChatBody = Readonly<Record<string, unknown>> & { readonly model: string }

/** A chat call: its body, wire format and (Messages) the caller's request headers that go upstream. */
export interface ChatRequest {
  readonly body: ChatBody
  /** Default `openai-chat`. */
  readonly format?: ChatFormat
  /** The caller's request headers, lower-case names; only `anthropic-version` and `anthropic-beta` of a Messages call are used. */
  readonly headers?: Readonly<Record<string, string | undefined>>
}

/** The headers a Messages call sends upstream: the caller's API version (or the default) and beta flags. */
const anthropicHeaders = Effect.fnUntraced(function*(headers: Readonly<Record<string, string | undefined>>) {
  const out: Record<string, string> = { "anthropic-version": DEFAULT_ANTHROPIC_VERSION }
  for (const name of ANTHROPIC_HEADERS) {
    const value = headers[name]
    if (value === undefined || value === "") continue
    if (value.length > MAX_HEADER_CHARS) {
      return yield* new ValidationError({
        message: `The ${name} header is longer than ${MAX_HEADER_CHARS} characters`,
        issues: [{ path: name, message: `at most ${MAX_HEADER_CHARS} characters` }]
      })
    }
    out[name] = value
  }
  return out
})

/** The proxied calls a chat call may become, in the order they are tried, or why it cannot be made. */
// Generators made once, not per call (docs/performance.md, "Generators made once").
export const chatCalls = Effect.fnUntraced(function*(catalogue: Catalogue, request: ChatRequest) {
  const { body } = request
  const format = request.format ?? "openai-chat"
  const all = chatRoutes(yield* catalogue.list, format)
  const routes = chatRoutesFor(all, body.model)
  if (routes.length === 0) {
    // `service/model` naming a chat service whose card does not list the model: not priced (400).
    const slash = body.model.indexOf("/")
    const slug = slash > 0 ? body.model.slice(0, slash) : undefined
    if (slug !== undefined && all.some((r) => r.service.slug === slug)) {
      return yield* new ModelNotPriced({ model: body.model.slice(slash + 1), provider: slug })
    }
    // A name no service knows: 404, as OpenAI answers an unknown model.
    return yield* new NotFound({
      resource: `Model ${body.model.slice(0, 200)} (GET /v1/models lists the models that may be used; ` +
        `an operator offers a model by listing it in a reason price card of the price file, PRICES_FILE)`
    })
  }
  if (body["stream"] !== undefined && typeof body["stream"] !== "boolean") {
    return yield* new ValidationError({ message: "stream must be true or false", issues: [{ path: "stream", message: "Expected a boolean" }] })
  }
  const headers = format === "anthropic-messages" ? yield* anthropicHeaders(request.headers ?? {}) : undefined
  return routes.map((route) => ({
    route,
    call: {
      method: "POST",
      path: route.path,
      ...(headers === undefined ? {} : { headers }),
      body: { ...body, model: route.model }
    } satisfies ProxyCall as ProxyCall
  }))
})

/** Runs `attempt` on each call in turn while it fails in a way that `fallsBack`. */
const firstAnswer = <A>(
  calls: ReadonlyArray<{ readonly route: ChatRoute; readonly call: ProxyCall }>,
  attempt: (slug: string, call: ProxyCall) => Effect.Effect<A, ProxyError>
): Effect.Effect<A & { readonly service: string }, ProxyError> => {
  const [first, ...rest] = calls
  const tried = Effect.map(attempt(first!.route.service.slug, first!.call), (a) => ({ ...a, service: first!.route.service.slug }))
  return rest.length === 0
    ? tried
    : Effect.catchIf(tried, fallsBack, () => firstAnswer(rest, attempt))
}

export interface ChatResult extends ProxyResult {
  /** The service that answered. */
  readonly service: string
}

export interface StreamedChat extends StreamedProxy {
  readonly service: string
  /** The upper bound held for the call, µUSD. */
  readonly quotedMicroUsd: bigint
}

export const makeChat = (deps: {
  readonly catalogue: Catalogue
  readonly proxy: (principal: Principal, slug: string, call: ProxyCall) => Effect.Effect<ProxyResult, ProxyError>
  /** A streamed call, its stream in the wire format of the chat call (no Spendgate events in it). */
  readonly proxyStream: (principal: Principal, slug: string, call: ProxyCall, format: ChatFormat) => Effect.Effect<StreamedProxy, ProxyError>
}) => ({
  chat: (principal: Principal, request: ChatRequest): Effect.Effect<ChatResult, ProxyError> =>
    Effect.flatMap(chatCalls(deps.catalogue, request), (calls) =>
      firstAnswer(calls, (slug, call) => deps.proxy(principal, slug, call))),
  chatStream: (principal: Principal, request: ChatRequest): Effect.Effect<StreamedChat, ProxyError> =>
    Effect.flatMap(chatCalls(deps.catalogue, request), (calls) =>
      firstAnswer(calls, (slug, call) => deps.proxyStream(principal, slug, call, request.format ?? "openai-chat"))),
  chatModels: (format: ChatFormat = "openai-chat"): Effect.Effect<ReadonlyArray<ChatModel>> =>
    Effect.map(deps.catalogue.list, (services) => chatModels(chatRoutes(services, format)))
})
