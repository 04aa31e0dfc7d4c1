import { Schema } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { MAX_KEY_GRACE_SECONDS } from "../../src/agents/Agents.ts"
import { AgentName, Role } from "../../src/domain/Agent.ts"
import { Capability } from "../../src/domain/Capability.ts"
import { Cents } from "../../src/domain/Money.ts"
import { AccessControl, Authentication, CurrentPrincipal, IdempotencyKeys, SignupAdmission } from "./middleware.ts"
import { AgentResponse } from "./resources.ts"
import { AdminApi } from "./AdminApi.ts"
import { CapabilitiesApi } from "./CapabilitiesApi.ts"
import { ServicesApi } from "./ServicesApi.ts"
import { QuotesApi } from "./QuotesApi.ts"
import { OpenAiApi } from "./openai/OpenAiApi.ts"
import { AnthropicApi } from "./anthropic/AnthropicApi.ts"
import { FundingApi } from "./FundingApi.ts"
import { WalletApi } from "./WalletApi.ts"
import { WebhooksApi } from "./WebhooksApi.ts"
import { L402Api } from "./L402Api.ts"
import { BadRequest, Conflict, Forbidden, NotFound, ServiceUnavailable, TooManyRequests, Unauthorized } from "./errors.ts"

/**
 * The HTTP contract of /v1: schemas only, no behaviour. Handlers live in
 * handlers.ts; every rule they apply lives in src/.
 */

// ---- shared pieces ---------------------------------------------------------

const Timestamp = Schema.String.annotate({ description: "ISO 8601 timestamp (UTC)" })

/** Path ids are free text up to 64 characters; an id that does not exist is 404, whatever its shape. */
const PathId = Schema.String.check(Schema.isMaxLength(64))

export const ListQuery = {
  limit: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100 }))),
  offset: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 1_000_000_000 })))
}

// ---- authentication ----------------------------------------------------------

export { Authentication, CurrentPrincipal, IdempotencyKeys }
export { AgentResponse }



// ---- resources -------------------------------------------------------------


export const CreatedAgentResponse = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  role: Role,
  apiKey: Schema.String.annotate({ description: "Shown once; store it now" }),
  killed: Schema.Boolean,
  createdAt: Timestamp
})

export const PolicyResponse = Schema.Struct({
  maxPerCallUsdCents: Schema.Number.annotate({ description: "USD cents; 0 means no limit" }),
  maxPerDayUsdCents: Schema.Number.annotate({ description: "USD cents; 0 means no limit; resets at midnight UTC" }),
  maxPerMonthUsdCents: Schema.Number.annotate({
    description: "USD cents per calendar month (UTC); 0 means no limit; resets at midnight UTC on the 1st"
  }),
  maxPerHourUsdCents: Schema.Number.annotate({ description: "USD cents over the last 60 minutes (rolling); 0 means no limit" }),
  maxCallsPerMinute: Schema.Number.annotate({ description: "Calls started in the last 60 seconds (rolling); 0 means no limit" }),
  autoKill: Schema.Boolean.annotate({ description: "A call past a velocity limit kills the agent (reason velocity); never an owner" }),
  allowedCapabilities: Schema.Array(Capability).annotate({ description: "Empty means all capabilities" }),
  dailySpentUsdCents: Schema.Number,
  monthlySpentUsdCents: Schema.Number.annotate({ description: "Held and settled spend of the current calendar month (UTC)" })
})

export const MeResponse = Schema.Struct({
  ...AgentResponse.fields,
  policy: PolicyResponse,
  spentTodayUsdCents: Schema.Number.annotate({ description: "Held and settled spend of the current UTC day, USD cents" }),
  remainingTodayUsdCents: Schema.NullOr(Schema.Number).annotate({
    description: "The daily cap less today's spend (never below 0), USD cents; null when there is no daily cap"
  }),
  spentThisMonthUsdCents: Schema.Number.annotate({
    description: "Held and settled spend of the current calendar month (UTC), USD cents"
  }),
  remainingThisMonthUsdCents: Schema.NullOr(Schema.Number).annotate({
    description: "The monthly cap less this month's spend (never below 0), USD cents; null when there is no monthly cap"
  }),
  spentLastHourUsdCents: Schema.Number.annotate({
    description: "Held quotes and settled charges of the last 60 minutes (rolling), USD cents"
  }),
  remainingThisHourUsdCents: Schema.NullOr(Schema.Number).annotate({
    description: "maxPerHourUsdCents less the last 60 minutes' spend (never below 0); null when there is no hourly limit"
  }),
  callsLastMinute: Schema.Number.annotate({ description: "Calls started in the last 60 seconds" }),
  callsLeftThisMinute: Schema.NullOr(Schema.Number).annotate({
    description: "maxCallsPerMinute less the calls of the last 60 seconds (never below 0); null when there is no such limit"
  }),
  allowedCapabilities: Schema.Array(Capability).annotate({
    description: "The capabilities this agent may call now (the policy's list, or all when it is empty)"
  })
}).annotate({ description: "The calling agent, its policy and what it may still spend today" })

