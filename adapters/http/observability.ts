import { Cause, Context, Effect, Exit, Layer, LogLevel, Metric, Option, Redacted, References } from "effect"
import { HttpBody, HttpEffect, HttpRouter, HttpServerRequest, HttpServerResponse, HttpTraceContext } from "effect/http"
import { HttpApi, type HttpApiGroup } from "effect/http-api"
// The module alone: the OTLP exporters of effect/observability load only when configured (otlp.ts).
import * as PrometheusMetrics from "effect/observability/PrometheusMetrics"
import { createHash, randomUUID, timingSafeEqual } from "node:crypto"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import { ProviderHealth } from "../../src/capabilities/ProviderHealth.ts"
import { metricStep, seriesCache } from "../../src/observability/Metrics.ts"
import { type Spans, spansIn } from "../../src/observability/Tracing.ts"
import { DatabasePool } from "../sql/DatabasePool.ts"
import { envelopeResponse } from "./errors.ts"

/**
 * What an operator sees of each request:
 *
 * - `X-Request-Id`: taken from the request when it is a sane token (1 to 128
 *   of `A-Z a-z 0-9 . _ : -`), generated (a UUID) otherwise; returned on every
 *   answer, put in every error body as `error.requestId`, and annotated on
 *   every log line written while the request runs;
 * - one access-log line per request at Info (method, route, status, duration,
 *   request id, agent id once authenticated; never headers, keys, query
 *   strings or bodies);
 * - the HTTP series of GET /metrics (requests by route, method and status,
 *   latency histogram by route).
 *
 * It wraps the whole router (`HttpRouter.serve`'s middleware), and marks the
 * answer in a pre-response handler, so it sees the final answer of every
 * route, the error envelope and the OpenAI/Anthropic reshaping included. Answers Node writes itself before any route runs (431
 * headers too large, 408 request timeout: adapters/http/clientError.ts) never
 * reach it.
 */

export const REQUEST_ID_HEADER = "x-request-id"

const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

/** The caller's request id when it is sane, else a fresh one. */
export const requestIdFor = (given: string | undefined): string =>
  given !== undefined && SANE_REQUEST_ID.test(given) ? given : randomUUID()

/**
 * What is learnt about a request while it runs, for its access-log line:
 * the authenticated agent (set by the authentication middleware). Absent
 * outside a request.
 */
export interface RequestFacts {
  agentId: string | undefined
}

export const CurrentRequestFacts = Context.Reference<RequestFacts | undefined>("spendgate/http/CurrentRequestFacts", {
  defaultValue: () => undefined
})

/** Records the authenticated agent of the current request (no-op outside one). */
export const noteAgent = (agentId: string): Effect.Effect<void> =>
  Effect.map(CurrentRequestFacts, (facts: RequestFacts | undefined) => {
    if (facts !== undefined) facts.agentId = agentId
  })

// ---- routes -------------------------------------------------------------------

/**
 * The templates of one method as a tree of path segments: a literal child per
 * segment text and one child for a parameter. A lookup walks the request's
 * segments once (both children where both match) instead of trying every
 * template's pattern in turn.
 */
interface Node {
  readonly literal: Map<string, Node>
  param: Node | undefined
  /** Templates ending here, with their rank (lower wins). */
  readonly ends: Array<{ readonly template: string; readonly rank: number }>
}

const newNode = (): Node => ({ literal: new Map(), param: undefined, ends: [] })

/** The best-ranked template whose segments match `segments` from `index` on. */
const bestMatch = (
  node: Node,
  segments: ReadonlyArray<string>,
  index: number
): { readonly template: string; readonly rank: number } | undefined => {
  if (index === segments.length) {
    let best: { readonly template: string; readonly rank: number } | undefined
    for (const end of node.ends) if (best === undefined || end.rank < best.rank) best = end
    return best
  }
  const segment = segments[index]!
  const literal = node.literal.get(segment)
  const viaLiteral = literal === undefined ? undefined : bestMatch(literal, segments, index + 1)
  // A parameter stands for one non-empty segment.
  const viaParam = node.param === undefined || segment === "" ? undefined : bestMatch(node.param, segments, index + 1)
  if (viaLiteral === undefined) return viaParam
  if (viaParam === undefined) return viaLiteral
  return viaLiteral.rank <= viaParam.rank ? viaLiteral : viaParam
}

/** Which path template a request matched, from the API's endpoints and the routes beside it. */
export interface RouteResolver {
  readonly resolve: (method: string, path: string) => string | undefined
}

