import { upstreamLayers } from "../support/upstreamLayers.ts"
import type { UpstreamClient } from "../../adapters/net/upstreamClient.ts"
import { assert, describe, layer } from "@effect/vitest"
import { Cause, Effect, Exit, Redacted, Result } from "effect"
import * as Brave from "../../adapters/providers/search/brave.ts"
import * as SearXNG from "../../adapters/providers/search/searxng.ts"
import * as Tavily from "../../adapters/providers/search/tavily.ts"
import { type Provider, ProviderFailure, type UnitPrice } from "../../src/capabilities/Provider.ts"
import type { SearchInput, SearchOutput } from "../../src/capabilities/schemas.ts"
import { type Answer, type FakeUpstream, json, type Recorded, refusedUrl, startFake, text } from "./fakeUpstream.ts"

// ---------------------------------------------------------------------------
// Upstream payloads, as each API documents them (with the fields real answers carry)

const BRAVE_KEY = "BSA-test-0123456789abcdefABCDEF"
const TAVILY_KEY = "tvly-dev-0123456789abcdefABCDEF"

const price = (microUsd: bigint): UnitPrice => ({ per: "query", priceMicroUsd: microUsd })

interface Item {
  readonly title: string
  readonly url: string
  readonly snippet: string
}

const items = (count: number, prefix = "result"): Array<Item> =>
  Array.from({ length: count }, (_, i) => ({
    title: `${prefix} ${i + 1}`,
    url: `https://example.com/${prefix}/${i + 1}`,
    snippet: `Snippet of ${prefix} ${i + 1}.`
  }))

/** Host and path of a URL, or blanks for the invalid ones some tests feed in. */
const parts = (text: string) => {
  try {
    const url = new URL(text)
    return { hostname: url.hostname, pathname: url.pathname }
  } catch {
    return { hostname: "", pathname: "/" }
  }
}

const braveResult = (item: Item) => {
  const url = parts(item.url)
  return {
    title: item.title,
    url: item.url,
    is_source_local: false,
    is_source_both: false,
    description: item.snippet,
    page_age: "2026-05-01T08:00:00",
    profile: { name: url.hostname, url: item.url, long_name: url.hostname, img: `https://imgs.search.brave.com/${url.hostname}.png` },
    language: "en",
    family_friendly: true,
    type: "search_result",
    subtype: "generic",
    is_live: false,
    meta_url: { scheme: "https", netloc: url.hostname, hostname: url.hostname, favicon: "", path: `› ${url.pathname.slice(1)}` },
    age: "May 1, 2026",
    extra_snippets: ["Another passage of the page."]
  }
}

const braveAnswer = (query: string, results: ReadonlyArray<unknown>) => ({
  query: {
    original: query,
    show_strict_warning: false,
    is_navigational: false,
    is_news_breaking: false,
    spellcheck_off: true,
    country: "us",
    bad_results: false,
    should_fallback: false,
    postal_code: "",
    city: "",
    header_country: "",
    more_results_available: true,
    state: ""
  },
  mixed: {
    type: "mixed",
    main: results.map((_, index) => ({ type: "web", index, all: false })),
    top: [],
    side: []
  },
  type: "search",
  web: { type: "search", results, family_friendly: true }
})

const braveError = (status: number, code: string, detail: string) => ({
  type: "ErrorResponse",
  error: { id: "6b5ab2a5-4bd5-4e3c-9a3e-1b2c3d4e5f60", status, code, detail, meta: { component: "authentication" } },
  time: 1_790_000_000
})

const tavilyResult = (item: Item, index: number) => ({
  url: item.url,
  title: item.title,
  content: item.snippet,
  score: Math.round((0.98 - index * 0.01) * 100) / 100,
  raw_content: null,
  favicon: `https://${parts(item.url).hostname}/favicon.ico`
})

const tavilyAnswer = (query: string, results: ReadonlyArray<unknown>) => ({
  query,
  follow_up_questions: null,
  answer: null,
  images: [],
  results,
  response_time: 1.09,
  request_id: "123e4567-e89b-12d3-a456-426614174111"
})

const tavilyQuery = (request: Recorded) => (JSON.parse(request.body) as { query: string }).query

