import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { inputSchemas } from "../../src/capabilities/schemas.ts"
import { QuoteId } from "../../src/quotes/Quote.ts"
import { BadRequest, Forbidden, NotFound, PaymentRequired, ServiceUnavailable, TooManyRequests } from "./errors.ts"
import { AccessControl, Authentication, IdempotencyKeys } from "./middleware.ts"

/** Binding quotes (docs/quotes.md): a price and a provider fixed for one call, for a short time. */

/** The header a capability call names its quote in; the body stays the capability's own input. */
export const QUOTE_HEADER = "x-spendgate-quote"

export const QuoteHeaders = Schema.Struct({
  [QUOTE_HEADER]: Schema.optional(QuoteId).annotate({
    description:
      "A quote from POST /v1/quotes for this capability and this exact input: the call runs on the quoted provider, is held at the quoted price and charged at most that, and uses the quote up"
  })
})

const quoteRequest = <C extends keyof typeof inputSchemas>(capability: C) =>
  Schema.Struct({
    capability: Schema.Literal(capability),
    input: inputSchemas[capability].annotate({
      description: `The body POST /v1/capabilities/${capability} will send, validated the same way`
    })
  })

export const QuoteRequest = Schema.Union([
  quoteRequest("reason"),
  quoteRequest("search"),
  quoteRequest("read"),
  quoteRequest("scrape"),
  quoteRequest("execute"),
  quoteRequest("imagine"),
  quoteRequest("speak"),
  quoteRequest("transcribe"),
  quoteRequest("email"),
  quoteRequest("sms")
]).annotate({ description: "A capability and the input its call will send" })

export const QuoteResponse = Schema.Struct({
  quoteId: Schema.String.annotate({ description: `Send it in the ${QUOTE_HEADER} header of the call` }),
  capability: Schema.String,
  provider: Schema.String.annotate({ description: "The provider the call will run on" }),
  model: Schema.optional(Schema.String),
  quotedUsdCents: Schema.Number.annotate({
    description: "The price: what the call holds, and the most it is charged (the actual cost when lower)"
  }),
  createdAt: Schema.String,
  expiresAt: Schema.String.annotate({ description: "ISO 8601; the quote can be used before this instant (60 s by default)" }),
  remainingTodayUsdCents: Schema.NullOr(Schema.Number).annotate({
    description: "As the estimate gives it: the daily cap less today's spend; null when there is no daily cap"
  }),
  remainingThisMonthUsdCents: Schema.NullOr(Schema.Number),
  remainingThisHourUsdCents: Schema.NullOr(Schema.Number)
}).annotate({ description: "A binding quote for one call by the calling agent" })

export class QuotesApi extends HttpApiGroup.make("quotes")
  .add(
    HttpApiEndpoint.post("create", "/v1/quotes", {
      payload: QuoteRequest,
      success: QuoteResponse.pipe(HttpApiSchema.status(201)),
      // A call the spend rules would refuse now is refused as the call would be (402, 403, 429), and nothing is stored.
      error: [BadRequest, PaymentRequired, Forbidden, NotFound, TooManyRequests, ServiceUnavailable]
    }).middleware(IdempotencyKeys)
  )
  .middleware(AccessControl)
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({
    title: "Quotes",
    description: "Binding quotes: a price and provider fixed for one capability call"
  }))
{}
