import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Effect, Layer, Redacted, Stream } from "effect"
import { HttpClient, HttpClientRequest, type HttpMethod } from "effect/http"
import { ProviderFailure } from "../../src/capabilities/Provider.ts"
import { FetchFailed } from "../../src/ports/Net.ts"
import { type ProxyResponse, ServiceTransport } from "../../src/ports/ServiceTransport.ts"
import type { Service } from "../../src/services/Service.ts"
import { declaredLength } from "../net/declaredLength.ts"
import * as SafeHttp from "../net/SafeHttp.ts"
import { UpstreamClient } from "../net/upstreamClient.ts"

/**
 * Sends proxied requests. Operator services get the operator's credentials
 * (never the caller's, never echoed back); registry services get none, and
 * go through SafeHttp's pinned request: the name is resolved once, every
 * answer checked by the URL-safety rules, and the socket opened to that
 * checked address (no second resolution, so no DNS-rebinding window);
 * redirects are not followed. Responses are bounded in size and time, and
 * their headers filtered.
 */

export interface OperatorService {
  readonly service: Service
  /** Headers that authenticate the operator to the upstream, e.g. `authorization`. */
  readonly credentials: Readonly<Record<string, Redacted.Redacted<string>>>
}

export interface TransportOptions {
  readonly operatorServices: ReadonlyArray<OperatorService>
  readonly timeoutMs?: number
  readonly maxResponseBytes?: number
  /** A streamed answer is cut (and the call failed) past this many bytes or this long. */
  readonly maxStreamBytes?: number
  readonly streamTimeoutMs?: number
  /** The URL-safety options for registry services (allow-list, resolver); default: none allowed, the system resolver. */
  readonly registry?: SafeHttp.Options
}

const DROPPED_RESPONSE_HEADERS = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "set-cookie",
  "set-cookie2",
  "www-authenticate",
  "authorization",
  "x-api-key",
  "content-length",
  "content-encoding",
  "alt-svc",
  "server",
  "via"
])

/** `keepChallenge`: an L402 service's `www-authenticate` (its challenge) is kept for the proxy to pay. */
export const filterResponseHeaders = (
  headers: Readonly<Record<string, string>>,
  keepChallenge = false
): Record<string, string> =>
  Object.fromEntries(
    Object.entries(headers).filter(([name]) => {
      const lower = name.toLowerCase()
      if (keepChallenge && lower === "www-authenticate") return true
      return !DROPPED_RESPONSE_HEADERS.has(lower) && !/(cookie|secret|token|api-key)/.test(lower)
    })
  )

/** Answers are text as a browser reads it: a malformed byte becomes U+FFFD. */
const utf8 = new TextDecoder()

