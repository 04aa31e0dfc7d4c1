import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { ProxyCall } from "../../src/services/Services.ts"
import { SubmissionInput } from "../../src/services/Service.ts"
import { Metadata } from "./CapabilitiesApi.ts"
import { BadGateway, BadRequest, Conflict, Forbidden, NotFound, PaymentRequired, ServiceUnavailable, TooManyRequests } from "./errors.ts"
import { AccessControl, Authentication, IdempotencyKeys } from "./middleware.ts"

/** The service catalogue, the proxy and the registry of community services. */

export const ServiceSummary = Schema.Struct({
  slug: Schema.String,
  name: Schema.String,
  description: Schema.String,
  baseUrl: Schema.String,
  capabilities: Schema.Array(Schema.String)
})

export const ServiceDetail = Schema.Struct({
  ...ServiceSummary.fields,
  pricing: Schema.Record(Schema.String, Schema.Unknown).annotate({
    description: "Keyed by endpoint path; then by model ({ inputPer1kTokens, outputPer1kTokens }) or a per-call price; USD cents"
  }),
  endpoints: Schema.Array(Schema.Struct({ path: Schema.String, method: Schema.String, description: Schema.String }))
})

export const SubmissionResponse = Schema.Struct({
  id: Schema.String,
  status: Schema.Literals(["pending", "approved", "rejected"]),
  slug: Schema.String,
  name: Schema.String,
  description: Schema.String,
  baseUrl: Schema.String,
  capabilities: Schema.Array(Schema.String),
  endpoints: Schema.Array(Schema.Struct({ path: Schema.String, method: Schema.String, description: Schema.String })),
  pricing: Schema.Record(Schema.String, Schema.Unknown),
  contact: Schema.String,
  createdAt: Schema.String,
  reviewedAt: Schema.NullOr(Schema.String),
  reviewNote: Schema.NullOr(Schema.String),
  l402: Schema.optional(Schema.Boolean).annotate({ description: "Present (true) when the service sells over L402" })
})

const Slug = Schema.String.check(Schema.isMaxLength(64))
const Paging = {
  limit: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100 }))),
  offset: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 1_000_000_000 })))
}

export class ServicesApi extends HttpApiGroup.make("services")
  .add(
    HttpApiEndpoint.get("list", "/v1/services", { success: Schema.Array(ServiceSummary), error: BadRequest }),
    HttpApiEndpoint.get("get", "/v1/services/:slug", {
      params: { slug: Slug },
      success: ServiceDetail,
      error: [BadRequest, NotFound]
    }),
    HttpApiEndpoint.post("proxy", "/v1/proxy/:slug", {
      params: { slug: Slug },
      payload: ProxyCall,
      success: Schema.Struct({
        status: Schema.Number,
        headers: Schema.Record(Schema.String, Schema.String),
        body: Schema.Unknown,
        metadata: Metadata
      }),
      error: [BadRequest, PaymentRequired, Forbidden, NotFound, TooManyRequests, BadGateway, ServiceUnavailable]
    }).middleware(IdempotencyKeys),
    HttpApiEndpoint.post("submit", "/v1/registry/submit", {
      payload: SubmissionInput,
      success: SubmissionResponse.pipe(HttpApiSchema.status(201)),
      error: [BadRequest, Forbidden, Conflict]
    }).middleware(IdempotencyKeys),
    HttpApiEndpoint.get("submissions", "/v1/registry/submissions", {
      query: Paging,
      success: Schema.Struct({
        submissions: Schema.Array(SubmissionResponse),
        total: Schema.Number,
        limit: Schema.Number,
        offset: Schema.Number
      }),
      error: [BadRequest, Forbidden]
    })
  )
  .middleware(AccessControl)
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Services", description: "Catalogue, proxy and registry" }))
{}
