import { upstreamLayers } from "../support/upstreamLayers.ts"
import type { UpstreamClient } from "../../adapters/net/upstreamClient.ts"
import { assert, describe, it } from "@effect/vitest"
import Anthropic from "@anthropic-ai/sdk"
import OpenAI from "openai"
import { Duration, Effect, Redacted, Result, type Scope } from "effect"
import * as AnthropicProvider from "../../adapters/providers/reason/anthropic.ts"
import * as OpenAiCompatible from "../../adapters/providers/reason/openaiCompatible.ts"
import type { ModelInfo, Provider, Quote } from "../../src/capabilities/Provider.ts"
import { ProviderFailure } from "../../src/capabilities/Provider.ts"
import { promptTokenBound, quoteReason } from "../../src/capabilities/pricing.ts"
import type { ReasonInput } from "../../src/capabilities/schemas.ts"
import { ModelNotPriced, ValidationError } from "../../src/domain/errors.ts"
import {
  anthropicError,
  closedPort,
  type Fake,
  openAiError,
  type Recorded,
  startFake
} from "./fakeLlm.ts"

/**
 * The `reason` providers against a local fake (test/providers/fakeLlm.ts) that
 * speaks OpenAI's Chat Completions and Anthropic's Messages wire formats. The
 * official SDKs are pointed at the same fake, so its payloads are the ones
 * the real client libraries send and parse.
 */

// ---------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------

const OPENAI_KEY = "sk-proj-test0123456789abcdefghijklmnop"
const ANTHROPIC_KEY = "sk-ant-api03-test0123456789abcdefghij"

/** 0.15 cents / 1k input, 0.6 cents / 1k output. */
const gptMini: ModelInfo = {
  id: "gpt-4o-mini",
  inputPer1kMicroUsd: 1_500n,
  outputPer1kMicroUsd: 6_000n,
  maxTokens: 16_384,
  defaultMaxTokens: 1_024
}
const gptLarge: ModelInfo = {
  id: "gpt-4o",
  inputPer1kMicroUsd: 25_000n,
  outputPer1kMicroUsd: 100_000n,
  maxTokens: 16_384,
  defaultMaxTokens: 2_048
}
const haiku: ModelInfo = {
  id: "claude-haiku-4-5",
  inputPer1kMicroUsd: 10_000n,
  outputPer1kMicroUsd: 50_000n,
  maxTokens: 64_000,
  defaultMaxTokens: 1_024
}

/** About 1300 bytes: a prompt for which 1234 prompt tokens are plausible. */
const LONG_PROMPT = `What is the answer? Context: ${"the quick brown fox jumps over the lazy dog ".repeat(30)}`

type Client = UpstreamClient

/** A test's effects get the real undici client; waits are bounded whatever the adapter does. */
const live = <A, E>(effect: Effect.Effect<A, E, Client | Scope.Scope>) =>
  effect.pipe(Effect.provide(upstreamLayers))

const bounded = <A, E, R>(effect: Effect.Effect<A, E, R>, ms = 10_000) =>
  Effect.timeoutOrElse(effect, {
    duration: Duration.millis(ms),
    orElse: () => Effect.die(new Error(`test: no outcome within ${ms} ms`))
  })

const quoteOf = (provider: Provider<"reason">, input: ReasonInput): Quote => {
  const quoted = provider.quote(input)
  if (Result.isFailure(quoted)) throw new Error(`quote refused: ${quoted.failure.message}`)
  return quoted.success
}

/** Runs a call that must fail: a success or a defect fails the test. */
const failureOf = (provider: Provider<"reason">, input: ReasonInput, quote = quoteOf(provider, input)) =>
  bounded(Effect.flip(provider.run(input, quote))).pipe(
    Effect.tap((error) => Effect.sync(() => assert.instanceOf(error, ProviderFailure)))
  )

const runOk = (provider: Provider<"reason">, input: ReasonInput, quote = quoteOf(provider, input)) =>
  bounded(provider.run(input, quote))

const openai = (fake: Fake, overrides: Partial<OpenAiCompatible.Options> = {}) =>
  OpenAiCompatible.make({
    name: "openai",
    baseUrl: `${fake.origin}/v1`,
    apiKey: Redacted.make(OPENAI_KEY),
    models: [gptMini, gptLarge],
    timeoutMs: 5_000,
    ...overrides
  })

const anthropic = (fake: Fake, overrides: Partial<AnthropicProvider.Options> = {}) =>
  AnthropicProvider.make({
    baseUrl: fake.origin,
    apiKey: Redacted.make(ANTHROPIC_KEY),
    models: [haiku],
    timeoutMs: 5_000,
    ...overrides
  })

const only = (fake: Fake): Recorded => {
  assert.strictEqual(fake.requests.length, 1, "exactly one request reaches the upstream")
  return fake.requests[0]!
}

const body = (request: Recorded): Record<string, unknown> => {
  assert.isObject(request.json, "the request body is a JSON object")
  return request.json as Record<string, unknown>
}

const realSleep = (ms: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, ms)))

/** Polls a condition on real time; fails the test after `timeoutMs`. */
const eventually = (what: string, check: () => boolean, timeoutMs = 5_000) =>
  Effect.gen(function*() {
    const deadline = Date.now() + timeoutMs
    while (!check()) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* realSleep(10)
    }
  })

// ---------------------------------------------------------------------------
// OpenAI-compatible
// ---------------------------------------------------------------------------

