import { assert, describe, it } from "@effect/vitest"
import { rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Cause, ConfigProvider, Effect, Exit, Redacted } from "effect"
import { loadProvidersConfig } from "../../adapters/providersConfig.ts"

const load = (env: Record<string, string>) =>
  loadProvidersConfig.pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnvRecord(env))))

/** Everything an operator can configure, with keys long enough to be secrets. */
const EVERYTHING: Record<string, string> = {
  OPENAI_API_KEY: "sk-openai-0123456789",
  OPENROUTER_API_KEY: "sk-or-0123456789",
  GROQ_API_KEY: "gsk-0123456789",
  LLM_BASE_URL: "http://127.0.0.1:11434/v1",
  ANTHROPIC_API_KEY: "sk-ant-0123456789",
  BRAVE_API_KEY: "brave-0123456789",
  TAVILY_API_KEY: "tvly-0123456789",
  SEARXNG_URL: "http://127.0.0.1:8888",
  JINA_API_KEY: "jina-0123456789",
  FIRECRAWL_API_KEY: "fc-0123456789",
  WHISPER_BASE_URL: "http://127.0.0.1:9000/v1",
  PISTON_URL: "http://127.0.0.1:2000",
  SMTP_HOST: "127.0.0.1",
  SMTP_FROM: "noreply@example.test",
  RESEND_API_KEY: "re_0123456789",
  RESEND_FROM: "noreply@example.test",
  TWILIO_ACCOUNT_SID: `AC${"0".repeat(32)}`,
  TWILIO_AUTH_TOKEN: "twilio-0123456789",
  TWILIO_FROM: "+15550100"
}

