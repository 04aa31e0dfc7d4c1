import { NodeHttpClient } from "@effect/platform-node"
import { Cause, Clock, Duration, Effect, Layer, Redacted, Schedule, Stream } from "effect"
import { Headers, HttpClient, type HttpClientError, HttpClientRequest, type HttpClientResponse } from "effect/http"
import {
  type LightningInvoiceCreated,
  type LightningInvoiceRequest,
  LightningRail,
  PaymentSink,
  RailError
} from "../../src/ports/Rails.ts"

/**
 * The Lightning rail over an LND node's REST interface (the grpc-gateway
 * proxy in front of lnd's gRPC API).
 *
 * Funding: `createInvoice` is `POST /v1/invoices` (AddInvoice). Payment:
 * `subscriber` follows `GET /v1/invoices/subscribe` (SubscribeInvoices) for
 * the life of its layer and hands every settlement to the `PaymentSink`.
 *
 * Wire format (grpc-gateway, protobuf field names): int64/uint64 fields are
 * JSON strings, `bytes` fields are base64, enums are their names. A streaming
 * answer is newline-delimited JSON, one `{"result": Invoice}` per update, or
 * `{"error": {...}}` just before the server ends the stream. The gateway
 * writes the HTTP status and headers together with the first message, so a
 * quiet node may leave a subscription without a response for a long time;
 * that is normal and is not treated as a failure.
 *
 * Resuming: LND replays every settlement whose `settle_index` is greater than
 * the one asked for. The subscriber saves an invoice's `settle_index` only
 * after the sink has recorded it, so after a crash or a dropped connection
 * the worst case is a notice delivered twice (harmless: recording is
 * idempotent), never a lost one. A `settle_index` of 0 means "no replay"
 * to LND, so while no cursor has been saved yet the subscriber first catches
 * up with `GET /v1/invoices` (ListInvoices, forwards by `add_index`, in pages):
 * every settled invoice found is delivered, the highest `settle_index` is
 * saved once all of them are recorded, and the subscription starts from it,
 * so LND replays whatever settled between the listing and the subscription.
 * The one gap left: on a node that has never settled any invoice, a payment
 * settled in the moment between that (empty) listing and the subscription.
 */

export const RAIL_NAME = "lnd"

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
const MAX_MESSAGE_LENGTH = 300

// ---------------------------------------------------------------------------
// Configuration and HTTP client

interface Endpoint {
  /** The REST base URL without its trailing slashes. */
  readonly base: string
  readonly origin: string
  readonly headers: Record<string, string>
}

/**
 * Checks the configuration once, when a layer is built. A bad value is a
 * deployment error, reported as a defect naming the setting.
 */
const endpointOf = (config: LndConfig): Effect.Effect<Endpoint> =>
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
const httpClientLayer = (config: LndConfig): Layer.Layer<HttpClient.HttpClient> =>
  config.tlsCertPem === undefined
    ? NodeHttpClient.layerUndici
    : NodeHttpClient.layerUndiciOptions({ connect: { ca: config.tlsCertPem } })

/** Keeps the macaroon out of spans and of any request that gets logged. */
const redactMacaroon = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.updateService(effect, Headers.CurrentRedactedNames, (names) => [...names, MACAROON_HEADER.toLowerCase()])

// ---------------------------------------------------------------------------
// Errors

const railError = (message: string) => new RailError({ rail: RAIL_NAME, message })

const clip = (text: string): string => {
  const oneLine = text.replace(/\s+/g, " ").trim()
  return oneLine.length > MAX_MESSAGE_LENGTH ? `${oneLine.slice(0, MAX_MESSAGE_LENGTH)}…` : oneLine
}

const describeCause = (cause: unknown): string => {
  if (cause instanceof Error) {
    // Node and undici errors carry a code (ECONNREFUSED, UND_ERR_SOCKET, …) and sometimes a cause.
    const code = (cause as { code?: unknown }).code
    const inner = (cause as { cause?: unknown }).cause
    const detail = typeof code === "string" && !cause.message.includes(code) ? `${code}: ${cause.message}` : cause.message
    return inner instanceof Error && inner.message !== cause.message ? `${detail} (${describeCause(inner)})` : detail
  }
  return String(cause)
}

