import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import {
  EmailInput,
  EmailOutput,
  ExecuteInput,
  ExecuteOutput,
  ImagineInput,
  ImagineOutput,
  SmsInput,
  SmsOutput,
  SpeakInput,
  SpeakOutput,
  TranscribeInput,
  TranscribeOutput,
  ReadInput,
  ReadOutput,
  ReasonInput,
  ReasonOutput,
  ScrapeInput,
  ScrapeOutput,
  SearchInput,
  SearchOutput
} from "../../src/capabilities/schemas.ts"
import { BadGateway, BadRequest, Conflict, ErrorBody, Forbidden, NotFound, PaymentRequired, ServiceUnavailable, TooManyRequests } from "./errors.ts"
import { QuoteHeaders } from "./QuotesApi.ts"
import { AccessControl, Authentication, IdempotencyKeys } from "./middleware.ts"

/** Capabilities: the catalogue with prices, and metered execution. */

export const Metadata = Schema.Struct({
  chargedUsdCents: Schema.Number.annotate({ description: "Actual cost in USD cents" }),
  chargedSats: Schema.optional(Schema.Number).annotate({ description: "The same cost in sats at the call's rate snapshot (absent when no rate is known)" }),
  quotedUsdCents: Schema.Number.annotate({ description: "The upper bound held before the call" }),
  balanceAfter: Schema.Number.annotate({ description: "Spendable value of the wallet after the charge, USD cents" }),
  auditId: Schema.String,
  provider: Schema.String,
  latencyMs: Schema.Number.annotate({ description: "The upstream call's time: from the request being sent to the last byte of the answer (a stream: until it ends)" }),
  model: Schema.optional(Schema.String),
  quoteId: Schema.optional(Schema.String).annotate({ description: "The binding quote that paid for the call (X-Spendgate-Quote)" }),
  debited: Schema.Struct({ usdCents: Schema.Number, sats: Schema.Number }).annotate({
    description: "What each wallet pocket actually lost"
  })
})

const result = <S extends Schema.Top>(data: S) => Schema.Struct({ data, metadata: Metadata })

export const PayInputSchema = Schema.Struct({
  url: Schema.String.check(Schema.isMaxLength(4096)).annotate({ description: "The paywalled http(s) URL (URL-safety rules as for read)" }),
  method: Schema.String.check(Schema.isMaxLength(10)).annotate({ description: "GET, HEAD, POST, PUT, PATCH or DELETE" }),
  headers: Schema.optional(Schema.Record(Schema.String, Schema.String)).annotate({
    description: "Request headers for the upstream (not Authorization, Cookie, Host or transport headers)"
  }),
  body: Schema.optional(Schema.String).annotate({ description: "Request body (UTF-8 text), at most 1 MiB" }),
  maxSats: Schema.Int.annotate({ description: "The most the invoice may ask, in sats; the routing fee (at most 1 %, at least 1 sat) comes on top" })
})

export const PayResponse = Schema.Struct({
  status: Schema.Number.annotate({ description: "The upstream's HTTP status (of the retry, when this call paid)" }),
  headers: Schema.Record(Schema.String, Schema.String).annotate({ description: "A safe subset of the upstream's headers" }),
  body: Schema.String,
  bodyEncoding: Schema.Literals(["utf8", "base64"]),
  truncated: Schema.Boolean.annotate({ description: "The body was cut at 4 MiB" }),
  l402: Schema.Literals(["paid", "token", "none"]).annotate({
    description: "paid: this call paid an L402 invoice; token: a token paid earlier was accepted; none: no paywall"
  }),
  payment: Schema.NullOr(Schema.Struct({
    paymentHash: Schema.String,
    preimage: Schema.String,
    amountSats: Schema.Number,
    routingFeeSats: Schema.Number
  })),
  metadata: Schema.NullOr(Schema.Struct({ ...Metadata.fields, transactionId: Schema.String })).annotate({
    description: "The charge (amount paid plus routing fee at the rate snapshot), when this call paid"
  })
})

export const CapabilityListItem = Schema.Struct({
  name: Schema.String,
  description: Schema.String,
  providers: Schema.Array(Schema.String),
  pricing: Schema.Record(Schema.String, Schema.Unknown).annotate({
    description: "Keyed by provider; USD cents (`unit: usd_cents`) per `per`"
  })
})

