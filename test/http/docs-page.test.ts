import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { existsSync } from "node:fs"
import { createServer } from "node:http"
import { chromium } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import { DOCS_PATH, type DocsOptions, docsPage, importScalarBundle, mountDocs, readScalarModule, scalarBundle } from "../../adapters/http/docsPage.ts"
import { type RunningServer, startServer } from "../support/server.ts"

/**
 * GET /docs (the Scalar API reference) needs nothing but the server: its
 * script is inlined, and it is told not to load its default fonts from
 * Scalar's CDN. Checked twice: in the HTML (no tag loads anything from
 * elsewhere), and in a real browser (headless Chromium), which must make no
 * request outside the server's own origin while the page renders.
 */

const CHROMIUM = process.env["CHROMIUM_PATH"] ?? "/usr/bin/chromium"

describe("GET /docs loads nothing from elsewhere", () => {
  let server: RunningServer
  beforeAll(async () => {
    server = await startServer(MemoryStore.layer)
  })
  afterAll(() => server.close())

  it("the HTML: the Scalar script inline, no external script, stylesheet, font or image, default fonts off", async () => {
    const response = await fetch(`${server.baseUrl}/docs`)
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toMatch(/^text\/html/)
    const html = await response.text()
    const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)]
    // Every script is inline (the Scalar bundle is one of them, and large).
    expect(scripts.length).toBeGreaterThanOrEqual(2)
    for (const [, attributes] of scripts) expect(attributes).not.toMatch(/\bsrc\s*=/)
    expect(Math.max(...scripts.map(([, , body]) => body!.length))).toBeGreaterThan(100_000)
    // Outside the scripts' bodies, nothing points elsewhere: no src/href to another origin, no CSS url() or @import.
    const markup = scripts.reduce((text, [whole]) => text.replace(whole!, "<script></script>"), html)
    expect(markup).not.toMatch(/\b(?:src|href)\s*=\s*["']?(?:https?:)?\/\//i)
    expect(markup).not.toMatch(/@import|url\(\s*["']?(?:https?:)?\/\//i)
    // Scalar is configured not to fetch its Inter and JetBrains Mono fonts from fonts.scalar.com.
    // (the page's last script: the configuration and the OpenAPI document, after the bundle)
    const config = scripts.at(-1)![2]!
    expect(config.trimStart().startsWith("window.Scalar.createApiReference(")).toBe(true)
    expect(/"withDefaultFonts":\s*false/.test(config)).toBe(true)
  })

  it.skipIf(!existsSync(CHROMIUM))("a browser rendering it requests nothing outside the server", async () => {
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] })
    try {
      const page = await browser.newPage()
      const requested: Array<string> = []
      page.on("request", (request) => void requested.push(request.url()))
      await page.goto(`${server.baseUrl}/docs`, { waitUntil: "load" })
      // Rendered: the API's title is on the page (bounded wait, no fixed sleep).
      await page.getByText("Spendgate", { exact: false }).first().waitFor({ timeout: 20_000 })
      await page.waitForLoadState("networkidle", { timeout: 20_000 }).catch(() => undefined)
      const origin = new URL(server.baseUrl).origin
      const elsewhere = requested.filter((url) => {
        if (url.startsWith("data:") || url.startsWith("blob:") || url.startsWith("about:")) return false
        return new URL(url).origin !== origin
      })
      expect(elsewhere).toEqual([])
      expect(requested).toContain(`${server.baseUrl}/docs`)
    } finally {
      await browser.close()
    }
  }, 60_000)
})

describe("GET /docs is built when asked for", () => {
  const serveDocs = async (options: DocsOptions) => {
    const scope = Effect.runSync(Scope.make())
    const app = HttpRouter.serve(mountDocs(options), { disableLogger: true, disableListenLog: true }).pipe(
      Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
    )
    const context = await Effect.runPromise(Layer.buildWithScope(app, scope))
    const address = Context.get(context, HttpServer.HttpServer).address
    if (address._tag === "UnixPathAddress") throw new Error("expected a TCP address")
    return { url: `http://127.0.0.1:${address.port}${DOCS_PATH}`, close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
  }

  it("Scalar's bundle is read out of Effect's module: the whole script, not part of it", async () => {
    const bundle = scalarBundle(await readScalarModule())
    expect(bundle.length).toBeGreaterThan(1_000_000)
    expect(bundle).toContain("createApiReference")
    // It is a script, not a module's source: no `export const javascript` left around it.
    expect(bundle.startsWith("export")).toBe(false)
    expect(bundle).not.toContain("export const javascript=")
  })

  it("a module of another shape is refused, not served in part", () => {
    expect(() => scalarBundle("export const other = 1")).toThrow(/not found/)
    expect(() => scalarBundle("export const javascript=\"console.log(1)\";")).toThrow(/does not hold/)
    expect(() => scalarBundle("export const javascript=\"unterminated;")).toThrow()
  })

  it("the module imported gives the same bundle as its source read", async () => {
    expect(await importScalarBundle()).toBe(scalarBundle(await readScalarModule()))
  })

  it("a bundle that can be neither read nor imported answers 500 in the envelope and is not kept; once served, the page is kept", async () => {
    let reads = 0
    let imports = 0
    const docs = await serveDocs({
      readModule: () => {
        reads += 1
        return reads === 1 ? Promise.reject(new Error("EIO")) : readScalarModule()
      },
      importBundle: () => {
        imports += 1
        return Promise.reject(new Error("ERR_MODULE_NOT_FOUND"))
      }
    })
    try {
      const failed = await fetch(docs.url)
      expect(failed.status).toBe(500)
      expect(await failed.json()).toEqual({ error: { code: "INTERNAL", message: "Internal error" } })
      expect(imports).toBe(1)
      const served = await fetch(docs.url)
      expect(served.status).toBe(200)
      expect(served.headers.get("content-type")).toBe("text/html; charset=utf-8")
      const html = await served.text()
      expect(html).toContain("window.Scalar.createApiReference(")
      expect(html).toContain("\"withDefaultFonts\":false")
      // Built once: the next request is answered with the same page, without reading the module again.
      expect(await (await fetch(docs.url)).text()).toBe(html)
      expect(reads).toBe(2)
      expect(imports).toBe(1)
    } finally {
      await docs.close()
    }
  })

  it("a module file of another shape (another Effect release): the bundle is taken from the module's export instead", async () => {
    let imports = 0
    const docs = await serveDocs({
      readModule: () => Promise.resolve("export const javascript = await load()"),
      importBundle: () => {
        imports += 1
        return importScalarBundle()
      }
    })
    try {
      const served = await fetch(docs.url)
      expect(served.status).toBe(200)
      const html = await served.text()
      expect(html).toContain(await importScalarBundle())
      await (await fetch(docs.url)).text()
      expect(imports).toBe(1)
    } finally {
      await docs.close()
    }
  })

  it("the OpenAPI document inside the page cannot close its script element", () => {
    const page = docsPage("/* bundle */")
    const config = page.slice(page.lastIndexOf("<script>") + "<script>".length, page.lastIndexOf("</script>"))
    expect(config).not.toContain("</")
    const content = config.slice(config.indexOf("content: ") + "content: ".length, config.lastIndexOf("}"))
    expect(JSON.parse(content.trim())).toMatchObject({ openapi: expect.any(String), info: { title: expect.any(String) } })
  })
})
