import { Effect, Layer } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { FetchFailed, type FetchedResponse, type FetchOptions, OutboundHttp, UnsafeUrl } from "../../src/ports/Net.ts"

/**
 * Web pages for the read and scrape providers: a real site on 127.0.0.1
 * (port 0) serving fixed routes, page fixtures, and a small `OutboundHttp`
 * over `fetch` that reaches 127.0.0.1 only.
 */

// ---------------------------------------------------------------------------
// A local site
// ---------------------------------------------------------------------------

export type Route =
  | {
    readonly _tag: "page"
    readonly status?: number
    /** Sent as Content-Type; null sends none. */
    readonly contentType: string | null
    readonly body: string | Uint8Array
  }
  | { readonly _tag: "redirect"; readonly status?: number; readonly location: string }
  /** 200 text/html, then `bytes` bytes of HTML written as fast as the client reads (or until it goes away). */
  | { readonly _tag: "huge"; readonly bytes: number }
  /** Headers never come. */
  | { readonly _tag: "hang" }

export const html = (body: string, status = 200, contentType: string | null = "text/html; charset=utf-8"): Route => ({
  _tag: "page",
  status,
  contentType,
  body
})

export const page = (contentType: string | null, body: string | Uint8Array, status = 200): Route => ({
  _tag: "page",
  status,
  contentType,
  body
})

export interface Site {
  readonly url: string
  /** Paths requested, in order, with the request headers. */
  readonly requests: Array<{ readonly path: string; readonly headers: Http.IncomingHttpHeaders }>
}

const serve = (res: Http.ServerResponse, route: Route | undefined): void => {
  if (route === undefined) {
    res.writeHead(404, { "content-type": "text/plain" }).end("no such route")
    return
  }
  switch (route._tag) {
    case "page": {
      const headers: Record<string, string> = {}
      if (route.contentType !== null) headers["content-type"] = route.contentType
      res.writeHead(route.status ?? 200, headers).end(route.body)
      return
    }
    case "redirect":
      res.writeHead(route.status ?? 301, { location: route.location }).end()
      return
    case "huge": {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" })
      res.write("<!DOCTYPE html><html><head><title>Huge</title></head><body>")
      const chunk = Buffer.from(`<p>${"A paragraph of a very long page, repeated. ".repeat(200)}</p>\n`)
      let sent = 0
      const pump = () => {
        while (!res.destroyed && sent < route.bytes) {
          sent += chunk.length
          if (!res.write(chunk)) return void res.once("drain", pump)
        }
        if (!res.destroyed) res.end("</body></html>")
      }
      pump()
      return
    }
    case "hang":
      return
  }
}

export const startSite = (routes: Readonly<Record<string, Route>>) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ site: Site; server: Http.Server }>((resolve, reject) => {
        const site: Site = { url: "", requests: [] }
        const server = Http.createServer((req, res) => {
          res.on("error", () => {})
          const path = new URL(req.url ?? "/", "http://127.0.0.1").pathname
          site.requests.push({ path, headers: req.headers })
          serve(res, routes[path])
        })
        server.on("error", reject)
        server.listen(0, "127.0.0.1", () => {
          const { port } = server.address() as AddressInfo
          resolve({ site: Object.assign(site, { url: `http://127.0.0.1:${port}` }), server })
        })
      })
    ),
    ({ server }) =>
      Effect.promise(() =>
        new Promise<void>((resolve) => {
          server.closeAllConnections()
          server.close(() => resolve())
        })
      )
  ).pipe(Effect.map(({ site }) => site))

// ---------------------------------------------------------------------------
// OutboundHttp for tests
// ---------------------------------------------------------------------------

type Outcome = FetchedResponse | UnsafeUrl | FetchFailed

const allowed = (url: URL): boolean => (url.protocol === "http:" || url.protocol === "https:") && url.hostname === "127.0.0.1"

/** Reads at most `maxBytes`; `over` when more was coming (the rest is not read). */
const readCapped = async (response: Response, maxBytes: number): Promise<{ bytes: Uint8Array; over: boolean }> => {
  const chunks: Array<Uint8Array> = []
  let size = 0
  if (response.body === null) return { bytes: new Uint8Array(), over: false }
  const reader = response.body.getReader()
  for (;;) {
    const { done, value } = await reader.read()
    if (done) return { bytes: Buffer.concat(chunks, size), over: false }
    if (size + value.byteLength > maxBytes) {
      chunks.push(value.subarray(0, maxBytes - size))
      size = maxBytes
      await reader.cancel().catch(() => {})
      return { bytes: Buffer.concat(chunks, size), over: true }
    }
    chunks.push(value)
    size += value.byteLength
  }
}

