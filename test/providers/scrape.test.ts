import { upstreamLayers } from "../support/upstreamLayers.ts"
import { assert, describe, it, layer } from "@effect/vitest"
import { Cause, Effect, Exit, type Layer, Redacted, Result } from "effect"
import * as SafeHttp from "../../adapters/net/SafeHttp.ts"
import * as BuiltinScrape from "../../adapters/providers/scrape/builtin.ts"
import * as Firecrawl from "../../adapters/providers/scrape/firecrawl.ts"
import { type Provider, ProviderFailure } from "../../src/capabilities/Provider.ts"
import type { ScrapeInput } from "../../src/capabilities/schemas.ts"
import { ValidationError } from "../../src/domain/errors.ts"
import type { OutboundHttp } from "../../src/ports/Net.ts"
import { type Answer, json, type Recorded, refusedUrl, startFake, text } from "./fakeUpstream.ts"
import { html, LISTING_HTML, page, startSite, testOutboundHttp } from "./pages.ts"

/**
 * The `scrape` providers against pages and a fake Firecrawl served on
 * 127.0.0.1. The built-in scraper runs over both the test fetcher and the
 * real URL-safe fetcher (SafeHttp, with 127.0.0.1 allowed).
 */

const PRICE = { per: "page", priceMicroUsd: 500n }
const SELECTORS = { headlines: "h2", prices: ".price" }

/** Runs a call with a hard bound on the wait, whatever the provider does. */
const runCall = (provider: Provider<"scrape">, input: ScrapeInput) =>
  provider.run(input, { microUsd: PRICE.priceMicroUsd }).pipe(
    Effect.timeoutOrElse({ duration: "20 seconds", orElse: () => Effect.die(new Error("the call did not finish within 20 s")) })
  )

const scrape = (provider: Provider<"scrape">, input: ScrapeInput) =>
  Effect.map(runCall(provider, input), (metered) => {
    assert.strictEqual(metered.actualMicroUsd, PRICE.priceMicroUsd, "a page costs the unit price")
    return metered.output
  })

/** The failure of a call, checked to be a ProviderFailure and never a defect. */
const failureOf = (provider: Provider<"scrape">, input: ScrapeInput) =>
  Effect.gen(function*() {
    const exit = yield* Effect.exit(runCall(provider, input))
    if (Exit.isSuccess(exit)) return assert.fail(`expected a failure, got ${JSON.stringify(exit.value.output).slice(0, 300)}`)
    assert.isFalse(Cause.hasDies(exit.cause), `a defect: ${Cause.pretty(exit.cause)}`)
    const error = Cause.squash(exit.cause)
    assert.instanceOf(error, ProviderFailure)
    return error as ProviderFailure
  })

/** The links the listing page carries, seen from `{site}/shop/tools`. */
const listingLinks = (site: string) => [
  { href: `${site}/`, text: "Home" },
  { href: `${site}/tools`, text: "Tools" },
  { href: `${site}/p/trowel`, text: "Details" },
  { href: `${site}/shop/p/shears?ref=list`, text: "Details" },
  { href: "https://cdn.example.org/manuals/can.pdf", text: "Manual" },
  { href: `${site}/shop/tools#top`, text: "Back to top" },
  // Protocol-relative: the page's own scheme.
  { href: `${new URL(site).protocol}//other.example/path`, text: "Partner" }
]

const EXTRACTED = {
  headlines: ["Stainless steel trowel", "Pruning shears", "Watering can, 10 l"],
  prices: ["$19.99", "$34.50", "$12.00"]
}