describe("openaiCompatible: request and answer", () => {
  it.live("sends the documented request and maps the answer; metering is exact", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({
        apiKey: OPENAI_KEY,
        behaviour: { _tag: "reply", reply: { content: "Forty-two.", promptTokens: 1234, completionTokens: 567 } }
      })
      const provider = yield* openai(fake)
      // Long enough that 1234 prompt tokens are within the quote's bound (one per byte).
      const input: ReasonInput = {
        prompt: LONG_PROMPT,
        systemPrompt: "Be terse.",
        maxTokens: 800,
        temperature: 0.2
      }
      const quote = quoteOf(provider, input)
      assert.strictEqual(quote.model, "gpt-4o-mini", "the first model is the default")
      assert.strictEqual(quote.maxTokens, 800)

      const metered = yield* runOk(provider, input, quote)

      const request = only(fake)
      assert.strictEqual(request.method, "POST")
      assert.strictEqual(request.path, "/v1/chat/completions")
      assert.strictEqual(request.headers.authorization, `Bearer ${OPENAI_KEY}`)
      assert.match(String(request.headers["content-type"]), /^application\/json/)
      assert.deepStrictEqual(body(request), {
        model: "gpt-4o-mini",
        messages: [
          { role: "system", content: "Be terse." },
          { role: "user", content: LONG_PROMPT }
        ],
        max_tokens: 800,
        temperature: 0.2,
        stream: false
      })

      assert.deepStrictEqual(metered.output, {
        content: "Forty-two.",
        finishReason: "stop",
        usage: { promptTokens: 1234, completionTokens: 567, totalTokens: 1801 }
      })
      // ceil(1234 * 1500 / 1000) + ceil(567 * 6000 / 1000) = 1851 + 3402
      assert.strictEqual(metered.actualMicroUsd, 5_253n)
      assert.strictEqual(metered.model, "gpt-4o-mini-2024-07-18", "the model the upstream names")
      assert.isTrue(metered.actualMicroUsd <= quote.microUsd)
    })))

  it.live("without a system prompt, temperature or maxTokens: one user message, no temperature, the model's default cap", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: OPENAI_KEY })
      const provider = yield* openai(fake)
      const input: ReasonInput = { prompt: "Hello", model: "gpt-4o", systemPrompt: "" }
      const quote = quoteOf(provider, input)
      yield* runOk(provider, input, quote)
      const sent = body(only(fake))
      assert.deepStrictEqual(sent.messages, [{ role: "user", content: "Hello" }])
      assert.isFalse("temperature" in sent, "temperature only when given")
      assert.strictEqual(sent.model, "gpt-4o")
      assert.strictEqual(sent.max_tokens, gptLarge.defaultMaxTokens)
      assert.strictEqual(sent.max_tokens, quote.maxTokens, "always the quote's cap")
    })))

  it.live("temperature 0 is sent (given, though falsy)", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: OPENAI_KEY })
      const provider = yield* openai(fake)
      yield* runOk(provider, { prompt: "Hello", temperature: 0 })
      assert.strictEqual(body(only(fake)).temperature, 0)
    })))

  it.live("a self-hosted server without a key gets no Authorization header; its name is the provider's", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake()
      const provider = yield* OpenAiCompatible.make({
        name: "local",
        baseUrl: `${fake.origin}/v1/`,
        models: [{ id: "llama-3.1-8b-instruct", inputPer1kMicroUsd: 0n, outputPer1kMicroUsd: 0n, maxTokens: 4_096, defaultMaxTokens: 512 }]
      })
      assert.strictEqual(provider.name, "local")
      assert.strictEqual(provider.capability, "reason")
      const metered = yield* runOk(provider, { prompt: "Hello" })
      const request = only(fake)
      assert.strictEqual(request.path, "/v1/chat/completions", "a trailing slash on the base URL is not doubled")
      assert.isUndefined(request.headers.authorization)
      assert.strictEqual(metered.actualMicroUsd, 0n)
    })))

  it.live("extra headers are sent but cannot replace the key or the content type", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: OPENAI_KEY })
      const provider = yield* openai(fake, {
        name: "openrouter",
        extraHeaders: {
          "HTTP-Referer": "https://spendgate.example",
          "X-Title": "Spendgate",
          Authorization: "Bearer someone-else",
          "Content-Type": "text/plain"
        }
      })
      yield* runOk(provider, { prompt: "Hello" })
      const request = only(fake)
      assert.strictEqual(request.headers["http-referer"], "https://spendgate.example")
      assert.strictEqual(request.headers["x-title"], "Spendgate")
      assert.strictEqual(request.headers.authorization, `Bearer ${OPENAI_KEY}`)
      assert.match(String(request.headers["content-type"]), /^application\/json/)
    })))

  it.live("tokenLimitField max_completion_tokens carries the quote's cap in that field", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: OPENAI_KEY })
      const provider = yield* openai(fake, { tokenLimitField: "max_completion_tokens" })
      const quote = quoteOf(provider, { prompt: "Hello", maxTokens: 300 })
      yield* runOk(provider, { prompt: "Hello", maxTokens: 300 }, quote)
      const sent = body(only(fake))
      assert.strictEqual(sent.max_completion_tokens, 300)
      assert.isFalse("max_tokens" in sent)
    })))

  it.live("a call that uses the whole max_tokens costs at most the quote", () =>
    live(Effect.gen(function*() {
      const input: ReasonInput = { prompt: "Write a long essay about tides.", systemPrompt: "You are a poet.", maxTokens: 2_000 }
      const fake = yield* startFake({
        apiKey: OPENAI_KEY,
        // The worst the quote allows for: every prompt byte a token, every completion token used.
        behaviour: {
          _tag: "reply",
          reply: { finish: "length", promptTokens: promptTokenBound(input), completionTokens: 2_000 }
        }
      })
      const provider = yield* openai(fake)
      const quote = quoteOf(provider, input)
      const metered = yield* runOk(provider, input, quote)
      assert.strictEqual(metered.output.finishReason, "length")
      assert.strictEqual(metered.actualMicroUsd, quote.microUsd)

      // A realistic count (far fewer prompt tokens than bytes) costs less.
      fake.behaviour = { _tag: "reply", reply: { finish: "length", promptTokens: 14, completionTokens: 2_000 } }
      const realistic = yield* runOk(provider, input, quote)
      assert.isTrue(realistic.actualMicroUsd < quote.microUsd)
      assert.strictEqual(realistic.actualMicroUsd, 21n + 12_000n)
    })))

  it.live("null content is the empty string; an answer without model names the requested one", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({
        apiKey: OPENAI_KEY,
        behaviour: { _tag: "reply", reply: { content: null, model: null, finish: "content_filter" } }
      })
      const provider = yield* openai(fake)
      const metered = yield* runOk(provider, { prompt: "Hello" })
      assert.strictEqual(metered.output.content, "")
      assert.strictEqual(metered.output.finishReason, "content_filter")
      assert.strictEqual(metered.model, "gpt-4o-mini")
    })))

  it.live("an upstream that reports no usage is charged the quote, and usage shows the bounds charged", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ behaviour: { _tag: "reply", reply: { noUsage: true } } })
      const provider = yield* openai(fake, { apiKey: undefined })
      const input: ReasonInput = { prompt: "Hello there", maxTokens: 100 }
      const quote = quoteOf(provider, input)
      const metered = yield* runOk(provider, input, quote)
      assert.strictEqual(metered.actualMicroUsd, quote.microUsd)
      const bound = promptTokenBound(input)
      assert.deepStrictEqual(metered.output.usage, { promptTokens: bound, completionTokens: 100, totalTokens: bound + 100 })
    })))

  it.live("a usage without total_tokens is summed", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({
        behaviour: { _tag: "reply", reply: { usage: { prompt_tokens: 10, completion_tokens: 5 } } }
      })
      const provider = yield* openai(fake, { apiKey: undefined })
      const metered = yield* runOk(provider, { prompt: "Hello" })
      assert.deepStrictEqual(metered.output.usage, { promptTokens: 10, completionTokens: 5, totalTokens: 15 })
    })))
})

