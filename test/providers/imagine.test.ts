import { upstreamLayers } from "../support/upstreamLayers.ts"
import type { UpstreamClient } from "../../adapters/net/upstreamClient.ts"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Redacted, Result, type Scope } from "effect"
import OpenAI from "openai"
import * as OpenAiImages from "../../adapters/providers/imagine/openaiImages.ts"
import type { Provider, Quote } from "../../src/capabilities/Provider.ts"
import { ProviderFailure } from "../../src/capabilities/Provider.ts"
import type { ImagineInput } from "../../src/capabilities/schemas.ts"
import { NotFound, ValidationError } from "../../src/domain/errors.ts"
import { type Fake, openAiError, PNG_1X1, type Recorded, refusedOrigin, startFake } from "./fakeOpenAiMedia.ts"

/**
 * The `imagine` provider over OpenAI's Images API, against a local fake
 * (test/providers/fakeOpenAiMedia.ts) that the official SDK is also pointed
 * at, so the fake's payloads are the real wire format.
 */

const KEY = "sk-proj-imagetest0123456789abcdefghij"

/** DALL·E 3 list prices, standard quality: 4 and 8 cents. */
const DALLE3_PRICES = { "1024x1024": 40_000n, "1024x1792": 80_000n, "1792x1024": 80_000n }
const DALLE2_PRICES = { "256x256": 16_000n, "512x512": 18_000n, "1024x1024": 20_000n }

type Client = UpstreamClient

const live = <A, E>(effect: Effect.Effect<A, E, Client | Scope.Scope>) => effect.pipe(Effect.provide(upstreamLayers))

const bounded = <A, E, R>(effect: Effect.Effect<A, E, R>, ms = 10_000) =>
  Effect.timeoutOrElse(effect, {
    duration: Duration.millis(ms),
    orElse: () => Effect.die(new Error(`test: no outcome within ${ms} ms`))
  })

const dalle3 = (fake: Fake | string, overrides: Partial<OpenAiImages.Options> = {}) =>
  OpenAiImages.make({
    baseUrl: `${typeof fake === "string" ? fake : fake.origin}/v1`,
    apiKey: Redacted.make(KEY),
    model: "dall-e-3",
    prices: DALLE3_PRICES,
    timeoutMs: 5_000,
    ...overrides
  })

const quoteOf = (provider: Provider<"imagine">, input: ImagineInput): Quote => {
  const quoted = provider.quote(input)
  if (Result.isFailure(quoted)) throw new Error(`quote refused: ${quoted.failure.message}`)
  return quoted.success
}

const refusalOf = (provider: Provider<"imagine">, input: ImagineInput) => {
  const quoted = provider.quote(input)
  if (Result.isSuccess(quoted)) throw new Error("the quote was expected to be refused")
  return quoted.failure
}

const failureOf = (provider: Provider<"imagine">, input: ImagineInput, ms?: number) =>
  bounded(Effect.flip(provider.run(input, quoteOf(provider, input))), ms).pipe(
    Effect.tap((error) => Effect.sync(() => assert.instanceOf(error, ProviderFailure)))
  )

const only = (fake: Fake): Recorded => {
  assert.strictEqual(fake.requests.length, 1, "exactly one request reaches the upstream")
  return fake.requests[0]!
}

const body = (request: Recorded) => {
  assert.isObject(request.json, "the request body is a JSON object")
  return request.json as Record<string, unknown>
}