const CapList = Schema.Array(Capability).check(Schema.isMaxLength(10))

const PerCallCap = Schema.NullOr(Cents).annotate({ description: "USD cents per call; 0 or null means no limit" })
const PerDayCap = Schema.NullOr(Cents).annotate({
  description: "USD cents per UTC day; 0 or null means no limit"
})
const PerMonthCap = Schema.NullOr(Cents).annotate({
  description: "USD cents per calendar month (UTC); 0 or null means no limit"
})
const PerHourCap = Schema.NullOr(Cents).annotate({
  description: "USD cents over the last 60 minutes (rolling); 0 or null means no limit"
})
const CallsPerMinute = Schema.NullOr(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 1_000_000 }))).annotate({
  description: "Calls started in the last 60 seconds (rolling); 0 or null means no limit"
})
const AutoKill = Schema.Boolean.annotate({
  description: "Kill the agent (reason velocity) when a call goes past a velocity limit; never applied to an owner"
})
const AllowedCapabilities = Schema.NullOr(CapList).annotate({ description: "[] or null means all capabilities" })

/**
 * PUT: the whole policy. The original three fields are required, so that
 * leaving one out cannot silently lift a cap; `null` (or 0 for a cap, [] for
 * the list) says "no limit" / "all" explicitly. A missing one is 400
 * VALIDATION_ERROR naming it in `details.issues`. Fields added later
 * (`maxPerMonthUsdCents`, `maxPerHourUsdCents`, `maxCallsPerMinute`,
 * `autoKill`) are optional and, when left out, keep their
 * current value: a client written before they existed never lifts them.
 */
export const PolicyReplace = Schema.Struct({
  maxPerCallUsdCents: PerCallCap,
  maxPerDayUsdCents: PerDayCap,
  maxPerMonthUsdCents: Schema.optional(PerMonthCap),
  maxPerHourUsdCents: Schema.optional(PerHourCap),
  maxCallsPerMinute: Schema.optional(CallsPerMinute),
  autoKill: Schema.optional(AutoKill),
  allowedCapabilities: AllowedCapabilities
}).annotate({
  description:
    "The whole policy: maxPerCallUsdCents, maxPerDayUsdCents and allowedCapabilities are required (null means no limit / all); maxPerMonthUsdCents, maxPerHourUsdCents, maxCallsPerMinute and autoKill are optional and kept when left out"
})

/** PATCH: only the fields given change. */
export const PolicyPatch = Schema.Struct({
  maxPerCallUsdCents: Schema.optional(PerCallCap),
  maxPerDayUsdCents: Schema.optional(PerDayCap),
  maxPerMonthUsdCents: Schema.optional(PerMonthCap),
  maxPerHourUsdCents: Schema.optional(PerHourCap),
  maxCallsPerMinute: Schema.optional(CallsPerMinute),
  autoKill: Schema.optional(AutoKill),
  allowedCapabilities: Schema.optional(AllowedCapabilities)
}).annotate({ description: "Only the fields given change" })

export const RotateKeyRequest = Schema.Struct({
  graceSeconds: Schema.optional(
    Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: MAX_KEY_GRACE_SECONDS })).annotate({
      description: `How long the current key keeps working, 0 to ${MAX_KEY_GRACE_SECONDS} seconds (7 days); default 0: revoked at once`
    })
  )
})

export const RotatedKeyResponse = Schema.Struct({
  id: Schema.String,
  apiKey: Schema.String.annotate({ description: "The new key. Shown once; store it now" }),
  previousKeyExpiresAt: Schema.NullOr(Timestamp).annotate({
    description: "When the previous key stops working; null when it stopped at once"
  })
})

export const HealthResponse = Schema.Struct({
  status: Schema.Literals(["ok", "degraded"]),
  version: Schema.String,
  storage: Schema.Literals(["ok", "down"]),
  uptimeSeconds: Schema.Number
})

