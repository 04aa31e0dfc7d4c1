import { Cause, Clock, Duration, Effect, Layer, Schedule, Stream } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import { PaymentSink, type RailError } from "../../../src/ports/Rails.ts"
import {
  type Endpoint,
  endpointOf,
  httpClientLayer,
  LIST_PAGE_SIZE,
  LIST_PAGE_TIMEOUT_MS,
  type LndConfig,
  MAX_LIST_PAGE_BYTES,
  MAX_RESPONSE_BYTES,
  MAX_STREAM_LINE_BYTES,
  readBounded,
  RECONNECT_FIRST_DELAY_MS,
  RECONNECT_MAX_DELAY_MS,
  RECONNECT_STABLE_AFTER_MS,
  redactMacaroon,
  transportMessage
} from "./client.ts"
import { LineSplitter, type Piece } from "./lines.ts"
import { asRailError, clip, RAIL_NAME, railError, toRailError } from "./messages.ts"
import { isRecord, parseInvoice, parseListPage, parseUpdate, type Settlement, statusMessage, uintField } from "./wire.ts"

/**
 * Payment: follows `GET /v1/invoices/subscribe` (SubscribeInvoices) for the
 * life of the layer, catching up with `GET /v1/invoices` (ListInvoices) first
 * while no cursor is saved, and hands every settlement to the `PaymentSink`
 * (see Lnd.ts for the resume rules).
 */

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