describe("openaiImages: request, answer, price", () => {
  it.live("dall-e-3, default size and format: the documented request, the image inline, one image's price", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: KEY })
      const provider = yield* dalle3(fake)
      assert.strictEqual(provider.name, "openai-images")
      assert.strictEqual(provider.capability, "imagine")
      assert.deepStrictEqual(provider.unitPrice, { per: "image", priceMicroUsd: 40_000n })
      const input: ImagineInput = { prompt: "A lighthouse at dusk, oil painting" }
      const quote = quoteOf(provider, input)
      assert.deepStrictEqual(quote, { microUsd: 40_000n, model: "dall-e-3" })

      const metered = yield* bounded(provider.run(input, quote))

      const request = only(fake)
      assert.strictEqual(request.method, "POST")
      assert.strictEqual(request.path, "/v1/images/generations")
      assert.strictEqual(request.headers.authorization, `Bearer ${KEY}`)
      assert.match(String(request.headers["content-type"]), /^application\/json/)
      assert.deepStrictEqual(body(request), {
        model: "dall-e-3",
        prompt: "A lighthouse at dusk, oil painting",
        n: 1,
        size: "1024x1024",
        response_format: "b64_json"
      })
      assert.deepStrictEqual(metered.output, {
        images: [{
          b64: PNG_1X1.toString("base64"),
          mimeType: "image/png",
          revisedPrompt: "A detailed rendering of: A lighthouse at dusk, oil painting"
        }],
        size: "1024x1024"
      })
      assert.strictEqual(Buffer.from(metered.output.images[0]!.b64!, "base64").subarray(1, 4).toString("latin1"), "PNG")
      assert.strictEqual(metered.actualMicroUsd, 40_000n)
      assert.strictEqual(metered.model, "dall-e-3")
    })))

  it.live("responseFormat url and a tall size: the URL comes back, priced at that size", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: KEY })
      const provider = yield* dalle3(fake)
      const input: ImagineInput = { prompt: "A red fox", size: "1024x1792", responseFormat: "url" }
      const quote = quoteOf(provider, input)
      assert.strictEqual(quote.microUsd, 80_000n)
      const metered = yield* bounded(provider.run(input, quote))
      const sent = body(only(fake))
      assert.strictEqual(sent.size, "1024x1792")
      assert.strictEqual(sent.response_format, "url")
      const image = metered.output.images[0]!
      assert.match(image.url ?? "", /^https:\/\/oaidalleapiprodscus\.blob\.core\.windows\.net\/private\/img-0\.png\?/)
      assert.isUndefined(image.b64)
      assert.strictEqual(image.mimeType, "image/png")
      assert.strictEqual(metered.output.size, "1024x1792")
      assert.strictEqual(metered.actualMicroUsd, 80_000n)
    })))

  it.live("dall-e-2, n=3: the quote is three images; two returned are charged as two", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: KEY, behaviour: { _tag: "ok", image: { count: 2, revisedPrompt: null } } })
      const provider = yield* dalle3(fake, { model: "dall-e-2", prices: DALLE2_PRICES })
      const input: ImagineInput = { prompt: "A cat", n: 3, size: "512x512" }
      const quote = quoteOf(provider, input)
      assert.strictEqual(quote.microUsd, 54_000n)
      const metered = yield* bounded(provider.run(input, quote))
      assert.strictEqual(body(only(fake)).n, 3)
      assert.lengthOf(metered.output.images, 2)
      assert.isFalse("revisedPrompt" in metered.output.images[0]!, "no revised prompt when the upstream gives none")
      assert.strictEqual(metered.actualMicroUsd, 36_000n)
    })))

  it.live("more images than asked for are cut to n and never charged beyond the quote", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: KEY, behaviour: { _tag: "ok", image: { count: 4 } } })
      const provider = yield* dalle3(fake, { model: "dall-e-2", prices: DALLE2_PRICES })
      const input: ImagineInput = { prompt: "A cat", n: 2, size: "256x256" }
      const metered = yield* bounded(provider.run(input, quoteOf(provider, input)))
      assert.lengthOf(metered.output.images, 2)
      assert.strictEqual(metered.actualMicroUsd, 32_000n)
    })))

  it.live("gpt-image family: no response_format is sent, the image comes inline; asking for a URL is refused", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: KEY })
      const provider = yield* dalle3(fake, { model: "gpt-image-1", prices: { "1024x1024": 42_000n }, maxImages: 4 })
      const input: ImagineInput = { prompt: "A watercolor map", n: 2 }
      const quote = quoteOf(provider, input)
      assert.strictEqual(quote.microUsd, 84_000n)
      const metered = yield* bounded(provider.run(input, quote))
      assert.deepStrictEqual(body(only(fake)), { model: "gpt-image-1", prompt: "A watercolor map", n: 2, size: "1024x1024" })
      assert.lengthOf(metered.output.images, 2)
      assert.strictEqual(metered.output.images[1]!.mimeType, "image/png")
      assert.strictEqual(metered.actualMicroUsd, 84_000n)

      const refused = refusalOf(provider, { prompt: "A map", responseFormat: "url" })
      assert.instanceOf(refused, ValidationError)
      assert.strictEqual((refused as ValidationError).issues[0]?.path, "responseFormat")
    })))

  it.live("a self-hosted server without a key gets no Authorization header; a trailing slash is not doubled", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake()
      const provider = yield* OpenAiImages.make({
        name: "local-sd",
        baseUrl: `${fake.origin}/v1/`,
        model: "stable-diffusion",
        modelFamily: "dall-e",
        prices: { "512x512": 1_000n }
      })
      assert.strictEqual(provider.name, "local-sd")
      assert.deepStrictEqual(provider.unitPrice, { per: "image", priceMicroUsd: 1_000n }, "the cheapest when no 1024x1024 price")
      const metered = yield* bounded(provider.run({ prompt: "A tree", size: "512x512" }, { microUsd: 1_000n }))
      const request = only(fake)
      assert.strictEqual(request.path, "/v1/images/generations")
      assert.isUndefined(request.headers.authorization)
      assert.strictEqual(metered.actualMicroUsd, 1_000n)
    })))
})