const invalidSelectorQuote = (provider: Provider<"scrape">) => {
  const quote = provider.quote({ url: "https://example.test/", selectors: { headlines: "h2", broken: "div >> p" } })
  assert.isTrue(Result.isFailure(quote))
  const error = (quote as Result.Failure<unknown, unknown>).failure
  assert.instanceOf(error, ValidationError)
  const validation = error as ValidationError
  assert.include(validation.message, "invalid CSS selector")
  assert.include(validation.message, "broken")
  assert.strictEqual(validation.issues[0]?.path, "selectors.broken")
  for (const bad of ["h2[", ":no-such-pseudo", "p,", "::before", "  "]) {
    assert.isTrue(Result.isFailure(provider.quote({ url: "https://example.test/", selectors: { s: bad } })), bad)
  }
  assert.deepStrictEqual(
    Result.getOrThrow(provider.quote({ url: "https://example.test/", selectors: { a: "section.product > h2", b: "p:not(.sale)" } })),
    { microUsd: 500n }
  )
  assert.deepStrictEqual(Result.getOrThrow(provider.quote({ url: "https://example.test/" })), { microUsd: 500n })
}

const fetchers: ReadonlyArray<readonly [string, Layer.Layer<OutboundHttp>]> = [
  ["test fetcher", testOutboundHttp],
  ["SafeHttp", SafeHttp.layer({ allowHosts: ["127.0.0.1"] })]
]

for (const [fetcherName, fetcher] of fetchers) {
  layer(fetcher, { excludeTestServices: true })(`built-in scraper over ${fetcherName}`, (it) => {
    const scraper = (options: Partial<BuiltinScrape.Options> = {}) => BuiltinScrape.make({ unitPrice: PRICE, ...options })

    it.effect("extracts each named selector's texts, absolute de-duplicated links, and the HTML", () =>
      Effect.gen(function*() {
        const site = yield* startSite({
          "/tools": { _tag: "redirect", location: "/shop/tools" },
          "/shop/tools": html(LISTING_HTML)
        })
        const provider = yield* scraper()
        assert.strictEqual(provider.name, "scraper")
        assert.strictEqual(provider.capability, "scrape")
        const out = yield* scrape(provider, { url: `${site.url}/tools`, selectors: SELECTORS })
        assert.strictEqual(out.url, `${site.url}/shop/tools`)
        assert.strictEqual(out.status, 200)
        assert.strictEqual(out.contentType, "text/html; charset=utf-8")
        assert.deepStrictEqual(out.extracted, EXTRACTED)
        assert.deepStrictEqual(out.links, listingLinks(site.url))
        assert.strictEqual(out.html, LISTING_HTML)
        assert.isFalse(out.truncated)
        assert.include(site.requests[1]!.headers.accept ?? "", "text/html")
      }))

    it.effect("includeHtml false leaves the HTML out; no selectors, no extracted", () =>
      Effect.gen(function*() {
        const site = yield* startSite({ "/shop/tools": html(LISTING_HTML) })
        const out = yield* scrape(yield* scraper(), { url: `${site.url}/shop/tools`, includeHtml: false })
        assert.isFalse("html" in out)
        assert.isFalse("extracted" in out)
        assert.strictEqual(out.links.length, 7)
      }))

    it.effect("an invalid selector is a ValidationError from quote, before anything is fetched", () =>
      Effect.gen(function*() {
        invalidSelectorQuote(yield* scraper())
      }))

    it.effect("a page over the cap is scraped as far as it was read and marked truncated", () =>
      Effect.gen(function*() {
        const products = Array.from({ length: 200 }, (_, i) =>
          `<section class="product"><h2>Product ${i}</h2><p class="price">$${i}.00</p><a href="/p/${i}">Details</a></section>`).join("\n")
        const site = yield* startSite({ "/long": html(`<!DOCTYPE html><html><head><title>All</title></head><body>${products}</body></html>`) })
        const out = yield* scrape(yield* scraper({ maxBytes: 4096 }), { url: `${site.url}/long`, selectors: SELECTORS })
        assert.isTrue(out.truncated)
        assert.isAtMost(Buffer.byteLength(out.html ?? ""), 4096)
        const headlines = out.extracted?.headlines ?? []
        assert.isAbove(headlines.length, 10)
        assert.isBelow(headlines.length, 200)
        assert.strictEqual(headlines[0], "Product 0")
      }))

    it.effect("at most 100 matches per selector and 500 links, marked truncated", () =>
      Effect.gen(function*() {
        const items = Array.from({ length: 700 }, (_, i) => `<li><a href="/item/${i}">Item ${i}</a></li>`).join("")
        const site = yield* startSite({ "/many": html(`<html><body><ul>${items}</ul></body></html>`) })
        const out = yield* scrape(yield* scraper(), { url: `${site.url}/many`, selectors: { items: "li" }, includeHtml: false })
        assert.strictEqual(out.extracted?.items?.length, 100)
        assert.strictEqual(out.links.length, 500)
        assert.strictEqual(out.links[499]?.href, `${site.url}/item/499`)
        assert.isTrue(out.truncated)
      }))

    it.effect("text that is not HTML is returned as it is; binary content is rejected", () =>
      Effect.gen(function*() {
        const csv = "sku,price\ntrowel,19.99\nshears,34.50\n"
        const site = yield* startSite({
          "/prices.csv": page("text/csv; charset=utf-8", csv),
          "/api/prices": page("application/json", "{\"trowel\":19.99}"),
          "/photo.jpg": page("image/jpeg", Uint8Array.from([0xff, 0xd8, 0xff, 0xe0, 0, 16, 0x4a, 0x46]))
        })
        const provider = yield* scraper()
        const out = yield* scrape(provider, { url: `${site.url}/prices.csv`, selectors: SELECTORS })
        assert.strictEqual(out.html, csv)
        assert.strictEqual(out.contentType, "text/csv; charset=utf-8")
        assert.deepStrictEqual(out.extracted, { headlines: [], prices: [] })
        assert.deepStrictEqual(out.links, [])
        assert.strictEqual((yield* scrape(provider, { url: `${site.url}/api/prices` })).html, "{\"trowel\":19.99}")
        const failure = yield* failureOf(provider, { url: `${site.url}/photo.jpg` })
        assert.strictEqual(failure.reason, "rejected")
        assert.include(failure.message, "image/jpeg")
      }))

    it.effect("a 404 page is scraped and returned with its status", () =>
      Effect.gen(function*() {
        const site = yield* startSite({ "/gone": html("<html><body><h2>Not found</h2><a href='/'>Home</a></body></html>", 404) })
        const out = yield* scrape(yield* scraper(), { url: `${site.url}/gone`, selectors: { headlines: "h2" } })
        assert.strictEqual(out.status, 404)
        assert.deepStrictEqual(out.extracted, { headlines: ["Not found"] })
      }))

    it.effect("a refused URL is blocked; a silent page is timeout; a refused connection is network", () =>
      Effect.gen(function*() {
        const site = yield* startSite({ "/slow": { _tag: "hang" } })
        const provider = yield* scraper({ timeoutMs: 300 })
        assert.strictEqual((yield* failureOf(provider, { url: "http://192.168.1.1/router" })).reason, "blocked")
        const started = Date.now()
        assert.strictEqual((yield* failureOf(provider, { url: `${site.url}/slow` })).reason, "timeout")
        assert.isBelow(Date.now() - started, 5_000)
        assert.strictEqual((yield* failureOf(provider, { url: `${yield* refusedUrl}/x` })).reason, "network")
      }))
  })
}