describe("openaiCompatible: quote", () => {
  it.live("is quoteReason over the configured models", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake()
      const provider = yield* openai(fake)
      const input: ReasonInput = { prompt: "Hello", model: "gpt-4o", maxTokens: 100 }
      assert.deepStrictEqual(provider.quote(input), quoteReason([gptMini, gptLarge], input))
      assert.deepStrictEqual(provider.models, [gptMini, gptLarge])
      const unknown = provider.quote({ prompt: "Hello", model: "gpt-5" })
      assert.isTrue(Result.isFailure(unknown) && unknown.failure instanceof ModelNotPriced)
      if (Result.isFailure(unknown)) {
        assert.strictEqual(unknown.failure.code, "MODEL_NOT_PRICED")
        assert.include(unknown.failure.message, "\"gpt-5\"")
        assert.include(unknown.failure.message, "PRICES_FILE")
        assert.include(unknown.failure.message, `"${provider.name}": { "capability": "reason"`)
      }
      const tooMany = provider.quote({ prompt: "Hello", maxTokens: 20_000 })
      assert.isTrue(Result.isFailure(tooMany) && tooMany.failure instanceof ValidationError)
      assert.strictEqual(fake.requests.length, 0, "quoting sends nothing")
    })))

  it.live("a quote for a model this provider does not offer is refused without a request", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: OPENAI_KEY })
      const provider = yield* openai(fake)
      const error = yield* failureOf(provider, { prompt: "Hello" }, { microUsd: 1_000n, model: "claude-haiku-4-5", maxTokens: 10 })
      assert.strictEqual(error.reason, "rejected")
      const noCap = yield* failureOf(provider, { prompt: "Hello" }, { microUsd: 1_000n, model: "gpt-4o-mini" })
      assert.strictEqual(noCap.reason, "rejected")
      assert.strictEqual(fake.requests.length, 0)
    })))
})