describe("openaiImages: quotes the provider refuses", () => {
  it.live("a size without a price, n above the model's limit, another model", () =>
    live(Effect.gen(function*() {
      const provider = yield* dalle3("http://127.0.0.1:9")
      const size = refusalOf(provider, { prompt: "x", size: "256x256" })
      assert.instanceOf(size, ValidationError)
      assert.strictEqual((size as ValidationError).issues[0]?.path, "size")
      assert.include(size.message, "1024x1024, 1024x1792, 1792x1024")

      const n = refusalOf(provider, { prompt: "x", n: 2 })
      assert.instanceOf(n, ValidationError, "dall-e-3 makes one image per call")
      assert.strictEqual((n as ValidationError).issues[0]?.path, "n")

      const model = refusalOf(provider, { prompt: "x", model: "dall-e-2" })
      assert.instanceOf(model, NotFound)
      assert.isTrue(Result.isSuccess(provider.quote({ prompt: "x", model: "dall-e-3" })), "naming its own model is fine")
    })))

  it("a misconfiguration is a defect at start-up, naming the field", async () => {
    const attempt = (options: Partial<OpenAiImages.Options>) =>
      Effect.runPromiseExit(
        OpenAiImages.make({ model: "dall-e-3", prices: DALLE3_PRICES, ...options }).pipe(Effect.provide(upstreamLayers))
      )
    const noPrices = await attempt({ prices: {} })
    assert.isTrue(noPrices._tag === "Failure" && String(noPrices.cause).includes("prices must name at least one size"))
    const badUrl = await attempt({ baseUrl: "ftp://example.com" })
    assert.isTrue(badUrl._tag === "Failure" && String(badUrl.cause).includes("baseUrl must be http(s)"))
    const tooMany = await attempt({ maxImages: 9 })
    assert.isTrue(tooMany._tag === "Failure" && String(tooMany.cause).includes("maxImages must be at most 4"))
  })
})

