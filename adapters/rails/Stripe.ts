import { Effect, Layer, Redacted, Schema } from "effect"
import type Stripe from "stripe"
import {
  CardRail,
  type CheckoutCreated,
  type CheckoutRequest,
  type PaymentOutcome,
  PaymentSink,
  RailError,
  type RailRoute,
  RailRouteRefused,
  railJson
} from "../../src/ports/Rails.ts"
import { loadOnceUnlessFailed } from "../lazyLoad.ts"

/**
 * The Stripe Checkout card rail.
 *
 * Funding: `createCheckout` opens a hosted Checkout Session (mode `payment`,
 * one USD line item) whose id is the card invoice's external id. Payment:
 * Stripe's signed webhooks (`POST /v1/webhooks/stripe`) are verified over the
 * raw body bytes and handed to the `PaymentSink`, which credits the wallet
 * once whatever the order or number of deliveries.
 */

export interface StripeConfig {
  /** `sk_live_…` / `sk_test_…` (or a restricted `rk_…` key allowed to write Checkout Sessions). */
  readonly secretKey: Redacted.Redacted<string>
  /** The endpoint's signing secret, `whsec_…`. */
  readonly webhookSecret: Redacted.Redacted<string>
  readonly successUrl: string
  readonly cancelUrl: string
  /** API host override, for tests and self-hosted mocks only. */
  readonly apiHost?: string
  readonly apiPort?: number
  readonly apiProtocol?: "http" | "https"
  /** Per attempt; the SDK retries once on connection errors and 5xx (same idempotency key). */
  readonly timeoutMs?: number
}

export const RAIL_NAME = "stripe"
export const WEBHOOK_PATH = "/v1/webhooks/stripe"
export const WEBHOOK_BODY_LIMIT_BYTES = 1024 * 1024
/** Maximum age of a signed webhook, in seconds (Stripe's own default). */
export const SIGNATURE_TOLERANCE_SECONDS = 300
export const DEFAULT_TIMEOUT_MS = 15_000
export const PRODUCT_NAME = "Spendgate wallet funding"

const MICRO_USD_PER_CENT = 10_000n
const MAX_NETWORK_RETRIES = 1

// ---------------------------------------------------------------------------
// Client and error messages

/**
 * The SDK's import. The rail loads it the first time it is used, so a server
 * on the dev card rail never loads it (it is a large module tree); a failed
 * load is not kept, the next use loads again (`make` and `handleWebhook`
 * take another import, for tests).
 */
type Sdk = typeof Stripe
export const importStripe = (): Promise<Sdk> => import("stripe").then((module) => module.default)

const makeClient = (Sdk: Sdk, config: StripeConfig): Stripe =>
  new Sdk(Redacted.value(config.secretKey), {
    maxNetworkRetries: MAX_NETWORK_RETRIES,
    timeout: config.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    ...(config.apiHost === undefined ? {} : { host: config.apiHost }),
    ...(config.apiPort === undefined ? {} : { port: config.apiPort }),
    ...(config.apiProtocol === undefined ? {} : { protocol: config.apiProtocol })
  })

const KEY_PATTERN = /\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]+/g
const WEBHOOK_SECRET_PATTERN = /\bwhsec_[A-Za-z0-9+/=]+/g
const MAX_MESSAGE_LENGTH = 300

/** Removes anything that looks like a credential, ours first by exact value. */
const scrub = (text: string, secrets: ReadonlyArray<string>): string => {
  let out = text
  for (const secret of secrets) {
    if (secret.length > 0) out = out.split(secret).join("[redacted]")
  }
  out = out.replace(KEY_PATTERN, "[redacted]").replace(WEBHOOK_SECRET_PATTERN, "[redacted]")
  return out.length > MAX_MESSAGE_LENGTH ? `${out.slice(0, MAX_MESSAGE_LENGTH)}…` : out
}

/**
 * A one-line description of an SDK failure for a `RailError`. Authentication
 * and permission failures get a fixed text: Stripe's own message quotes (part
 * of) the key that was refused.
 */