describe("openaiCompatible: failures", () => {
  it.live("429 is rate_limited, with the upstream's message and Retry-After", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({
        behaviour: {
          _tag: "json",
          status: 429,
          headers: { "retry-after": "20" },
          body: openAiError(
            "Rate limit reached for gpt-4o-mini in organization org-abc on requests per min (RPM): Limit 3, Used 3, Requested 1.",
            "requests",
            "rate_limit_exceeded"
          )
        }
      })
      const provider = yield* openai(fake)
      const error = yield* failureOf(provider, { prompt: "Hello" })
      assert.strictEqual(error.reason, "rate_limited")
      assert.strictEqual(error.provider, "openai")
      assert.include(error.message, "Rate limit reached for gpt-4o-mini")
      assert.include(error.message, "retry after 20 s")
      assert.include(error.message, "req_4c3b0e1f9a8d7c6b5a4f3e2d1c0b9a8f")
      assert.strictEqual(error.code, "PROVIDER_ERROR")
    })))

  it.live("500, 502 (an HTML page) and 503 are unavailable", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({
        behaviour: {
          _tag: "json",
          status: 500,
          body: openAiError("The server had an error while processing your request. Sorry about that!", "server_error", null)
        }
      })
      const provider = yield* openai(fake)
      const e500 = yield* failureOf(provider, { prompt: "Hello" })
      assert.strictEqual(e500.reason, "unavailable")
      assert.include(e500.message, "HTTP 500")
      assert.include(e500.message, "The server had an error")

      fake.behaviour = { _tag: "raw", status: 502, contentType: "text/html", body: "<html><body><h1>502 Bad Gateway</h1></body></html>" }
      const e502 = yield* failureOf(provider, { prompt: "Hello" })
      assert.strictEqual(e502.reason, "unavailable")
      assert.notInclude(e502.message, "<html>")

      fake.behaviour = { _tag: "json", status: 503, body: openAiError("The engine is currently overloaded, please try again later", "server_error", null) }
      const e503 = yield* failureOf(provider, { prompt: "Hello" })
      assert.strictEqual(e503.reason, "unavailable")
    })))

  it.live("401 is rejected with the upstream's message; the API key never appears in a failure", () =>
    live(Effect.gen(function*() {
      // The fake expects another key: the real API's 401 answer.
      const fake = yield* startFake({ apiKey: "sk-proj-the-right-one-0123456789" })
      const provider = yield* openai(fake)
      const error = yield* failureOf(provider, { prompt: "Hello" })
      assert.strictEqual(error.reason, "rejected")
      assert.include(error.message, "HTTP 401")
      assert.include(error.message, "invalid_api_key: Incorrect API key provided")

      // A careless server that echoes the whole key back.
      fake.behaviour = {
        _tag: "json",
        status: 403,
        body: openAiError(`key ${OPENAI_KEY} is not allowed to use this model`, "invalid_request_error", null)
      }
      const echoed = yield* failureOf(provider, { prompt: "Hello" })
      assert.strictEqual(echoed.reason, "rejected")
      assert.notInclude(echoed.message, OPENAI_KEY)
      assert.include(echoed.message, "[redacted]")
    })))

  it.live("400 and 404 are rejected; the upstream's message is cut to 300 characters", () =>
    live(Effect.gen(function*() {
      const long = "This model's maximum context length is 128000 tokens. " + "x".repeat(1_000)
      const fake = yield* startFake({
        behaviour: { _tag: "json", status: 400, body: openAiError(long, "invalid_request_error", "context_length_exceeded", "messages") }
      })
      const provider = yield* openai(fake)
      const error = yield* failureOf(provider, { prompt: "Hello" })
      assert.strictEqual(error.reason, "rejected")
      assert.include(error.message, "This model's maximum context length")
      assert.notInclude(error.message, "x".repeat(301))
      assert.isBelow(error.message.length, 500)

      fake.behaviour = {
        _tag: "json",
        status: 404,
        body: openAiError("The model `gpt-4o-mini` does not exist or you do not have access to it.", "invalid_request_error", "model_not_found")
      }
      const e404 = yield* failureOf(provider, { prompt: "Hello" })
      assert.strictEqual(e404.reason, "rejected")
      assert.include(e404.message, "model_not_found")
    })))

  it.live("a body that is not JSON, or JSON that is not a chat completion, is malformed", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ behaviour: { _tag: "raw", status: 200, contentType: "application/json", body: "{\"id\": \"chatcmpl-1\", \"choi" } })
      const provider = yield* openai(fake)
      const truncated = yield* failureOf(provider, { prompt: "Hello" })
      assert.strictEqual(truncated.reason, "malformed")

      const cases: ReadonlyArray<unknown> = [
        [],
        { id: "chatcmpl-1", object: "chat.completion" },
        { choices: [] },
        { choices: [{ index: 0, finish_reason: "stop" }] },
        { choices: [{ index: 0, message: { role: "assistant", content: 42 }, finish_reason: "stop" }] },
        { choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }], usage: { prompt_tokens: "12" } },
        { choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }], usage: { prompt_tokens: -1, completion_tokens: 2 } }
      ]
      for (const answer of cases) {
        fake.behaviour = { _tag: "json", status: 200, body: answer }
        const error = yield* failureOf(provider, { prompt: "Hello" })
        assert.strictEqual(error.reason, "malformed", JSON.stringify(answer))
      }
    })))

  it.live("an upstream that never answers times out, and the connection is dropped", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ behaviour: { _tag: "hang" } })
      const provider = yield* openai(fake, { timeoutMs: 300 })
      const started = Date.now()
      const error = yield* failureOf(provider, { prompt: "Hello" })
      const elapsed = Date.now() - started
      assert.strictEqual(error.reason, "timeout")
      assert.include(error.message, "300 ms")
      assert.isAtLeast(elapsed, 250)
      assert.isBelow(elapsed, 3_000)
      yield* eventually("the connection to close", () => fake.connections.closed === fake.connections.opened)
    })))

  it.live("an endless body is too_large: reading stops at the cap and the connection is dropped", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ behaviour: { _tag: "endless" } })
      const provider = yield* openai(fake, { maxResponseBytes: 64 * 1024 })
      const error = yield* failureOf(provider, { prompt: "Hello" })
      assert.strictEqual(error.reason, "too_large")
      assert.include(error.message, String(64 * 1024))
      yield* eventually("the endless answer to be cut off", () => fake.endless.closed)
      const sentAtClose = fake.endless.sent
      // Kernel and client buffers hold a few MiB at most; nothing close to an unbounded read.
      assert.isBelow(sentAtClose, 32 * 1024 * 1024)
      yield* realSleep(100)
      assert.strictEqual(fake.endless.sent, sentAtClose, "nothing more is sent once the connection is gone")
    })))

  it.live("a declared content-length over the cap is too_large before the body is read", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ behaviour: { _tag: "declared", bytes: 10 * 1024 * 1024 } })
      const provider = yield* openai(fake, { maxResponseBytes: 1024 * 1024, timeoutMs: 5_000 })
      const started = Date.now()
      const error = yield* failureOf(provider, { prompt: "Hello" })
      assert.strictEqual(error.reason, "too_large")
      assert.isBelow(Date.now() - started, 2_000, "not waiting for a body that does not come")
    })))

  it.live("connection refused is a network failure", () =>
    live(Effect.gen(function*() {
      const port = yield* closedPort
      const provider = yield* OpenAiCompatible.make({
        name: "local",
        baseUrl: `http://127.0.0.1:${port}/v1`,
        models: [gptMini],
        timeoutMs: 5_000
      })
      const error = yield* failureOf(provider, { prompt: "Hello" })
      assert.strictEqual(error.reason, "network")
      assert.strictEqual(error.provider, "local")
      assert.include(error.message, "ECONNREFUSED")
    })))

  it.live("bad configuration is refused when the provider is built", () =>
    live(Effect.gen(function*() {
      const bad: ReadonlyArray<Partial<OpenAiCompatible.Options>> = [
        { baseUrl: "ftp://example.com/v1" },
        { baseUrl: "not a url" },
        { models: [] },
        { timeoutMs: 0 },
        { maxResponseBytes: -1 }
      ]
      for (const overrides of bad) {
        const exit = yield* Effect.exit(OpenAiCompatible.make({ name: "openai", baseUrl: "https://api.openai.com/v1", models: [gptMini], ...overrides }))
        assert.isTrue(exit._tag === "Failure", JSON.stringify(overrides))
      }
    })))
})

