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

export const MAX_EXECUTE_TIMEOUT_MS = 60_000

export const ExecuteInput = Schema.Struct({
  provider: Schema.optional(ProviderName),
  code: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(100_000)),
  language: Schema.Literals(["python", "javascript", "bash"]),
  timeout: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: MAX_EXECUTE_TIMEOUT_MS }))).annotate({
    description: "Wall-time limit in milliseconds (the operator's maximum applies); the quote assumes all of it"
  })
})
export type ExecuteInput = typeof ExecuteInput.Type

export const ExecuteOutput = Schema.Struct({
  stdout: Schema.String,
  stderr: Schema.String,
  exitCode: Schema.NullOr(Schema.Number).annotate({ description: "null when the process was killed" }),
  timedOut: Schema.Boolean,
  durationMs: Schema.Number,
  truncated: Schema.Boolean.annotate({ description: "Output was cut at the output limit" })
})
export type ExecuteOutput = typeof ExecuteOutput.Type

export const ImageSize = Schema.Literals(["256x256", "512x512", "1024x1024", "1024x1792", "1792x1024"])

export const ImagineInput = Schema.Struct({
  provider: Schema.optional(ProviderName),
  prompt: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(4000)),
  model: Schema.optional(Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(200))),
  size: Schema.optional(ImageSize).annotate({ description: "Default 1024x1024" }),
  n: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 4 }))).annotate({ description: "Default 1" }),
  responseFormat: Schema.optional(Schema.Literals(["b64_json", "url"])).annotate({ description: "Default b64_json" })
})
export type ImagineInput = typeof ImagineInput.Type

export const ImagineOutput = Schema.Struct({
  images: Schema.Array(Schema.Struct({
    b64: Schema.optional(Schema.String),
    url: Schema.optional(Schema.String),
    mimeType: Schema.String,
    revisedPrompt: Schema.optional(Schema.String)
  })),
  size: Schema.String
})
export type ImagineOutput = typeof ImagineOutput.Type

export const SpeakInput = Schema.Struct({
  provider: Schema.optional(ProviderName),
  text: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(4096)),
  voice: Schema.optional(Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(64))),
  format: Schema.optional(Schema.Literals(["wav", "mp3", "opus", "flac"])).annotate({ description: "Default wav" })
})
export type SpeakInput = typeof SpeakInput.Type

export const SpeakOutput = Schema.Struct({
  audio: Schema.String.annotate({ description: "Base64" }),
  mimeType: Schema.String,
  durationMs: Schema.NullOr(Schema.Number),
  characters: Schema.Number
})
export type SpeakOutput = typeof SpeakOutput.Type

export const TranscribeInput = Schema.Struct({
  provider: Schema.optional(ProviderName),
  url: Schema.optional(PublicUrl).annotate({ description: "Audio to fetch (URL-safety rules apply); or give `audio`" }),
  audio: Schema.optional(Schema.String.check(Schema.isMaxLength(1_000_000))).annotate({ description: "Base64 audio" }),
  mimeType: Schema.optional(Schema.String.check(Schema.isMaxLength(100))),
  language: Schema.optional(Schema.String.check(Schema.isMinLength(2), Schema.isMaxLength(16)))
}).check(Schema.makeFilter((input) =>
  (input.url === undefined) === (input.audio === undefined) ? "Give exactly one of url or audio" : undefined
))
export type TranscribeInput = typeof TranscribeInput.Type

export const TranscribeOutput = Schema.Struct({
  text: Schema.String,
  language: Schema.NullOr(Schema.String),
  durationSeconds: Schema.NullOr(Schema.Number)
})
export type TranscribeOutput = typeof TranscribeOutput.Type

const EmailAddress = Schema.String.check(
  Schema.isMaxLength(320),
  Schema.isPattern(/^[^\s@<>()[\],;:"]+@[^\s@<>()[\],;:"]+\.[^\s@<>()[\],;:"]+$/, { message: "Expected an email address" })
)

export const EmailInput = Schema.Struct({
  provider: Schema.optional(ProviderName),
  to: Schema.Array(EmailAddress).check(Schema.isMinLength(1), Schema.isMaxLength(10)),
  subject: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(998)),
  text: Schema.optional(Schema.String.check(Schema.isMaxLength(200_000))),
  html: Schema.optional(Schema.String.check(Schema.isMaxLength(200_000))),
  replyTo: Schema.optional(EmailAddress)
}).check(Schema.makeFilter((input) =>
  input.text === undefined && input.html === undefined ? "Give text, html or both" : undefined
))
export type EmailInput = typeof EmailInput.Type

export const EmailOutput = Schema.Struct({
  messageId: Schema.String,
  accepted: Schema.Array(Schema.String),
  rejected: Schema.Array(Schema.String)
})
export type EmailOutput = typeof EmailOutput.Type

export const SmsInput = Schema.Struct({
  provider: Schema.optional(ProviderName),
  to: Schema.String.check(Schema.isPattern(/^\+[1-9]\d{1,14}$/, { message: "Expected an E.164 number such as +14155550100" })),
  body: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(1600))
})
export type SmsInput = typeof SmsInput.Type

export const SmsOutput = Schema.Struct({
  sid: Schema.String,
  segments: Schema.Number,
  encoding: Schema.Literals(["GSM-7", "UCS-2"]),
  status: Schema.String
})
export type SmsOutput = typeof SmsOutput.Type

/** Inputs and outputs per capability. */
export interface CapabilityIO {
  readonly reason: { readonly input: ReasonInput; readonly output: ReasonOutput }
  readonly search: { readonly input: SearchInput; readonly output: SearchOutput }
  readonly read: { readonly input: ReadInput; readonly output: ReadOutput }
  readonly scrape: { readonly input: ScrapeInput; readonly output: ScrapeOutput }
  readonly execute: { readonly input: ExecuteInput; readonly output: ExecuteOutput }
  readonly imagine: { readonly input: ImagineInput; readonly output: ImagineOutput }
  readonly speak: { readonly input: SpeakInput; readonly output: SpeakOutput }
  readonly transcribe: { readonly input: TranscribeInput; readonly output: TranscribeOutput }
  readonly email: { readonly input: EmailInput; readonly output: EmailOutput }
  readonly sms: { readonly input: SmsInput; readonly output: SmsOutput }
}
export type BuiltCapability = keyof CapabilityIO

export const inputSchemas = {
  reason: ReasonInput,
  search: SearchInput,
  read: ReadInput,
  scrape: ScrapeInput,
  execute: ExecuteInput,
  imagine: ImagineInput,
  speak: SpeakInput,
  transcribe: TranscribeInput,
  email: EmailInput,
  sms: SmsInput
} as const

export const outputSchemas = {
  reason: ReasonOutput,
  search: SearchOutput,
  read: ReadOutput,
  scrape: ScrapeOutput,
  execute: ExecuteOutput,
  imagine: ImagineOutput,
  speak: SpeakOutput,
  transcribe: TranscribeOutput,
  email: EmailOutput,
  sms: SmsOutput
} as const