export class HealthDegraded extends Schema.Error<HealthDegraded>("HealthDegraded")(
  HealthResponse,
  { httpApiStatus: 503 }
) {}

// ---- groups ----------------------------------------------------------------

const accessErrors = [BadRequest, Forbidden, NotFound] as const

export class PublicApi extends HttpApiGroup.make("public")
  .add(
    HttpApiEndpoint.get("health", "/health", {
      success: HealthResponse,
      error: HealthDegraded
    }),
    HttpApiEndpoint.post("signup", "/v1/signup", {
      payload: Schema.Struct({ name: AgentName }),
      success: Schema.Struct({
        apiKey: Schema.String,
        agentId: Schema.String,
        accountId: Schema.String
      }).pipe(HttpApiSchema.status(201)),
      // 401 without the signup token, 403 when signup is closed, 429 over the per-address limit (SIGNUP).
      error: [BadRequest, Unauthorized, Forbidden, TooManyRequests, ServiceUnavailable]
    }).middleware(IdempotencyKeys).middleware(SignupAdmission)
  )
  .middleware(AccessControl)
  .annotateMerge(OpenApi.annotations({ title: "Public", description: "Signup and health; no key needed" }))
{}

export class AgentsApi extends HttpApiGroup.make("agents")
  .add(
    HttpApiEndpoint.get("list", "/", {
      query: ListQuery,
      success: Schema.Struct({
        agents: Schema.Array(AgentResponse),
        total: Schema.Number,
        limit: Schema.Number,
        offset: Schema.Number
      }),
      error: accessErrors
    }),
    HttpApiEndpoint.post("create", "/", {
      payload: Schema.Struct({ name: AgentName, role: Schema.optional(Role) }),
      success: CreatedAgentResponse.pipe(HttpApiSchema.status(201)),
      error: accessErrors
    }).middleware(IdempotencyKeys),
    // Declared before "/:id": "me" is the caller, never an agent id.
    HttpApiEndpoint.get("me", "/me", {
      success: MeResponse,
      error: accessErrors
    }),
    HttpApiEndpoint.get("get", "/:id", {
      params: { id: PathId },
      success: AgentResponse,
      error: accessErrors
    }),
    HttpApiEndpoint.patch("update", "/:id", {
      params: { id: PathId },
      payload: Schema.Struct({ name: Schema.optional(AgentName), killed: Schema.optional(Schema.Boolean) }),
      success: AgentResponse,
      error: [...accessErrors, Conflict]
    }),
    HttpApiEndpoint.delete("delete", "/:id", {
      params: { id: PathId },
      success: AgentResponse,
      error: [...accessErrors, Conflict]
    }),
    HttpApiEndpoint.post("rotateKey", "/:id/rotate-key", {
      params: { id: PathId },
      payload: RotateKeyRequest,
      success: RotatedKeyResponse,
      error: accessErrors
    }).middleware(IdempotencyKeys),
    HttpApiEndpoint.get("getPolicy", "/:id/policy", {
      params: { id: PathId },
      success: PolicyResponse,
      error: accessErrors
    }),
    HttpApiEndpoint.put("replacePolicy", "/:id/policy", {
      params: { id: PathId },
      payload: PolicyReplace,
      success: PolicyResponse,
      error: accessErrors
    }).annotate(HttpApi.PayloadParseOptions, { onExcessProperty: "error", errors: "all" }),
    HttpApiEndpoint.patch("patchPolicy", "/:id/policy", {
      params: { id: PathId },
      payload: PolicyPatch,
      success: PolicyResponse,
      error: accessErrors
    })
  )
  .middleware(AccessControl)
  .middleware(Authentication)
  .prefix("/v1/agents")
  .annotateMerge(OpenApi.annotations({ title: "Agents", description: "Agents, kill switch and policies" }))
{}

export class Api extends HttpApi.make("spendgate")
  .add(PublicApi)
  .add(AgentsApi)
  .add(WalletApi)
  .add(FundingApi)
  .add(AdminApi)
  .add(CapabilitiesApi)
  .add(QuotesApi)
  .add(ServicesApi)
  .add(OpenAiApi)
  .add(AnthropicApi)
  .add(WebhooksApi)
  .add(L402Api)
  .annotate(HttpApi.ParseOptions, { onExcessProperty: "error" })
  .annotate(HttpApi.HeadersParseOptions, {})
  .annotateMerge(OpenApi.annotations({
    title: "Spendgate",
    version: "0.1.0",
    description: "Agent spending gateway. Errors are `{ error: { code, message, details? } }`."
  }))
{}
