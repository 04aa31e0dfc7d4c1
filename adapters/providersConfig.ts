import { NodeHttpClient } from "@effect/platform-node"
import { Config, Effect, Layer, Option, Redacted } from "effect"
import type { HttpClient } from "effect/http"
import { Providers } from "../src/capabilities/Capabilities.ts"
import { ProviderStatuses } from "../src/capabilities/ProviderHealth.ts"
import type { AnyProvider, ModelInfo, UnitPrice } from "../src/capabilities/Provider.ts"
import type { Capability } from "../src/domain/Capability.ts"
import { OutboundHttp } from "../src/ports/Net.ts"
import type { ServiceTransport } from "../src/ports/ServiceTransport.ts"
import * as Transport from "./services/transport.ts"
import { InvalidConfig } from "./config.ts"
import * as SafeHttp from "./net/SafeHttp.ts"
import { loadPriceCards, type PriceEntry } from "./priceCards.ts"
import * as Resend from "./providers/email/resend.ts"
import * as Piston from "./providers/execute/piston.ts"
import * as Sandbox from "./providers/execute/sandbox.ts"
import * as Smtp from "./providers/email/smtp.ts"
import * as OpenAiImages from "./providers/imagine/openaiImages.ts"
import * as Anthropic from "./providers/reason/anthropic.ts"
import * as Twilio from "./providers/sms/twilio.ts"
import * as Espeak from "./providers/speak/espeak.ts"
import * as OpenAiSpeech from "./providers/speak/openaiSpeech.ts"
import * as OpenAiTranscribe from "./providers/transcribe/openaiTranscribe.ts"
import * as OpenAiCompatible from "./providers/reason/openaiCompatible.ts"
import * as BuiltinRead from "./providers/read/builtin.ts"
import * as Jina from "./providers/read/jina.ts"
import * as BuiltinScrape from "./providers/scrape/builtin.ts"
import * as Firecrawl from "./providers/scrape/firecrawl.ts"
import * as Brave from "./providers/search/brave.ts"
import * as SearXNG from "./providers/search/searxng.ts"
import * as Tavily from "./providers/search/tavily.ts"

/**
 * Which capability providers are on: each is enabled by its configuration
 * (an API key, or a base URL for self-hosted servers) and priced by its
 * price card. The built-in reader and scraper are on unless turned off.
 */

type Builder = Effect.Effect<AnyProvider, never, HttpClient.HttpClient | OutboundHttp>

type Probe = Effect.Effect<{ readonly ok: true } | { readonly ok: false; readonly reason: string }>

export interface ProvidersConfig {
  readonly builders: ReadonlyArray<{
    readonly name: string
    readonly capability: Capability
    readonly build: Builder
    /** Whether the provider can work at all here (checked once at start-up). */
    readonly probe?: Probe
  }>
  readonly allowHosts: ReadonlyArray<string>
  /** Upstreams reachable through the proxy with the operator's credentials. */
  readonly operatorServices: ReadonlyArray<Transport.OperatorService>
}

const fail = (message: string) => Effect.fail(new InvalidConfig({ message: `Invalid configuration: ${message}` }))

const env = (name: string): Effect.Effect<Option.Option<string>> =>
  Effect.map(
    Effect.orElseSucceed(Config.option(Config.String(name)), () => Option.none<string>()),
    (value) => Option.filter(value, (v: string) => v.trim() !== "")
  )

const modelsOf = (cards: ReadonlyMap<string, PriceEntry>, name: string) => {
  const card = cards.get(name)
  return card?.kind === "models"
    ? Effect.succeed<ReadonlyArray<ModelInfo>>(card.models)
    : fail(`no reason price card (models) for provider "${name}" in the price cards`)
}

const unitPriceOf = (cards: ReadonlyMap<string, PriceEntry>, name: string, capability: Capability) => {
  const card = cards.get(name)
  return card?.kind === "unit" && card.capability === capability
    ? Effect.succeed<UnitPrice>(card.unitPrice)
    : fail(`no ${capability} price card for provider "${name}" in the price cards`)
}