describe("scraping helpers", () => {
  it("a <base href> decides how relative links resolve; text falls back to aria-label", () => {
    const scraped = BuiltinScrape.scrapeHtml(
      `<html><head><base href="https://static.example.test/v2/"></head><body>
        <a href="guide.html">Guide</a><a href="/abs">Abs</a><a href="guide.html" aria-label="Guide again"></a>
        <a href="icon" aria-label="Settings"><svg><text>gear</text></svg></a></body></html>`,
      "https://example.test/page",
      { includeHtml: false }
    )
    assert.deepStrictEqual(scraped.links, [
      { href: "https://static.example.test/v2/guide.html", text: "Guide" },
      { href: "https://static.example.test/abs", text: "Abs" },
      { href: "https://static.example.test/v2/icon", text: "Settings" }
    ])
  })
})

// ---------------------------------------------------------------------------
// Firecrawl
// ---------------------------------------------------------------------------

const FIRECRAWL_KEY = "fc-0b9a7c4e2d1f4a3b8c6d5e4f3a2b1c0d"
const PAGE_URL = "https://shop.example.test/shop/tools"

/** The documented v2 answer for `formats: ["rawHtml", "links"]`. */
const firecrawlAnswer = (overrides: Record<string, unknown> = {}) => ({
  success: true,
  data: {
    rawHtml: LISTING_HTML,
    links: [
      "https://shop.example.test/",
      "https://shop.example.test/tools",
      "https://shop.example.test/p/trowel",
      "https://shop.example.test/shop/p/shears?ref=list",
      "https://shop.example.test/cart?from=script"
    ],
    metadata: {
      title: "Garden tools — Greenleaf",
      language: "en",
      sourceURL: "https://shop.example.test/tools",
      url: PAGE_URL,
      statusCode: 200,
      contentType: "text/html; charset=utf-8",
      proxyUsed: "basic",
      cacheState: "miss",
      creditsUsed: 1
    },
    ...overrides
  }
})