describe("openaiImages: failures", () => {
  const prompt: ImagineInput = { prompt: "A lighthouse" }

  it.live("401 with OpenAI's error body: rejected, with the upstream's message", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: "sk-proj-the-right-key-0123456789" })
      const failure = yield* failureOf(yield* dalle3(fake), prompt)
      assert.strictEqual(failure.reason, "rejected")
      assert.strictEqual(failure.provider, "openai-images")
      assert.include(failure.message, "HTTP 401")
      assert.include(failure.message, "invalid_api_key: Incorrect API key provided")
    })))

  it.live("a 400 quoting the key: the key is scrubbed and the message cut to 300 characters", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({
        apiKey: KEY,
        behaviour: {
          _tag: "json",
          status: 400,
          body: openAiError(`Your request was rejected by the safety system (key ${KEY}). ${"x".repeat(1000)}`, "invalid_request_error", "content_policy_violation")
        }
      })
      const failure = yield* failureOf(yield* dalle3(fake), prompt)
      assert.strictEqual(failure.reason, "rejected")
      assert.notInclude(failure.message, KEY)
      assert.include(failure.message, "[redacted]")
      assert.include(failure.message, "content_policy_violation")
      assert.isBelow(failure.message.length, 460)
      assert.notInclude(failure.message, "x".repeat(301))
    })))

  it.live("429: rate_limited, with the retry-after hint", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({
        apiKey: KEY,
        behaviour: {
          _tag: "json",
          status: 429,
          body: openAiError("Rate limit exceeded for images per minute in organization org-abc.", "requests", "rate_limit_exceeded"),
          headers: { "retry-after": "20" }
        }
      })
      const failure = yield* failureOf(yield* dalle3(fake), prompt)
      assert.strictEqual(failure.reason, "rate_limited")
      assert.include(failure.message, "retry after 20 s")
    })))

  it.live("500 and a refused connection: unavailable", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({
        apiKey: KEY,
        behaviour: { _tag: "json", status: 500, body: openAiError("The server had an error while processing your request.", "server_error", null) }
      })
      const failure = yield* failureOf(yield* dalle3(fake), prompt)
      assert.strictEqual(failure.reason, "unavailable")
      assert.include(failure.message, "HTTP 500")

      const refused = yield* failureOf(yield* dalle3(yield* refusedOrigin), prompt)
      assert.strictEqual(refused.reason, "unavailable")
      assert.include(refused.message, "ECONNREFUSED")
    })))

  it.live("no answer within timeoutMs: timeout, on time", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: KEY, behaviour: { _tag: "hang" } })
      const started = Date.now()
      const failure = yield* failureOf(yield* dalle3(fake, { timeoutMs: 300 }), prompt, 5_000)
      assert.strictEqual(failure.reason, "timeout")
      assert.isBelow(Date.now() - started, 3_000)
    })))

  it.live("answers that are not images: malformed", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: KEY, behaviour: { _tag: "raw", status: 200, body: "<html>oops</html>", contentType: "text/html" } })
      const provider = yield* dalle3(fake)
      assert.strictEqual((yield* failureOf(provider, prompt)).reason, "malformed")
      fake.behaviour = { _tag: "json", status: 200, body: { created: 1, data: [] } }
      const empty = yield* failureOf(provider, prompt)
      assert.strictEqual(empty.reason, "malformed")
      assert.include(empty.message, "no image")
      fake.behaviour = { _tag: "json", status: 200, body: { created: 1, data: [{ b64_json: "not base64!" }] } }
      assert.strictEqual((yield* failureOf(provider, prompt)).reason, "malformed")
      fake.behaviour = { _tag: "json", status: 200, body: { created: 1, data: [{ url: "javascript:alert(1)" }] } }
      assert.strictEqual((yield* failureOf(provider, prompt)).reason, "malformed")
    })))

  it.live("an endless body is cut at maxResponseBytes (too_large) and the connection dropped", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: KEY, behaviour: { _tag: "endless", contentType: "application/json" } })
      const failure = yield* failureOf(yield* dalle3(fake, { maxResponseBytes: 256 * 1024 }), prompt)
      assert.strictEqual(failure.reason, "too_large")
      const deadline = Date.now() + 5_000
      while (!fake.endless.closed && Date.now() < deadline) yield* Effect.promise(() => new Promise((r) => setTimeout(r, 10)))
      assert.isTrue(fake.endless.closed, "the connection is closed")
      assert.isBelow(fake.endless.sent, 64 * 1024 * 1024, "the server stopped well short of its gigabyte")
    })))

  it.live("a declared content-length over the cap: too_large without reading", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: KEY, behaviour: { _tag: "declared", bytes: 10_000_000 } })
      const failure = yield* failureOf(yield* dalle3(fake, { maxResponseBytes: 1_000_000 }), prompt)
      assert.strictEqual(failure.reason, "too_large")
    })))
})