const describeFailure = (Sdk: Sdk | undefined, error: unknown, secrets: ReadonlyArray<string>): string => {
  if (Sdk !== undefined && error instanceof Sdk.errors.StripeError) {
    const status = error.statusCode === undefined ? "" : ` (HTTP ${error.statusCode})`
    const request = error.requestId === undefined ? "" : ` [request ${scrub(error.requestId, secrets)}]`
    if (error instanceof Sdk.errors.StripeAuthenticationError) {
      return `Stripe refused the API key${status}`
    }
    if (error instanceof Sdk.errors.StripePermissionError) {
      return `The Stripe API key may not create Checkout Sessions${status}${request}`
    }
    if (error instanceof Sdk.errors.StripeConnectionError) {
      return `Could not reach Stripe: ${scrub(error.message, secrets)}`
    }
    return `Stripe ${error.rawType ?? error.type}${status}: ${scrub(error.message, secrets)}${request}`
  }
  const message = error instanceof Error ? error.message : String(error)
  return `Stripe request failed: ${scrub(message, secrets)}`
}

// ---------------------------------------------------------------------------
// Card rail

/** µUSD → whole cents; anything finer than a cent (or not positive) is refused. */
const wholeCents = (amountMicroUsd: bigint): Effect.Effect<number, RailError> => {
  if (amountMicroUsd <= 0n || amountMicroUsd % MICRO_USD_PER_CENT !== 0n) {
    return Effect.fail(
      new RailError({
        rail: RAIL_NAME,
        message: `Card amounts must be a positive whole number of cents (got ${amountMicroUsd} µUSD)`
      })
    )
  }
  const cents = amountMicroUsd / MICRO_USD_PER_CENT
  if (cents > BigInt(Number.MAX_SAFE_INTEGER)) {
    return Effect.fail(new RailError({ rail: RAIL_NAME, message: "Card amount is too large" }))
  }
  return Effect.succeed(Number(cents))
}

/**
 * Added to the requested expiry: Stripe refuses an `expires_at` under 30
 * minutes after the session's creation as *its* clock sees it, and the
 * request takes time to arrive (and clocks differ). The invoice then expires
 * when the session does (Stripe's answered `expires_at`).
 */
export const EXPIRY_MARGIN_SECONDS = 120

export const make = (config: StripeConfig, importSdk: () => Promise<Sdk> = importStripe): (typeof CardRail)["Service"] => {
  const secrets = [Redacted.value(config.secretKey), Redacted.value(config.webhookSecret)]
  let loaded: Sdk | undefined
  const clientOf = loadOnceUnlessFailed((): Promise<Stripe> =>
    importSdk().then((Sdk) => {
      loaded = Sdk
      return makeClient(Sdk, config)
    })
  )

  const createCheckout = Effect.fn("StripeRail.createCheckout")(function*(request: CheckoutRequest) {
    const unitAmount = yield* wholeCents(request.amountMicroUsd)
    const session = yield* Effect.tryPromise({
      try: () =>
        clientOf().then((stripe) => stripe.checkout.sessions.create(
          {
            mode: "payment",
            line_items: [{
              price_data: { currency: "usd", unit_amount: unitAmount, product_data: { name: PRODUCT_NAME } },
              quantity: 1
            }],
            // Stripe wants at least 30 minutes from the session's creation by its own clock,
            // so the time asked for gets a margin; the invoice takes Stripe's expires_at back.
            expires_at: Math.ceil(request.expiresAt.getTime() / 1000) + EXPIRY_MARGIN_SECONDS,
            success_url: config.successUrl,
            cancel_url: config.cancelUrl,
            client_reference_id: request.invoiceId,
            metadata: { invoice_id: request.invoiceId }
          },
          // A retry (ours or the SDK's) for the same invoice gets the same session back.
          { idempotencyKey: request.invoiceId }
        )),
      catch: (error) => new RailError({ rail: RAIL_NAME, message: describeFailure(loaded, error, secrets) })
    }).pipe(
      Effect.tapError((error) =>
        Effect.logWarning("Stripe Checkout Session not created").pipe(
          Effect.annotateLogs({ rail: RAIL_NAME, invoiceId: request.invoiceId, reason: error.message })
        )
      )
    )
    if (typeof session.id !== "string" || typeof session.url !== "string" || session.url === "") {
      return yield* new RailError({ rail: RAIL_NAME, message: "Stripe answered a Checkout Session without a URL" })
    }
    const expiresAt = typeof session.expires_at === "number" && Number.isSafeInteger(session.expires_at) &&
        session.expires_at > 0
      ? new Date(session.expires_at * 1000)
      : undefined
    return { sessionId: session.id, checkoutUrl: session.url, expiresAt } satisfies CheckoutCreated
  })

  return CardRail.of({ name: RAIL_NAME, createCheckout })
}