const fetchOnce = async (start: string, options: FetchOptions, signal: AbortSignal): Promise<Outcome> => {
  let url: URL
  try {
    url = new URL(start)
  } catch {
    return new UnsafeUrl({ url: start, reason: "not a URL" })
  }
  const maxRedirects = options.maxRedirects ?? 5
  for (let redirects = 0;; redirects++) {
    if (!allowed(url)) return new UnsafeUrl({ url: url.href, reason: `${url.hostname} is not a test address` })
    const response = await fetch(url, { headers: { ...options.headers }, redirect: "manual", signal })
    const location = response.headers.get("location")
    if (response.status >= 300 && response.status < 400 && location !== null) {
      await response.body?.cancel().catch(() => {})
      if (redirects >= maxRedirects) return new FetchFailed({ url: url.href, reason: "too_many_redirects", message: "too many redirects" })
      url = new URL(location, url)
      continue
    }
    const { bytes, over } = await readCapped(response, options.maxBytes)
    if (over && options.failIfLarger === true) {
      return new FetchFailed({ url: url.href, reason: "too_large", message: `larger than ${options.maxBytes} bytes` })
    }
    return {
      url: url.href,
      status: response.status,
      contentType: response.headers.get("content-type") ?? "",
      body: bytes,
      truncated: over
    }
  }
}

/**
 * `OutboundHttp` over `fetch` for tests: 127.0.0.1 only (any other host is
 * `UnsafeUrl`, on the first URL and on every redirect), `maxBytes` honoured
 * (`truncated`, or `too_large` with `failIfLarger`), `timeoutMs` for the whole fetch.
 */
export const testOutboundHttp: Layer.Layer<OutboundHttp> = Layer.succeed(
  OutboundHttp,
  OutboundHttp.of({
    check: (url) =>
      Effect.suspend(() => {
        try {
          return allowed(new URL(url)) ? Effect.void : Effect.fail(new UnsafeUrl({ url, reason: "not a test address" }))
        } catch {
          return Effect.fail(new UnsafeUrl({ url, reason: "not a URL" }))
        }
      }),
    get: (url, options) =>
      Effect.flatMap(
        Effect.promise(async () => {
          const controller = new AbortController()
          const timer = setTimeout(() => controller.abort(), options.timeoutMs)
          try {
            return await fetchOnce(url, options, controller.signal)
          } catch (error) {
            return controller.signal.aborted
              ? new FetchFailed({ url, reason: "timeout", message: `no response within ${options.timeoutMs} ms` })
              : new FetchFailed({ url, reason: "network", message: error instanceof Error ? error.message : String(error) })
          } finally {
            clearTimeout(timer)
          }
        }),
        (outcome) =>
          outcome instanceof UnsafeUrl || outcome instanceof FetchFailed ? Effect.fail(outcome) : Effect.succeed(outcome)
      )
  })
)

// ---------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------