export const layer = (
  options: TransportOptions
): Layer.Layer<ServiceTransport, never, HttpClient.HttpClient | UpstreamClient> =>
  Layer.effect(
    ServiceTransport,
    Effect.gen(function*() {
      // Streamed answers (server-sent events) go through Effect's client; the others through the upstream client.
      // Each request is tied to the scope of the call that opened it: closing the scope aborts it,
      // even when its body was never read (a caller gone before the first byte). Left to itself,
      // an unread response is aborted only when it is garbage-collected, and the upstream goes on.
      const client = HttpClient.withScope(yield* HttpClient.HttpClient)
      const upstream = yield* UpstreamClient
      const pinned = SafeHttp.makePinnedRequest(options.registry ?? {})
      const timeoutMs = options.timeoutMs ?? 60_000
      const maxBytes = options.maxResponseBytes ?? 4 * 1024 * 1024
      const maxStreamBytes = options.maxStreamBytes ?? 16 * 1024 * 1024
      const streamTimeoutMs = options.streamTimeoutMs ?? 10 * 60_000
      const credentialsOf = new Map(options.operatorServices.map((o) => [o.service.slug, o.credentials]))

      type Request = Parameters<ServiceTransport["Service"]["send"]>[1]
      const failure = (service: Service) => (reason: ProviderFailure["reason"], message: string) =>
        new ProviderFailure({ provider: service.slug, reason, message })
      /** The connection failed, or the body could not be read: the error's text, clipped. */
      const networkFailure = (service: Service) => (error: unknown) => failure(service)("network", String(error).slice(0, 300))

      /** A registry service: one request over a connection pinned to the checked address. */
      const openRegistry = (service: Service, url: URL, request: Request) =>
        pinned({
          url: url.toString(),
          method: request.method,
          headers: {
            ...request.headers,
            ...(request.body !== undefined && request.method !== "GET" ? { "content-type": "application/json" } : {})
          },
          body: request.body !== undefined && request.method !== "GET" ? JSON.stringify(request.body) : undefined,
          timeoutMs
        }).pipe(
          Effect.mapError((error) => error instanceof FetchFailed ? failure(service)("network", error.message.slice(0, 300)) : error),
          Effect.map((response) => ({
            status: response.status,
            headers: response.headers,
            stream: response.body === null
              ? Stream.empty
              : Stream.fromReadableStream({
                evaluate: () => response.body!,
                onError: networkFailure(service)
              })
          }))
        )

      /** The service's base URL, the call's path and its query. */
      const targetUrl = (service: Service, request: Request) => {
        const url = new URL(service.baseUrl.replace(/\/+$/, "") + request.path)
        for (const [k, v] of Object.entries(request.query)) url.searchParams.set(k, v)
        return url
      }

      /** Builds the upstream request (operator credentials injected) and opens it. */
      const open = (service: Service, request: Request) =>
        Effect.gen(function*() {
          const url = targetUrl(service, request)
          if (service.origin === "registry") return yield* openRegistry(service, url, request)
          let outgoing = HttpClientRequest.make(request.method as HttpMethod.HttpMethod)(url.toString()).pipe(
            HttpClientRequest.setHeaders(request.headers)
          )
          const credentials = credentialsOf.get(service.slug) ?? {}
          for (const [name, value] of Object.entries(credentials)) {
            outgoing = HttpClientRequest.setHeader(outgoing, name, Redacted.value(value))
          }
          if (request.body !== undefined && request.method !== "GET") {
            outgoing = HttpClientRequest.bodyJsonUnsafe(outgoing, request.body)
          }
          const response = yield* client.execute(outgoing).pipe(
            Effect.mapError((error) => failure(service)("network", error.message.slice(0, 300)))
          )
          return {
            status: response.status,
            headers: response.headers as Readonly<Record<string, string>>,
            stream: response.stream.pipe(Stream.mapError(networkFailure(service)))
          }
        })

      const stream = (service: Service, request: Request) =>
        Effect.gen(function*() {
          const response = yield* open(service, request).pipe(
            Effect.timeoutOrElse({
              duration: timeoutMs,
              orElse: () => Effect.fail(failure(service)("timeout", `no answer in ${timeoutMs} ms`))
            })
          )
          let received = 0
          const body = response.stream.pipe(
            Stream.mapEffect((chunk) =>
              Effect.suspend(() => {
                received += chunk.length
                return received > maxStreamBytes
                  ? Effect.fail(failure(service)("too_large", `the stream is longer than ${maxStreamBytes} bytes`))
                  : Effect.succeed(chunk)
              })
            ),
            Stream.timeoutOrElse({
              duration: streamTimeoutMs,
              orElse: () => Stream.fail(failure(service)("timeout", `the stream ran longer than ${streamTimeoutMs} ms`))
            })
          )
          return { status: response.status, headers: filterResponseHeaders(response.headers), body }
        })

      /** The answer of `send`: its JSON parsed when it says it is JSON, else its text; its headers filtered. */
      const proxyResponse = (service: Service, status: number, headers: Readonly<Record<string, string>>, bytes: Uint8Array) =>
        Effect.suspend((): Effect.Effect<ProxyResponse, ProviderFailure> => {
          const text = utf8.decode(bytes)
          let body: unknown = text
          if ((headers["content-type"] ?? "").includes("json")) {
            try {
              body = JSON.parse(text)
            } catch {
              return Effect.fail(failure(service)("malformed", "the answer is not valid JSON"))
            }
          }
          return Effect.succeed({ status, headers: filterResponseHeaders(headers, service.l402 === true), body })
        })

      /** A registry service: its answer read chunk by chunk over the pinned connection, bounded. */
      const sendRegistry = (service: Service, request: Request) =>
        Effect.gen(function*() {
          const fail = failure(service)
          const response = yield* open(service, request)
          const declared = declaredLength(response.headers)
          if (declared !== undefined && declared > maxBytes) {
            return yield* fail("too_large", `the answer is larger than ${maxBytes} bytes`)
          }
          let received = 0
          const chunks: Array<Uint8Array> = []
          yield* response.stream.pipe(
            Stream.runForEachWhile((chunk) =>
              Effect.suspend(() => {
                received += chunk.length
                if (received > maxBytes) return Effect.fail(fail("too_large", `the answer is larger than ${maxBytes} bytes`))
                chunks.push(chunk)
                return Effect.succeed(true)
              })
            )
          )
          return yield* proxyResponse(service, response.status, response.headers, Buffer.concat(chunks, received))
        }).pipe(
          Effect.scoped,
          Effect.timeoutOrElse({
            duration: timeoutMs,
            orElse: () => Effect.fail(new ProviderFailure({ provider: service.slug, reason: "timeout", message: `no answer in ${timeoutMs} ms` }))
          })
        )

      /**
       * An operator service: one exchange of the upstream client (the operator's credentials
       * injected), read into memory up to the bound within the deadline.
       */
      const sendOperator = (service: Service, request: Request) =>
        Effect.suspend(() => {
          const fail = failure(service)
          const headers: Record<string, string> = { ...request.headers }
          const withBody = request.body !== undefined && request.method !== "GET"
          if (withBody) headers["content-type"] = "application/json"
          // The operator's credentials replace whatever the caller sent under those names.
          for (const [name, value] of Object.entries(credentialsOf.get(service.slug) ?? {})) {
            headers[name.toLowerCase()] = Redacted.value(value)
          }
          return upstream.send({
            url: targetUrl(service, request),
            method: request.method,
            headers,
            body: withBody ? JSON.stringify(request.body) : undefined,
            timeoutMs,
            maxBytes: () => maxBytes
          }).pipe(
            Effect.catchTags({
              UpstreamTimeout: () => Effect.fail(fail("timeout", `no answer in ${timeoutMs} ms`)),
              UpstreamUnreachable: (error) => Effect.fail(networkFailure(service)(error.cause)),
              UpstreamBroken: (error) => Effect.fail(networkFailure(service)(error.cause))
            }),
            Effect.flatMap((answer) =>
              answer.overflow
                ? Effect.fail(fail("too_large", `the answer is larger than ${maxBytes} bytes`))
                : proxyResponse(service, answer.status, answer.headers, answer.bytes)
            )
          )
        })

      const send = (service: Service, request: Request) =>
        service.origin === "registry" ? sendRegistry(service, request) : sendOperator(service, request)

      return ServiceTransport.of({ operatorServices: options.operatorServices.map((o) => o.service), send, stream })
    })
  )

/** A transport with no operator services: only approved registry services can be proxied. */
export const registryOnly: Layer.Layer<ServiceTransport> = layer({ operatorServices: [] }).pipe(
  Layer.provide([NodeHttpClient.layerUndici, UpstreamClient.layer])
)