// ---------------------------------------------------------------------------
// Anthropic
// ---------------------------------------------------------------------------

describe("anthropic: request and answer", () => {
  it.live("sends the documented request and maps the answer; metering is exact", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({
        apiKey: ANTHROPIC_KEY,
        behaviour: {
          _tag: "reply",
          reply: {
            blocks: [
              { type: "thinking", thinking: "The user greets me.", signature: "EqQBCgIYAhIM" },
              { type: "text", text: "Hello! ", citations: null },
              { type: "text", text: "How can I help?", citations: null }
            ],
            promptTokens: 1234,
            completionTokens: 567
          }
        }
      })
      const provider = yield* anthropic(fake)
      assert.strictEqual(provider.name, "anthropic")
      const input: ReasonInput = { prompt: LONG_PROMPT, systemPrompt: "You are terse.", maxTokens: 700, temperature: 0.7 }
      const quote = quoteOf(provider, input)
      const metered = yield* runOk(provider, input, quote)

      const request = only(fake)
      assert.strictEqual(request.method, "POST")
      assert.strictEqual(request.path, "/v1/messages")
      assert.strictEqual(request.headers["x-api-key"], ANTHROPIC_KEY)
      assert.strictEqual(request.headers["anthropic-version"], "2023-06-01")
      assert.isUndefined(request.headers.authorization)
      assert.match(String(request.headers["content-type"]), /^application\/json/)
      assert.deepStrictEqual(body(request), {
        model: "claude-haiku-4-5",
        max_tokens: 700,
        system: "You are terse.",
        messages: [{ role: "user", content: LONG_PROMPT }],
        temperature: 0.7
      })

      assert.deepStrictEqual(metered.output, {
        content: "Hello! How can I help?",
        finishReason: "end_turn",
        usage: { promptTokens: 1234, completionTokens: 567, totalTokens: 1801 }
      })
      // ceil(1234 * 10000 / 1000) + ceil(567 * 50000 / 1000)
      assert.strictEqual(metered.actualMicroUsd, 12_340n + 28_350n)
      assert.strictEqual(metered.model, "claude-haiku-4-5")
      assert.isTrue(metered.actualMicroUsd <= quote.microUsd)
    })))

  it.live("metering rounds up per token kind (0.15 / 0.6 cents per 1k)", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: ANTHROPIC_KEY, behaviour: { _tag: "reply", reply: { promptTokens: 1234, completionTokens: 567 } } })
      const cheap: ModelInfo = { ...haiku, inputPer1kMicroUsd: 1_500n, outputPer1kMicroUsd: 6_000n }
      const provider = yield* anthropic(fake, { models: [cheap] })
      const metered = yield* runOk(provider, { prompt: "Hello" })
      assert.strictEqual(metered.actualMicroUsd, 5_253n)
    })))

  it.live("without a system prompt or temperature neither is sent; a configured version and name are used", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: ANTHROPIC_KEY })
      const provider = yield* anthropic(fake, { name: "claude", version: "2026-10-21" })
      const quote = quoteOf(provider, { prompt: "Hi" })
      yield* runOk(provider, { prompt: "Hi" }, quote)
      const request = only(fake)
      const sent = body(request)
      assert.isFalse("system" in sent)
      assert.isFalse("temperature" in sent)
      assert.strictEqual(sent.max_tokens, haiku.defaultMaxTokens)
      assert.strictEqual(sent.max_tokens, quote.maxTokens)
      assert.strictEqual(request.headers["anthropic-version"], "2026-10-21")
      assert.strictEqual(provider.name, "claude")
    })))

  it.live("temperature above 1 is refused when quoting; 1 is accepted; run never sends it", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: ANTHROPIC_KEY })
      const provider = yield* anthropic(fake)
      const refused = provider.quote({ prompt: "Hi", temperature: 1.5 })
      assert.isTrue(Result.isFailure(refused))
      if (Result.isFailure(refused)) {
        assert.instanceOf(refused.failure, ValidationError)
        assert.strictEqual(refused.failure.code, "VALIDATION_ERROR")
        assert.deepStrictEqual((refused.failure as ValidationError).issues.map((i) => i.path), ["temperature"])
      }
      assert.isTrue(Result.isSuccess(provider.quote({ prompt: "Hi", temperature: 1 })))

      const quote = quoteOf(provider, { prompt: "Hi" })
      const error = yield* failureOf(provider, { prompt: "Hi", temperature: 1.5 }, quote)
      assert.strictEqual(error.reason, "rejected")
      assert.strictEqual(fake.requests.length, 0)

      yield* runOk(provider, { prompt: "Hi", temperature: 1 })
      assert.strictEqual(body(only(fake)).temperature, 1)
    })))

  it.live("with API version 2026-10-21, which has no temperature, a temperature is refused when quoting", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: ANTHROPIC_KEY })
      const provider = yield* anthropic(fake, { version: "2026-10-21" })
      for (const temperature of [0, 0.5, 1]) {
        const refused = provider.quote({ prompt: "Hi", temperature })
        assert.isTrue(Result.isFailure(refused) && refused.failure instanceof ValidationError, `temperature ${temperature}`)
      }
      const quote = quoteOf(provider, { prompt: "Hi" })
      const error = yield* failureOf(provider, { prompt: "Hi", temperature: 1 }, quote)
      assert.strictEqual(error.reason, "rejected")
      assert.strictEqual(fake.requests.length, 0)

      // What the API answers when one is sent anyway: the adapter avoids exactly this.
      const older = yield* anthropic(fake)
      const sentAnyway = yield* Effect.promise(() =>
        fetch(`${fake.origin}/v1/messages`, {
          method: "POST",
          headers: { "x-api-key": ANTHROPIC_KEY, "anthropic-version": "2026-10-21", "content-type": "application/json" },
          body: JSON.stringify({ model: "claude-haiku-4-5", max_tokens: 10, messages: [{ role: "user", content: "Hi" }], temperature: 1 }),
          signal: AbortSignal.timeout(5_000)
        }).then(async (response) => ({ status: response.status, body: await response.json() as unknown }))
      )
      assert.strictEqual(sentAnyway.status, 400)
      assert.deepInclude(sentAnyway.body as object, { type: "error" })
      // The default version still takes it.
      yield* runOk(older, { prompt: "Hi", temperature: 1 })
      assert.strictEqual(body(fake.requests.at(-1)!).temperature, 1)
    })))

  it.live("cache tokens count as prompt tokens", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({
        apiKey: ANTHROPIC_KEY,
        behaviour: { _tag: "reply", reply: { promptTokens: 10, cacheCreation: 100, cacheRead: 1000, completionTokens: 5 } }
      })
      const provider = yield* anthropic(fake)
      const metered = yield* runOk(provider, { prompt: "Hi" })
      assert.deepStrictEqual(metered.output.usage, { promptTokens: 1110, completionTokens: 5, totalTokens: 1115 })
    })))

  it.live("a call stopped by max_tokens costs at most the quote", () =>
    live(Effect.gen(function*() {
      const input: ReasonInput = { prompt: "Tell me everything.", systemPrompt: "Be thorough.", maxTokens: 4_000 }
      const fake = yield* startFake({
        apiKey: ANTHROPIC_KEY,
        behaviour: { _tag: "reply", reply: { finish: "max_tokens", promptTokens: promptTokenBound(input), completionTokens: 4_000 } }
      })
      const provider = yield* anthropic(fake)
      const quote = quoteOf(provider, input)
      const metered = yield* runOk(provider, input, quote)
      assert.strictEqual(metered.output.finishReason, "max_tokens", "Anthropic's own stop_reason")
      assert.isTrue(metered.actualMicroUsd <= quote.microUsd)
      assert.strictEqual(metered.actualMicroUsd, quote.microUsd)
    })))

  it.live("no usage: the quote is charged", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: ANTHROPIC_KEY, behaviour: { _tag: "reply", reply: { noUsage: true } } })
      const provider = yield* anthropic(fake)
      const quote = quoteOf(provider, { prompt: "Hi" })
      const metered = yield* runOk(provider, { prompt: "Hi" }, quote)
      assert.strictEqual(metered.actualMicroUsd, quote.microUsd)
    })))
})