export const routeResolver = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>,
  extra: ReadonlyArray<{ readonly method: string; readonly path: string }>
): RouteResolver => {
  const byMethod = new Map<string, Array<string>>()
  const add = (method: string, path: string) => {
    const list = byMethod.get(method) ?? []
    list.push(path)
    byMethod.set(method, list)
  }
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => add(endpoint.method, endpoint.path)
  })
  for (const route of extra) add(route.method, route.path)
  const trees = new Map<string, Node>()
  for (const [method, templates] of byMethod) {
    // Fewer parameters first, then the longer template: literal segments win
    // over parameters (`/v1/webhooks/alerts/...` before `/v1/webhooks/:id`).
    const ranked = [...templates].sort((a, b) => (b.split(":").length === a.split(":").length
      ? b.length - a.length
      : a.split(":").length - b.split(":").length))
    const root = newNode()
    ranked.forEach((template, rank) => {
      let node = root
      for (const segment of template.split("/")) {
        if (segment.startsWith(":")) {
          node.param ??= newNode()
          node = node.param
        } else {
          let next = node.literal.get(segment)
          if (next === undefined) {
            next = newNode()
            node.literal.set(segment, next)
          }
          node = next
        }
      }
      node.ends.push({ template, rank })
    })
    trees.set(method, root)
  }
  const inTree = (tree: Node | undefined, segments: ReadonlyArray<string>) => {
    if (tree === undefined) return undefined
    const exact = bestMatch(tree, segments, 0)
    // One trailing slash is allowed (`/v1/wallet/`).
    const trimmed = segments.length > 1 && segments[segments.length - 1] === ""
      ? bestMatch(tree, segments.slice(0, -1), 0)
      : undefined
    if (exact === undefined) return trimmed?.template
    if (trimmed === undefined) return exact.template
    return exact.rank <= trimmed.rank ? exact.template : trimmed.template
  }
  const find = (method: string, segments: ReadonlyArray<string>) =>
    inTree(trees.get(method), segments) ?? inTree(trees.get("*"), segments)
  return {
    resolve: (method, path) => {
      const segments = path.split("/")
      return find(method, segments) ?? (method === "HEAD" ? find("GET", segments) : undefined)
    }
  }
}

/** A segment that names one thing (an id, a number, a long token) rather than a route. */
const ID_LIKE = /^(?:\d+|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[a-z]+_[A-Za-z0-9_-]{6,}|[A-Za-z0-9_-]{20,})$/i

/** A path with its ids elided (`/v1/agents/agt_123abc` -> `/v1/agents/:id`), bounded in length. */
export const elideIds = (path: string): string =>
  path.split("/").map((segment) => ID_LIKE.test(segment) ? ":id" : segment).join("/").slice(0, 200)

// ---- metrics ------------------------------------------------------------------

const httpRequestsOptions = {
  description: "HTTP requests answered, by route template, method and status",
  incremental: true
} as const

const httpRequestDurationOptions = {
  description: "Time to answer (until the response head is ready), by route template",
  boundaries: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]
} as const

export const httpRequestsTotal = Metric.counter("spendgate_http_requests_total", httpRequestsOptions)

export const httpRequestDuration = Metric.histogram("spendgate_http_request_duration_seconds", httpRequestDurationOptions)

// One metric per label set, made at its first request (see seriesCache): the same series as
// `Metric.withAttributes(httpRequestsTotal, labels)`, without merging the labels and rebuilding
// the series key at every request.
const requestsByLabels = seriesCache((attributes) =>
  Metric.counter("spendgate_http_requests_total", { ...httpRequestsOptions, attributes })
)
const requestsSeries = (route: string, method: string, status: number) =>
  requestsByLabels(`${route}\u0000${method}\u0000${status}`, () => ({ route, method, status: String(status) }))

const durationByLabels = seriesCache((attributes) =>
  Metric.histogram("spendgate_http_request_duration_seconds", { ...httpRequestDurationOptions, attributes })
)
const durationSeries = (route: string) => durationByLabels(route, () => ({ route }))

// ---- the middleware -------------------------------------------------------------

/**
 * Puts the request id in an error body that has an `error` object (the
 * API's envelope, and the OpenAI and Anthropic shapes); an upstream's own
 * answer (`x-spendgate-audit-id`) and a JSON-RPC error pass as they came.
 */
