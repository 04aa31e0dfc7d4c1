import type { RegistryStore } from "../../src/ports/RegistryStore.ts"
import { Context, Effect, Exit, Layer, Option, Redacted, Scope } from "effect"
import { HttpServer } from "effect/http"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import { type L402SellOptions, serverLayer } from "../../adapters/http/server.ts"
import * as PgliteClient from "../../adapters/sql/PgliteClient.ts"
import { storeOverClient } from "../../adapters/sql/Database.ts"
import { rateLayer } from "../../adapters/payments.ts"
import type { RateLimitOptions, SignupOptions } from "../../adapters/http/rateLimit.ts"
import type { SessionOptions } from "../../adapters/http/sessions.ts"
import * as DevCard from "../../adapters/rails/DevCard.ts"
import * as DevLightning from "../../adapters/rails/DevLightning.ts"
import { registryOnly } from "../../adapters/services/transport.ts"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import type { ServiceTransport } from "../../src/ports/ServiceTransport.ts"
import * as Gateway from "../../src/Gateway.ts"
import type { OutboundHttp } from "../../src/ports/Net.ts"
import type { WebhookTransport } from "../../src/ports/WebhookTransport.ts"
import * as WebhookHttp from "../../adapters/net/webhookTransport.ts"
import { defaultWebhookSettings, WebhookSettings } from "../../src/webhooks/Webhooks.ts"
import type { BtcUsdRate } from "../../src/domain/Money.ts"
import type { RateSource } from "../../src/ports/RateSource.ts"
import type { CardRail, LightningRail, RailRoute } from "../../src/ports/Rails.ts"
import type { IdempotencyStore } from "../../src/ports/IdempotencyStore.ts"
import type { AdminStore } from "../../src/ports/AdminStore.ts"
import type { Store } from "../../src/ports/Store.ts"
import { freshPostgresLayer } from "./postgres.ts"

/** The dev card rail's checkout URLs start with this in tests (the real port is not known in advance). */
export const TEST_PUBLIC_URL = "http://spendgate.test"

/** The three storage back-ends every HTTP suite runs against. */
export const storeBackends: ReadonlyArray<readonly [string, () => Layer.Layer<Store | AdminStore | IdempotencyStore | RegistryStore, unknown>]> = [
  ["memory", () => MemoryStore.layer],
  ["PGlite", () => storeOverClient.pipe(Layer.provide(PgliteClient.layer({ dataDir: undefined })))],
  ["PostgreSQL", () => storeOverClient.pipe(Layer.provide(freshPostgresLayer()))]
]

export interface RunningServer {
  readonly baseUrl: string
  readonly close: () => Promise<void>
  /** Runs a core effect against the same services (and storage) as the server. */
  readonly run: <A, E>(effect: Effect.Effect<A, E, Gateway.Services | Store | RateSource>) => Promise<A>
}

/** A real HTTP server on an ephemeral loopback port over the given store. */
export const startServer = async (
  store: Layer.Layer<Store | AdminStore | IdempotencyStore | RegistryStore, unknown>,
  options: {
    readonly bodyLimitBytes?: number
    readonly rate?: BtcUsdRate
    readonly adminToken?: string
    /** How the proxy reaches services (only approved registry services by default). */
    readonly transport?: Layer.Layer<ServiceTransport>
    /** Rate limits (the real 100/1000 per minute by default). */
    readonly rateLimits?: RateLimitOptions
    /**
     * Who may sign up. Default: open with no practical limit, since every test
     * signs up from 127.0.0.1 (the real default, 10 an hour, is tested in
     * test/http/signup.test.ts).
     */
    readonly signup?: SignupOptions
    /** How many client connections at once (the real default otherwise). */
    readonly maxConnections?: number
    /** How long a binding quote can be used (the real 60 s by default). */
    readonly quoteTtlMs?: number
    /** Capability providers (none by default). */
    readonly providers?: Layer.Layer<Providers>
    /** URL safety for caller-chosen URLs (read, scrape). */
    readonly outbound?: Layer.Layer<OutboundHttp>
    /** How webhook deliveries are sent (default: the real rules, no host allowed beyond them). */
    readonly webhooks?: Layer.Layer<WebhookTransport>
    /** Webhook delivery settings (the defaults otherwise). */
    readonly webhookSettings?: Partial<WebhookSettings>
    /** One access-log line per request (off by default). */
    readonly logRequests?: boolean
    /** METRICS_TOKEN (GET /metrics; ADMIN_TOKEN stands in when unset). */
    readonly metricsToken?: string
    /** Where the server's log lines go (the default console logger otherwise). */
    readonly loggers?: Layer.Layer<never>
    /** Replaces the dev Lightning rail (e.g. LND against the fake node). */
    readonly lightning?: Layer.Layer<LightningRail>
    /** Dashboard sessions: lifetimes and sign-in limit (the real defaults otherwise). */
    readonly sessions?: SessionOptions
    /** L402_SELL=on: anonymous capability calls are sold over L402. */
    readonly l402?: L402SellOptions
    /** Replaces the dev card rail (and adds the rail's own routes). */
    readonly card?: {
      readonly rail: Layer.Layer<CardRail>
      readonly routes: ReadonlyArray<RailRoute>
    }
  } = {}
): Promise<RunningServer> => {
  const scope = Effect.runSync(Scope.make())
  const app = serverLayer({
    port: 0,
    host: "127.0.0.1",
    announce: false,
    railRoutes: [...DevLightning.routes, ...(options.card?.routes ?? DevCard.routes)],
    ...(options.rateLimits === undefined ? {} : { rateLimits: options.rateLimits }),
    ...(options.l402 === undefined ? {} : { l402: options.l402 }),
    ...(options.maxConnections === undefined ? {} : { maxConnections: options.maxConnections }),
    signup: options.signup ?? { perHour: 1_000_000 },
    adminToken: options.adminToken === undefined ? Option.none() : Option.some(Redacted.make(options.adminToken)),
    ...(options.metricsToken === undefined ? {} : { metricsToken: Option.some(Redacted.make(options.metricsToken)) }),
    ...(options.logRequests === undefined ? {} : { logRequests: options.logRequests }),
    ...(options.sessions === undefined ? {} : { sessions: options.sessions }),
    ...(options.bodyLimitBytes === undefined ? {} : { bodyLimitBytes: options.bodyLimitBytes })
  }).pipe(
    Layer.provideMerge(options.quoteTtlMs === undefined ? Gateway.layer : Gateway.layerWith({ quoteTtlMs: options.quoteTtlMs })),
    Layer.provideMerge(Layer.mergeAll(
      store,
      rateLayer({
        lightning: { kind: "dev" },
        card: { kind: "dev", publicUrl: TEST_PUBLIC_URL },
        rate: options.rate === undefined ? { kind: "none" } : { kind: "fixed", rate: options.rate }
      }),
      options.lightning ?? DevLightning.layer({ dataDir: undefined }),
      options.card?.rail ?? DevCard.layer({ publicUrl: TEST_PUBLIC_URL }),
      options.providers ?? Providers.make([]),
      options.transport ?? registryOnly,
      options.outbound ?? Layer.empty,
      options.webhooks ?? WebhookHttp.layer(),
      Layer.succeed(WebhookSettings, { ...defaultWebhookSettings, ...options.webhookSettings })
    )),
    Layer.provide(options.loggers ?? Layer.empty)
  )
  const context = await Effect.runPromise(Layer.buildWithScope(app, scope))
  const address = Context.get(context, HttpServer.HttpServer).address
  if (address._tag === "UnixPathAddress") throw new Error("expected a TCP address")
  return {
    baseUrl: `http://127.0.0.1:${address.port}`,
    close: () => Effect.runPromise(Scope.close(scope, Exit.void)),
    run: (effect) => Effect.runPromise(Effect.provideContext(effect, context))
  }
}

