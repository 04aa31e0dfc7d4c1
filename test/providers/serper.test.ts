import { upstreamLayers } from "../support/upstreamLayers.ts"
import { assert, describe, layer } from "@effect/vitest"
import { Cause, ConfigProvider, Effect, Exit, Redacted } from "effect"
import { loadProvidersConfig } from "../../adapters/providersConfig.ts"
import * as Serper from "../../adapters/providers/search/serper.ts"
import { type Provider, ProviderFailure, type UnitPrice } from "../../src/capabilities/Provider.ts"
import type { SearchInput } from "../../src/capabilities/schemas.ts"
import { type FakeUpstream, json, type Recorded, refusedUrl, startFake, text } from "./fakeUpstream.ts"

const SERPER_KEY = "serper-0123456789abcdef0123456789abcdef"
const price: UnitPrice = { per: "query", priceMicroUsd: 1_000n }

/** Serper's documented answer to `POST /search` (trimmed of the blocks the adapter does not read). */
const serperAnswer = (q: string, organic: ReadonlyArray<unknown> | undefined) => ({
  searchParameters: { q, type: "search", engine: "google" },
  knowledgeGraph: { title: "Effect", type: "Software", description: "A TypeScript library." },
  ...(organic === undefined ? {} : { organic }),
  peopleAlsoAsk: [{ question: "What is Effect?", snippet: "A library.", title: "Effect", link: "https://effect.website/" }],
  relatedSearches: [{ query: "effect typescript" }],
  credits: 1
})

const organic = (count: number) =>
  Array.from({ length: count }, (_, i) => ({
    title: `Result ${i + 1}`,
    link: `https://example.com/${i + 1}`,
    snippet: `Snippet of result ${i + 1}.`,
    date: "May 1, 2026",
    position: i + 1
  }))

const serperQuery = (request: Recorded) => (JSON.parse(request.body) as { q: string }).q

const make = (baseUrl: string) => Serper.make({ baseUrl, apiKey: Redacted.make(SERPER_KEY), unitPrice: price })

const run = (provider: Provider<"search">, input: SearchInput) =>
  provider.run(input, { microUsd: price.priceMicroUsd }).pipe(
    Effect.timeoutOrElse({ duration: "10 seconds", orElse: () => Effect.die(new Error("the call did not finish within 10 s")) })
  )

const failureOf = (provider: Provider<"search">, input: SearchInput) =>
  Effect.gen(function*() {
    const exit = yield* Effect.exit(run(provider, input))
    if (Exit.isSuccess(exit)) return assert.fail("expected a failure")
    assert.isFalse(Cause.hasDies(exit.cause), `a defect: ${Cause.pretty(exit.cause)}`)
    const error = Cause.squash(exit.cause)
    assert.instanceOf(error, ProviderFailure)
    return error as ProviderFailure
  })

const only = (fake: FakeUpstream): Recorded => {
  assert.strictEqual(fake.requests.length, 1, "exactly one request")
  return fake.requests[0]!
}

