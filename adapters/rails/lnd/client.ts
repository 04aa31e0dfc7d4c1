import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Effect, Layer, Redacted, Stream } from "effect"
import { Headers, type HttpClient, type HttpClientError, type HttpClientResponse } from "effect/http"
import type { RailError } from "../../../src/ports/Rails.ts"
import { clip, describeCause, railError } from "./messages.ts"

/**
 * The REST client of the LND rail: its configuration, the endpoint checked
 * once, an HTTP client trusting the node's certificate only, the macaroon
 * kept out of logs, and bounded reading of answers.
 */

export interface LndConfig {
  /** Base URL of LND's REST listener, e.g. `https://127.0.0.1:8080`. */
  readonly restUrl: string
  /** A macaroon allowed to write invoices (`invoice.macaroon`), hex-encoded. */
  readonly macaroonHex: Redacted.Redacted<string>
  /**
   * The node's TLS certificate (PEM), usually self-signed. When given it is
   * the only certificate authority trusted for this connection.
   */
  readonly tlsCertPem?: string | undefined
  /** Limit for one AddInvoice call, from connecting to the end of the answer. */
  readonly requestTimeoutMs?: number | undefined
}

export const DEFAULT_REQUEST_TIMEOUT_MS = 10_000
/** Largest AddInvoice (or error) answer read; LND's are well under 1 KiB. */
export const MAX_RESPONSE_BYTES = 64 * 1024
/** Longest line accepted from the invoice stream; longer ones are skipped. */
export const MAX_STREAM_LINE_BYTES = 1024 * 1024
/** Invoices asked for per ListInvoices page while catching up. */
export const LIST_PAGE_SIZE = 100
/** Largest ListInvoices page read (an invoice with many HTLCs can run to kilobytes). */
export const MAX_LIST_PAGE_BYTES = 16 * 1024 * 1024
/** Limit for one ListInvoices page, from connecting to the end of the answer. */
export const LIST_PAGE_TIMEOUT_MS = 30_000
/** Reconnection backoff of the subscriber: doubles from the first delay up to the cap. */
export const RECONNECT_FIRST_DELAY_MS = 100
export const RECONNECT_MAX_DELAY_MS = 30_000
/**
 * A subscription that has stayed open this long counts as established and
 * resets the backoff, even when LND has not answered yet (see above).
 */
export const RECONNECT_STABLE_AFTER_MS = 5_000

const MACAROON_HEADER = "Grpc-Metadata-macaroon"

// ---------------------------------------------------------------------------
// Endpoint and HTTP client

export interface Endpoint {
  /** The REST base URL without its trailing slashes. */
  readonly base: string
  readonly origin: string
  readonly headers: Record<string, string>
}

/**
 * Checks the configuration once, when a layer is built. A bad value is a
 * deployment error, reported as a defect naming the setting.
 */
export const endpointOf = (config: LndConfig): Effect.Effect<Endpoint> =>
  Effect.suspend(() => {
    let url: URL
    try {
      url = new URL(config.restUrl)
    } catch {
      return Effect.die(new Error(`LND restUrl is not a URL: ${JSON.stringify(config.restUrl)}`))
    }
    if (url.protocol !== "https:" && url.protocol !== "http:") {
      return Effect.die(new Error(`LND restUrl must be an http(s) URL, got ${url.protocol}`))
    }
    if (url.search !== "" || url.hash !== "" || url.username !== "" || url.password !== "") {
      return Effect.die(new Error("LND restUrl must not carry credentials, a query or a fragment"))
    }
    // `xxd -p` breaks its output into lines: whitespace is not part of the value.
    const macaroon = Redacted.value(config.macaroonHex).replace(/\s+/g, "")
    if (macaroon.length === 0 || macaroon.length % 2 !== 0 || !/^[0-9a-fA-F]+$/.test(macaroon)) {
      return Effect.die(new Error("LND macaroon must be hex-encoded (e.g. the output of `xxd -p invoice.macaroon`)"))
    }
    return Effect.succeed({
      base: url.href.replace(/\/+$/, ""),
      origin: url.origin,
      headers: { [MACAROON_HEADER]: macaroon }
    })
  })

/**
 * An undici client of its own, so that the node's certificate is trusted for
 * this connection only (never process-wide) and the pool closes with the layer.
 */
export const httpClientLayer = (config: LndConfig): Layer.Layer<HttpClient.HttpClient> =>
  config.tlsCertPem === undefined
    ? NodeHttpClient.layerUndici
    : NodeHttpClient.layerUndiciOptions({ connect: { ca: config.tlsCertPem } })

/** Keeps the macaroon out of spans and of any request that gets logged. */
export const redactMacaroon = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.updateService(effect, Headers.CurrentRedactedNames, (names) => [...names, MACAROON_HEADER.toLowerCase()])

/** A transport failure as one line naming the node. */
export const transportMessage = (endpoint: Endpoint, error: HttpClientError.HttpClientError): string => {
  const reason = error.reason
  const cause = "cause" in reason && reason.cause !== undefined ? describeCause(reason.cause) : reason.message
  switch (reason._tag) {
    case "TransportError":
      return clip(`LND is unreachable at ${endpoint.origin}: ${cause}`)
    case "DecodeError":
      return clip(`the connection to LND broke while reading its answer: ${cause}`)
    default:
      return clip(`the request to LND failed: ${cause}`)
  }
}

// ---------------------------------------------------------------------------
// Bounded reading

export const readBounded = (
  response: HttpClientResponse.HttpClientResponse,
  limit: number
): Effect.Effect<Uint8Array, HttpClientError.HttpClientError | RailError> =>
  Stream.runFoldEffect(
    response.stream,
    () => ({ chunks: [] as Array<Uint8Array>, size: 0 }),
    (acc, chunk) => {
      acc.size += chunk.length
      if (acc.size > limit) {
        return Effect.fail(railError(`LND's answer is larger than ${limit} bytes`))
      }
      acc.chunks.push(chunk)
      return Effect.succeed(acc)
    }
  ).pipe(Effect.map((acc) => Buffer.concat(acc.chunks, acc.size)))