export interface ApiResponse {
  readonly status: number
  readonly headers: Headers
  readonly body: any
  readonly text: string
}

/**
 * Funds the key's account on the dev card rail of a running server: a
 * checkout of `amountUsdCents`, paid on the dev checkout page. The page's
 * answer status (200 when paid) and the session's id.
 */
export const fundByDevCard = async (baseUrl: string, key: string, amountUsdCents: number) => {
  const card = await client(baseUrl).post("/v1/wallet/fund-card", { amountUsdCents }, key)
  const session = new URL(card.body.checkoutUrl).pathname.split("/").pop()!
  const paid = await fetch(`${baseUrl}/dev/checkout/${session}/pay`, { method: "POST" })
  await paid.arrayBuffer()
  return { status: paid.status, session }
}

/** A small JSON client for the tests. */
export const client = (baseUrl: string) => {
  const call = async (
    method: string,
    path: string,
    options: { readonly key?: string; readonly body?: unknown; readonly raw?: string; readonly headers?: Record<string, string> } = {}
  ): Promise<ApiResponse> => {
    const headers: Record<string, string> = { ...options.headers }
    if (options.key !== undefined) headers["authorization"] = `Bearer ${options.key}`
    let body: string | undefined
    if (options.raw !== undefined) body = options.raw
    else if (options.body !== undefined) {
      body = JSON.stringify(options.body)
      headers["content-type"] ??= "application/json"
    }
    const response = await fetch(`${baseUrl}${path}`, { method, headers, ...(body === undefined ? {} : { body }) })
    const text = await response.text()
    let parsed: unknown = undefined
    try {
      parsed = text === "" ? undefined : JSON.parse(text)
    } catch {
      parsed = undefined
    }
    return { status: response.status, headers: response.headers, body: parsed, text }
  }
  return {
    call,
    get: (path: string, key?: string) => call("GET", path, key === undefined ? {} : { key }),
    post: (path: string, body: unknown, key?: string) => call("POST", path, key === undefined ? { body } : { key, body }),
    put: (path: string, body: unknown, key?: string) => call("PUT", path, key === undefined ? { body } : { key, body }),
    patch: (path: string, body: unknown, key?: string) =>
      call("PATCH", path, key === undefined ? { body } : { key, body })
  }
}

/**
 * Asserts the error envelope of the API (or, on the Anthropic-compatible
 * routes, Anthropic's error shape carrying the same code) and returns its code.
 */
export const errorCode = (response: ApiResponse): string => {
  const error = response.body?.error
  if (
    typeof error !== "object" || error === null || typeof error.code !== "string" || typeof error.message !== "string"
  ) {
    throw new Error(`not an error envelope (${response.status}): ${response.text.slice(0, 300)}`)
  }
  const keys = Object.keys(response.body)
  if (response.body.type === "error") {
    // Anthropic's shape, on the routes that speak it (adapters/http/anthropic/wire.ts).
    if (keys.sort().join(",") !== "error,request_id,type" || typeof error.type !== "string" || error.details?.error_code !== error.code) {
      throw new Error(`not Anthropic's error shape (${response.status}): ${response.text.slice(0, 300)}`)
    }
    return error.code
  }
  if (keys.length !== 1) throw new Error(`envelope has extra keys: ${keys.join(",")}`)
  return error.code
}
