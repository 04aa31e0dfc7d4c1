import { Schema } from "effect"

/**
 * Request and response shapes of each capability, published in the OpenAPI
 * document. The spec gives `reason` and `search`; `read` and `scrape` follow
 * the most common shape among the real providers (decisions §7).
 * Every string and list is bounded.
 */

const ProviderName = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(64)).annotate({
  description: "Pin a provider; omitted: the service picks the best available"
})

/** An absolute http(s) URL; whether it may be fetched is decided by the URL-safety rules. */
export const PublicUrl = Schema.String.check(
  Schema.isMinLength(1),
  Schema.isMaxLength(2048),
  Schema.makeFilter((text: string) => {
    try {
      const url = new URL(text)
      return url.protocol === "http:" || url.protocol === "https:" ? undefined : "Only http and https URLs can be fetched"
    } catch {
      return "Expected an absolute URL"
    }
  })
)

export const MAX_PROMPT_CHARS = 200_000
export const MAX_COMPLETION_TOKENS = 200_000

export const ReasonInput = Schema.Struct({
  provider: Schema.optional(ProviderName),
  prompt: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(MAX_PROMPT_CHARS)),
  model: Schema.optional(Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(200))),
  systemPrompt: Schema.optional(Schema.String.check(Schema.isMaxLength(MAX_PROMPT_CHARS))),
  maxTokens: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: MAX_COMPLETION_TOKENS }))),
  temperature: Schema.optional(Schema.Number.check(Schema.isBetween({ minimum: 0, maximum: 2 })))
})
export type ReasonInput = typeof ReasonInput.Type

export const ReasonOutput = Schema.Struct({
  content: Schema.String,
  finishReason: Schema.String,
  usage: Schema.Struct({ promptTokens: Schema.Number, completionTokens: Schema.Number, totalTokens: Schema.Number })
})
export type ReasonOutput = typeof ReasonOutput.Type

export const SearchInput = Schema.Struct({
  provider: Schema.optional(ProviderName),
  query: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(2000)),
  numResults: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 50 }))).annotate({
    description: "Default 10, at most 50"
  })
})
export type SearchInput = typeof SearchInput.Type

export const SearchResult = Schema.Struct({
  title: Schema.String,
  url: Schema.String,
  snippet: Schema.String,
  position: Schema.Number
})

export const SearchOutput = Schema.Struct({
  results: Schema.Array(SearchResult),
  query: Schema.String,
  totalResults: Schema.Number
})
export type SearchOutput = typeof SearchOutput.Type

export const ReadInput = Schema.Struct({
  provider: Schema.optional(ProviderName),
  url: PublicUrl
})
export type ReadInput = typeof ReadInput.Type

export const ReadOutput = Schema.Struct({
  url: Schema.String.annotate({ description: "The final URL, after redirects" }),
  title: Schema.NullOr(Schema.String),
  byline: Schema.NullOr(Schema.String),
  siteName: Schema.NullOr(Schema.String),
  excerpt: Schema.NullOr(Schema.String),
  text: Schema.String,
  markdown: Schema.String,
  length: Schema.Number.annotate({ description: "Characters of text" })
})
export type ReadOutput = typeof ReadOutput.Type

export const ScrapeInput = Schema.Struct({
  provider: Schema.optional(ProviderName),
  url: PublicUrl,
  selectors: Schema.optional(
    Schema.Record(
      Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(64)),
      Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(512))
    ).check(Schema.isMaxProperties(20))
  ).annotate({ description: "Named CSS selectors; each returns the text of every match" }),
  includeHtml: Schema.optional(Schema.Boolean).annotate({ description: "Default true" })
})
export type ScrapeInput = typeof ScrapeInput.Type

export const ScrapeOutput = Schema.Struct({
  url: Schema.String,
  status: Schema.Number,
  contentType: Schema.String,
  html: Schema.optional(Schema.String),
  extracted: Schema.optional(Schema.Record(Schema.String, Schema.Array(Schema.String))),
  links: Schema.Array(Schema.Struct({ href: Schema.String, text: Schema.String })),
  truncated: Schema.Boolean
})
export type ScrapeOutput = typeof ScrapeOutput.Type

/** Inputs and outputs per capability built so far; the others come with their providers. */
export interface CapabilityIO {
  readonly reason: { readonly input: ReasonInput; readonly output: ReasonOutput }
  readonly search: { readonly input: SearchInput; readonly output: SearchOutput }
  readonly read: { readonly input: ReadInput; readonly output: ReadOutput }
  readonly scrape: { readonly input: ScrapeInput; readonly output: ScrapeOutput }
}
export type BuiltCapability = keyof CapabilityIO

export const inputSchemas = {
  reason: ReasonInput,
  search: SearchInput,
  read: ReadInput,
  scrape: ScrapeInput
} as const

export const outputSchemas = {
  reason: ReasonOutput,
  search: SearchOutput,
  read: ReadOutput,
  scrape: ScrapeOutput
} as const