const transportMessage = (endpoint: Endpoint, error: HttpClientError.HttpClientError): string => {
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

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * LND's error body: `{ code, message, details }` (gRPC status through
 * grpc-gateway); older gateways also sent `error`.
 */
const lndErrorText = (value: unknown): string | undefined => {
  if (!isRecord(value)) return undefined
  const message = typeof value.message === "string" && value.message !== ""
    ? value.message
    : typeof value.error === "string" && value.error !== ""
    ? value.error
    : undefined
  return message === undefined ? undefined : clip(message)
}

const statusMessage = (status: number, body: Uint8Array): string => {
  const text = new TextDecoder().decode(body)
  let detail: string | undefined
  try {
    detail = lndErrorText(JSON.parse(text))
  } catch {
    detail = undefined
  }
  if (detail !== undefined) return `LND refused the request (HTTP ${status}): ${detail}`
  return text.trim() === ""
    ? `LND answered HTTP ${status}`
    : `LND answered HTTP ${status}: ${clip(text)}`
}

// ---------------------------------------------------------------------------
// Wire values

const UINT = /^\d{1,20}$/

/** An int64/uint64 field: a decimal string, or a plain number from lenient encoders. */
const uintField = (value: unknown): bigint | undefined => {
  if (typeof value === "string" && UINT.test(value)) return BigInt(value)
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return BigInt(value)
  return undefined
}

const MALFORMED = Symbol("malformed")

/** An optional int64 field: absent (or null) is undefined, present but not a number is MALFORMED. */
const optionalUint = (value: unknown): bigint | undefined | typeof MALFORMED =>
  value === undefined || value === null ? undefined : uintField(value) ?? MALFORMED

const BASE64 = /^(?:[A-Za-z0-9+/]*={0,2}|[A-Za-z0-9_-]*={0,2})$/

/** A 32-byte hash sent as base64 (standard or URL-safe), as lower-case hex. */
const hashField = (value: unknown): string | undefined => {
  if (typeof value !== "string" || !BASE64.test(value)) return undefined
  const bytes = Buffer.from(value, "base64")
  return bytes.length === 32 ? bytes.toString("hex") : undefined
}

// ---------------------------------------------------------------------------
// Bounded reading

const readBounded = (
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

// ---------------------------------------------------------------------------
// The rail

/** An answer's body as a JSON object, or what is wrong with it. */
const jsonObject = (body: Uint8Array, call: string): Record<string, unknown> | string => {
  let json: unknown
  try {
    json = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body))
  } catch {
    return `LND's ${call} answer is not JSON`
  }
  return isRecord(json) ? json : `LND's ${call} answer is not a JSON object`
}

/** What AddInvoice answered, checked. */
const parseAddInvoice = (body: Uint8Array): LightningInvoiceCreated | string => {
  const json = jsonObject(body, "AddInvoice")
  if (typeof json === "string") return json
  const paymentRequest = json.payment_request
  if (typeof paymentRequest !== "string" || paymentRequest.trim() === "") {
    return "LND's AddInvoice answer has no payment_request"
  }
  if (json.r_hash === undefined) return "LND's AddInvoice answer has no r_hash"
  const paymentHash = hashField(json.r_hash)
  if (paymentHash === undefined) return "LND's AddInvoice answer has an r_hash that is not 32 bytes of base64"
  return { paymentRequest: paymentRequest.trim(), paymentHash }
}

/** A ListInvoices answer, checked: its invoices (each checked when read) and the next offset. */
const parseListPage = (
  body: Uint8Array
): { readonly invoices: ReadonlyArray<unknown>; readonly lastIndexOffset: bigint } | string => {
  const json = jsonObject(body, "ListInvoices")
  if (typeof json === "string") return json
  // grpc-gateway leaves out empty repeated fields unless told to emit defaults.
  const invoices = json.invoices === undefined || json.invoices === null ? [] : json.invoices
  if (!Array.isArray(invoices)) return "LND's ListInvoices answer has invoices that are not a list"
  const lastIndexOffset = json.last_index_offset === undefined || json.last_index_offset === null
    ? 0n
    : uintField(json.last_index_offset)
  if (lastIndexOffset === undefined) return "LND's ListInvoices answer has a malformed last_index_offset"
  return { invoices, lastIndexOffset }
}