describe("anthropic: failures", () => {
  const cases: ReadonlyArray<{ status: number; type: string; message: string; reason: ProviderFailure["reason"] }> = [
    { status: 529, type: "overloaded_error", message: "Overloaded", reason: "unavailable" },
    { status: 500, type: "api_error", message: "Internal server error", reason: "unavailable" },
    { status: 429, type: "rate_limit_error", message: "Number of request tokens has exceeded your per-minute rate limit", reason: "rate_limited" },
    { status: 400, type: "invalid_request_error", message: "prompt is too long: 210000 tokens > 200000 maximum", reason: "rejected" },
    { status: 403, type: "permission_error", message: "Your API key does not have permission to use the specified resource.", reason: "rejected" },
    { status: 404, type: "not_found_error", message: "model: claude-haiku-4-5", reason: "rejected" },
    { status: 413, type: "request_too_large", message: "Request exceeds the maximum allowed number of bytes.", reason: "rejected" }
  ]
  it.live("the documented error statuses map to their reasons, with the upstream's type and message", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: ANTHROPIC_KEY })
      const provider = yield* anthropic(fake)
      for (const c of cases) {
        fake.behaviour = { _tag: "json", status: c.status, body: anthropicError(c.type, c.message) }
        const error = yield* failureOf(provider, { prompt: "Hi" })
        assert.strictEqual(error.reason, c.reason, `HTTP ${c.status}`)
        assert.strictEqual(error.provider, "anthropic")
        assert.include(error.message, `HTTP ${c.status}`)
        assert.include(error.message, `${c.type}: ${c.message}`)
        assert.include(error.message, "req_011CSHoEeqs5C35K2UUqR7Fy")
      }
    })))

  it.live("401 from a wrong key is rejected, and the key is not in the message", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: "sk-ant-api03-the-right-one-000000" })
      const provider = yield* anthropic(fake)
      const error = yield* failureOf(provider, { prompt: "Hi" })
      assert.strictEqual(error.reason, "rejected")
      assert.include(error.message, "authentication_error: invalid x-api-key")
      assert.notInclude(error.message, ANTHROPIC_KEY)
    })))

  it.live("malformed answers", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: ANTHROPIC_KEY, behaviour: { _tag: "raw", status: 200, contentType: "text/plain", body: "OK" } })
      const provider = yield* anthropic(fake)
      assert.strictEqual((yield* failureOf(provider, { prompt: "Hi" })).reason, "malformed")
      const answers: ReadonlyArray<unknown> = [
        { id: "msg_1", type: "message", role: "assistant" },
        { type: "message", content: "hello" },
        { type: "message", content: [{ type: "text" }] },
        { type: "message", content: [{ type: "text", text: "hi" }], usage: { input_tokens: 3 } },
        { type: "message", content: [{ type: "text", text: "hi" }], usage: { input_tokens: 3, output_tokens: 1, cache_read_input_tokens: "x" } },
        anthropicError("api_error", "Internal server error")
      ]
      for (const answer of answers) {
        fake.behaviour = { _tag: "json", status: 200, body: answer }
        const error = yield* failureOf(provider, { prompt: "Hi" })
        assert.strictEqual(error.reason, "malformed", JSON.stringify(answer))
      }
    })))

  it.live("timeout, endless body and connection refused", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: ANTHROPIC_KEY, behaviour: { _tag: "hang" } })
      const slow = yield* anthropic(fake, { timeoutMs: 300 })
      const timeout = yield* failureOf(slow, { prompt: "Hi" })
      assert.strictEqual(timeout.reason, "timeout")

      fake.behaviour = { _tag: "endless" }
      const capped = yield* anthropic(fake, { maxResponseBytes: 32 * 1024 })
      const large = yield* failureOf(capped, { prompt: "Hi" })
      assert.strictEqual(large.reason, "too_large")
      yield* eventually("the endless answer to be cut off", () => fake.endless.closed)

      const port = yield* closedPort
      const nowhere = yield* AnthropicProvider.make({ baseUrl: `http://127.0.0.1:${port}`, apiKey: Redacted.make(ANTHROPIC_KEY), models: [haiku] })
      const refused = yield* failureOf(nowhere, { prompt: "Hi" })
      assert.strictEqual(refused.reason, "network")
      assert.include(refused.message, "ECONNREFUSED")
    })))
})

