import { Effect } from "effect"
import type { Principal } from "../domain/Agent.ts"
import type { Capability } from "../domain/Capability.ts"
import { NotFound, ValidationError } from "../domain/errors.ts"
import type { Catalogue } from "./catalogue.ts"
import { fallsBack } from "./chat.ts"
import { type ProxyCall, proxyCapability, type ProxyError, type ProxyResult } from "./proxy.ts"
import type { Service } from "./Service.ts"

/**
 * Embeddings by model (the OpenAI-compatible `POST /v1/embeddings`): the
 * model named in the body is resolved to one of the operator's services
 * whose endpoint is priced as embeddings (per 1000 input tokens, see
 * embeddingsQuote.ts), and the call runs through that service's proxy
 * unchanged: the quote from a bound on the input's tokens, the hold, the
 * charge from the upstream's `usage.prompt_tokens`, the receipt. It counts
 * as the capability `reason` (an agent that may reason may embed), so the
 * same policy, caps and kill switch apply as to a chat completion.
 *
 * Names resolve as chat's do (chat.ts): `service/model`, or a bare model id
 * answered by the cheapest service pricing it (ties in configuration order),
 * falling back to the next when one cannot be reached or answers 5xx.
 */

/** The capability an embeddings call counts as. */
export const EMBEDDINGS_CAPABILITY: Capability = "reason"

export interface EmbeddingRoute {
  readonly service: Service
  readonly path: string
  readonly model: string
  readonly inputPer1kMicroUsd: bigint
}

/** Every (service, endpoint, model) an embeddings call may be routed to, in configuration order. */
export const embeddingRoutes = (services: ReadonlyArray<Service>): ReadonlyArray<EmbeddingRoute> =>
  services
    .filter((s) => s.origin === "operator" && proxyCapability(s) === EMBEDDINGS_CAPABILITY)
    .flatMap((service) =>
      service.endpoints.flatMap((e) =>
        e.method === "POST" && e.price !== null && e.price.kind === "embeddings"
          ? e.price.models.map((m) => ({ service, path: e.path, model: m.id, inputPer1kMicroUsd: m.inputPer1kMicroUsd }))
          : []
      )
    )

/** The routes of a model name, in the order they are tried (as `chatRoutesFor`). */
export const embeddingRoutesFor = (routes: ReadonlyArray<EmbeddingRoute>, name: string): ReadonlyArray<EmbeddingRoute> => {
  const slash = name.indexOf("/")
  if (slash > 0) {
    const named = routes.find((r) => r.service.slug === name.slice(0, slash) && r.model === name.slice(slash + 1))
    if (named !== undefined) return [named]
  }
  return routes
    .map((r, i) => [r, i] as const)
    .filter(([r]) => r.model === name)
    .sort(([a, i], [b, j]) => (a.inputPer1kMicroUsd < b.inputPer1kMicroUsd ? -1 : a.inputPer1kMicroUsd > b.inputPer1kMicroUsd ? 1 : i - j))
    .map(([r]) => r)
}

export interface EmbeddingModel {
  readonly id: string
  readonly ownedBy: string
}

/** The models an embeddings call may name: each bare id once (owned by its cheapest service), then each `service/model`. */
export const embeddingModels = (routes: ReadonlyArray<EmbeddingRoute>): ReadonlyArray<EmbeddingModel> => {
  const bare = new Map<string, EmbeddingModel>()
  for (const r of routes) {
    const first = embeddingRoutesFor(routes, r.model)[0]
    if (first !== undefined && !bare.has(r.model)) bare.set(r.model, { id: r.model, ownedBy: first.service.slug })
  }
  const named = routes.map((r) => ({ id: `${r.service.slug}/${r.model}`, ownedBy: r.service.slug }))
  return [...bare.values(), ...named.filter((m) => !bare.has(m.id))]
}

/** The body of an embeddings call: a JSON object naming its model. */
export type EmbeddingsBody = Readonly<Record<string, unknown>> & { readonly model: string }

export interface EmbeddingsResult extends ProxyResult {
  /** The service that answered. */
  readonly service: string
}

export const makeEmbeddings = (deps: {
  readonly catalogue: Catalogue
  readonly proxy: (principal: Principal, slug: string, call: ProxyCall) => Effect.Effect<ProxyResult, ProxyError>
}) => {
  const attempt = (
    principal: Principal,
    body: EmbeddingsBody,
    routes: ReadonlyArray<EmbeddingRoute>
  ): Effect.Effect<EmbeddingsResult, ProxyError> => {
    const [first, ...rest] = routes
    const tried = Effect.map(
      deps.proxy(principal, first!.service.slug, { method: "POST", path: first!.path, body: { ...body, model: first!.model } }),
      (result) => ({ ...result, service: first!.service.slug })
    )
    return rest.length === 0 ? tried : Effect.catchIf(tried, fallsBack, () => attempt(principal, body, rest))
  }
  // Made once, not per call (docs/performance.md, "Generators made once").
  const embeddings = Effect.fnUntraced(function*(principal: Principal, body: EmbeddingsBody) {
    if (body["stream"] !== undefined) {
      return yield* new ValidationError({ message: "Embeddings do not stream", issues: [{ path: "stream", message: "not supported" }] })
    }
    const routes = embeddingRoutesFor(embeddingRoutes(yield* deps.catalogue.list), body.model)
    if (routes.length === 0) {
      return yield* new NotFound({
        resource: `Embedding model ${body.model.slice(0, 200)} (GET /v1/models lists the models that may be used)`
      })
    }
    return yield* attempt(principal, body, routes)
  })
  return {
    embeddings: (principal: Principal, body: EmbeddingsBody): Effect.Effect<EmbeddingsResult, ProxyError> =>
      embeddings(principal, body),
    embeddingModels: Effect.map(deps.catalogue.list, (services) => embeddingModels(embeddingRoutes(services)))
  }
}
