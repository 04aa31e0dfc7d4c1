import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { microUsdToCents } from "../../src/domain/Money.ts"
import { callReceipt } from "../../src/wallet/receipt.ts"
import type { Service, Submission } from "../../src/services/Service.ts"
import { type ProxyCall, Services } from "../../src/services/Services.ts"
import { Api } from "./Api.ts"
import { failAsHttpError, toHttpError } from "./errors.ts"
import { CurrentPrincipal } from "./middleware.ts"

export const serviceSummary = (s: Service) => ({
  slug: s.slug,
  name: s.name,
  description: s.description,
  baseUrl: s.baseUrl,
  capabilities: s.capabilities
})

const cents = microUsdToCents

export const serviceDetail = (s: Service) => ({
  ...serviceSummary(s),
  pricing: Object.fromEntries(
    s.endpoints.filter((e) => e.price !== null).map((e) => {
      const price = e.price!
      return [
        e.path,
        price.kind === "perCall"
          ? { perCall: cents(price.priceMicroUsd), unit: "usd_cents", per: "call" }
          : price.kind === "embeddings"
          ? Object.fromEntries(price.models.map((m) => [m.id, {
            inputPer1kTokens: cents(m.inputPer1kMicroUsd),
            dimensions: m.dimensions,
            unit: "usd_cents",
            per: "1k_tokens"
          }]))
          : Object.fromEntries(price.models.map((m) => [m.id, {
            inputPer1kTokens: cents(m.inputPer1kMicroUsd),
            outputPer1kTokens: cents(m.outputPer1kMicroUsd),
            unit: "usd_cents",
            per: "1k_tokens"
          }]))
      ] as const
    })
  ),
  endpoints: s.endpoints.map((e) => ({ path: e.path, method: e.method, description: e.description }))
})

export const submissionJson = (s: Submission) => ({
  id: s.id,
  status: s.status,
  slug: s.slug,
  name: s.name,
  description: s.description,
  baseUrl: s.baseUrl,
  capabilities: s.capabilities,
  endpoints: s.endpoints,
  pricing: s.pricing,
  contact: s.contact,
  createdAt: s.createdAt.toISOString(),
  reviewedAt: s.reviewedAt === null ? null : s.reviewedAt.toISOString(),
  reviewNote: s.reviewNote,
  ...(s.l402 === true ? { l402: true } : {})
})

export const ServicesHandlers = HttpApiBuilder.group(
  Api,
  "services",
  Effect.fn(function*(handlers) {
    const services = yield* Services
    // Made once, not per call (docs/performance.md, "Generators made once").
    const proxy = Effect.fnUntraced(function*(slug: string, payload: ProxyCall) {
      const principal = yield* CurrentPrincipal
      const wantsStream = typeof payload.body === "object" && payload.body !== null &&
        (payload.body as { stream?: unknown }).stream === true
      if (wantsStream) {
        const streamed = yield* services.proxyStream(principal, slug, payload).pipe(Effect.catch(failAsHttpError))
        return HttpServerResponse.stream(streamed.body, {
          status: streamed.status,
          headers: { ...streamed.headers, "cache-control": "no-cache" },
          contentType: streamed.headers["content-type"] ?? "text/event-stream"
        })
      }
      const result = yield* services.proxy(principal, slug, payload).pipe(Effect.catch(failAsHttpError))
      return {
        status: result.response.status,
        headers: result.response.headers,
        body: result.response.body,
        metadata: callReceipt(result.receipt, { provider: slug, model: result.model })
      }
    })
    return handlers
      .handle("list", () => Effect.map(services.list, (all) => all.map(serviceSummary)))
      .handle("get", ({ params }) => services.get(params.slug).pipe(Effect.map(serviceDetail), Effect.mapError(toHttpError)))
      .handle("proxy", ({ params, payload }) => proxy(params.slug, payload))
      .handle("submit", ({ payload }) =>
        Effect.flatMap(CurrentPrincipal, (principal) =>
          services.submit(principal, payload).pipe(Effect.map(submissionJson), Effect.mapError(toHttpError))))
      .handle("submissions", ({ query }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const page = { limit: query.limit ?? 50, offset: query.offset ?? 0 }
          const result = yield* services.submissions(principal, page).pipe(Effect.mapError(toHttpError))
          return { submissions: result.items.map(submissionJson), total: result.total, ...page }
        }))
  })
)
