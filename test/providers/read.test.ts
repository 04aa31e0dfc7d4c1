import { upstreamLayers } from "../support/upstreamLayers.ts"
import { assert, describe, it, layer } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Redacted, Result } from "effect"
import * as SafeHttp from "../../adapters/net/SafeHttp.ts"
import * as BuiltinRead from "../../adapters/providers/read/builtin.ts"
import * as Jina from "../../adapters/providers/read/jina.ts"
import * as Page from "../../adapters/providers/kit/page.ts"
import * as ReadPage from "../../adapters/providers/kit/readPage.ts"
import { type Provider, ProviderFailure } from "../../src/capabilities/Provider.ts"
import type { ReadOutput } from "../../src/capabilities/schemas.ts"
import type { OutboundHttp } from "../../src/ports/Net.ts"
import { type Answer, json, type Recorded, refusedUrl, startFake, text } from "./fakeUpstream.ts"
import { ARTICLE_HTML, ARTICLE_JUNK, ARTICLE_SENTENCES, html, page, startSite, testOutboundHttp } from "./pages.ts"

/**
 * The `read` providers against pages and a fake Jina served on 127.0.0.1.
 * The built-in reader runs over both the test fetcher and the real
 * URL-safe fetcher (SafeHttp, with 127.0.0.1 allowed).
 */

const PRICE = { per: "page", priceMicroUsd: 500n }

/** Runs a call with a hard bound on the wait, whatever the provider does. */
const runCall = (provider: Provider<"read">, url: string) =>
  provider.run({ url }, { microUsd: PRICE.priceMicroUsd }).pipe(
    Effect.timeoutOrElse({ duration: "20 seconds", orElse: () => Effect.die(new Error("the call did not finish within 20 s")) })
  )

/** The failure of a call, checked to be a ProviderFailure and never a defect. */
const failureOf = (provider: Provider<"read">, url: string) =>
  Effect.gen(function*() {
    const exit = yield* Effect.exit(runCall(provider, url))
    if (Exit.isSuccess(exit)) return assert.fail(`expected a failure, got ${JSON.stringify(exit.value.output).slice(0, 300)}`)
    assert.isFalse(Cause.hasDies(exit.cause), `a defect: ${Cause.pretty(exit.cause)}`)
    const error = Cause.squash(exit.cause)
    assert.instanceOf(error, ProviderFailure)
    return error as ProviderFailure
  })

const read = (provider: Provider<"read">, url: string) =>
  Effect.map(runCall(provider, url), (metered) => {
    assert.strictEqual(metered.actualMicroUsd, PRICE.priceMicroUsd, "a page costs the unit price")
    return metered.output
  })

const includesAll = (haystack: string, needles: ReadonlyArray<string>, what: string) => {
  for (const needle of needles) assert.include(haystack, needle, `${what} has ${JSON.stringify(needle)}`)
}
const includesNone = (haystack: string, needles: ReadonlyArray<string>, what: string) => {
  for (const needle of needles) assert.notInclude(haystack, needle, `${what} leaves out ${JSON.stringify(needle)}`)
}

const fetchers: ReadonlyArray<readonly [string, Layer.Layer<OutboundHttp>]> = [
  ["test fetcher", testOutboundHttp],
  ["SafeHttp", SafeHttp.layer({ allowHosts: ["127.0.0.1"] })]
]

