import { NodeHttpClient } from "@effect/platform-node"
import { Effect, Layer, Option, Redacted, Stream } from "effect"
import { HttpClient, HttpClientRequest, type HttpMethod } from "effect/http"
import { ProviderFailure } from "../../src/capabilities/Provider.ts"
import { OutboundHttp } from "../../src/ports/Net.ts"
import { type ProxyResponse, ServiceTransport } from "../../src/ports/ServiceTransport.ts"
import type { Service } from "../../src/services/Service.ts"

/**
 * Sends proxied requests. Operator services get the operator's credentials
 * (never the caller's, never echoed back); registry services get none, and
 * their address is checked by the URL-safety rules first. Responses are
 * bounded in size and time, and their headers filtered.
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

export const filterResponseHeaders = (headers: Readonly<Record<string, string>>): Record<string, string> =>
  Object.fromEntries(
    Object.entries(headers).filter(([name]) => {
      const lower = name.toLowerCase()
      return !DROPPED_RESPONSE_HEADERS.has(lower) && !/(cookie|secret|token|api-key)/.test(lower)
    })
  )

export const layer = (options: TransportOptions): Layer.Layer<ServiceTransport, never, HttpClient.HttpClient> =>
  Layer.effect(
    ServiceTransport,
    Effect.gen(function*() {
      const client = yield* HttpClient.HttpClient
      const outbound = yield* Effect.serviceOption(OutboundHttp)
      const timeoutMs = options.timeoutMs ?? 60_000
      const maxBytes = options.maxResponseBytes ?? 4 * 1024 * 1024
      const credentialsOf = new Map(options.operatorServices.map((o) => [o.service.slug, o.credentials]))

      const send = (service: Service, request: Parameters<ServiceTransport["Service"]["send"]>[1]) =>
        Effect.gen(function*() {
          const url = new URL(service.baseUrl.replace(/\/+$/, "") + request.path)
          for (const [k, v] of Object.entries(request.query)) url.searchParams.set(k, v)
          if (service.origin === "registry" && Option.isSome(outbound)) yield* outbound.value.check(url.toString())
          const fail = (reason: ProviderFailure["reason"], message: string) =>
            new ProviderFailure({ provider: service.slug, reason, message })
          let outgoing = HttpClientRequest.make(request.method as HttpMethod.HttpMethod)(url.toString()).pipe(
            HttpClientRequest.setHeaders(request.headers)
          )
          const credentials = service.origin === "operator" ? credentialsOf.get(service.slug) ?? {} : {}
          for (const [name, value] of Object.entries(credentials)) {
            outgoing = HttpClientRequest.setHeader(outgoing, name, Redacted.value(value))
          }
          if (request.body !== undefined && request.method !== "GET") {
            outgoing = HttpClientRequest.bodyJsonUnsafe(outgoing, request.body)
          }
          const response = yield* client.execute(outgoing).pipe(
            Effect.mapError((error) => fail("network", error.message.slice(0, 300)))
          )
          let received = 0
          const chunks: Array<Uint8Array> = []
          yield* response.stream.pipe(
            Stream.mapError((error) => fail("network", String(error).slice(0, 300))),
            Stream.runForEachWhile((chunk) =>
              Effect.suspend(() => {
                received += chunk.length
                if (received > maxBytes) return Effect.fail(fail("too_large", `the answer is larger than ${maxBytes} bytes`))
                chunks.push(chunk)
                return Effect.succeed(true)
              })
            )
          )
          const bytes = new Uint8Array(received)
          let offset = 0
          for (const chunk of chunks) {
            bytes.set(chunk, offset)
            offset += chunk.length
          }
          const text = new TextDecoder().decode(bytes)
          const contentType = response.headers["content-type"] ?? ""
          let body: unknown = text
          if (contentType.includes("json")) {
            try {
              body = JSON.parse(text)
            } catch {
              return yield* fail("malformed", "the answer is not valid JSON")
            }
          }
          return { status: response.status, headers: filterResponseHeaders(response.headers), body } satisfies ProxyResponse
        }).pipe(
          Effect.scoped,
          Effect.timeoutOrElse({
            duration: timeoutMs,
            orElse: () => Effect.fail(new ProviderFailure({ provider: service.slug, reason: "timeout", message: `no answer in ${timeoutMs} ms` }))
          })
        )

      return ServiceTransport.of({ operatorServices: options.operatorServices.map((o) => o.service), send })
    })
  )

/** A transport with no operator services: only approved registry services can be proxied. */
export const registryOnly: Layer.Layer<ServiceTransport> = layer({ operatorServices: [] }).pipe(
  Layer.provide(NodeHttpClient.layerUndici)
)