const searxResult = (item: Item, index: number) => {
  const url = parts(item.url)
  return {
    url: item.url,
    title: item.title,
    content: item.snippet,
    thumbnail: "",
    engine: "duckduckgo",
    template: "default.html",
    parsed_url: ["https", url.hostname, url.pathname, "", "", ""],
    img_src: "",
    priority: "",
    engines: ["duckduckgo", "brave"],
    positions: [index + 1, index + 2],
    score: 4 / (index + 1),
    category: "general",
    publishedDate: null
  }
}

const searxAnswer = (
  query: string,
  results: ReadonlyArray<unknown>,
  extra: { readonly numberOfResults?: number; readonly unresponsive?: ReadonlyArray<[string, string]> } = {}
) => ({
  query,
  number_of_results: extra.numberOfResults ?? 0,
  results,
  answers: [],
  corrections: [],
  infoboxes: [],
  suggestions: [`${query} tutorial`, `${query} example`],
  unresponsive_engines: extra.unresponsive ?? []
})

// ---------------------------------------------------------------------------
// Running a provider against a fake

const searchInput = (query: string, numResults?: number): SearchInput =>
  numResults === undefined ? { query } : { query, numResults }

/** Runs a call with a hard bound on the wait, whatever the provider does. */
const runCall = (provider: Provider<"search">, input: SearchInput) =>
  provider.run(input, { microUsd: provider.unitPrice?.priceMicroUsd ?? 0n }).pipe(
    Effect.timeoutOrElse({ duration: "10 seconds", orElse: () => Effect.die(new Error("the call did not finish within 10 s")) })
  )

/** The failure of a call, checked to be a ProviderFailure and never a defect. */
const failureOf = (provider: Provider<"search">, input: SearchInput) =>
  Effect.gen(function*() {
    const exit = yield* Effect.exit(runCall(provider, input))
    if (Exit.isSuccess(exit)) return assert.fail(`expected a failure, got ${JSON.stringify(exit.value.output).slice(0, 200)}`)
    assert.isFalse(Cause.hasDies(exit.cause), `a defect: ${Cause.pretty(exit.cause)}`)
    const error = Cause.squash(exit.cause)
    assert.instanceOf(error, ProviderFailure)
    return error as ProviderFailure
  })

const succeeded = (provider: Provider<"search">, input: SearchInput) =>
  Effect.gen(function*() {
    const metered = yield* runCall(provider, input)
    return metered
  })

const only = (fake: FakeUpstream): Recorded => {
  assert.strictEqual(fake.requests.length, 1, "exactly one request")
  return fake.requests[0]!
}

const titles = (output: SearchOutput) => output.results.map((r) => r.title)
const positions = (output: SearchOutput) => output.results.map((r) => r.position)

// ---------------------------------------------------------------------------
// Each provider, described for the shared failure table

interface Subject {
  readonly name: string
  readonly secret: string | undefined
  readonly make: (
    baseUrl: string,
    limits?: { readonly timeoutMs?: number; readonly maxResponseBytes?: number }
  ) => Effect.Effect<Provider<"search">, never, UpstreamClient>
  /** The provider's documented success answer around some results. */
  readonly answer: (request: Recorded, results: ReadonlyArray<Item>) => Answer
  /** The provider's error answer. */
  readonly error: (status: number, message: string) => Answer
  /** A 200 JSON answer without the fields the mapping needs. */
  readonly missingFields: unknown
}

const subjects: ReadonlyArray<Subject> = [
  {
    name: "brave",
    secret: BRAVE_KEY,
    make: (baseUrl, limits = {}) => Brave.make({ baseUrl, apiKey: Redacted.make(BRAVE_KEY), unitPrice: price(5_000n), ...limits }),
    answer: (request, results) => json(braveAnswer(request.query.get("q") ?? "", results.map(braveResult))),
    error: (status, message) => json(braveError(status, status === 429 ? "RATE_LIMITED" : "SUBSCRIPTION_TOKEN_INVALID", message), status),
    missingFields: { type: "search", web: { type: "search" } }
  },
  {
    name: "tavily",
    secret: TAVILY_KEY,
    make: (baseUrl, limits = {}) => Tavily.make({ baseUrl, apiKey: Redacted.make(TAVILY_KEY), unitPrice: price(8_000n), ...limits }),
    answer: (request, results) => json(tavilyAnswer(tavilyQuery(request), results.map(tavilyResult))),
    error: (status, message) => json({ detail: { error: message } }, status),
    missingFields: { query: "q", response_time: 0.5 }
  },
  {
    name: "searxng",
    secret: undefined,
    make: (baseUrl, limits = {}) => SearXNG.make({ baseUrl, unitPrice: price(100n), ...limits }),
    answer: (request, results) => json(searxAnswer(request.query.get("q") ?? "", results.map(searxResult))),
    error: (status, message) =>
      text(status, `<!DOCTYPE html><html><head><title>${status}</title></head><body><h1>${message}</h1></body></html>`, "text/html"),
    missingFields: { query: "q", number_of_results: 0, answers: [] }
  }
]

