import { existsSync } from "node:fs"
import { chromium } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
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