export const make = (config: LndConfig): Effect.Effect<LightningRail["Service"], never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const endpoint = yield* endpointOf(config)
    const client = HttpClient.withScope(yield* HttpClient.HttpClient)
    const timeoutMs = config.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS

    const createInvoice = Effect.fn("Lnd.createInvoice")(
      function*(request: LightningInvoiceRequest) {
        if (request.amountMsat <= 0n) {
          return yield* railError("an LND funding invoice needs a positive amount")
        }
        if (!Number.isSafeInteger(request.expirySeconds) || request.expirySeconds <= 0) {
          return yield* railError("an LND funding invoice needs a positive whole expiry in seconds")
        }
        const body = JSON.stringify({
          value_msat: request.amountMsat.toString(),
          memo: request.memo,
          expiry: String(request.expirySeconds)
        })
        const { status, bytes } = yield* Effect.scoped(
          Effect.gen(function*() {
            const response = yield* client.execute(
              HttpClientRequest.post(`${endpoint.base}/v1/invoices`, { headers: endpoint.headers, acceptJson: true }).pipe(
                HttpClientRequest.bodyText(body, "application/json")
              )
            )
            const bytes = yield* readBounded(response, MAX_RESPONSE_BYTES)
            return { status: response.status, bytes }
          })
        ).pipe(
          Effect.catchTag("HttpClientError", (error) => Effect.fail(railError(transportMessage(endpoint, error)))),
          Effect.timeoutOrElse({
            duration: Duration.millis(timeoutMs),
            orElse: () => Effect.fail(railError(`LND did not answer AddInvoice within ${timeoutMs} ms`))
          })
        )
        if (status < 200 || status >= 300) return yield* railError(statusMessage(status, bytes))
        const created = parseAddInvoice(bytes)
        if (typeof created === "string") return yield* railError(created)
        return created
      },
      redactMacaroon
    )

    return LightningRail.of({ name: RAIL_NAME, createInvoice })
  })

/** The LND rail; its HTTP connection pool lives as long as the layer. */
export const layer = (config: LndConfig): Layer.Layer<LightningRail> =>
  Layer.effect(LightningRail, make(config)).pipe(Layer.provide(httpClientLayer(config)))

// ---------------------------------------------------------------------------
// The invoice stream

type Piece =
  | { readonly _tag: "Line"; readonly text: string }
  | { readonly _tag: "Invalid"; readonly reason: string }

/**
 * Splits a byte stream into lines incrementally. A line is kept only up to
 * `maxBytes`; a longer one is dropped as it arrives and reported once its
 * end is seen, so memory stays bounded whatever the server sends. A final
 * line without its newline (a cut connection) is discarded.
 */
class LineSplitter {
  private parts: Array<Uint8Array> = []
  private size = 0
  private overlong = false
  private readonly decoder = new TextDecoder("utf-8", { fatal: true })
  readonly maxBytes: number

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes
  }

  push(chunk: Uint8Array): Array<Piece> {
    const pieces: Array<Piece> = []
    let start = 0
    for (;;) {
      const newline = chunk.indexOf(10, start)
      if (newline === -1) {
        this.append(chunk.subarray(start))
        return pieces
      }
      this.append(chunk.subarray(start, newline))
      pieces.push(this.take())
      start = newline + 1
    }
  }

  private append(bytes: Uint8Array) {
    if (bytes.length === 0) return
    this.size += bytes.length
    if (this.overlong) return
    if (this.size > this.maxBytes) {
      this.overlong = true
      this.parts = []
      return
    }
    // Copied: the chunk's buffer may be reused once this function returns.
    this.parts.push(bytes.slice())
  }

  private take(): Piece {
    let piece: Piece
    if (this.overlong) {
      piece = { _tag: "Invalid", reason: `a line of ${this.size} bytes (over ${this.maxBytes})` }
    } else {
      try {
        piece = { _tag: "Line", text: this.decoder.decode(Buffer.concat(this.parts, this.size)) }
      } catch {
        piece = { _tag: "Invalid", reason: "a line that is not UTF-8" }
      }
    }
    this.parts = []
    this.size = 0
    this.overlong = false
    return piece
  }
}