const withRequestIdInBody = (
  response: HttpServerResponse.HttpServerResponse,
  requestId: string
): HttpServerResponse.HttpServerResponse => {
  if (response.status < 400 || response.body._tag !== "Uint8Array") return response
  if (!(response.headers["content-type"] ?? "").startsWith("application/json")) return response
  if (response.headers["x-spendgate-audit-id"] !== undefined) return response
  let parsed: unknown
  try {
    parsed = JSON.parse(new TextDecoder().decode(response.body.body))
  } catch {
    return response
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return response
  // A JSON-RPC error (/mcp) keeps the members its specification names; the header carries the id.
  if ("jsonrpc" in parsed) return response
  const error = (parsed as { error?: unknown }).error
  if (typeof error !== "object" || error === null || Array.isArray(error)) return response
  return HttpServerResponse.setBody(
    response,
    HttpBody.jsonUnsafe({ ...parsed, error: { ...error, requestId } })
  )
}

export interface ObserveOptions {
  readonly routes: RouteResolver
  /** One Info line per request (default true). */
  readonly accessLog?: boolean | undefined
}

/** What `observe` knows of a request before running it. */
interface Observed<E, R> {
  readonly app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
  readonly request: HttpServerRequest.HttpServerRequest
  readonly requestId: string
  readonly facts: RequestFacts
  readonly started: number
  readonly path: string
  readonly template: string | undefined
  readonly spans: Spans
  readonly logsAccess: boolean
}

/** A request run, measured and logged (a generator made once, not per request: docs/performance.md). */
const observed = Effect.fnUntraced(function*<E, R>(
  { app, facts, logsAccess, path, request, requestId, spans, started, template }: Observed<E, R>
) {
  // The server writes the answer inside `app`; a pre-response handler is the last word on it.
  yield* HttpEffect.appendPreResponseHandler((_request, response) =>
    Effect.succeed(HttpServerResponse.setHeader(withRequestIdInBody(response, requestId), REQUEST_ID_HEADER, requestId))
  )
  const exit = yield* Effect.exit(Effect.provideService(app, CurrentRequestFacts, facts))
  const status = Exit.isSuccess(exit) ? exit.value.status : Cause.hasInterruptsOnly(exit.cause) ? 499 : 500
  const seconds = (performance.now() - started) / 1000
  // Unknown paths share one series, so a scan cannot grow the metrics without bound.
  const metricRoute = template ?? "unmatched"
  // Both series in one fiber step (Metric.update is a step each).
  yield* metricStep((current) => {
    requestsSeries(metricRoute, request.method, status).updateUnsafe(1, current)
    durationSeries(metricRoute).updateUnsafe(seconds, current)
  })
  if (spans.enabled) {
    yield* spans.annotate({
      "http.response.status_code": status,
      ...(facts.agentId === undefined ? {} : { "spendgate.agent_id": facts.agentId })
    })
  }
  if (logsAccess) {
    const route = template ?? elideIds(path)
    const durationMs = Math.round(seconds * 100_000) / 100
    yield* Effect.logInfo(`${request.method} ${route} ${status} ${durationMs}ms`).pipe(
      Effect.annotateLogs({
        method: request.method,
        route,
        status,
        durationMs,
        ...(facts.agentId === undefined ? {} : { agentId: facts.agentId })
      })
    )
  }
  if (Exit.isFailure(exit)) return yield* Effect.failCause(exit.cause)
  return exit.value
})

/**
 * `HttpRouter.serve`'s middleware: request ids, the access log, the HTTP
 * metrics and the request's span.
 *
 * The span (kind server) is named `<METHOD> <route template>` (the method
 * alone for an unknown path) and carries `http.request.method`, `http.route`,
 * `http.response.status_code`, `spendgate.request_id` and, once the key is
 * authenticated, `spendgate.agent_id`; never a header, key, query string or
 * body. A W3C `traceparent` (or B3) header makes it a child of the caller's
 * span. Everything the request runs (authentication, the spend pipeline, the
 * access-log line) is inside it. Without an exporter (OTLP unset) the span
 * stays in process and is dropped.
 */
export const observe = (options: ObserveOptions) =>
<E, R>(
  app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest> =>
  Effect.contextWith((context: Context.Context<HttpServerRequest.HttpServerRequest>) => {
    const request = Context.get(context, HttpServerRequest.HttpServerRequest)
    const requestId = requestIdFor(request.headers[REQUEST_ID_HEADER])
    const facts: RequestFacts = { agentId: undefined }
    const started = performance.now()
    const path = request.url.split("?")[0]!
    const template = options.routes.resolve(request.method, path)
    // Spans (and their parent from the caller's headers) only when they are recorded (Tracing.ts);
    // the access line only when Info lines are written.
    const spans = spansIn(context)
    const logsAccess = options.accessLog !== false &&
      LogLevel.isGreaterThanOrEqualTo("Info", Context.get(context, References.MinimumLogLevel))
    return observed({ app, request, requestId, facts, started, path, template, spans, logsAccess }).pipe(
      Effect.annotateLogs("requestId", requestId),
      spans.span(template === undefined ? request.method : `${request.method} ${template}`, () => {
        const caller = HttpTraceContext.fromHeaders(request.headers)
        return {
          kind: "server",
          ...(Option.isSome(caller) ? { parent: caller.value } : { root: true }),
          attributes: {
            "http.request.method": request.method,
            ...(template === undefined ? {} : { "http.route": template }),
            "spendgate.request_id": requestId
          }
        }
      })
    )
  })

// ---- GET /metrics ---------------------------------------------------------------

export const METRICS_PATH = "/metrics"

const digest = (text: string) => createHash("sha256").update(text).digest()

/**
 * GET /metrics: the process's metrics in Prometheus text format, for
 * `Authorization: Bearer <token>` (METRICS_TOKEN, else ADMIN_TOKEN). With
 * neither set the route answers 404, like the admin API.
 */
/** Each provider's circuit (closed, open, half-open): 1 on its current state, 0 on the others. */
export const providerCircuit = Metric.gauge("spendgate_provider_circuit_state", {
  description: "A provider's circuit breaker, 1 on its current state (closed, open, half-open), 0 on the others"
})

const CIRCUIT_STATES = ["closed", "open", "half-open"] as const

/** The database pool's upper bound, by driver (PGlite: 1). */
export const dbPoolMaxConnections = Metric.gauge("spendgate_db_pool_max_connections", {
  description: "The most database connections this process opens (PGlite: one, in process)"
})

/** Open database connections by state, read at each scrape. */
export const dbConnections = Metric.gauge("spendgate_db_connections", {
  description: "Database connections this process holds open, by state (PostgreSQL: from pg_stat_activity; PGlite: one, open)"
})

export const mountMetrics = (token: Option.Option<Redacted.Redacted<string>>) =>
  Layer.effectDiscard(Effect.gen(function*() {
    const router = yield* HttpRouter.HttpRouter
    const health = yield* ProviderHealth
    const { all: providers } = yield* Providers
    // Read at each scrape: the circuits live in ProviderHealth, in process.
    const circuits = Effect.forEach(providers, (provider) =>
      Effect.flatMap(health.report(provider.name), (report) =>
        Effect.forEach(CIRCUIT_STATES, (state) =>
          Metric.update(
            Metric.withAttributes(providerCircuit, { capability: provider.capability, provider: provider.name, state }),
            report.circuit === state ? 1 : 0
          ))), { discard: true })
    // Read at each scrape too: the connections by state. A state seen once is reported 0 when it is gone.
    const pool = yield* DatabasePool
    const seenStates = new Set<string>()
    const connections = pool === undefined ? Effect.void : Effect.flatMap(pool.read, (reading) => {
      if (reading === undefined) return Effect.void
      for (const state of Object.keys(reading.connections)) seenStates.add(state)
      return Effect.andThen(
        Metric.update(Metric.withAttributes(dbPoolMaxConnections, { driver: reading.driver }), reading.max),
        Effect.forEach(seenStates, (state) =>
          Metric.update(
            Metric.withAttributes(dbConnections, { driver: reading.driver, state }),
            reading.connections[state] ?? 0
          ), { discard: true })
      )
    })
    const expected = Option.map(token, (value) => digest(Redacted.value(value)))
    yield* router.add("GET", METRICS_PATH, (request) =>
      Effect.gen(function*() {
        if (Option.isNone(expected)) return envelopeResponse("NOT_FOUND", `No route for GET ${METRICS_PATH}`)
        const match = /^Bearer +(\S+) *$/i.exec(request.headers["authorization"] ?? "")
        // Compared as SHA-256 digests in constant time: no length or prefix leaks.
        if (match === null || !timingSafeEqual(digest(match[1]!), expected.value)) {
          return envelopeResponse(
            "UNAUTHORIZED",
            "GET /metrics needs Authorization: Bearer <METRICS_TOKEN, or ADMIN_TOKEN when METRICS_TOKEN is unset>",
            undefined,
            { "www-authenticate": "Bearer" }
          )
        }
        yield* circuits
        yield* connections
        return HttpServerResponse.text(yield* PrometheusMetrics.format(), {
          contentType: "text/plain; version=0.0.4; charset=utf-8"
        })
      }))
  }))