layer(upstreamLayers, { excludeTestServices: true })("serper over HTTP", (it) => {
  it.effect("POSTs /search with the key in X-API-KEY and { q, num }, and maps the organic results", () =>
    Effect.gen(function*() {
      const fake = yield* startFake((request) =>
        json(serperAnswer(serperQuery(request), [
          { title: "  Effect —\n TypeScript ", link: "https://effect.website/", snippet: "Effect is a powerful\n\nTypeScript library.", position: 1 },
          { title: "Repeated", link: "https://effect.website/", snippet: "dropped: same URL", position: 2 },
          { title: "Bad URL", link: "javascript:alert(1)", snippet: "dropped", position: 3 },
          "not an object",
          { title: "Docs", link: "https://effect.website/docs", position: 4 }
        ]))
      )
      const provider = yield* make(fake.url)
      assert.strictEqual(provider.name, "serper")
      const metered = yield* run(provider, { query: "what is effect" })
      const request = only(fake)
      assert.strictEqual(request.method, "POST")
      assert.strictEqual(request.path, "/search")
      assert.strictEqual(request.headers["x-api-key"], SERPER_KEY)
      assert.match(request.headers["content-type"] ?? "", /^application\/json/)
      assert.isUndefined(request.headers.authorization)
      assert.isUndefined(request.headers.traceparent)
      assert.deepStrictEqual(JSON.parse(request.body), { q: "what is effect", num: 10 })
      assert.notInclude(request.body, SERPER_KEY)

      assert.strictEqual(metered.actualMicroUsd, 1_000n)
      assert.deepStrictEqual(metered.output, {
        query: "what is effect",
        totalResults: 2,
        results: [
          { title: "Effect — TypeScript", url: "https://effect.website/", snippet: "Effect is a powerful TypeScript library.", position: 1 },
          { title: "Docs", url: "https://effect.website/docs", snippet: "", position: 2 }
        ]
      })
    }))

  it.effect("asks for at most 10, returns at most numResults; no organic block is an empty answer", () =>
    Effect.gen(function*() {
      const fake = yield* startFake((request) => json(serperAnswer(serperQuery(request), organic(10))))
      const provider = yield* make(fake.url)
      const three = yield* run(provider, { query: "q", numResults: 3 })
      assert.deepStrictEqual(JSON.parse(fake.requests[0]!.body), { q: "q", num: 3 })
      assert.strictEqual(three.output.results.length, 3)
      const many = yield* run(provider, { query: "q", numResults: 20 })
      assert.deepStrictEqual(JSON.parse(fake.requests[1]!.body), { q: "q", num: 10 })
      assert.strictEqual(many.output.results.length, 10)

      const empty = yield* startFake((request) => json(serperAnswer(serperQuery(request), undefined)))
      const none = yield* run(yield* make(empty.url), { query: "nothing at all" })
      assert.deepStrictEqual(none.output, { query: "nothing at all", totalResults: 0, results: [] })
    }))

  it.effect("Serper's errors: 403 rejected with its message, 429 rate limited, 5xx unavailable; the key never in a message", () =>
    Effect.gen(function*() {
      const answers = [
        [json({ message: "Unauthorized.", statusCode: 403 }, 403), "rejected", "Unauthorized."],
        [json({ message: "Not enough credits", statusCode: 400 }, 400), "rejected", "Not enough credits"],
        [json({ message: `Too many requests for ${SERPER_KEY}`, statusCode: 429 }, 429), "rate_limited", "[redacted]"],
        [text(502, "<html><body>Bad gateway</body></html>", "text/html"), "unavailable", "Bad gateway"]
      ] as const
      for (const [answer, reason, says] of answers) {
        const fake = yield* startFake(() => answer)
        const failure = yield* failureOf(yield* make(fake.url), { query: "q" })
        assert.strictEqual(failure.reason, reason)
        assert.include(failure.message, says)
        assert.notInclude(failure.message, SERPER_KEY)
      }
    }))

  it.effect("an answer that is not JSON, or whose organic is not a list, is malformed; no server is unavailable", () =>
    Effect.gen(function*() {
      for (const answer of [text(200, "not json"), json({ organic: "nope" }), json([1, 2])]) {
        const fake = yield* startFake(() => answer)
        assert.strictEqual((yield* failureOf(yield* make(fake.url), { query: "q" })).reason, "malformed")
      }
      assert.strictEqual((yield* failureOf(yield* make(yield* refusedUrl), { query: "q" })).reason, "unavailable")
    }))
})

describe("serper from the configuration", () => {
  layer(upstreamLayers)((it) => {
    it.effect("SERPER_API_KEY turns it on with the serper price card, and the proxy offers its search endpoint", () =>
      Effect.gen(function*() {
        const config = yield* loadProvidersConfig.pipe(
          Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnvRecord({ SERPER_API_KEY: SERPER_KEY, BUILTIN_EXECUTE: "off" })))
        )
        const serper = config.builders.find((b) => b.name === "serper")
        assert.isDefined(serper)
        assert.strictEqual(serper!.capability, "search")
        const provider = yield* serper!.build.pipe(Effect.provide(upstreamLayers), Effect.orDie) as Effect.Effect<Provider<"search">>
        assert.deepStrictEqual(provider.unitPrice, { per: "query", priceMicroUsd: 1_000n })
        const [service] = config.operatorServices
        assert.strictEqual(config.operatorServices.length, 1)
        assert.strictEqual(service!.service.slug, "serper")
        assert.strictEqual(service!.service.baseUrl, "https://google.serper.dev")
        assert.deepStrictEqual(service!.service.endpoints.map((e) => [e.method, e.path, e.price]), [
          ["POST", "/search", { kind: "perCall", priceMicroUsd: 1_000n }]
        ])
        assert.deepStrictEqual(Object.keys(service!.credentials), ["x-api-key"])
        assert.strictEqual(Redacted.value(service!.credentials["x-api-key"]!), SERPER_KEY)
      }))
  })
})