export const loadProvidersConfig: Effect.Effect<ProvidersConfig, InvalidConfig> = Effect.gen(function*() {
  const cards = yield* loadPriceCards(Option.getOrUndefined(yield* env("PRICES_FILE")))
  const builders: Array<ProvidersConfig["builders"][number]> = []
  const operatorServices: Array<Transport.OperatorService> = []
  const tokenService = (
    slug: string,
    name: string,
    baseUrl: string,
    path: string,
    format: "openai-chat" | "anthropic-messages",
    models: ReadonlyArray<ModelInfo>,
    credentials: Record<string, Redacted.Redacted<string>>
  ) =>
    operatorServices.push({
      service: {
        slug,
        name,
        description: `${name} ${format === "openai-chat" ? "chat completions" : "messages"} with the operator's credentials`,
        baseUrl,
        capabilities: ["reason"],
        origin: "operator",
        endpoints: [{ path, method: "POST", description: "Create a completion", price: { kind: "tokens", format, models } }]
      },
      credentials
    })
  const add = (name: string, capability: Capability, build: Builder, probe?: Probe) =>
    builders.push(probe === undefined ? { name, capability, build } : { name, capability, build, probe })

  const openAiCompatible = (name: string, keyVar: string, baseUrl: string) =>
    Effect.gen(function*() {
      const key = yield* env(keyVar)
      if (Option.isNone(key)) return
      const models = yield* modelsOf(cards, name)
      add(name, "reason", OpenAiCompatible.make({ name, baseUrl, apiKey: Redacted.make(key.value), models }))
      tokenService(name, name === "openai" ? "OpenAI" : name === "groq" ? "Groq" : "OpenRouter", baseUrl, "/chat/completions", "openai-chat", models, {
        authorization: Redacted.make(`Bearer ${key.value}`)
      })
    })
  yield* openAiCompatible("openai", "OPENAI_API_KEY", Option.getOrElse(yield* env("OPENAI_BASE_URL"), () => "https://api.openai.com/v1"))
  yield* openAiCompatible("openrouter", "OPENROUTER_API_KEY", "https://openrouter.ai/api/v1")
  yield* openAiCompatible("groq", "GROQ_API_KEY", "https://api.groq.com/openai/v1")

  const llmBaseUrl = yield* env("LLM_BASE_URL")
  if (Option.isSome(llmBaseUrl)) {
    if (!/^https?:\/\//.test(llmBaseUrl.value)) return yield* fail("LLM_BASE_URL must be an http(s) URL")
    const name = Option.getOrElse(yield* env("LLM_NAME"), () => "local")
    const models = yield* modelsOf(cards, name)
    const key = yield* env("LLM_API_KEY")
    add(name, "reason", OpenAiCompatible.make({
      name,
      baseUrl: llmBaseUrl.value,
      ...(Option.isSome(key) ? { apiKey: Redacted.make(key.value) } : {}),
      models
    }))
  }

  const anthropicKey = yield* env("ANTHROPIC_API_KEY")
  if (Option.isSome(anthropicKey)) {
    const models = yield* modelsOf(cards, "anthropic")
    const baseUrl = yield* env("ANTHROPIC_BASE_URL")
    add("anthropic", "reason", Anthropic.make({
      apiKey: Redacted.make(anthropicKey.value),
      models,
      ...(Option.isSome(baseUrl) ? { baseUrl: baseUrl.value } : {})
    }))
    tokenService("anthropic", "Anthropic", Option.getOrElse(baseUrl, () => "https://api.anthropic.com"), "/v1/messages", "anthropic-messages", models, {
      "x-api-key": Redacted.make(anthropicKey.value),
      "anthropic-version": Redacted.make("2023-06-01")
    })
  }

  const braveKey = yield* env("BRAVE_API_KEY")
  if (Option.isSome(braveKey)) {
    const unitPrice = yield* unitPriceOf(cards, "brave", "search")
    add("brave", "search", Brave.make({ apiKey: Redacted.make(braveKey.value), unitPrice }))
    operatorServices.push({
      service: {
        slug: "brave",
        name: "Brave Search",
        description: "Brave Search web results with the operator's credentials",
        baseUrl: "https://api.search.brave.com",
        capabilities: ["search"],
        origin: "operator",
        endpoints: [{
          path: "/res/v1/web/search",
          method: "GET",
          description: "Web search",
          price: { kind: "perCall", priceMicroUsd: unitPrice.priceMicroUsd }
        }]
      },
      credentials: { "x-subscription-token": Redacted.make(braveKey.value) }
    })
  }
  const tavilyKey = yield* env("TAVILY_API_KEY")
  if (Option.isSome(tavilyKey)) {
    const unitPrice = yield* unitPriceOf(cards, "tavily", "search")
    add("tavily", "search", Tavily.make({ apiKey: Redacted.make(tavilyKey.value), unitPrice }))
    operatorServices.push({
      service: {
        slug: "tavily",
        name: "Tavily",
        description: "Tavily search with the operator's credentials",
        baseUrl: "https://api.tavily.com",
        capabilities: ["search"],
        origin: "operator",
        endpoints: [{
          path: "/search",
          method: "POST",
          description: "Search",
          price: { kind: "perCall", priceMicroUsd: unitPrice.priceMicroUsd }
        }]
      },
      credentials: { authorization: Redacted.make(`Bearer ${tavilyKey.value}`) }
    })
  }
  const searxng = yield* env("SEARXNG_URL")
  if (Option.isSome(searxng)) {
    if (!/^https?:\/\//.test(searxng.value)) return yield* fail("SEARXNG_URL must be an http(s) URL")
    const unitPrice = yield* unitPriceOf(cards, "searxng", "search")
    add("searxng", "search", SearXNG.make({ baseUrl: searxng.value, unitPrice }))
  }

  if (Option.getOrElse(yield* env("BUILTIN_READ"), () => "on") !== "off") {
    const unitPrice = yield* unitPriceOf(cards, "readability", "read")
    add("readability", "read", BuiltinRead.make({ unitPrice }))
  }
  const jinaKey = yield* env("JINA_API_KEY")
  if (Option.isSome(jinaKey)) {
    const unitPrice = yield* unitPriceOf(cards, "jina", "read")
    add("jina", "read", Jina.make({ apiKey: Redacted.make(jinaKey.value), unitPrice }))
  }
  if (Option.getOrElse(yield* env("BUILTIN_SCRAPE"), () => "on") !== "off") {
    const unitPrice = yield* unitPriceOf(cards, "scraper", "scrape")
    add("scraper", "scrape", BuiltinScrape.make({ unitPrice }))
  }
  const firecrawlKey = yield* env("FIRECRAWL_API_KEY")
  if (Option.isSome(firecrawlKey)) {
    const unitPrice = yield* unitPriceOf(cards, "firecrawl", "scrape")
    add("firecrawl", "scrape", Firecrawl.make({ apiKey: Redacted.make(firecrawlKey.value), unitPrice }))
  }

  // ---- imagine, speak, transcribe ----------------------------------------
  const openAiKey = yield* env("OPENAI_API_KEY")
  const openAiBase = Option.getOrElse(yield* env("OPENAI_BASE_URL"), () => "https://api.openai.com/v1")
  if (Option.isSome(openAiKey)) {
    const images = cards.get("openai-images")
    if (images?.kind === "images") {
      add("openai-images", "imagine", OpenAiImages.make({
        baseUrl: openAiBase,
        apiKey: Redacted.make(openAiKey.value),
        model: images.model,
        prices: images.sizes
      }))
    }
    const speech = yield* unitPriceOf(cards, "openai-speech", "speak")
    add("openai-speech", "speak", OpenAiSpeech.make({ baseUrl: openAiBase, apiKey: Redacted.make(openAiKey.value), unitPrice: speech }))
    const transcribe = yield* unitPriceOf(cards, "openai-transcribe", "transcribe")
    add("openai-transcribe", "transcribe", OpenAiTranscribe.make({
      baseUrl: openAiBase,
      apiKey: Redacted.make(openAiKey.value),
      unitPrice: transcribe
    }))
  }
  const whisper = yield* env("WHISPER_BASE_URL")
  if (Option.isSome(whisper)) {
    if (!/^https?:\/\//.test(whisper.value)) return yield* fail("WHISPER_BASE_URL must be an http(s) URL")
    const key = yield* env("WHISPER_API_KEY")
    const unitPrice = yield* unitPriceOf(cards, "whisper", "transcribe")
    add("whisper", "transcribe", OpenAiTranscribe.make({
      name: "whisper",
      baseUrl: whisper.value,
      ...(Option.isSome(key) ? { apiKey: Redacted.make(key.value) } : {}),
      model: Option.getOrElse(yield* env("WHISPER_MODEL"), () => "whisper-1"),
      unitPrice
    }))
  }
  if (Option.getOrElse(yield* env("BUILTIN_SPEAK"), () => "on") !== "off") {
    const unitPrice = yield* unitPriceOf(cards, "espeak", "speak")
    add(
      "espeak",
      "speak",
      Espeak.make({ unitPrice }),
      Espeak.probe().pipe(
        Effect.as({ ok: true } as const),
        Effect.catch((failure) => Effect.succeed({ ok: false, reason: failure.message } as const))
      )
    )
  }

  // ---- execute -----------------------------------------------------------
  if (Option.getOrElse(yield* env("BUILTIN_EXECUTE"), () => "on") !== "off") {
    const unitPrice = yield* unitPriceOf(cards, "sandbox", "execute")
    const maxTimeout = Number(Option.getOrElse(yield* env("EXECUTE_MAX_TIMEOUT_MS"), () => "30000"))
    if (!Number.isInteger(maxTimeout) || maxTimeout < 100 || maxTimeout > 60_000) {
      return yield* fail("EXECUTE_MAX_TIMEOUT_MS must be a whole number of milliseconds from 100 to 60000")
    }
    const options = { unitPrice, maxTimeoutMs: maxTimeout }
    add(
      "sandbox",
      "execute",
      Sandbox.make(options),
      Sandbox.probe(options).pipe(
        Effect.map((status) =>
          status.ok
            ? { ok: true, ...(status.degraded === undefined ? {} : { degraded: status.degraded }) } as const
            : { ok: false, reason: status.reason } as const
        )
      )
    )
  }
  const piston = yield* env("PISTON_URL")
  if (Option.isSome(piston)) {
    if (!/^https?:\/\//.test(piston.value)) return yield* fail("PISTON_URL must be an http(s) URL")
    const unitPrice = yield* unitPriceOf(cards, "piston", "execute")
    add("piston", "execute", Piston.make({ baseUrl: piston.value, unitPrice }))
  }

  // ---- email, sms ------------------------------------------------------
  const smtpHost = yield* env("SMTP_HOST")
  if (Option.isSome(smtpHost)) {
    const from = yield* env("SMTP_FROM")
    if (Option.isNone(from)) return yield* fail("SMTP_FROM is required when SMTP_HOST is set")
    const port = Number(Option.getOrElse(yield* env("SMTP_PORT"), () => "587"))
    if (!Number.isInteger(port) || port < 1 || port > 65535) return yield* fail("SMTP_PORT must be a port number")
    const user = yield* env("SMTP_USER")
    const pass = yield* env("SMTP_PASSWORD")
    const unitPrice = yield* unitPriceOf(cards, "smtp", "email")
    add("smtp", "email", Smtp.make({
      host: smtpHost.value,
      port,
      secure: Option.getOrElse(yield* env("SMTP_SECURE"), () => "false") === "true",
      requireTls: Option.getOrElse(yield* env("SMTP_REQUIRE_TLS"), () => "true") === "true",
      ...(Option.isSome(user) ? { auth: { user: user.value, pass: Redacted.make(Option.getOrElse(pass, () => "")) } } : {}),
      from: from.value,
      unitPrice
    }))
  }
  const resendKey = yield* env("RESEND_API_KEY")
  if (Option.isSome(resendKey)) {
    const from = yield* env("RESEND_FROM")
    if (Option.isNone(from)) return yield* fail("RESEND_FROM is required when RESEND_API_KEY is set")
    const unitPrice = yield* unitPriceOf(cards, "resend", "email")
    add("resend", "email", Resend.make({ apiKey: Redacted.make(resendKey.value), from: from.value, unitPrice }))
  }
  const twilioSid = yield* env("TWILIO_ACCOUNT_SID")
  if (Option.isSome(twilioSid)) {
    const token = yield* env("TWILIO_AUTH_TOKEN")
    if (Option.isNone(token)) return yield* fail("TWILIO_AUTH_TOKEN is required when TWILIO_ACCOUNT_SID is set")
    const from = yield* env("TWILIO_FROM")
    const service = yield* env("TWILIO_MESSAGING_SERVICE_SID")
    if (Option.isSome(from) === Option.isSome(service)) {
      return yield* fail("set exactly one of TWILIO_FROM and TWILIO_MESSAGING_SERVICE_SID")
    }
    const unitPrice = yield* unitPriceOf(cards, "twilio", "sms")
    add("twilio", "sms", Twilio.make({
      accountSid: twilioSid.value,
      authToken: Redacted.make(token.value),
      ...(Option.isSome(from) ? { from: from.value } : {}),
      ...(Option.isSome(service) ? { messagingServiceSid: service.value } : {}),
      unitPrice
    }))
  }

  const allowHosts = Option.match(yield* env("URL_ALLOW_HOSTS"), {
    onNone: () => [] as Array<string>,
    onSome: (list) => list.split(",").map((h) => h.trim()).filter((h) => h !== "")
  })
  return { builders, allowHosts, operatorServices }
})

/** OutboundHttp (URL safety), the configured providers and the proxy's transport, over Node's HTTP client. */
export const providersLayer = (
  config: ProvidersConfig
): Layer.Layer<Providers | OutboundHttp | ServiceTransport | ProviderStatuses> => {
  const outbound = SafeHttp.layer({ allowHosts: config.allowHosts })
  const http = NodeHttpClient.layerUndici
  const providers = Layer.effect(
    Providers,
    Effect.map(Effect.forEach(config.builders, (b) => b.build), (all) => ({ all }))
  ).pipe(Layer.provide(Layer.mergeAll(http, outbound)))
  const transport = Transport.layer({ operatorServices: config.operatorServices, registry: { allowHosts: config.allowHosts } })
    .pipe(Layer.provide(http))
  const statuses = Layer.effect(
    ProviderStatuses,
    Effect.gen(function*() {
      const found = new Map<string, { readonly ok: true } | { readonly ok: false; readonly reason: string }>()
      for (const b of config.builders) {
        if (b.probe === undefined) continue
        const status = yield* b.probe
        found.set(b.name, status)
        if (!status.ok) yield* Effect.logWarning(`Provider ${b.name} (${b.capability}) is unavailable: ${status.reason}`)
      }
      return ProviderStatuses.of({ of: (name) => found.get(name) })
    })
  )
  return Layer.mergeAll(providers, outbound, transport, statuses)
}