/** The `CardRail` backed by Stripe Checkout. */
export const layer = (config: StripeConfig): Layer.Layer<CardRail> => Layer.sync(CardRail, () => make(config))

// ---------------------------------------------------------------------------
// Webhooks

/** A webhook that is not provably from Stripe (or not for this endpoint): answered 400, nothing recorded. */
export class WebhookRejected extends Schema.TaggedError<WebhookRejected>()("WebhookRejected", {
  message: Schema.String
}) {
  readonly code = "VALIDATION_ERROR"
}

export interface WebhookResult {
  readonly eventId: string
  readonly eventType: string
  /**
   * - `payment`: handed to `PaymentSink.record` (`outcome` says what it did)
   * - `expiry`: handed to `PaymentSink.recordExpiry`
   * - `awaiting_payment`: the session completed but a delayed payment method has not paid yet
   * - `ignored`: an event this rail does not act on
   */
  readonly action: "payment" | "expiry" | "awaiting_payment" | "ignored"
  readonly sessionId?: string
  readonly outcome?: PaymentOutcome
}

const isWholeAmount = (value: unknown): value is number =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= 0

/**
 * What the customer paid, in µUSD, when the session says so in USD. Sessions
 * we create are priced in USD; Adaptive Pricing sessions created before
 * 2025-03-31 report the local currency and carry the USD total in
 * `currency_conversion`. Otherwise the amount is left to the sink (the
 * invoice's own amount).
 */
const paidMicroUsd = (session: Stripe.Checkout.Session): bigint | undefined => {
  if (session.currency?.toLowerCase() === "usd" && isWholeAmount(session.amount_total)) {
    return BigInt(session.amount_total) * MICRO_USD_PER_CENT
  }
  const conversion = session.currency_conversion
  if (conversion != null && conversion.source_currency?.toLowerCase() === "usd" && isWholeAmount(conversion.amount_total)) {
    return BigInt(conversion.amount_total) * MICRO_USD_PER_CENT
  }
  return undefined
}

const rejectionMessage = (Sdk: Sdk, error: unknown): string => {
  // constructEvent verifies, then parses: anything but a verification error is a body that is not JSON.
  if (!(error instanceof Sdk.errors.StripeSignatureVerificationError)) {
    return "The webhook body is not a JSON Stripe event"
  }
  // The SDK's messages run on with advice and links; the first sentence is the reason.
  const first = error.message.split("\n")[0]?.trim() ?? ""
  const sentence = first.includes(". ") ? first.slice(0, first.indexOf(". ") + 1) : first
  return `Invalid Stripe-Signature: ${sentence === "" ? "verification failed" : sentence}`
}

/**
 * Verifies a webhook delivery and hands what it says to the `PaymentSink`.
 * `rawBody` must be the bytes exactly as received: the signature covers them,
 * so a body parsed and re-serialised (even with only different spacing) is
 * rejected.
 */