interface Settlement {
  readonly paymentHash: string
  readonly amountPaidMsat: bigint | undefined
  readonly settleDate: bigint | undefined
  readonly settleIndex: bigint | undefined
}

type Update =
  | { readonly _tag: "Skip"; readonly warning?: string }
  | { readonly _tag: "Settled"; readonly settlement: Settlement }
  | { readonly _tag: "StreamError"; readonly message: string }

/** `SETTLED` as LND sends it; the enum's number (1) from gateways set to send numbers. */
const isSettledState = (state: unknown): boolean => state === "SETTLED" || state === 1

/** Reads one line of the stream. Pure: what to do with it is decided by the caller. */
const parseUpdate = (text: string): Update => {
  const trimmed = text.trim()
  if (trimmed === "") return { _tag: "Skip" }
  let message: unknown
  try {
    message = JSON.parse(trimmed)
  } catch {
    return { _tag: "Skip", warning: `a line that is not JSON: ${clip(trimmed).slice(0, 80)}` }
  }
  if (!isRecord(message)) return { _tag: "Skip", warning: "a line that is not a JSON object" }
  if (message.error !== undefined && message.error !== null) {
    const detail = lndErrorText(message.error) ?? clip(JSON.stringify(message.error))
    return { _tag: "StreamError", message: `LND ended the invoice stream with an error: ${detail}` }
  }
  const invoice = message.result
  if (!isRecord(invoice)) return { _tag: "Skip", warning: "a message without a result object" }
  return parseInvoice(invoice)
}

/** One Invoice message, from the stream or from a ListInvoices page: a settlement or nothing. */
const parseInvoice = (invoice: Record<string, unknown>): Update => {
  if (!isSettledState(invoice.state)) return { _tag: "Skip" }
  const paymentHash = hashField(invoice.r_hash)
  if (paymentHash === undefined) {
    return { _tag: "Skip", warning: "a settled invoice whose r_hash is not 32 bytes of base64" }
  }
  const amountPaidMsat = optionalUint(invoice.amt_paid_msat)
  const settleDate = optionalUint(invoice.settle_date)
  const settleIndex = optionalUint(invoice.settle_index)
  const malformed = amountPaidMsat === MALFORMED
    ? "amt_paid_msat"
    : settleDate === MALFORMED
    ? "settle_date"
    : settleIndex === MALFORMED
    ? "settle_index"
    : undefined
  if (malformed !== undefined) {
    return { _tag: "Skip", warning: `settled invoice ${paymentHash} with a malformed ${malformed}` }
  }
  return {
    _tag: "Settled",
    settlement: {
      paymentHash,
      amountPaidMsat: amountPaidMsat as bigint | undefined,
      settleDate: settleDate as bigint | undefined,
      settleIndex: settleIndex as bigint | undefined
    }
  }
}

/** A failure as a `RailError` (kept as is when it already is one). */
const toRailError = (context: string, cause: Cause.Cause<unknown>): RailError => {
  const error = Cause.squash(cause)
  return error instanceof RailError ? error : railError(clip(`${context}: ${describeCause(error)}`))
}

/** Anything but an interruption becomes a `RailError`, so that it leads to a reconnection. */
const asRailError = (context: string) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, RailError, R> =>
  Effect.catchCause(effect, (cause) =>
    Cause.hasInterruptsOnly(cause)
      ? Effect.failCause(cause as Cause.Cause<never>)
      : Effect.fail(toRailError(context, cause)))

const Established = { _tag: "Established" } as const

/**
 * Follows SubscribeInvoices until interrupted: one subscription at a time,
 * each resuming from the saved cursor, reconnecting with backoff whenever a
 * subscription ends or fails.
 */