/** A news article as sites serve them: header, navigation, ads, share buttons, comments teaser and footer around the story. */
export const ARTICLE_HTML = `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>How Tidal Power Could Light Coastal Towns | The Coastal Ledger</title>
  <meta name="description" content="Engineers in three harbour towns are testing turbines that turn the tide into electricity.">
  <meta name="author" content="Maria Keller">
  <meta property="og:site_name" content="The Coastal Ledger">
  <meta property="og:title" content="How Tidal Power Could Light Coastal Towns">
  <link rel="stylesheet" href="/static/site.css">
  <script>window.dataLayer = [{ page: "article", trackingId: "UA-0000" }];</script>
  <style>.ad { border: 1px solid #ccc }</style>
</head>
<body>
  <header class="site-header">
    <a class="logo" href="/">The Coastal Ledger</a>
    <nav class="main-nav">
      <ul>
        <li><a href="/news">News</a></li>
        <li><a href="/sport">Sport</a></li>
        <li><a href="/weather">Weather</a></li>
        <li><a href="/subscribe">Subscribe today and save 50%</a></li>
      </ul>
    </nav>
  </header>
  <div class="ad ad-banner" id="top-ad">Advertisement: Buy one ferry ticket, get one free!</div>
  <main>
    <article class="story">
      <h1>How Tidal Power Could Light Coastal Towns</h1>
      <p class="byline">By <a rel="author" href="/authors/maria-keller">Maria Keller</a>, Energy Correspondent</p>
      <time datetime="2026-03-14">14 March 2026</time>
      <p>At the mouth of the Severn estuary, where the tide rises and falls by more than twelve metres twice a day, a row of
        yellow buoys marks one of the most ambitious energy experiments in the country. Beneath them, three turbines the
        size of double-decker buses turn slowly in the current, feeding power to a substation on the shore.</p>
      <p>The project, run by a cooperative of harbour towns, aims to show that tidal energy can supply small communities
        around the clock. Unlike wind and sun, the tide is predictable decades in advance, which makes it attractive to
        grid operators who must balance supply and demand minute by minute.</p>
      <h2>A predictable source of power</h2>
      <p>Engineers say the turbines have produced electricity on every tide since they were installed last autumn. "We can
        tell you today how much power we will generate on a Tuesday in 2040," said Dr Anwen Price, who leads the technical
        team. "No other renewable source can promise that." The team publishes its output data on the
        <a href="/data/tidal-output">cooperative's open data page</a>, updated every hour.</p>
      <p>Costs remain the main obstacle. Each turbine costs several million pounds to build and install, and salt water is
        hard on moving parts. The cooperative hopes that a longer trial will convince investors that maintenance costs can
        be brought down as the industry matures.</p>
      <h2>What happens next</h2>
      <p>If the trial succeeds, the towns plan to add twelve more turbines over the next five years, enough to power
        roughly eight thousand homes. Local fishermen, initially sceptical, now help with inspections of the moorings.</p>
      <ul>
        <li>Three turbines installed in autumn 2025</li>
        <li>Twelve more planned by 2031</li>
        <li>Enough power for eight thousand homes</li>
      </ul>
      <blockquote><p>"The sea has fed this town for centuries. Now it may keep the lights on too."</p></blockquote>
    </article>
    <aside class="share-tools">Share this story: <a href="https://social.example/share">Share</a></aside>
    <aside class="sidebar related">
      <h3>Most read</h3>
      <ul><li><a href="/news/ferry-strike">Ferry strike enters third week</a></li></ul>
    </aside>
  </main>
  <div class="ad ad-footer">Sponsored: Holiday cottages from £49 a night</div>
  <footer class="site-footer">
    <p>© 2026 The Coastal Ledger. All rights reserved.</p>
    <a href="/privacy">Privacy policy</a> <a href="/contact">Contact us</a>
  </footer>
  <script src="/static/analytics.js"></script>
</body>
</html>`

/** Sentences from the story, and junk around it that a reader must leave out. */
export const ARTICLE_SENTENCES = [
  "a row of yellow buoys marks one of the most ambitious energy experiments in the country",
  "the tide is predictable decades in advance",
  "Costs remain the main obstacle.",
  "enough to power roughly eight thousand homes"
]
export const ARTICLE_JUNK = ["Subscribe today", "Buy one ferry ticket", "Holiday cottages", "All rights reserved", "dataLayer", "Ferry strike"]

/** A shop's listing page: headlines, prices, and links in every spelling (relative, absolute, repeated, non-http). */
export const LISTING_HTML = `<!DOCTYPE html>
<html>
<head><title>Garden tools — Greenleaf</title><script>var cart = { items: 0 }</script></head>
<body>
  <nav><a href="/">Home</a> <a href="/tools">Tools</a> <a href="/tools">Tools again</a></nav>
  <h1>Garden tools</h1>
  <section class="product">
    <h2>Stainless steel trowel</h2>
    <p class="price">$19.99</p>
    <a href="/p/trowel">Details</a>
  </section>
  <section class="product">
    <h2>  Pruning   shears </h2>
    <p class="price">$34.50</p>
    <a href="p/shears?ref=list">Details</a>
  </section>
  <section class="product">
    <h2>Watering can, 10 l</h2>
    <p class="price sale">$12.00</p>
    <a href="https://cdn.example.org/manuals/can.pdf">Manual</a>
  </section>
  <footer>
    <a href="mailto:help@greenleaf.example">Email us</a>
    <a href="javascript:void(0)">Open chat</a>
    <a href="/p/trowel"><img src="/img/t.png" alt=""></a>
    <a href="#top">Back to top</a>
    <a href="//other.example/path">Partner</a>
  </footer>
</body>
</html>`