const firecrawlError = (error: string) => ({ success: false, error })

layer(upstreamLayers, { excludeTestServices: true })("Firecrawl", (it) => {
  const firecrawl = (baseUrl: string, options: Partial<Firecrawl.Options> = {}) =>
    Firecrawl.make({ baseUrl, apiKey: Redacted.make(FIRECRAWL_KEY), unitPrice: PRICE, ...options })
  const only = (requests: ReadonlyArray<Recorded>) => {
    assert.strictEqual(requests.length, 1, "exactly one request")
    return requests[0]!
  }

  it.effect("POSTs /v2/scrape with url and formats, and maps the documented answer", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(() => json(firecrawlAnswer()))
      const provider = yield* firecrawl(fake.url, { timeoutMs: 30_000 })
      assert.strictEqual(provider.name, "firecrawl")
      const out = yield* scrape(provider, { url: "https://shop.example.test/tools", selectors: SELECTORS })

      const request = only(fake.requests)
      assert.strictEqual(request.method, "POST")
      assert.strictEqual(request.path, "/v2/scrape")
      assert.strictEqual(request.headers.authorization, `Bearer ${FIRECRAWL_KEY}`)
      assert.match(request.headers["content-type"] ?? "", /^application\/json/)
      assert.deepStrictEqual(JSON.parse(request.body), {
        url: "https://shop.example.test/tools",
        formats: ["rawHtml", "links"],
        onlyMainContent: false,
        timeout: 25_000
      })

      assert.strictEqual(out.url, PAGE_URL)
      assert.strictEqual(out.status, 200)
      assert.strictEqual(out.contentType, "text/html; charset=utf-8")
      assert.strictEqual(out.html, LISTING_HTML)
      assert.deepStrictEqual(out.extracted, EXTRACTED)
      assert.deepStrictEqual(out.links, [
        ...listingLinks("https://shop.example.test"),
        { href: "https://shop.example.test/cart?from=script", text: "" }
      ])
      assert.isFalse(out.truncated)
    }))

  it.effect("without a key no Authorization is sent; includeHtml false; the site's status is passed on", () =>
    Effect.gen(function*() {
      const answer = firecrawlAnswer()
      const fake = yield* startFake(() =>
        json({ ...answer, data: { ...answer.data, metadata: { ...answer.data.metadata, statusCode: 404 } } })
      )
      const out = yield* scrape(yield* Firecrawl.make({ baseUrl: fake.url, unitPrice: PRICE }), { url: PAGE_URL, includeHtml: false })
      assert.isUndefined(only(fake.requests).headers.authorization)
      assert.isFalse("html" in out)
      assert.isFalse("extracted" in out)
      assert.strictEqual(out.status, 404)
    }))

  it.effect("an invalid selector is a ValidationError from quote", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(() => json(firecrawlAnswer()))
      invalidSelectorQuote(yield* firecrawl(fake.url))
      assert.strictEqual(fake.requests.length, 0)
    }))

  const statuses: ReadonlyArray<readonly [number, Answer, ProviderFailure["reason"]]> = [
    [401, json(firecrawlError(`Unauthorized: Invalid token ${FIRECRAWL_KEY}`), 401), "rejected"],
    [402, json(firecrawlError("Payment Required: Insufficient credits"), 402), "rejected"],
    [403, json(firecrawlError("Forbidden"), 403), "rejected"],
    [408, json(firecrawlError("Request Timeout"), 408), "timeout"],
    [429, json(firecrawlError("Rate limit exceeded"), 429), "rate_limited"],
    [500, json({ success: false, code: "UNKNOWN_ERROR", error: "An unexpected error occurred on the server." }, 500), "unavailable"],
    [502, text(502, "<html><body>Bad Gateway</body></html>", "text/html"), "unavailable"]
  ]
  for (const [status, answer, reason] of statuses) {
    it.effect(`HTTP ${status} is ${reason}`, () =>
      Effect.gen(function*() {
        const fake = yield* startFake(() => answer)
        const failure = yield* failureOf(yield* firecrawl(fake.url), { url: PAGE_URL })
        assert.strictEqual(failure.reason, reason)
        assert.strictEqual(failure.provider, "firecrawl")
        assert.include(failure.message, String(status))
        assert.notInclude(failure.message, FIRECRAWL_KEY, "the key never appears in a failure")
      }))
  }

  it.effect("success false in a 200 is rejected with Firecrawl's message", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(() => json(firecrawlError("All scraping engines failed!")))
      const failure = yield* failureOf(yield* firecrawl(fake.url), { url: PAGE_URL })
      assert.strictEqual(failure.reason, "rejected")
      assert.include(failure.message, "All scraping engines failed!")
    }))

  it.effect("an answer that is not JSON, or lacks the page, is malformed", () =>
    Effect.gen(function*() {
      const notJson = yield* startFake(() => text(200, "<html>maintenance</html>", "text/html"))
      assert.strictEqual((yield* failureOf(yield* firecrawl(notJson.url), { url: PAGE_URL })).reason, "malformed")
      const noHtml = yield* startFake(() => json({ success: true, data: { markdown: "# Garden tools", metadata: { statusCode: 200 } } }))
      const failure = yield* failureOf(yield* firecrawl(noHtml.url), { url: PAGE_URL })
      assert.strictEqual(failure.reason, "malformed")
      assert.include(failure.message, "rawHtml")
      const badStatus = yield* startFake(() => json(firecrawlAnswer({ metadata: { statusCode: "200" } })))
      assert.strictEqual((yield* failureOf(yield* firecrawl(badStatus.url), { url: PAGE_URL })).reason, "malformed")
    }))

  it.effect("no answer within timeoutMs is timeout; an endless body is too_large; a refused connection is network", () =>
    Effect.gen(function*() {
      const hang = yield* startFake(() => ({ _tag: "hang" }))
      const started = Date.now()
      assert.strictEqual((yield* failureOf(yield* firecrawl(hang.url, { timeoutMs: 300 }), { url: PAGE_URL })).reason, "timeout")
      assert.isBelow(Date.now() - started, 5_000)
      const endless = yield* startFake(() => ({ _tag: "endless" }))
      const large = yield* failureOf(yield* firecrawl(endless.url, { maxResponseBytes: 64 * 1024 }), { url: PAGE_URL })
      assert.strictEqual(large.reason, "too_large")
      assert.strictEqual((yield* failureOf(yield* firecrawl(yield* refusedUrl), { url: PAGE_URL })).reason, "network")
    }))

  it.effect("bad options are refused when the provider is built", () =>
    Effect.gen(function*() {
      for (const options of [{ baseUrl: "api.firecrawl.dev" }, { baseUrl: "https://api.firecrawl.dev?x=1" }, { maxResponseBytes: -1 }]) {
        const exit = yield* Effect.exit(Firecrawl.make({ unitPrice: PRICE, ...options }))
        assert.isTrue(Exit.isFailure(exit) && Cause.hasDies(exit.cause), JSON.stringify(options))
      }
    }))
})
