import { Context, type Effect, Schema } from "effect"
import type { PaymentOutcome } from "../domain/Invoice.ts"
import type { Store } from "./Store.ts"

/**
 * Payment rails: how money gets into a wallet. A rail creates a payment
 * request (a BOLT11 invoice, a card checkout session); when the payment
 * arrives, whatever observes it (a subscription, a signed webhook, the dev
 * pay page) hands a `PaymentNotice` to the core's `Funding.recordPayment`,
 * which credits the wallet exactly once.
 */

/** The rail could not be reached or refused the request; nothing was created. */
export class RailError extends Schema.TaggedError<RailError>()("RailError", {
  rail: Schema.String,
  message: Schema.String
}) {
  readonly code = "PROVIDER_ERROR"
  get details() {
    return { provider: this.rail }
  }
}

export interface LightningInvoiceRequest {
  /** The gateway's own invoice id (`inv_…`), for memos and logs. */
  readonly invoiceId: string
  readonly amountMsat: bigint
  readonly memo: string
  /** Always 3600 for funding invoices. */
  readonly expirySeconds: number
  readonly createdAt: Date
}

export interface LightningInvoiceCreated {
  /** BOLT11 payment request. */
  readonly paymentRequest: string
  /** Payment hash, 64 lower-case hex characters. */
  readonly paymentHash: string
}

/** An outbound payment the gateway asks the rail to make (L402, src/l402/). */
export interface LightningPaymentRequest {
  /** The BOLT11 payment request, already decoded and checked by the caller. */
  readonly paymentRequest: string
  /** 64 lower-case hex characters, from the decoded invoice. */
  readonly paymentHash: string
  /** The invoice's amount; invoices without one are not paid. */
  readonly amountMsat: bigint
  /** The most routing fee the payment may cost. */
  readonly feeLimitMsat: bigint
  /** How long the node may keep trying before it gives the payment up. */
  readonly timeoutSeconds: number
}

/**
 * What became of an outbound payment, as far as the node knows:
 * `Succeeded` (the preimage is proof of payment), `Failed` (no money left the
 * node; the payment may be tried again), `InFlight` (sent, outcome not yet
 * known: ask again by hash, never pay again), `NotFound` (the node never
 * started a payment to this hash: nothing left the node).
 */
export type LightningPaymentStatus =
  | {
    readonly _tag: "Succeeded"
    /** 64 lower-case hex characters; its SHA-256 is the payment hash. */
    readonly preimage: string
    /** What the payee received. */
    readonly amountMsat: bigint
    /** The routing fee paid on top. */
    readonly feeMsat: bigint
  }
  | { readonly _tag: "Failed"; readonly reason: string }
  | { readonly _tag: "InFlight" }
  | { readonly _tag: "NotFound" }

/** What a BOLT11 invoice says, its signature verified (the payee recovered from it). */
export interface DecodedLightningInvoice {
  readonly paymentRequest: string
  /** BIP-0173 currency prefix: `bc`, `tb` or `bcrt`. */
  readonly network: string
  /** Undefined for an "any amount" invoice. */
  readonly amountMsat: bigint | undefined
  readonly timestampSeconds: number
  readonly expirySeconds: number
  readonly paymentHash: string
  /** The payee's node id, 66 hex characters. */
  readonly payeeNodeKey: string
  readonly description: string | undefined
  readonly descriptionHash: string | undefined
}

/** What a rail that can pay offers (the dev node pays its own invoices; LND routes them). */
export interface LightningPayer {
  /** Reads and checks a payment request; a string says what is wrong with it. Never throws. */
  readonly decode: (paymentRequest: string) => DecodedLightningInvoice | { readonly invalid: string }
  /**
   * Pays once and follows the payment up to its timeout: `Succeeded`,
   * `Failed` or, when the outcome is not known by then, `InFlight`. A
   * `RailError` means the outcome is unknown too (the request may have
   * reached the node): the caller tracks by hash before anything else.
   */
  readonly payInvoice: (request: LightningPaymentRequest) => Effect.Effect<LightningPaymentStatus, RailError>
  /** The node's word on a payment by hash (for a restart after a crash). */
  readonly trackPayment: (paymentHash: string) => Effect.Effect<LightningPaymentStatus, RailError>
}

export class LightningRail extends Context.Service<LightningRail, {
  /** "dev" (built in, local node key) or "lnd". */
  readonly name: string
  readonly createInvoice: (request: LightningInvoiceRequest) => Effect.Effect<LightningInvoiceCreated, RailError>
  /** Outbound payments, when the rail can make them (absent: the rail only receives). */
  readonly payer?: LightningPayer | undefined
}>()("spendgate/LightningRail") {}

