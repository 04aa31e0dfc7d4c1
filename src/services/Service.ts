import { Schema } from "effect"
import { Capability } from "../domain/Capability.ts"
import type { AccountId, AgentId } from "../domain/ids.ts"
import { sortableRandomId } from "../domain/ids.ts"

/**
 * Services reachable through the proxy: the upstreams the operator has
 * configured, and community services approved from the registry. Every
 * listed endpoint carries a price, so the proxy is never a way around a budget.
 */

export const HTTP_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const
export type HttpMethod = (typeof HTTP_METHODS)[number]

/** How one endpoint is priced: per call, per 1000 tokens by model (chat-style bodies), or per 1000 input tokens (OpenAI's embeddings). */
export type EndpointPrice =
  | { readonly kind: "perCall"; readonly priceMicroUsd: bigint }
  | {
    readonly kind: "embeddings"
    readonly models: ReadonlyArray<{
      readonly id: string
      readonly inputPer1kMicroUsd: bigint
      /** The length of the model's vectors; a call may ask for fewer (`dimensions`), never more. */
      readonly dimensions: number
    }>
  }
  | {
    readonly kind: "tokens"
    /** The wire format the body and usage follow. */
    readonly format: "openai-chat" | "anthropic-messages"
    /** OpenAI format: the field the completion cap is added in when the caller gives none; default `max_tokens`. */
    readonly tokenLimitField?: "max_tokens" | "max_completion_tokens" | undefined
    readonly models: ReadonlyArray<{
      readonly id: string
      readonly inputPer1kMicroUsd: bigint
      readonly outputPer1kMicroUsd: bigint
      /** Prompt tokens served from the upstream's cache; absent: the input price. */
      readonly cachedInputPer1kMicroUsd?: bigint | undefined
      /** Prompt tokens written to the upstream's cache; absent: the input price. */
      readonly cacheWritePer1kMicroUsd?: bigint | undefined
      readonly maxTokens: number
      readonly defaultMaxTokens: number
    }>
  }

export interface ServiceEndpoint {
  readonly path: string
  readonly method: HttpMethod
  readonly description: string
  readonly price: EndpointPrice | null
}

export interface Service {
  readonly slug: string
  readonly name: string
  readonly description: string
  readonly baseUrl: string
  readonly capabilities: ReadonlyArray<Capability>
  readonly endpoints: ReadonlyArray<ServiceEndpoint>
  /** "operator": configured with the operator's credentials; "registry": an approved community service. */
  readonly origin: "operator" | "registry"
  /** The service answers `402` with L402 challenges, which the proxy pays (docs/l402.md). */
  readonly l402?: boolean | undefined
}

export const Slug = Schema.String.check(
  Schema.isPattern(/^[a-z0-9][a-z0-9-]{1,39}$/, { message: "2-40 characters of a-z, 0-9 and -, starting with a letter or digit" })
)

export const EndpointPath = Schema.String.check(
  Schema.isMaxLength(200),
  Schema.isPattern(/^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/, { message: "Expected an absolute path such as /v1/search" }),
  Schema.makeFilter((path: string) => (path.split("/").some((s) => s === ".." || s === ".") ? "No . or .. segments" : undefined))
)

const Cents = Schema.Number.check(Schema.isGreaterThanOrEqualTo(0), Schema.isLessThanOrEqualTo(1_000_000))

/** A submission's price of one endpoint, in USD cents. */
export const SubmittedPrice = Schema.Union([
  Schema.Struct({ perCallUsdCents: Cents }),
  Schema.Struct({
    format: Schema.Literals(["openai-chat", "anthropic-messages"]),
    models: Schema.Record(
      Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(200)),
      Schema.Struct({
        inputPer1kTokens: Cents,
        outputPer1kTokens: Cents,
        maxTokens: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 1_000_000 }))
      })
    ).check(Schema.isMinProperties(1), Schema.isMaxProperties(50))
  })
])

export const SubmissionInput = Schema.Struct({
  slug: Slug,
  name: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(100)),
  description: Schema.String.check(Schema.isMaxLength(2000)),
  baseUrl: Schema.String.check(Schema.isMaxLength(2048)),
  capabilities: Schema.Array(Capability).check(Schema.isMaxLength(10)),
  endpoints: Schema.Array(Schema.Struct({
    path: EndpointPath,
    method: Schema.Literals(HTTP_METHODS),
    description: Schema.String.check(Schema.isMaxLength(500))
  })).check(Schema.isMinLength(1), Schema.isMaxLength(50)),
  pricing: Schema.Record(EndpointPath, SubmittedPrice).annotate({ description: "Keyed by endpoint path; USD cents" }),
  contact: Schema.String.check(Schema.isMinLength(3), Schema.isMaxLength(320)),
  l402: Schema.optional(Schema.Boolean).annotate({
    description: "The service sells over L402: its 402 challenges are paid by the proxy (docs/l402.md)"
  })
})
export type SubmissionInput = typeof SubmissionInput.Type

export type SubmissionStatus = "pending" | "approved" | "rejected"

export interface Submission extends SubmissionInput {
  readonly id: string
  readonly accountId: AccountId
  readonly agentId: AgentId
  readonly status: SubmissionStatus
  readonly createdAt: Date
  readonly reviewedAt: Date | null
  readonly reviewNote: string | null
}

export const newSubmissionId = () => `sub_${sortableRandomId()}`