export const CapabilityDetail = Schema.Struct({
  name: Schema.String,
  description: Schema.String,
  defaultProvider: Schema.NullOr(Schema.String),
  providers: Schema.Array(Schema.Struct({
    name: Schema.String,
    models: Schema.optional(Schema.Array(Schema.Struct({
      id: Schema.String,
      inputPricePer1kTokens: Schema.Number,
      outputPricePer1kTokens: Schema.Number,
      /** USD cents per 1000 prompt tokens served from the provider's prompt cache; absent: the input price. */
      cachedInputPricePer1kTokens: Schema.optional(Schema.Number),
      /** USD cents per 1000 prompt tokens written to the provider's prompt cache; absent: the input price. */
      cacheWritePricePer1kTokens: Schema.optional(Schema.Number),
      /** The most completion tokens a call may ask for. */
      maxTokens: Schema.Number,
      /** The model's context window, when its price card gives it. */
      contextTokens: Schema.optional(Schema.Number)
    }))),
    pricing: Schema.optional(Schema.Record(Schema.String, Schema.Unknown)),
    /** Absent when usable; `unavailable`: never chosen here; `degraded`: runs without a protection; `reason` says why. */
    status: Schema.optional(Schema.Literals(["degraded", "unavailable"])),
    reason: Schema.optional(Schema.String)
  }))
})

export const EstimateResult = Schema.Struct({
  capability: Schema.String,
  provider: Schema.String.annotate({ description: "The provider execute would start with (the pinned one, else the cheapest healthy one)" }),
  model: Schema.optional(Schema.String),
  quotedUsdCents: Schema.Number.annotate({ description: "The quote execute would hold, USD cents" }),
  allowed: Schema.Boolean.annotate({ description: "Whether the spend rules would hold this quote now" }),
  refusal: Schema.optional(ErrorBody).annotate({
    description: "When not allowed: the code, message and details execute would answer (BUDGET_EXCEEDED, VELOCITY_EXCEEDED, RATE_LIMITED, PER_CALL_LIMIT_EXCEEDED, INSUFFICIENT_BALANCE, CAPABILITY_NOT_ALLOWED, AGENT_KILLED, RATE_UNAVAILABLE)"
  }),
  remainingTodayUsdCents: Schema.NullOr(Schema.Number).annotate({
    description: "The daily cap less today's held and settled spend (UTC day), USD cents; null when there is no daily cap"
  }),
  remainingThisMonthUsdCents: Schema.NullOr(Schema.Number).annotate({
    description:
      "The monthly cap less this calendar month's held and settled spend (UTC), USD cents; null when there is no monthly cap"
  }),
  remainingThisHourUsdCents: Schema.NullOr(Schema.Number).annotate({
    description: "maxPerHourUsdCents less the last 60 minutes' held and settled spend, USD cents; null when there is no hourly limit"
  })
}).annotate({
  description:
    "A report, not the call: 200 even when refused; nothing is held or charged and no provider is called. A concurrent call may change the answer before execute."
})

const estimateErrors = [BadRequest, Forbidden, NotFound, ServiceUnavailable] as const

const estimate = <Name extends string, P extends Schema.Top>(name: Name, path: `/${string}`, payload: P) =>
  HttpApiEndpoint.post(name, path, { payload, success: EstimateResult, error: estimateErrors })

const executeErrors = [BadRequest, PaymentRequired, Forbidden, NotFound, TooManyRequests, BadGateway, ServiceUnavailable] as const
/** A call made with a quote can also be refused 409 (QUOTE_USED, QUOTE_EXPIRED, QUOTE_MISMATCH). */
const quotedExecuteErrors = [...executeErrors, Conflict] as const

const CapabilityParam = Schema.String.check(Schema.isMaxLength(64))