export interface CheckoutRequest {
  readonly invoiceId: string
  readonly amountMicroUsd: bigint
  readonly description: string
  /** Creation + 30 minutes. */
  readonly expiresAt: Date
  readonly createdAt: Date
}

export interface CheckoutCreated {
  readonly sessionId: string
  readonly checkoutUrl: string
  /**
   * When the rail's session stops taking payment, if not the time asked for
   * (e.g. a provider that needs a margin above its minimum lifetime). The
   * invoice then expires at this time, so that it can never be paid after
   * it has expired on our side nor expire here while still payable there.
   */
  readonly expiresAt?: Date | undefined
}

export class CardRail extends Context.Service<CardRail, {
  /** "dev" (built in, a local checkout page) or "stripe". */
  readonly name: string
  readonly createCheckout: (request: CheckoutRequest) => Effect.Effect<CheckoutCreated, RailError>
}>()("spendgate/CardRail") {}

/** A payment observed on a rail. Delivering the same notice twice is harmless. */
export interface PaymentNotice {
  readonly type: "lightning" | "card"
  /** The payment hash (hex) of a Lightning invoice, or the card rail's session id. */
  readonly externalId: string
  /** What was actually paid, when the rail says (msat for Lightning, µUSD for card). */
  readonly amountPaid?: bigint | undefined
  readonly paidAt: Date
  /** Where the notice came from, for the record: "lnd", "stripe:evt_…", "dev". */
  readonly source: string
}

/** What became of a payment notice (defined with the invoice, in the domain). */
export type { PaymentOutcome } from "../domain/Invoice.ts"

/**
 * Where rails deliver what they observe. Implemented by the core's funding
 * service; rails that follow a stream keep their resume position here too.
 */
export class PaymentSink extends Context.Service<PaymentSink, {
  readonly record: (notice: PaymentNotice) => Effect.Effect<PaymentOutcome>
  /** The rail says a still-pending request can no longer be paid (e.g. Stripe's `checkout.session.expired`). */
  readonly recordExpiry: (type: "lightning" | "card", externalId: string, at: Date) => Effect.Effect<void>
  /** The last position a streaming rail processed (e.g. LND's settle index), or null. */
  readonly loadCursor: (rail: string) => Effect.Effect<string | null>
  readonly saveCursor: (rail: string, value: string) => Effect.Effect<void>
}>()("spendgate/PaymentSink") {}

// ---------------------------------------------------------------------------
// Routes a rail serves outside the API contract

/**
 * A request as a rail route sees it: the path parameters, the headers (names
 * in lower case) and the body bytes exactly as received (a signature may
 * cover them). The body is empty for a GET.
 */
export interface RailRequest {
  readonly params: Readonly<Record<string, string | undefined>>
  readonly headers: Readonly<Record<string, string | undefined>>
  readonly body: Uint8Array
}

/** What a rail route answers: a JSON document or an HTML page, with its status. */
export type RailResponse =
  | { readonly _tag: "Json"; readonly status: number; readonly body: unknown }
  | { readonly _tag: "Html"; readonly status: number; readonly html: string }

/**
 * A request the rail route refuses, answered in the API's error envelope
 * with the code's status. Anything else that goes wrong is answered by the
 * HTTP adapter like any other failure (500 INTERNAL, so that a webhook sender
 * delivers again).
 */
export class RailRouteRefused extends Schema.TaggedError<RailRouteRefused>()("RailRouteRefused", {
  code: Schema.Literals(["VALIDATION_ERROR", "NOT_FOUND"]),
  message: Schema.String,
  details: Schema.optional(Schema.Record(Schema.String, Schema.Unknown))
}) {}

/**
 * One route a rail owns: Stripe's signed webhook, the dev rails' payer pages.
 * The rail describes it; the HTTP adapter mounts it (reading the body up to
 * `bodyLimitBytes`, answering `RailRouteRefused` in the error envelope). A
 * rail never sees the HTTP framework, and the HTTP adapter never knows which
 * rails exist.
 */
export interface RailRoute {
  readonly method: "GET" | "POST"
  /** The path, `:name` for a parameter, e.g. `/dev/checkout/:sessionId`. */
  readonly path: `/${string}`
  /**
   * Largest body read, in bytes (the server's own limit when absent); larger
   * bodies are answered 413 PAYLOAD_TOO_LARGE.
   */
  readonly bodyLimitBytes?: number
  readonly handle: (request: RailRequest) => Effect.Effect<RailResponse, RailRouteRefused, PaymentSink | Store>
}

export const railJson = (body: unknown, status = 200): RailResponse => ({ _tag: "Json", status, body })
export const railHtml = (html: string, status = 200): RailResponse => ({ _tag: "Html", status, html })