/** Results every provider must clean up the same way. */
const untidy: ReadonlyArray<Item> = [
  { title: "First", url: "https://example.com/first", snippet: "Kept." },
  { title: "😀".repeat(300), url: "https://example.com/long", snippet: "s".repeat(3_000) },
  { title: "FTP", url: "ftp://files.example.com/a.tar", snippet: "dropped: not http(s)" },
  { title: "Relative", url: "/relative/path", snippet: "dropped: not absolute" },
  { title: "Space", url: "https://example.com/a b", snippet: "dropped: whitespace" },
  { title: "Repeat", url: "https://example.com/first", snippet: "dropped: seen already" },
  { title: "Too long", url: `https://example.com/${"a".repeat(2_100)}`, snippet: "dropped: URL over 2048" },
  { title: "Plain http", url: "http://example.org/page?x=1&y=2", snippet: "Kept as well." }
]

// ---------------------------------------------------------------------------

// Real sockets and real time: the test clock is left out.
layer(upstreamLayers, { excludeTestServices: true })("search providers over HTTP", (it) => {
  describe("brave", () => {
    it.effect("GETs /res/v1/web/search with q, count and the subscription token, and maps the answer", () =>
      Effect.gen(function*() {
        const fake = yield* startFake((request) => {
          const raw = [
            { title: "The <strong>Effect</strong> library", url: "https://effect.website/", snippet: "Build <strong>robust</strong> apps &amp; services in TypeScript&#x27;s type system." },
            { title: "Effect &quot;docs&quot;", url: "https://effect.website/docs", snippet: "Escaped markup stays text: &lt;strong&gt;not bold&lt;/strong&gt;" },
            { title: "No URL", url: "", snippet: "dropped" },
            { title: "FTP", url: "ftp://files.example.com/effect.tar", snippet: "dropped: not http(s)" },
            { title: "Repeat", url: "https://effect.website/", snippet: "dropped: same URL as the first" },
            { title: "GitHub", url: "https://github.com/Effect-TS/effect", snippet: "Source" }
          ]
          return json(braveAnswer(request.query.get("q") ?? "", raw.map(braveResult)))
        })
        const provider = yield* Brave.make({ baseUrl: fake.url, apiKey: Redacted.make(BRAVE_KEY), unitPrice: price(5_000n) })

        assert.strictEqual(provider.name, "brave")
        assert.strictEqual(provider.capability, "search")
        assert.deepStrictEqual(provider.unitPrice, { per: "query", priceMicroUsd: 5_000n })
        const quote = provider.quote(searchInput("effect typescript"))
        assert.isTrue(Result.isSuccess(quote))
        if (Result.isSuccess(quote)) assert.strictEqual(quote.success.microUsd, 5_000n)

        const metered = yield* succeeded(provider, searchInput("effect typescript & more"))
        const request = only(fake)
        assert.strictEqual(request.method, "GET")
        assert.strictEqual(request.path, "/res/v1/web/search")
        assert.deepStrictEqual([...request.query.entries()].sort(), [["count", "10"], ["q", "effect typescript & more"]])
        assert.strictEqual(request.headers["x-subscription-token"], BRAVE_KEY)
        assert.strictEqual(request.headers.accept, "application/json")
        assert.isUndefined(request.headers.authorization)
        assert.isUndefined(request.headers.traceparent, "no trace context is sent upstream")
        assert.strictEqual(request.body, "")

        assert.strictEqual(metered.actualMicroUsd, 5_000n)
        assert.deepStrictEqual(metered.output, {
          query: "effect typescript & more",
          totalResults: 3,
          results: [
            { title: "The Effect library", url: "https://effect.website/", snippet: "Build robust apps & services in TypeScript's type system.", position: 1 },
            { title: "Effect \"docs\"", url: "https://effect.website/docs", snippet: "Escaped markup stays text: <strong>not bold</strong>", position: 2 },
            { title: "GitHub", url: "https://github.com/Effect-TS/effect", snippet: "Source", position: 3 }
          ]
        })
      }))

    it.effect("caps the results at numResults, and asks for at most 20", () =>
      Effect.gen(function*() {
        // Answers 20 results whatever was asked, as an upstream ignoring `count` would.
        const fake = yield* startFake((request) => json(braveAnswer(request.query.get("q") ?? "", items(20).map(braveResult))))
        const provider = yield* Brave.make({ baseUrl: fake.url, apiKey: Redacted.make(BRAVE_KEY), unitPrice: price(5_000n) })

        const three = yield* succeeded(provider, searchInput("q", 3))
        assert.strictEqual(fake.requests[0]!.query.get("count"), "3")
        assert.deepStrictEqual(positions(three.output), [1, 2, 3])
        assert.strictEqual(three.output.totalResults, 3)

        const byDefault = yield* succeeded(provider, searchInput("q"))
        assert.strictEqual(fake.requests[1]!.query.get("count"), "10")
        assert.strictEqual(byDefault.output.results.length, 10)

        const fifty = yield* succeeded(provider, searchInput("q", 50))
        assert.strictEqual(fake.requests.length, 3, "one request per call, even for 50")
        assert.strictEqual(fake.requests[2]!.query.get("count"), "20")
        assert.isNull(fake.requests[2]!.query.get("offset"))
        assert.strictEqual(fifty.output.results.length, 20)
        assert.deepStrictEqual(positions(fifty.output), Array.from({ length: 20 }, (_, i) => i + 1))
      }))

    it.effect("an answer without web results is an empty result list", () =>
      Effect.gen(function*() {
        const fake = yield* startFake((request) => {
          const { web: _, ...rest } = braveAnswer(request.query.get("q") ?? "", [])
          return json(rest)
        })
        const provider = yield* Brave.make({ baseUrl: fake.url, apiKey: Redacted.make(BRAVE_KEY), unitPrice: price(5_000n) })
        const metered = yield* succeeded(provider, searchInput("zzqxv nothing matches"))
        assert.deepStrictEqual(metered.output, { results: [], query: "zzqxv nothing matches", totalResults: 0 })
      }))

    it.effect("keeps a path prefix of the base URL and uses the configured name", () =>
      Effect.gen(function*() {
        const fake = yield* startFake((request) => json(braveAnswer(request.query.get("q") ?? "", items(1).map(braveResult))))
        const provider = yield* Brave.make({
          name: "brave-proxy",
          baseUrl: `${fake.url}/gateway/brave/`,
          apiKey: Redacted.make(BRAVE_KEY),
          unitPrice: price(1n)
        })
        assert.strictEqual(provider.name, "brave-proxy")
        yield* succeeded(provider, searchInput("q"))
        assert.strictEqual(only(fake).path, "/gateway/brave/res/v1/web/search")
        fake.answer = () => json({}, 503)
        const failure = yield* failureOf(provider, searchInput("q"))
        assert.strictEqual(failure.provider, "brave-proxy")
      }))
  })

  describe("tavily", () => {
    it.effect("POSTs /search with a bearer key and a JSON body, and maps the answer", () =>
      Effect.gen(function*() {
        const fake = yield* startFake((request) => {
          const query = tavilyQuery(request)
          const raw = [
            { title: "  Effect  —\n TypeScript ", url: "https://effect.website/", snippet: "Effect is a powerful\n\nTypeScript library." },
            { title: "A long page", url: "https://example.com/long", snippet: "x".repeat(5_000) },
            { title: "t".repeat(700), url: "https://example.com/long-title", snippet: "" },
            { title: "Bad URL", url: "javascript:alert(1)", snippet: "dropped" },
            { title: "URL with a newline", url: "https://exa\nmple.com/", snippet: "dropped" },
            { title: "Too long URL", url: `https://example.com/${"a".repeat(2100)}`, snippet: "dropped" }
          ]
          return json(tavilyAnswer(query, raw.map(tavilyResult)))
        })
        const provider = yield* Tavily.make({ baseUrl: fake.url, apiKey: Redacted.make(TAVILY_KEY), unitPrice: price(8_000n) })
        assert.strictEqual(provider.name, "tavily")

        const metered = yield* succeeded(provider, searchInput("what is effect"))
        const request = only(fake)
        assert.strictEqual(request.method, "POST")
        assert.strictEqual(request.path, "/search")
        assert.strictEqual([...request.query.keys()].length, 0)
        assert.strictEqual(request.headers.authorization, `Bearer ${TAVILY_KEY}`)
        assert.match(request.headers["content-type"] ?? "", /^application\/json/)
        assert.strictEqual(request.headers.accept, "application/json")
        assert.isUndefined(request.headers.traceparent)
        assert.deepStrictEqual(JSON.parse(request.body), { query: "what is effect", max_results: 10, search_depth: "basic" })
        assert.notInclude(request.body, TAVILY_KEY, "the key never goes in the body")

        assert.strictEqual(metered.actualMicroUsd, 8_000n)
        const output = metered.output
        assert.strictEqual(output.query, "what is effect")
        assert.strictEqual(output.totalResults, 3)
        assert.deepStrictEqual(positions(output), [1, 2, 3])
        assert.deepStrictEqual(output.results[0], {
          title: "Effect — TypeScript",
          url: "https://effect.website/",
          snippet: "Effect is a powerful TypeScript library.",
          position: 1
        })
        assert.strictEqual(output.results[1]!.snippet.length, 2000)
        assert.isTrue(output.results[1]!.snippet.endsWith("…"))
        assert.strictEqual(output.results[2]!.title.length, 500)
        assert.strictEqual(output.results[2]!.snippet, "")
      }))

    it.effect("caps the results at numResults, and asks for at most 20", () =>
      Effect.gen(function*() {
        const fake = yield* startFake((request) =>
          json(tavilyAnswer(tavilyQuery(request), items(25).map(tavilyResult)))
        )
        const provider = yield* Tavily.make({ baseUrl: fake.url, apiKey: Redacted.make(TAVILY_KEY), unitPrice: price(8_000n) })

        const four = yield* succeeded(provider, searchInput("q", 4))
        assert.strictEqual((JSON.parse(fake.requests[0]!.body) as { max_results: number }).max_results, 4)
        assert.deepStrictEqual(titles(four.output), ["result 1", "result 2", "result 3", "result 4"])
        assert.strictEqual(four.output.totalResults, 4)

        const byDefault = yield* succeeded(provider, searchInput("q"))
        assert.strictEqual(byDefault.output.results.length, 10)

        const fifty = yield* succeeded(provider, searchInput("q", 50))
        assert.strictEqual((JSON.parse(fake.requests[2]!.body) as { max_results: number }).max_results, 20)
        // Fewer than the 50 asked for: everything the upstream gave.
        assert.strictEqual(fifty.output.results.length, 25)
        assert.strictEqual(fifty.output.results[24]!.position, 25)
      }))
  })

  describe("searxng", () => {
    it.effect("GETs /search?q=…&format=json without credentials, and maps the answer", () =>
      Effect.gen(function*() {
        const fake = yield* startFake((request) =>
          json(searxAnswer(request.query.get("q") ?? "", items(12).map(searxResult), { numberOfResults: 48_200 }))
        )
        const provider = yield* SearXNG.make({ baseUrl: `${fake.url}/`, unitPrice: price(100n) })
        assert.strictEqual(provider.name, "searxng")

        const metered = yield* succeeded(provider, searchInput("effect schema"))
        const request = only(fake)
        assert.strictEqual(request.method, "GET")
        assert.strictEqual(request.path, "/search")
        assert.deepStrictEqual([...request.query.entries()].sort(), [["format", "json"], ["q", "effect schema"]])
        assert.isUndefined(request.headers.authorization)
        assert.isUndefined(request.headers.traceparent)

        assert.strictEqual(metered.actualMicroUsd, 100n)
        assert.strictEqual(metered.output.query, "effect schema")
        assert.strictEqual(metered.output.totalResults, 48_200, "the engines' reported total")
        assert.deepStrictEqual(positions(metered.output), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
        assert.deepStrictEqual(metered.output.results[0], {
          title: "result 1",
          url: "https://example.com/result/1",
          snippet: "Snippet of result 1.",
          position: 1
        })
      }))

    it.effect("totalResults is the number returned when the instance reports 0", () =>
      Effect.gen(function*() {
        const fake = yield* startFake((request) => json(searxAnswer(request.query.get("q") ?? "", items(4).map(searxResult))))
        const provider = yield* SearXNG.make({ baseUrl: fake.url, unitPrice: price(100n) })
        const metered = yield* succeeded(provider, searchInput("q", 3))
        assert.strictEqual(metered.output.results.length, 3)
        assert.strictEqual(metered.output.totalResults, 3)
        assert.strictEqual(fake.requests.length, 1, "a page with enough results is the only one read")
      }))

    it.effect("reads further pages (pageno) until there are enough, without repeats", () =>
      Effect.gen(function*() {
        const fake = yield* startFake((request) => {
          const page = Number(request.query.get("pageno") ?? "1")
          // Pages of 10 that overlap by two, as engines' pages do.
          const all = items(60)
          const slice = all.slice((page - 1) * 8, (page - 1) * 8 + 10)
          return json(searxAnswer(request.query.get("q") ?? "", slice.map(searxResult)))
        })
        const provider = yield* SearXNG.make({ baseUrl: fake.url, unitPrice: price(100n) })
        const metered = yield* succeeded(provider, searchInput("q", 25))
        assert.deepStrictEqual(fake.requests.map((r) => r.query.get("pageno")), [null, "2", "3"])
        assert.deepStrictEqual(titles(metered.output), items(25).map((i) => i.title))
        assert.deepStrictEqual(positions(metered.output), Array.from({ length: 25 }, (_, i) => i + 1))
      }))

    it.effect("stops paging at a page that adds nothing, and after MAX_PAGES", () =>
      Effect.gen(function*() {
        const same = yield* startFake((request) => json(searxAnswer(request.query.get("q") ?? "", items(5).map(searxResult))))
        const provider = yield* SearXNG.make({ baseUrl: same.url, unitPrice: price(100n) })
        const metered = yield* succeeded(provider, searchInput("q", 50))
        assert.strictEqual(same.requests.length, 2)
        assert.strictEqual(metered.output.results.length, 5)

        const endless = yield* startFake((request) => {
          const page = Number(request.query.get("pageno") ?? "1")
          return json(searxAnswer(request.query.get("q") ?? "", items(3, `page${page}`).map(searxResult)))
        })
        const many = yield* SearXNG.make({ baseUrl: endless.url, unitPrice: price(100n) })
        const capped = yield* succeeded(many, searchInput("q", 50))
        assert.strictEqual(endless.requests.length, SearXNG.MAX_PAGES)
        assert.strictEqual(capped.output.results.length, 3 * SearXNG.MAX_PAGES)
      }))

    it.effect("a later page that fails or hangs leaves the results already gathered", () =>
      Effect.gen(function*() {
        const fake = yield* startFake((request) =>
          request.query.get("pageno") === null
            ? json(searxAnswer(request.query.get("q") ?? "", items(4).map(searxResult)))
            : json({ error: "boom" }, 500)
        )
        const provider = yield* SearXNG.make({ baseUrl: fake.url, unitPrice: price(100n), timeoutMs: 1_000 })
        const failed = yield* succeeded(provider, searchInput("q", 10))
        assert.strictEqual(failed.output.results.length, 4)
        assert.strictEqual(fake.requests.length, 2)

        fake.answer = (request) =>
          request.query.get("pageno") === null
            ? json(searxAnswer(request.query.get("q") ?? "", items(4).map(searxResult)))
            : { _tag: "hang" }
        const started = Date.now()
        const hung = yield* succeeded(provider, searchInput("q", 10))
        assert.strictEqual(hung.output.results.length, 4)
        assert.isBelow(Date.now() - started, 5_000)
      }))

    it.effect("no results because every engine failed is unavailable", () =>
      Effect.gen(function*() {
        const fake = yield* startFake((request) =>
          json(searxAnswer(request.query.get("q") ?? "", [], { unresponsive: [["google", "timeout"], ["duckduckgo", "CAPTCHA"]] }))
        )
        const provider = yield* SearXNG.make({ baseUrl: fake.url, unitPrice: price(100n) })
        const failure = yield* failureOf(provider, searchInput("q"))
        assert.strictEqual(failure.reason, "unavailable")
        assert.include(failure.message, "google (timeout)")
        assert.strictEqual(fake.requests.length, 1)

        // Some engines failing while others answered is a normal answer.
        fake.answer = (request) =>
          json(searxAnswer(request.query.get("q") ?? "", items(2).map(searxResult), { unresponsive: [["google", "timeout"]] }))
        const metered = yield* succeeded(provider, searchInput("q", 2))
        assert.strictEqual(metered.output.results.length, 2)

        // No results and no failed engine: an empty answer, and no second page asked for.
        fake.requests.length = 0
        fake.answer = (request) => json(searxAnswer(request.query.get("q") ?? "", []))
        const empty = yield* succeeded(provider, searchInput("q"))
        assert.deepStrictEqual(empty.output, { results: [], query: "q", totalResults: 0 })
        assert.strictEqual(fake.requests.length, 1)
      }))

    it.effect("403 means the JSON format is disabled", () =>
      Effect.gen(function*() {
        const fake = yield* startFake(() => text(403, "<!doctype html><title>403 Forbidden</title><h1>Forbidden</h1>", "text/html"))
        const provider = yield* SearXNG.make({ baseUrl: fake.url, unitPrice: price(100n) })
        const failure = yield* failureOf(provider, searchInput("q"))
        assert.strictEqual(failure.reason, "rejected")
        assert.strictEqual(failure.message, "JSON output is disabled on this SearXNG instance")
      }))
  })

  describe("configuration", () => {
    const dies = <A, E, R>(effect: Effect.Effect<A, E, R>, pattern: RegExp) =>
      Effect.gen(function*() {
        const exit = yield* Effect.exit(effect)
        assert.isTrue(Exit.isFailure(exit) && Cause.hasDies(exit.cause), "a configuration error is a defect")
        if (Exit.isFailure(exit)) assert.match(String(Cause.squash(exit.cause)), pattern)
      })

    it.effect("bad options are refused when the provider is built", () =>
      Effect.gen(function*() {
        const key = Redacted.make(BRAVE_KEY)
        yield* dies(Brave.make({ baseUrl: "ftp://example.com", apiKey: key, unitPrice: price(1n) }), /http\(s\)/)
        yield* dies(Brave.make({ baseUrl: "https://user:pw@example.com", apiKey: key, unitPrice: price(1n) }), /credentials/)
        yield* dies(Brave.make({ apiKey: Redacted.make("  "), unitPrice: price(1n) }), /key is empty/)
        yield* dies(Tavily.make({ apiKey: key, unitPrice: { per: "page", priceMicroUsd: 1n } }), /per query/)
        yield* dies(Tavily.make({ apiKey: key, unitPrice: price(1n), timeoutMs: 0 }), /timeoutMs/)
        yield* dies(SearXNG.make({ baseUrl: "not a url", unitPrice: price(1n) }), /not a URL/)
        yield* dies(SearXNG.make({ baseUrl: "http://127.0.0.1:1", unitPrice: price(1n), maxResponseBytes: 1.5 }), /maxResponseBytes/)
      }))
  })

  // -------------------------------------------------------------------------
  // Every failure mode, for every provider

  for (const subject of subjects) {
    describe(`${subject.name} failures`, () => {
      const statusCases: ReadonlyArray<readonly [number, ProviderFailure["reason"]]> = [
        [401, "rejected"],
        [403, "rejected"],
        [422, "rejected"],
        [429, "rate_limited"],
        [500, "unavailable"],
        [502, "unavailable"],
        [503, "unavailable"]
      ]
      for (const [status, reason] of statusCases) {
        it.effect(`HTTP ${status} is ${reason}`, () =>
          Effect.gen(function*() {
            const fake = yield* startFake(() => subject.error(status, `Upstream says ${status}`))
            const provider = yield* subject.make(fake.url)
            const failure = yield* failureOf(provider, searchInput("q"))
            assert.strictEqual(failure.reason, reason)
            assert.strictEqual(failure.provider, subject.name)
            assert.strictEqual(fake.requests.length, 1)
            if (!(subject.name === "searxng" && status === 403)) assert.include(failure.message, `Upstream says ${status}`)
          }))
      }

      it.effect("the upstream's message is cut to 300 characters and never carries the key", () =>
        Effect.gen(function*() {
          const long = `Invalid token ${subject.secret ?? "none"} given; ${"please check your subscription. ".repeat(40)}`
          const fake = yield* startFake(() => subject.error(401, long))
          const provider = yield* subject.make(fake.url)
          const failure = yield* failureOf(provider, searchInput("q"))
          assert.strictEqual(failure.reason, "rejected")
          const upstream = failure.message.slice(failure.message.indexOf(": ") + 2)
          assert.isAtMost(upstream.length, 300)
          assert.include(upstream, "Invalid token")
          if (subject.secret !== undefined) {
            assert.notInclude(failure.message, subject.secret)
            assert.include(upstream, "[redacted]")
          }
        }))

      it.effect("no answer within timeoutMs is timeout", () =>
        Effect.gen(function*() {
          const fake = yield* startFake(() => ({ _tag: "hang" }))
          const provider = yield* subject.make(fake.url, { timeoutMs: 300 })
          const started = Date.now()
          const failure = yield* failureOf(provider, searchInput("q"))
          assert.strictEqual(failure.reason, "timeout")
          assert.isAtLeast(Date.now() - started, 250)
          assert.isBelow(Date.now() - started, 5_000)
        }))

      it.effect("a refused connection is unavailable", () =>
        Effect.gen(function*() {
          const provider = yield* subject.make(yield* refusedUrl)
          const failure = yield* failureOf(provider, searchInput("q"))
          assert.strictEqual(failure.reason, "unavailable")
          assert.include(failure.message, "ECONNREFUSED")
        }))

      it.effect("an answer that is not JSON is malformed", () =>
        Effect.gen(function*() {
          const fake = yield* startFake(() => text(200, "<html><body>Search results</body></html>", "text/html"))
          const provider = yield* subject.make(fake.url)
          const failure = yield* failureOf(provider, searchInput("q"))
          assert.strictEqual(failure.reason, "malformed")
        }))

      it.effect("an answer without the expected fields is malformed", () =>
        Effect.gen(function*() {
          const fake = yield* startFake(() => json(subject.missingFields))
          const provider = yield* subject.make(fake.url)
          const failure = yield* failureOf(provider, searchInput("q"))
          assert.strictEqual(failure.reason, "malformed")
          fake.answer = () => json([1, 2, 3])
          assert.strictEqual((yield* failureOf(provider, searchInput("q"))).reason, "malformed")
        }))

      it.effect("an endless body is too_large, and reading stops at the cap", () =>
        Effect.gen(function*() {
          const fake = yield* startFake(() => ({ _tag: "endless" }))
          const provider = yield* subject.make(fake.url, { maxResponseBytes: 64 * 1024 })
          const started = Date.now()
          const failure = yield* failureOf(provider, searchInput("q"))
          assert.strictEqual(failure.reason, "too_large")
          assert.isBelow(Date.now() - started, 5_000)
        }))

      it.effect("a declared length over the cap is too_large before the body is read", () =>
        Effect.gen(function*() {
          const fake = yield* startFake(() => ({ _tag: "declared", length: 10 * 1024 * 1024 }))
          const provider = yield* subject.make(fake.url, { timeoutMs: 3_000 })
          const failure = yield* failureOf(provider, searchInput("q"))
          assert.strictEqual(failure.reason, "too_large")
        }))

      it.effect("a connection cut during the answer is a network failure", () =>
        Effect.gen(function*() {
          const fake = yield* startFake(() => ({ _tag: "cut" }))
          const provider = yield* subject.make(fake.url)
          const failure = yield* failureOf(provider, searchInput("q"))
          assert.strictEqual(failure.reason, "network")
        }))

      it.effect("the documented answer succeeds at the unit price (the fake itself is sound)", () =>
        Effect.gen(function*() {
          const fake = yield* startFake((request) => subject.answer(request, items(3)))
          const provider = yield* subject.make(fake.url)
          const metered = yield* succeeded(provider, searchInput("q"))
          assert.strictEqual(metered.output.results.length, 3)
          assert.strictEqual(metered.actualMicroUsd, provider.unitPrice?.priceMicroUsd)
        }))

      it.effect("drops results without a usable http(s) URL or seen before, and bounds the text", () =>
        Effect.gen(function*() {
          const fake = yield* startFake((request) => subject.answer(request, untidy))
          const provider = yield* subject.make(fake.url)
          const { output } = yield* succeeded(provider, searchInput("q"))
          assert.deepStrictEqual(output.results.map((r) => [r.position, r.url]), [
            [1, "https://example.com/first"],
            [2, "https://example.com/long"],
            [3, "http://example.org/page?x=1&y=2"]
          ])
          assert.strictEqual(output.totalResults, 3)
          const long = output.results[1]!
          assert.isAtMost(long.title.length, 500)
          assert.isAbove(long.title.length, 490)
          assert.notMatch(long.title, /[\ud800-\udbff](?![\udc00-\udfff])/, "no surrogate pair is cut in half")
          assert.strictEqual(long.snippet.length, 2000)
          assert.isTrue(long.snippet.endsWith("…"))
        }))
    })
  }
})