export class CapabilitiesApi extends HttpApiGroup.make("capabilities")
  .add(
    HttpApiEndpoint.get("list", "/v1/capabilities", { success: Schema.Array(CapabilityListItem), error: BadRequest }),
    HttpApiEndpoint.get("describe", "/v1/capabilities/:capability", {
      params: { capability: CapabilityParam },
      success: CapabilityDetail,
      error: [BadRequest, NotFound]
    }),
    HttpApiEndpoint.post("reason", "/v1/capabilities/reason", {
      payload: ReasonInput,
      headers: QuoteHeaders,
      success: result(ReasonOutput),
      error: quotedExecuteErrors
    }).middleware(IdempotencyKeys),
    HttpApiEndpoint.post("search", "/v1/capabilities/search", {
      payload: SearchInput,
      headers: QuoteHeaders,
      success: result(SearchOutput),
      error: quotedExecuteErrors
    }).middleware(IdempotencyKeys),
    HttpApiEndpoint.post("read", "/v1/capabilities/read", {
      payload: ReadInput,
      headers: QuoteHeaders,
      success: result(ReadOutput),
      error: quotedExecuteErrors
    }).middleware(IdempotencyKeys),
    HttpApiEndpoint.post("scrape", "/v1/capabilities/scrape", {
      payload: ScrapeInput,
      headers: QuoteHeaders,
      success: result(ScrapeOutput),
      error: quotedExecuteErrors
    }).middleware(IdempotencyKeys),
    HttpApiEndpoint.post("execute", "/v1/capabilities/execute", {
      payload: ExecuteInput,
      headers: QuoteHeaders,
      success: result(ExecuteOutput),
      error: quotedExecuteErrors
    }).middleware(IdempotencyKeys),
    HttpApiEndpoint.post("imagine", "/v1/capabilities/imagine", {
      payload: ImagineInput,
      headers: QuoteHeaders,
      success: result(ImagineOutput),
      error: quotedExecuteErrors
    }).middleware(IdempotencyKeys),
    HttpApiEndpoint.post("speak", "/v1/capabilities/speak", {
      payload: SpeakInput,
      headers: QuoteHeaders,
      success: result(SpeakOutput),
      error: quotedExecuteErrors
    }).middleware(IdempotencyKeys),
    HttpApiEndpoint.post("transcribe", "/v1/capabilities/transcribe", {
      payload: TranscribeInput,
      headers: QuoteHeaders,
      success: result(TranscribeOutput),
      error: quotedExecuteErrors
    }).middleware(IdempotencyKeys),
    HttpApiEndpoint.post("email", "/v1/capabilities/email", {
      payload: EmailInput,
      headers: QuoteHeaders,
      success: result(EmailOutput),
      error: quotedExecuteErrors
    }).middleware(IdempotencyKeys),
    HttpApiEndpoint.post("sms", "/v1/capabilities/sms", {
      payload: SmsInput,
      headers: QuoteHeaders,
      success: result(SmsOutput),
      error: quotedExecuteErrors
    }).middleware(IdempotencyKeys),
    HttpApiEndpoint.post("pay", "/v1/capabilities/pay", {
      payload: PayInputSchema,
      success: PayResponse,
      error: executeErrors
    }).middleware(IdempotencyKeys),
    estimate("estimateReason", "/v1/capabilities/reason/estimate", ReasonInput),
    estimate("estimateSearch", "/v1/capabilities/search/estimate", SearchInput),
    estimate("estimateRead", "/v1/capabilities/read/estimate", ReadInput),
    estimate("estimateScrape", "/v1/capabilities/scrape/estimate", ScrapeInput),
    estimate("estimateExecute", "/v1/capabilities/execute/estimate", ExecuteInput),
    estimate("estimateImagine", "/v1/capabilities/imagine/estimate", ImagineInput),
    estimate("estimateSpeak", "/v1/capabilities/speak/estimate", SpeakInput),
    estimate("estimateTranscribe", "/v1/capabilities/transcribe/estimate", TranscribeInput),
    estimate("estimateEmail", "/v1/capabilities/email/estimate", EmailInput),
    estimate("estimateSms", "/v1/capabilities/sms/estimate", SmsInput),
    HttpApiEndpoint.post("estimateOther", "/v1/capabilities/:capability/estimate", {
      params: { capability: CapabilityParam },
      payload: Schema.Unknown,
      success: EstimateResult,
      error: estimateErrors
    }),
    HttpApiEndpoint.post("other", "/v1/capabilities/:capability", {
      params: { capability: CapabilityParam },
      payload: Schema.Unknown,
      success: result(Schema.Unknown),
      error: executeErrors
    })
  )
  .middleware(AccessControl)
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Capabilities", description: "Catalogue, prices and metered execution" }))
{}