for (const [fetcherName, fetcher] of fetchers) {
  layer(fetcher, { excludeTestServices: true })(`built-in reader over ${fetcherName}`, (it) => {
    const reader = (options: Partial<BuiltinRead.Options> = {}) => BuiltinRead.make({ unitPrice: PRICE, ...options })

    it.effect("reads an article: title, byline, site, the story's text without the page around it, Markdown", () =>
      Effect.gen(function*() {
        const site = yield* startSite({
          "/old/tidal": { _tag: "redirect", location: "/news/tidal-power" },
          "/news/tidal-power": html(ARTICLE_HTML)
        })
        const provider = yield* reader()
        assert.strictEqual(provider.name, "readability")
        assert.strictEqual(provider.capability, "read")
        assert.deepStrictEqual(provider.unitPrice, PRICE)
        assert.deepStrictEqual(Result.getOrThrow(provider.quote({ url: `${site.url}/old/tidal` })), { microUsd: 500n })

        const out = yield* read(provider, `${site.url}/old/tidal`)
        assert.strictEqual(out.url, `${site.url}/news/tidal-power`, "the final URL, after the redirect")
        assert.strictEqual(out.title, "How Tidal Power Could Light Coastal Towns")
        assert.strictEqual(out.byline, "Maria Keller")
        assert.strictEqual(out.siteName, "The Coastal Ledger")
        assert.strictEqual(out.excerpt, "Engineers in three harbour towns are testing turbines that turn the tide into electricity.")
        includesAll(out.text, ARTICLE_SENTENCES, "text")
        includesNone(out.text, ARTICLE_JUNK, "text")
        assert.notMatch(out.text, /[ \t]{2,}|\n{3,}/, "whitespace is normalised")
        assert.include(out.text, "A predictable source of power\n\nEngineers say", "a heading stands on its own line")
        assert.include(out.text, "autumn 2025\nTwelve more planned by 2031\n", "list items on lines of their own")
        assert.strictEqual(out.length, out.text.length)

        includesAll(out.markdown, ARTICLE_SENTENCES.slice(2), "markdown")
        includesNone(out.markdown, ARTICLE_JUNK, "markdown")
        assert.match(out.markdown, /^## A predictable source of power$/m)
        assert.match(out.markdown, /^## What happens next$/m)
        assert.include(out.markdown, `[cooperative's open data page](${site.url}/data/tidal-output)`, "links are absolute")
        assert.match(out.markdown, /^- +Three turbines installed in autumn 2025$/m)
        assert.match(out.markdown, /^> "The sea has fed this town/m)
        assert.notMatch(out.markdown, /<\/?(?:p|div|a|h2)\b/, "no HTML left")

        assert.deepStrictEqual(site.requests.map((r) => r.path), ["/old/tidal", "/news/tidal-power"])
        assert.include(site.requests[1]!.headers.accept ?? "", "text/html")
      }))

    it.effect("a page without an article still answers its title and the visible text of its body", () =>
      Effect.gen(function*() {
        const site = yield* startSite({
          "/soon": html(`<!DOCTYPE html><html><head><title>Coming soon</title>
            <script>var launch = "2026-05-01"</script></head>
            <body><aside>Our new site is coming soon.</aside><button>Notify me</button>
            <div hidden>secret draft</div><style>body { color: red }</style></body></html>`)
        })
        const out = yield* read(yield* reader(), `${site.url}/soon`)
        assert.strictEqual(out.title, "Coming soon")
        assert.strictEqual(out.text, "Our new site is coming soon.\n\nNotify me")
        assert.strictEqual(out.markdown, out.text)
        assert.isNull(out.byline)
        assert.isNull(out.excerpt)
        assert.strictEqual(out.length, out.text.length)
      }))

    it.effect("a page over the 5 MiB cap is too_large, not a misleading part of an article", () =>
      Effect.gen(function*() {
        const site = yield* startSite({ "/huge": { _tag: "huge", bytes: 6 * 1024 * 1024 } })
        const failure = yield* failureOf(yield* reader(), `${site.url}/huge`)
        assert.strictEqual(failure.reason, "too_large")
        assert.strictEqual(failure.provider, "readability")
        assert.include(failure.message, String(5 * 1024 * 1024))
      }))

    it.effect("a smaller cap applies too (maxBytes)", () =>
      Effect.gen(function*() {
        const site = yield* startSite({ "/article": html(ARTICLE_HTML) })
        assert.strictEqual((yield* failureOf(yield* reader({ maxBytes: 1000 }), `${site.url}/article`)).reason, "too_large")
      }))

    it.effect("text/plain is returned as it is", () =>
      Effect.gen(function*() {
        const body = "Tide tables for March\n\n  High water 06:12\nLow water 12:31\n"
        const site = yield* startSite({ "/tides.txt": page("text/plain; charset=utf-8", body) })
        const out = yield* read(yield* reader(), `${site.url}/tides.txt`)
        assert.strictEqual(out.text, body)
        assert.strictEqual(out.markdown, body)
        assert.isNull(out.title)
        assert.strictEqual(out.length, body.length)
      }))

    it.effect("JSON is pretty-printed (a fenced block in markdown)", () =>
      Effect.gen(function*() {
        const site = yield* startSite({ "/api/tide": page("application/json", "{\"station\":\"Avonmouth\",\"heights\":[12.2,0.8]}") })
        const out = yield* read(yield* reader(), `${site.url}/api/tide`)
        const pretty = JSON.stringify({ station: "Avonmouth", heights: [12.2, 0.8] }, null, 2)
        assert.strictEqual(out.text, pretty)
        assert.strictEqual(out.markdown, `\`\`\`json\n${pretty}\n\`\`\``)
      }))

    it.effect("images, PDF and octet-stream are rejected", () =>
      Effect.gen(function*() {
        const png = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52])
        const site = yield* startSite({
          "/logo.png": page("image/png", png),
          "/report.pdf": page("application/pdf", "%PDF-1.7\n%\u00e2\u00e3"),
          "/blob": page("application/octet-stream", png),
          "/undeclared": page(null, png)
        })
        const provider = yield* reader()
        const failure = yield* failureOf(provider, `${site.url}/logo.png`)
        assert.strictEqual(failure.reason, "rejected")
        assert.include(failure.message, "unsupported content type image/png")
        assert.include((yield* failureOf(provider, `${site.url}/report.pdf`)).message, "application/pdf")
        assert.strictEqual((yield* failureOf(provider, `${site.url}/blob`)).reason, "rejected")
        assert.strictEqual((yield* failureOf(provider, `${site.url}/undeclared`)).reason, "rejected")
      }))

    it.effect("a page answering 404 (or 500) is rejected, saying so", () =>
      Effect.gen(function*() {
        const site = yield* startSite({
          "/gone": html("<html><head><title>Not found</title></head><body><p>This page has gone.</p></body></html>", 404),
          "/broken": html("<html><body>Internal error</body></html>", 500)
        })
        const provider = yield* reader()
        const failure = yield* failureOf(provider, `${site.url}/gone`)
        assert.strictEqual(failure.reason, "rejected")
        assert.strictEqual(failure.message, "the page answered 404")
        assert.strictEqual((yield* failureOf(provider, `${site.url}/broken`)).message, "the page answered 500")
      }))

    it.effect("decodes the charset the page declares (ISO-8859-1 header, windows-1252 meta)", () =>
      Effect.gen(function*() {
        const story = "Café crème brûlée à la façade naïve, señor. "
        const body = (head: string) =>
          `<!DOCTYPE html><html><head>${head}<title>Menu du jour</title></head><body><article><h1>Menu du jour</h1>` +
          `<p>${story.repeat(12)}</p><p>${story.repeat(10)}</p></article></body></html>`
        const site = yield* startSite({
          "/latin1": page("text/html; charset=ISO-8859-1", Buffer.from(body(""), "latin1")),
          "/meta": page("text/html", Buffer.from(body("<meta charset=\"windows-1252\">"), "latin1")),
          "/plain": page("text/plain; charset=iso-8859-1", Buffer.from("Crème fraîche", "latin1"))
        })
        const provider = yield* reader()
        for (const path of ["/latin1", "/meta"]) {
          const out = yield* read(provider, `${site.url}${path}`)
          assert.include(out.text, "Café crème brûlée à la façade naïve, señor.", path)
          assert.notInclude(out.text, "\ufffd", path)
          assert.strictEqual(out.title, "Menu du jour", path)
        }
        assert.strictEqual((yield* read(provider, `${site.url}/plain`)).text, "Crème fraîche")
      }))

    it.effect("a URL the fetcher refuses is blocked, and nothing is sent to it", () =>
      Effect.gen(function*() {
        const site = yield* startSite({ "/to-metadata": { _tag: "redirect", status: 302, location: "http://169.254.169.254/latest/meta-data/" } })
        const provider = yield* reader()
        const direct = yield* failureOf(provider, "http://10.0.0.1/admin")
        assert.strictEqual(direct.reason, "blocked")
        assert.notInclude(direct.message, "This URL may not be fetched", "the core adds its own lead")
        const redirected = yield* failureOf(provider, `${site.url}/to-metadata`)
        assert.strictEqual(redirected.reason, "blocked")
        assert.deepStrictEqual(site.requests.map((r) => r.path), ["/to-metadata"])
      }))

    it.effect("a page that does not answer within timeoutMs is timeout; a refused connection is network", () =>
      Effect.gen(function*() {
        const site = yield* startSite({ "/slow": { _tag: "hang" } })
        const started = Date.now()
        const slow = yield* failureOf(yield* reader({ timeoutMs: 300 }), `${site.url}/slow`)
        assert.strictEqual(slow.reason, "timeout")
        assert.isBelow(Date.now() - started, 5_000)
        const refused = yield* failureOf(yield* reader(), `${yield* refusedUrl}/page`)
        assert.strictEqual(refused.reason, "network")
      }))

    it.effect("a page with more elements than Readability can score quickly is too_large", () =>
      Effect.gen(function*() {
        const cells = "<div><span>x</span></div>".repeat(BuiltinRead.MAX_ELEMENTS / 2 + 10)
        const site = yield* startSite({ "/grid": html(`<!DOCTYPE html><html><head><title>Grid</title></head><body>${cells}</body></html>`) })
        const failure = yield* failureOf(yield* reader(), `${site.url}/grid`)
        assert.strictEqual(failure.reason, "too_large")
        assert.include(failure.message, "elements")
      }))
  })
}

describe("built-in reader, pure parts", () => {
  const readPage = (h: string, url = "https://example.test/a/b") =>
    Result.getOrThrow(ReadPage.readHtml(h, url, ReadPage.makeTurndown()))

  it("text over the output bound is cut with a note", () => {
    const long = Page.cut("a".repeat(20), 10)
    assert.isTrue(long.cut)
    assert.strictEqual(long.text, `${"a".repeat(10)}\n\n[… cut at 10 characters]`)
    assert.deepStrictEqual(Page.cut("short", 10), { text: "short", cut: false })
    const surrogate = Page.cut(`${"a".repeat(9)}😀tail`, 10)
    assert.isTrue(surrogate.text.startsWith(`${"a".repeat(9)}\n`), "never half a surrogate pair")
  })

  it("a page that leaves <html> implicit is still read, and <base href> is honoured", () => {
    const out = readPage(`<!doctype html><title>Implicit</title><p>${"Words of a short note. ".repeat(30)}</p>`)
    assert.strictEqual(out.title, "Implicit")
    assert.include(out.text, "Words of a short note.")
    const based = readPage(
      `<html><head><base href="https://cdn.example.test/docs/"><title>T</title></head><body><article><p>${
        "Text with a link inside. ".repeat(30)
      }<a href="guide.html">the guide</a></p></article></body></html>`
    )
    assert.include(based.markdown, "[the guide](https://cdn.example.test/docs/guide.html)")
  })
})

// ---------------------------------------------------------------------------
// Jina Reader
// ---------------------------------------------------------------------------

const JINA_KEY = "jina_4f0c1e9a7b2d4c6e8f0a1b2c3d4e5f60_test"

/** The documented JSON answer of `GET https://r.jina.ai/{url}` with `Accept: application/json`. */
const jinaAnswer = (url: string) => ({
  code: 200,
  status: 20000,
  data: {
    title: "How Tidal Power Could Light Coastal Towns",
    description: "Engineers in three harbour towns are testing turbines that turn the tide into electricity.",
    url,
    content: [
      "At the mouth of the **Severn estuary**, a row of yellow buoys marks one of the most ambitious energy experiments.",
      "",
      "## A predictable source of power",
      "",
      "The team publishes its output on the [open data page](https://example.test/data/tidal-output).",
      "",
      "![Turbine being lowered into the water](https://example.test/img/turbine.jpg)",
      "",
      "- Three turbines installed in autumn 2025",
      "- Twelve more planned by 2031",
      "",
      "> The sea has fed this town for centuries.",
      "",
      "Run `tide --today` for the tables."
    ].join("\n"),
    publishedTime: "2026-03-14T08:00:00Z",
    metadata: { lang: "en", "og:site_name": "The Coastal Ledger", author: "Maria Keller" },
    usage: { tokens: 412 }
  }
})

const jinaError = (code: number, name: string, readableMessage: string) => ({
  data: null,
  code,
  name,
  status: code * 100 + 3,
  message: readableMessage,
  readableMessage
})

layer(upstreamLayers, { excludeTestServices: true })("Jina Reader", (it) => {
  const jina = (baseUrl: string, options: Partial<Jina.Options> = {}) =>
    Jina.make({ baseUrl, apiKey: Redacted.make(JINA_KEY), unitPrice: PRICE, ...options })
  const only = (requests: ReadonlyArray<Recorded>) => {
    assert.strictEqual(requests.length, 1, "exactly one request")
    return requests[0]!
  }

  it.effect("GETs {base}/{url} with the key and Accept: application/json, and maps the documented answer", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(() => json(jinaAnswer("https://example.test/article")))
      const provider = yield* jina(fake.url)
      assert.strictEqual(provider.name, "jina")
      assert.deepStrictEqual(Result.getOrThrow(provider.quote({ url: "https://example.test/article" })), { microUsd: 500n })
      const out = yield* read(provider, "https://example.test/article")

      const request = only(fake.requests)
      assert.strictEqual(request.method, "GET")
      assert.strictEqual(request.path, "/https://example.test/article")
      assert.strictEqual(request.headers.authorization, `Bearer ${JINA_KEY}`)
      assert.strictEqual(request.headers.accept, "application/json")

      const expected: Omit<ReadOutput, "text" | "length"> = {
        url: "https://example.test/article",
        title: "How Tidal Power Could Light Coastal Towns",
        byline: "Maria Keller",
        siteName: "The Coastal Ledger",
        excerpt: "Engineers in three harbour towns are testing turbines that turn the tide into electricity.",
        markdown: jinaAnswer("").data.content
      }
      assert.deepStrictEqual({ ...out, text: undefined, length: undefined }, { ...expected, text: undefined, length: undefined })
      assert.strictEqual(
        out.text,
        [
          "At the mouth of the Severn estuary, a row of yellow buoys marks one of the most ambitious energy experiments.",
          "",
          "A predictable source of power",
          "",
          "The team publishes its output on the open data page.",
          "",
          "Turbine being lowered into the water",
          "",
          "- Three turbines installed in autumn 2025",
          "- Twelve more planned by 2031",
          "",
          "The sea has fed this town for centuries.",
          "",
          "Run tide --today for the tables."
        ].join("\n")
      )
      assert.strictEqual(out.length, out.text.length)
    }))

  it.effect("without a key no Authorization is sent; a query string reaches Jina as part of the URL", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(() => json(jinaAnswer("https://example.test/search?q=tide&page=2")))
      const provider = yield* Jina.make({ baseUrl: fake.url, unitPrice: PRICE })
      const out = yield* read(provider, "https://example.test/search?q=tide&page=2")
      const request = only(fake.requests)
      assert.isUndefined(request.headers.authorization)
      assert.strictEqual(`${request.path}?${request.query.toString()}`, "/https://example.test/search?q=tide&page=2")
      assert.strictEqual(out.url, "https://example.test/search?q=tide&page=2")
    }))

  it.effect("a page Jina reports as answering 404 is rejected", () =>
    Effect.gen(function*() {
      const answer = jinaAnswer("https://example.test/gone")
      const fake = yield* startFake(() =>
        json({ ...answer, data: { ...answer.data, content: "Not Found", warning: "Target URL returned error 404: Not Found" } })
      )
      const failure = yield* failureOf(yield* jina(fake.url), "https://example.test/gone")
      assert.strictEqual(failure.reason, "rejected")
      assert.include(failure.message, "the page answered 404")
    }))

  const statuses: ReadonlyArray<readonly [number, Answer, ProviderFailure["reason"]]> = [
    [401, json(jinaError(401, "AuthenticationRequiredError", `Invalid API key: ${JINA_KEY}`), 401), "rejected"],
    [403, json(jinaError(403, "InsufficientBalanceError", "Account balance not enough"), 403), "rejected"],
    [422, json(jinaError(422, "AssertionFailureError", "Failed to goto https://example.test/article"), 422), "rejected"],
    [429, json(jinaError(429, "RateLimitTriggeredError", "Per IP rate limit exceeded"), 429), "rate_limited"],
    [500, text(500, "upstream crashed"), "unavailable"],
    [503, json(jinaError(503, "ServiceCrashedError", "Service unavailable"), 503), "unavailable"]
  ]
  for (const [status, answer, reason] of statuses) {
    it.effect(`HTTP ${status} is ${reason}`, () =>
      Effect.gen(function*() {
        const fake = yield* startFake(() => answer)
        const failure = yield* failureOf(yield* jina(fake.url), "https://example.test/article")
        assert.strictEqual(failure.reason, reason)
        assert.strictEqual(failure.provider, "jina")
        assert.include(failure.message, String(status))
        assert.notInclude(failure.message, JINA_KEY, "the key never appears in a failure")
      }))
  }

  it.effect("no answer within timeoutMs is timeout", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(() => ({ _tag: "hang" }))
      const started = Date.now()
      const failure = yield* failureOf(yield* jina(fake.url, { timeoutMs: 300 }), "https://example.test/article")
      assert.strictEqual(failure.reason, "timeout")
      assert.isBelow(Date.now() - started, 5_000)
    }))

  it.effect("an answer that is not JSON, or lacks content, is malformed", () =>
    Effect.gen(function*() {
      const notJson = yield* startFake(() => text(200, "Title: How Tidal Power\n\nMarkdown Content: …"))
      assert.strictEqual((yield* failureOf(yield* jina(notJson.url), "https://example.test/article")).reason, "malformed")
      const noContent = yield* startFake(() => json({ code: 200, status: 20000, data: { title: "t", url: "https://example.test/article" } }))
      const failure = yield* failureOf(yield* jina(noContent.url), "https://example.test/article")
      assert.strictEqual(failure.reason, "malformed")
      assert.include(failure.message, "content")
    }))

  it.effect("an endless body is too_large, and reading stops at the cap", () =>
    Effect.gen(function*() {
      const fake = yield* startFake(() => ({ _tag: "endless" }))
      const started = Date.now()
      const failure = yield* failureOf(yield* jina(fake.url, { maxResponseBytes: 64 * 1024 }), "https://example.test/article")
      assert.strictEqual(failure.reason, "too_large")
      assert.isBelow(Date.now() - started, 5_000)
    }))

  it.effect("a refused connection is network", () =>
    Effect.gen(function*() {
      const failure = yield* failureOf(yield* jina(yield* refusedUrl), "https://example.test/article")
      assert.strictEqual(failure.reason, "network")
    }))

  it.effect("bad options are refused when the provider is built", () =>
    Effect.gen(function*() {
      for (const options of [{ baseUrl: "not a url" }, { baseUrl: "ftp://r.jina.ai" }, { timeoutMs: 0 }, { name: " " }]) {
        const exit = yield* Effect.exit(Jina.make({ unitPrice: PRICE, ...options }))
        assert.isTrue(Exit.isFailure(exit) && Cause.hasDies(exit.cause), JSON.stringify(options))
      }
    }))
})

describe("markdownToText", () => {
  it("keeps the words and drops the markup", () => {
    assert.strictEqual(
      Jina.markdownToText(
        "Title\n=====\n\n**Bold** and __strong__, [a link](https://x.test) and ![alt text](i.png).\n\n```js\nconst a = 1\n```\n\n---\n\n<b>tag</b> end"
      ),
      "Title\n\nBold and strong, a link and alt text.\n\nconst a = 1\n\ntag end"
    )
  })
})