const follow = (endpoint: Endpoint): Effect.Effect<void, never, PaymentSink | HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const sink = yield* PaymentSink
    const client = HttpClient.withScope(yield* HttpClient.HttpClient)

    const deliver = (settlement: Settlement, cursor: { value: bigint }, save = true) =>
      Effect.gen(function*() {
        // settle_date is in seconds; a settled invoice without a usable one is dated on arrival.
        const settledAt = settlement.settleDate !== undefined && settlement.settleDate > 0n
          ? new Date(Number(settlement.settleDate) * 1000)
          : undefined
        const paidAt = settledAt !== undefined && Number.isFinite(settledAt.getTime())
          ? settledAt
          : new Date(yield* Clock.currentTimeMillis)
        const outcome = yield* sink.record({
          type: "lightning",
          externalId: settlement.paymentHash,
          amountPaid: settlement.amountPaidMsat,
          paidAt,
          source: RAIL_NAME
        }).pipe(asRailError("the payment sink failed to record a settlement"))
        yield* Effect.logDebug(`settled invoice ${settlement.paymentHash}: ${outcome}`)
        // Only once the notice is recorded, and never backwards.
        if (save && settlement.settleIndex !== undefined && settlement.settleIndex > cursor.value) {
          yield* sink.saveCursor(RAIL_NAME, settlement.settleIndex.toString()).pipe(
            asRailError("the payment sink failed to save the cursor")
          )
          cursor.value = settlement.settleIndex
        }
      })

    const handle = (cursor: { value: bigint }) => (piece: Piece): Effect.Effect<void, RailError> => {
      if (piece._tag === "Invalid") return Effect.logWarning(`skipped ${piece.reason} in the invoice stream`)
      const update = parseUpdate(piece.text)
      switch (update._tag) {
        case "Skip":
          return update.warning === undefined
            ? Effect.void
            : Effect.logWarning(`skipped ${update.warning} in the invoice stream`)
        case "StreamError":
          return Effect.fail(railError(update.message))
        case "Settled":
          return deliver(update.settlement, cursor)
      }
    }

    /** One ListInvoices page after `offset` (an add_index), oldest first. */
    const listPage = (offset: bigint) =>
      Effect.scoped(Effect.gen(function*() {
        const response = yield* client.execute(
          HttpClientRequest.get(`${endpoint.base}/v1/invoices`, {
            headers: endpoint.headers,
            acceptJson: true,
            urlParams: {
              index_offset: offset.toString(),
              num_max_invoices: String(LIST_PAGE_SIZE),
              reversed: "false"
            }
          })
        )
        const bytes = yield* readBounded(response, MAX_LIST_PAGE_BYTES)
        return { status: response.status, bytes }
      })).pipe(
        Effect.catchTag("HttpClientError", (error) => Effect.fail(railError(transportMessage(endpoint, error)))),
        Effect.timeoutOrElse({
          duration: Duration.millis(LIST_PAGE_TIMEOUT_MS),
          orElse: () => Effect.fail(railError(`LND did not answer ListInvoices within ${LIST_PAGE_TIMEOUT_MS} ms`))
        }),
        Effect.flatMap(({ bytes, status }) => {
          if (status !== 200) return Effect.fail(railError(statusMessage(status, bytes)))
          const page = parseListPage(bytes)
          return typeof page === "string" ? Effect.fail(railError(page)) : Effect.succeed(page)
        })
      )

    /**
     * Delivers every settled invoice the node holds; the cursor is saved only
     * after all of them are recorded (an interrupted catch-up starts over, and
     * delivering twice is harmless). Answers the cursor to subscribe from.
     */
    const catchUp = Effect.gen(function*() {
      const cursor = { value: 0n }
      let highest = 0n
      let offset = 0n
      let delivered = 0
      while (true) {
        const page = yield* listPage(offset)
        for (const invoice of page.invoices) {
          const update = isRecord(invoice) ? parseInvoice(invoice) : { _tag: "Skip", warning: "an invoice that is not a JSON object" } as const
          if (update._tag === "Settled") {
            yield* deliver(update.settlement, cursor, false)
            delivered++
            const index = update.settlement.settleIndex
            if (index !== undefined && index > highest) highest = index
          } else if (update._tag === "Skip" && update.warning !== undefined) {
            yield* Effect.logWarning(`skipped ${update.warning} in ListInvoices`)
          }
        }
        if (page.invoices.length < LIST_PAGE_SIZE || page.lastIndexOffset <= offset) break
        offset = page.lastIndexOffset
      }
      if (highest > 0n) {
        yield* sink.saveCursor(RAIL_NAME, highest.toString()).pipe(
          asRailError("the payment sink failed to save the cursor")
        )
      }
      yield* Effect.logInfo(`caught up with LND: ${delivered} settled invoice(s) delivered, settle_index ${highest}`)
      return highest
    })

    const subscription = Effect.gen(function*() {
      const saved = yield* sink.loadCursor(RAIL_NAME)
      const parsed = saved === null ? 0n : uintField(saved)
      if (parsed === undefined) {
        return yield* railError(`the saved LND cursor is not a settle index: ${JSON.stringify(clip(saved ?? ""))}`)
      }
      const start = parsed === 0n ? yield* catchUp : parsed
      yield* Effect.logDebug(`subscribing to LND invoices after settle_index ${start}`)
      const response = yield* client.execute(
        HttpClientRequest.get(`${endpoint.base}/v1/invoices/subscribe`, {
          headers: endpoint.headers,
          urlParams: { settle_index: start.toString() }
        })
      ).pipe(Effect.catchTag("HttpClientError", (error) => Effect.fail(railError(transportMessage(endpoint, error)))))
      if (response.status !== 200) {
        const body = yield* readBounded(response, MAX_RESPONSE_BYTES).pipe(
          Effect.catchTag("HttpClientError", () => Effect.succeed(new Uint8Array()))
        )
        return yield* railError(statusMessage(response.status, body))
      }
      yield* Effect.logInfo(`following LND invoices after settle_index ${start}`)
      const cursor = { value: start }
      return Stream.succeed(Established).pipe(
        Stream.concat(
          response.stream.pipe(
            Stream.mapError((error) => railError(transportMessage(endpoint, error))),
            Stream.mapAccum(() => new LineSplitter(MAX_STREAM_LINE_BYTES), (splitter, chunk: Uint8Array) =>
              [splitter, splitter.push(chunk)] as const),
            Stream.mapEffect(handle(cursor))
          )
        ),
        Stream.concat(Stream.fail(railError("LND closed the invoice stream")))
      )
    }).pipe(asRailError("the invoice subscription failed"))

    const attempt = Stream.unwrap(subscription).pipe(
      Stream.merge(Stream.fromEffect(Effect.as(Effect.sleep(Duration.millis(RECONNECT_STABLE_AFTER_MS)), Established))),
      // Stream.retry gives up on defects: a bug in handling one line must not end the subscriber.
      Stream.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause)
          ? Stream.failCause(cause as Cause.Cause<never>)
          : Stream.fail(toRailError("the invoice stream failed", cause))
      )
    )

    // Stream.retry starts the schedule afresh once an attempt emits, i.e. once it is established.
    const backoff = Schedule.min([
      Schedule.exponential(Duration.millis(RECONNECT_FIRST_DELAY_MS)),
      Schedule.spaced(Duration.millis(RECONNECT_MAX_DELAY_MS))
    ]).pipe(
      Schedule.setInputType<RailError>(),
      Schedule.tap((meta) =>
        Effect.logWarning(
          `LND invoice stream: ${meta.input.message}; reconnecting in ${Duration.toMillis(meta.duration)} ms`
        )
      )
    )

    // The backoff never ends and every failure is a RailError by now, so this
    // runs until interrupted; anything else is a bug worth an error line.
    yield* attempt.pipe(
      Stream.retry(backoff),
      Stream.runDrain,
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause)
          ? Effect.failCause(cause as Cause.Cause<never>)
          : Effect.logError("LND invoice subscriber stopped", cause)
      )
    )
  }).pipe(redactMacaroon, Effect.annotateLogs({ rail: RAIL_NAME }))

/**
 * Follows LND's settled invoices for as long as the layer is alive and
 * delivers them to the `PaymentSink`; the subscription stops when the
 * layer's scope closes.
 */
export const subscriber = (config: LndConfig): Layer.Layer<never, never, PaymentSink> =>
  Layer.effectDiscard(Effect.flatMap(endpointOf(config), (endpoint) => Effect.forkScoped(follow(endpoint)))).pipe(
    Layer.provide(httpClientLayer(config))
  )
