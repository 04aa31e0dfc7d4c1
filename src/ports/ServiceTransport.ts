import { Context, type Effect, type Scope, type Stream } from "effect"
import type { ProviderFailure } from "../capabilities/Provider.ts"
import type { Service } from "../services/Service.ts"
import type { UnsafeUrl } from "./Net.ts"

/**
 * How the proxy reaches a service: the adapter sends the request, injecting
 * the operator's credentials for operator services (never the caller's),
 * and returns the upstream's answer with its headers already filtered.
 */

export interface ProxyRequest {
  readonly method: string
  readonly path: string
  readonly query: Readonly<Record<string, string>>
  /** Already filtered to what may be forwarded. */
  readonly headers: Readonly<Record<string, string>>
  /** A JSON body, or undefined. */
  readonly body: unknown
}

export interface ProxyResponse {
  readonly status: number
  /** Filtered: no hop-by-hop headers, no cookies, no upstream credentials. */
  readonly headers: Readonly<Record<string, string>>
  /** Parsed JSON when the upstream answered JSON, else text. */
  readonly body: unknown
}

export interface StreamingResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  /** The body as it arrives; the connection closes with the enclosing scope. */
  readonly body: Stream.Stream<Uint8Array, ProviderFailure>
}

export class ServiceTransport extends Context.Service<ServiceTransport, {
  /** The services the operator configured (with credentials held by the adapter). */
  readonly operatorServices: ReadonlyArray<Service>
  readonly send: (service: Service, request: ProxyRequest) => Effect.Effect<ProxyResponse, ProviderFailure | UnsafeUrl>
  /** Like `send`, but hands the body over as a stream (server-sent events). */
  readonly stream: (
    service: Service,
    request: ProxyRequest
  ) => Effect.Effect<StreamingResponse, ProviderFailure | UnsafeUrl, Scope.Scope>
}>()("spendgate/ServiceTransport") {}