describe("providers from the configuration", () => {
  it.effect("every provider, in the order they are tried, and the proxy's operator services", () =>
    Effect.gen(function*() {
      const config = yield* load(EVERYTHING)
      assert.deepStrictEqual(config.builders.map((b) => `${b.capability}:${b.name}`), [
        "reason:openai",
        "reason:openrouter",
        "reason:groq",
        "reason:local",
        "reason:anthropic",
        "search:brave",
        "search:tavily",
        "search:searxng",
        "read:readability",
        "read:jina",
        "scrape:scraper",
        "scrape:firecrawl",
        "imagine:openai-images",
        "speak:openai-speech",
        "transcribe:openai-transcribe",
        "transcribe:whisper",
        "speak:espeak",
        "execute:sandbox",
        "execute:piston",
        "email:smtp",
        "email:resend",
        "sms:twilio"
      ])
      assert.deepStrictEqual(config.builders.filter((b) => b.probe !== undefined).map((b) => b.name), ["espeak", "sandbox"])
      const services = config.operatorServices.map(({ service, credentials }) => ({
        slug: service.slug,
        name: service.name,
        description: service.description,
        baseUrl: service.baseUrl,
        capabilities: service.capabilities,
        endpoints: service.endpoints.map((e) => ({ path: e.path, method: e.method, description: e.description, price: e.price?.kind })),
        credentials: Object.fromEntries(Object.entries(credentials).map(([k, v]) => [k, Redacted.value(v)]))
      }))
      assert.deepStrictEqual(services, [
        {
          slug: "openai",
          name: "OpenAI",
          description: "OpenAI chat completions with the operator's credentials",
          baseUrl: "https://api.openai.com/v1",
          capabilities: ["reason"],
          endpoints: [{ path: "/chat/completions", method: "POST", description: "Create a completion", price: "tokens" }],
          credentials: { authorization: "Bearer sk-openai-0123456789" }
        },
        {
          slug: "openrouter",
          name: "OpenRouter",
          description: "OpenRouter chat completions with the operator's credentials",
          baseUrl: "https://openrouter.ai/api/v1",
          capabilities: ["reason"],
          endpoints: [{ path: "/chat/completions", method: "POST", description: "Create a completion", price: "tokens" }],
          credentials: { authorization: "Bearer sk-or-0123456789" }
        },
        {
          slug: "groq",
          name: "Groq",
          description: "Groq chat completions with the operator's credentials",
          baseUrl: "https://api.groq.com/openai/v1",
          capabilities: ["reason"],
          endpoints: [{ path: "/chat/completions", method: "POST", description: "Create a completion", price: "tokens" }],
          credentials: { authorization: "Bearer gsk-0123456789" }
        },
        {
          // The self-hosted server (LLM_BASE_URL, no LLM_API_KEY): offered like the hosted ones, with no credentials.
          slug: "local",
          name: "Self-hosted model server (local)",
          description: "Self-hosted model server (local) chat completions with the operator's credentials",
          baseUrl: "http://127.0.0.1:11434/v1",
          capabilities: ["reason"],
          endpoints: [{ path: "/chat/completions", method: "POST", description: "Create a completion", price: "tokens" }],
          credentials: {}
        },
        {
          slug: "anthropic",
          name: "Anthropic",
          description: "Anthropic messages with the operator's credentials",
          baseUrl: "https://api.anthropic.com",
          capabilities: ["reason"],
          endpoints: [{ path: "/v1/messages", method: "POST", description: "Create a completion", price: "tokens" }],
          credentials: { "x-api-key": "sk-ant-0123456789", "anthropic-version": "2023-06-01" }
        },
        {
          slug: "openai-embeddings",
          name: "OpenAI embeddings",
          description: "OpenAI embeddings with the operator's credentials, per 1000 input tokens",
          baseUrl: "https://api.openai.com/v1",
          capabilities: ["reason"],
          endpoints: [{ path: "/embeddings", method: "POST", description: "Create embeddings", price: "embeddings" }],
          credentials: { authorization: "Bearer sk-openai-0123456789" }
        },
        {
          slug: "brave",
          name: "Brave Search",
          description: "Brave Search web results with the operator's credentials",
          baseUrl: "https://api.search.brave.com",
          capabilities: ["search"],
          endpoints: [{ path: "/res/v1/web/search", method: "GET", description: "Web search", price: "perCall" }],
          credentials: { "x-subscription-token": "brave-0123456789" }
        },
        {
          slug: "tavily",
          name: "Tavily",
          description: "Tavily search with the operator's credentials",
          baseUrl: "https://api.tavily.com",
          capabilities: ["search"],
          endpoints: [{ path: "/search", method: "POST", description: "Search", price: "perCall" }],
          credentials: { authorization: "Bearer tvly-0123456789" }
        }
      ])
    }))

  it.effect("nothing configured: the built-in providers only", () =>
    Effect.gen(function*() {
      const config = yield* load({})
      assert.deepStrictEqual(config.builders.map((b) => b.name), ["readability", "scraper", "espeak", "sandbox"])
      assert.deepStrictEqual(config.operatorServices, [])
      const off = yield* load({ BUILTIN_READ: "off", BUILTIN_SCRAPE: "off", BUILTIN_SPEAK: "off", BUILTIN_EXECUTE: "off" })
      assert.deepStrictEqual(off.builders, [])
    }))

  it.effect("a missing companion variable or a bad URL is a configuration error naming it", () =>
    Effect.gen(function*() {
      for (
        const [env, says] of [
          [{ SMTP_HOST: "127.0.0.1" }, "SMTP_FROM is required"],
          [{ RESEND_API_KEY: "re_0123456789" }, "RESEND_FROM is required"],
          [{ TWILIO_ACCOUNT_SID: "AC1" }, "TWILIO_AUTH_TOKEN is required"],
          [{ SEARXNG_URL: "ftp://x" }, "SEARXNG_URL must be an http(s) URL"],
          [{ PISTON_URL: "x" }, "PISTON_URL must be an http(s) URL"],
          [{ EXECUTE_MAX_TIMEOUT_MS: "5" }, "EXECUTE_MAX_TIMEOUT_MS"]
        ] as const
      ) {
        const exit = yield* Effect.exit(load(env))
        assert.isTrue(Exit.isFailure(exit), JSON.stringify(env))
        if (Exit.isFailure(exit)) assert.include(String(exit.cause), says)
      }
    }))

  it.effect("a price card per another unit than the provider charges by stops start-up with a configuration error naming it", () => {
    const file = join(tmpdir(), `prices-per-${process.pid}-${Date.now()}.json`)
    return Effect.gen(function*() {
      writeFileSync(file, JSON.stringify({ readability: { capability: "read", per: "query", priceUsdCents: 0.1 } }))
      const exit = yield* Effect.exit(load({ PRICES_FILE: file }))
      assert.isTrue(Exit.isFailure(exit), "a read card per query is refused")
      if (Exit.isFailure(exit)) {
        const error = Cause.squash(exit.cause) as { readonly _tag?: string; readonly message?: string }
        assert.strictEqual(error._tag, "InvalidConfig")
        assert.include(error.message ?? "", "readability")
        assert.include(error.message ?? "", "per page")
      }
      writeFileSync(file, JSON.stringify({ twilio: { capability: "sms", per: "message", priceUsdCents: 1 } }))
      const sms = yield* Effect.exit(load({ PRICES_FILE: file, TWILIO_ACCOUNT_SID: `AC${"0".repeat(32)}`, TWILIO_AUTH_TOKEN: "t", TWILIO_FROM: "+15550100" }))
      assert.isTrue(Exit.isFailure(sms) && String(sms.cause).includes("per segment"), "an sms card per message is refused")
    }).pipe(Effect.ensuring(Effect.sync(() => rmSync(file, { force: true }))))
  })
})