describe("the fake speaks the Images API as the official SDK does", () => {
  it.live("images.generate parses the fake's answer; the SDK's request has the adapter's shape", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: KEY })
      const client = new OpenAI({ apiKey: KEY, baseURL: `${fake.origin}/v1`, maxRetries: 0, timeout: 5_000 })
      const answer = yield* bounded(Effect.promise(() =>
        client.images.generate({
          model: "dall-e-3",
          prompt: "A lighthouse at dusk, oil painting",
          n: 1,
          size: "1024x1024",
          response_format: "b64_json"
        })
      ))
      assert.strictEqual(answer.created, 1_713_833_628)
      assert.strictEqual(answer.data?.[0]?.b64_json, PNG_1X1.toString("base64"))
      assert.strictEqual(answer.data?.[0]?.revised_prompt, "A detailed rendering of: A lighthouse at dusk, oil painting")

      const provider = yield* dalle3(fake)
      yield* bounded(provider.run({ prompt: "A lighthouse at dusk, oil painting" }, { microUsd: 40_000n }))
      const [sdk, ours] = fake.requests
      assert.strictEqual(ours!.path, sdk!.path)
      assert.strictEqual(ours!.headers.authorization, sdk!.headers.authorization)
      assert.deepStrictEqual(body(ours!), body(sdk!))

      fake.behaviour = { _tag: "ok" }
      const byUrl = yield* bounded(Effect.promise(() =>
        client.images.generate({ model: "dall-e-3", prompt: "A fox", response_format: "url" })
      ))
      assert.match(byUrl.data?.[0]?.url ?? "", /^https:\/\//)
    })))

  it.live("the fake's errors are the ones the SDK reads", () =>
    live(Effect.gen(function*() {
      const fake = yield* startFake({ apiKey: "sk-proj-the-right-key-0123456789" })
      const client = new OpenAI({ apiKey: KEY, baseURL: `${fake.origin}/v1`, maxRetries: 0, timeout: 5_000 })
      const call = () => client.images.generate({ model: "dall-e-3", prompt: "x" })
      const unauthorized = yield* bounded(Effect.flip(Effect.tryPromise({ try: call, catch: (e) => e })))
      assert.instanceOf(unauthorized, OpenAI.AuthenticationError)
      assert.strictEqual((unauthorized as InstanceType<typeof OpenAI.AuthenticationError>).code, "invalid_api_key")

      fake.apiKey = KEY
      fake.behaviour = { _tag: "json", status: 429, body: openAiError("Rate limit exceeded", "requests", "rate_limit_exceeded") }
      const limited = yield* bounded(Effect.flip(Effect.tryPromise({ try: call, catch: (e) => e })))
      assert.instanceOf(limited, OpenAI.RateLimitError)

      fake.behaviour = { _tag: "ok" }
      const twoFromDalle3 = yield* bounded(Effect.flip(Effect.tryPromise({
        try: () => client.images.generate({ model: "dall-e-3", prompt: "x", n: 2 }),
        catch: (e) => e
      })))
      assert.instanceOf(twoFromDalle3, OpenAI.BadRequestError)
      assert.strictEqual((twoFromDalle3 as InstanceType<typeof OpenAI.BadRequestError>).param, "n")
    })))
})