// ---------------------------------------------------------------------------
// The fake speaks the real wire format: the official SDKs against it
// ---------------------------------------------------------------------------

describe("the fake against the official client libraries", () => {
  it.live("openai: chat.completions.create parses the fake's answer; its request matches the adapter's", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({
        apiKey: OPENAI_KEY,
        behaviour: { _tag: "reply", reply: { content: "Forty-two.", promptTokens: 1234, completionTokens: 567 } }
      })
      const client = new OpenAI({ apiKey: OPENAI_KEY, baseURL: `${fake.origin}/v1`, maxRetries: 0, timeout: 5_000 })
      const completion = yield* bounded(Effect.promise(() =>
        client.chat.completions.create({
          model: "gpt-4o-mini",
          messages: [{ role: "system", content: "Be terse." }, { role: "user", content: "What is the answer?" }],
          max_tokens: 800,
          temperature: 0.2
        })
      ))
      assert.strictEqual(completion.object, "chat.completion")
      assert.strictEqual(completion.choices[0]?.message.content, "Forty-two.")
      assert.strictEqual(completion.choices[0]?.finish_reason, "stop")
      assert.deepStrictEqual(
        { prompt: completion.usage?.prompt_tokens, completion: completion.usage?.completion_tokens, total: completion.usage?.total_tokens },
        { prompt: 1234, completion: 567, total: 1801 }
      )

      const provider = yield* openai(fake)
      yield* runOk(provider, { prompt: "What is the answer?", systemPrompt: "Be terse.", maxTokens: 800, temperature: 0.2 })
      assert.strictEqual(fake.requests.length, 2)
      const [sdk, ours] = fake.requests as [Recorded, Recorded]
      assert.strictEqual(ours.path, sdk.path)
      assert.strictEqual(ours.method, sdk.method)
      assert.strictEqual(ours.headers.authorization, sdk.headers.authorization)
      const { stream: _stream, ...oursWithoutStream } = body(ours)
      assert.deepStrictEqual(oursWithoutStream, body(sdk), "the same fields as the official client sends")
    })))

  it.live("openai: the fake's error bodies are the ones the SDK reads", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: "sk-proj-the-right-one-0123456789" })
      const client = new OpenAI({ apiKey: OPENAI_KEY, baseURL: `${fake.origin}/v1`, maxRetries: 0, timeout: 5_000 })
      const call = () => client.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "Hi" }] })
      const unauthorized = yield* bounded(Effect.flip(Effect.tryPromise({ try: call, catch: (e) => e })))
      assert.instanceOf(unauthorized, OpenAI.AuthenticationError)
      assert.strictEqual((unauthorized as InstanceType<typeof OpenAI.AuthenticationError>).code, "invalid_api_key")
      assert.include((unauthorized as Error).message, "Incorrect API key provided")

      fake.behaviour = {
        _tag: "json",
        status: 429,
        body: openAiError("Rate limit reached for gpt-4o-mini", "requests", "rate_limit_exceeded")
      }
      const limited = yield* bounded(Effect.flip(Effect.tryPromise({ try: call, catch: (e) => e })))
      assert.instanceOf(limited, OpenAI.RateLimitError)
      const rate = limited as InstanceType<typeof OpenAI.RateLimitError>
      assert.strictEqual(rate.code, "rate_limit_exceeded")
      assert.strictEqual(rate.type, "requests")
      assert.strictEqual(rate.requestID, "req_4c3b0e1f9a8d7c6b5a4f3e2d1c0b9a8f")
    })))

  it.live("anthropic: messages.create parses the fake's answer; its request matches the adapter's", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({
        apiKey: ANTHROPIC_KEY,
        behaviour: { _tag: "reply", reply: { content: "Hello! How can I help?", promptTokens: 12, completionTokens: 9 } }
      })
      const client = new Anthropic({ apiKey: ANTHROPIC_KEY, baseURL: fake.origin, maxRetries: 0, timeout: 5_000 })
      const message = yield* bounded(Effect.promise(() =>
        client.messages.create({
          model: "claude-haiku-4-5",
          max_tokens: 700,
          system: "You are terse.",
          messages: [{ role: "user", content: "Hello, Claude" }]
        })
      ))
      assert.strictEqual(message.type, "message")
      assert.strictEqual(message.role, "assistant")
      const first = message.content[0]
      assert.isTrue(first?.type === "text" && first.text === "Hello! How can I help?")
      assert.strictEqual(message.stop_reason, "end_turn")
      assert.strictEqual(message.usage.input_tokens, 12)
      assert.strictEqual(message.usage.output_tokens, 9)

      const provider = yield* anthropic(fake)
      yield* runOk(provider, { prompt: "Hello, Claude", systemPrompt: "You are terse.", maxTokens: 700 })
      assert.strictEqual(fake.requests.length, 2)
      const [sdk, ours] = fake.requests as [Recorded, Recorded]
      assert.strictEqual(ours.path, sdk.path)
      assert.deepStrictEqual(body(ours), body(sdk), "the same body as the official client sends")
      // The SDK sends the key as a bearer token and the newest API version; the adapter the
      // x-api-key header and 2023-06-01. The API (and the fake) take both.
      assert.strictEqual(sdk.headers.authorization, `Bearer ${ANTHROPIC_KEY}`)
      assert.strictEqual(sdk.headers["anthropic-version"], "2026-10-21")
      assert.strictEqual(ours.headers["x-api-key"], ANTHROPIC_KEY)
    })))

  it.live("anthropic: the fake's error bodies are the ones the SDK reads", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: ANTHROPIC_KEY, behaviour: { _tag: "json", status: 529, body: anthropicError("overloaded_error", "Overloaded") } })
      const client = new Anthropic({ apiKey: ANTHROPIC_KEY, baseURL: fake.origin, maxRetries: 0, timeout: 5_000 })
      const call = () => client.messages.create({ model: "claude-haiku-4-5", max_tokens: 10, messages: [{ role: "user", content: "Hi" }] })
      const overloaded = yield* bounded(Effect.flip(Effect.tryPromise({ try: call, catch: (e) => e })))
      assert.instanceOf(overloaded, Anthropic.InternalServerError)
      const error = overloaded as InstanceType<typeof Anthropic.APIError>
      assert.strictEqual(error.status, 529)
      assert.strictEqual(error.type, "overloaded_error")
      assert.strictEqual(error.apiMessage, "Overloaded")
      assert.strictEqual(error.requestID, "req_011CSHoEeqs5C35K2UUqR7Fy")

      // With no canned answer the fake checks the request as the API does: the SDK's passes.
      fake.behaviour = { _tag: "reply" }
      fake.apiKey = "sk-ant-api03-the-right-one-000000"
      const unauthorized = yield* bounded(Effect.flip(Effect.tryPromise({ try: call, catch: (e) => e })))
      assert.instanceOf(unauthorized, Anthropic.AuthenticationError)
      assert.strictEqual((unauthorized as InstanceType<typeof Anthropic.APIError>).type, "authentication_error")
    })))
})