export const handleWebhook = (config: StripeConfig, importSdk: () => Promise<Sdk> = importStripe) => {
  const secret = Redacted.value(config.webhookSecret)
  const loadSdk = loadOnceUnlessFailed(importSdk)
  return Effect.fn("StripeRail.handleWebhook")(function*(
    rawBody: Uint8Array,
    signatureHeader: string | undefined
  ): Effect.fn.Return<WebhookResult, WebhookRejected, PaymentSink> {
    if (signatureHeader === undefined || signatureHeader.trim() === "") {
      return yield* new WebhookRejected({ message: "Missing Stripe-Signature header" })
    }
    const Sdk = yield* Effect.promise(loadSdk)
    const event = yield* Effect.try({
      try: () => Sdk.webhooks.constructEvent(rawBody, signatureHeader, secret, SIGNATURE_TOLERANCE_SECONDS),
      catch: (error) => new WebhookRejected({ message: rejectionMessage(Sdk, error) })
    })
    if (typeof event?.id !== "string" || typeof event.type !== "string" || typeof event.created !== "number") {
      return yield* new WebhookRejected({ message: "The webhook body is not a Stripe event" })
    }
    const at = new Date(event.created * 1000)
    const base = { eventId: event.id, eventType: event.type }

    const sessionOf = (object: Stripe.Checkout.Session) =>
      typeof object?.id === "string" && object.id !== ""
        ? Effect.succeed(object)
        : Effect.fail(new WebhookRejected({ message: "The event carries no Checkout Session id" }))

    const record = (session: Stripe.Checkout.Session) =>
      Effect.gen(function*() {
        const sink = yield* PaymentSink
        const outcome = yield* Effect.uninterruptible(sink.record({
          type: "card",
          externalId: session.id,
          amountPaid: paidMicroUsd(session),
          paidAt: at,
          source: `${RAIL_NAME}:${event.id}`
        }))
        return { ...base, action: "payment", sessionId: session.id, outcome } satisfies WebhookResult
      })

    const expire = (session: Stripe.Checkout.Session) =>
      Effect.gen(function*() {
        const sink = yield* PaymentSink
        yield* Effect.uninterruptible(sink.recordExpiry("card", session.id, at))
        return { ...base, action: "expiry", sessionId: session.id } satisfies WebhookResult
      })

    switch (event.type) {
      case "checkout.session.completed": {
        const session = yield* sessionOf(event.data.object)
        if (session.payment_status === "paid") return yield* record(session)
        if (session.payment_status === "unpaid") {
          // A delayed payment method (bank debit, …): async_payment_succeeded or _failed follows.
          return { ...base, action: "awaiting_payment", sessionId: session.id }
        }
        // `no_payment_required` (a 100% discount or a free session): no money moved, nothing to credit.
        yield* Effect.logWarning("Stripe Checkout Session completed without a payment; not credited").pipe(
          Effect.annotateLogs({ rail: RAIL_NAME, sessionId: session.id, paymentStatus: String(session.payment_status) })
        )
        return { ...base, action: "ignored", sessionId: session.id }
      }
      case "checkout.session.async_payment_succeeded":
        return yield* record(yield* sessionOf(event.data.object))
      case "checkout.session.async_payment_failed":
      case "checkout.session.expired":
        return yield* expire(yield* sessionOf(event.data.object))
      default:
        return { ...base, action: "ignored" }
    }
  })
}

// ---------------------------------------------------------------------------
// Route

/**
 * `POST /v1/webhooks/stripe`, mounted by the HTTP adapter beside the API (it
 * is not part of the API contract: Stripe calls it, and it must read the raw
 * body). Answers 200 `{"received": true}`, 400 in the error envelope for a
 * delivery that fails verification, 413 for a body over 1 MiB, and 500 when
 * the payment could not be recorded (Stripe retries).
 */
export const webhookRoute = (config: StripeConfig): RailRoute => {
  const handle = handleWebhook(config)
  return {
    method: "POST",
    path: WEBHOOK_PATH,
    bodyLimitBytes: WEBHOOK_BODY_LIMIT_BYTES,
    handle: (request) =>
      handle(request.body, request.headers["stripe-signature"]).pipe(
        Effect.as(railJson({ received: true })),
        Effect.catchTag("WebhookRejected", (error) =>
          Effect.logWarning("Stripe webhook rejected").pipe(
            Effect.annotateLogs({ rail: RAIL_NAME, reason: error.message }),
            Effect.andThen(Effect.fail(new RailRouteRefused({ code: "VALIDATION_ERROR", message: error.message, details: { issues: [] } })))
          ))
        // Anything else (the sink failed) is answered 500 by the HTTP adapter: Stripe delivers the event again.
      )
  }
}

/** The routes the Stripe rail serves: its webhook. */
export const routes = (config: StripeConfig): ReadonlyArray<RailRoute> => [webhookRoute(config)]