// ---------------------------------------------------------------------------
// Prompt-cache metering
// ---------------------------------------------------------------------------

describe("prompt-cache metering", () => {
  /** Input 10 µUSD/token, cached 1 µUSD/token, cache writes 12.5 µUSD/token, output 50 µUSD/token. */
  const cachedHaiku: ModelInfo = { ...haiku, cachedInputPer1kMicroUsd: 1_000n, cacheWritePer1kMicroUsd: 12_500n }
  const cachedMini: ModelInfo = { ...gptMini, cachedInputPer1kMicroUsd: 750n }

  it.live("OpenAI: cached_tokens, a part of prompt_tokens, are charged at the cached-input price", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({
        apiKey: OPENAI_KEY,
        behaviour: { _tag: "reply", reply: { promptTokens: 1234, cacheRead: 1024, completionTokens: 567 } }
      })
      const provider = yield* openai(fake, { models: [cachedMini, gptLarge] })
      const input: ReasonInput = { prompt: LONG_PROMPT, maxTokens: 1000 }
      const quote = quoteOf(provider, input)
      const metered = yield* runOk(provider, input, quote)
      // (210 × 1500 + 1024 × 750) / 1000 = 1083 µUSD of prompt, rounded up once; 567 × 6000 / 1000 = 3402 of output.
      assert.strictEqual(metered.actualMicroUsd, 1_083n + 3_402n)
      assert.deepStrictEqual(metered.output.usage, { promptTokens: 1234, completionTokens: 567, totalTokens: 1801 })
      assert.isTrue(metered.actualMicroUsd <= quote.microUsd)
      // Without a cached price on the card, cached tokens are plain input.
      const plain = yield* openai(fake)
      const plainMetered = yield* runOk(plain, input)
      assert.strictEqual(plainMetered.actualMicroUsd, (1234n * 1_500n + 999n) / 1000n + 3_402n)
    })))

  it.live("Anthropic: cache reads at the cached price, cache writes at the write price, the rest at input", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({
        apiKey: ANTHROPIC_KEY,
        behaviour: { _tag: "reply", reply: { promptTokens: 10, cacheCreation: 100, cacheRead: 1000, completionTokens: 5 } }
      })
      const provider = yield* anthropic(fake, { models: [cachedHaiku] })
      const input: ReasonInput = { prompt: LONG_PROMPT, maxTokens: 100 }
      const quote = quoteOf(provider, input)
      const metered = yield* runOk(provider, input, quote)
      // (10 × 10000 + 100 × 12500 + 1000 × 1000) / 1000 = 2350; 5 × 50000 / 1000 = 250.
      assert.strictEqual(metered.actualMicroUsd, 2_350n + 250n)
      assert.deepStrictEqual(metered.output.usage, { promptTokens: 1110, completionTokens: 5, totalTokens: 1115 })
      // The quote bounds prompt tokens at the write price, the dearest a prompt token can be.
      assert.strictEqual(
        quote.microUsd,
        (BigInt(promptTokenBound(input)) * 12_500n + 999n) / 1000n + (100n * 50_000n) / 1000n
      )
    })))
})
