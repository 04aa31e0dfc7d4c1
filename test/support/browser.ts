import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core"
import { type ServerProcess, startServerProcess } from "./server-process.ts"

/**
 * Browser tests of the dashboard: a real Spendgate server process (PGlite in
 * a temporary data directory, the dev rails, ADMIN_TOKEN set, an ephemeral
 * port) and a headless Chromium (Debian's `chromium` package, driven by
 * playwright-core; no browser is ever downloaded).
 *
 *     const h = await startBrowserHarness()
 *     try { const page = await h.newPage(); await h.signIn(page, { key }); … }
 *     finally { await h.close() }
 *
 * Screenshots go to artifacts/screenshots/<name>.png (desktop width) and
 * <name>-phone.png (390 px); the folder is git-ignored and kept by CI.
 */

const root = join(import.meta.dirname, "..", "..")
export const SCREENSHOT_DIR = join(root, "artifacts", "screenshots")

/** Where Chromium is: CHROMIUM_PATH, else Debian's package. */
export const chromiumPath = (): string => process.env["CHROMIUM_PATH"] ?? "/usr/bin/chromium"
export const chromiumAvailable = (): boolean => existsSync(chromiumPath())

export const DESKTOP = { width: 1280, height: 800 } as const
export const PHONE = { width: 390, height: 844 } as const

export const BROWSER_ADMIN_TOKEN = "browser-test-admin-token-0123456789abcdef"

export type Credentials = { readonly key: string } | { readonly adminToken: string }

export interface BrowserHarness {
  readonly server: ServerProcess
  readonly baseUrl: string
  readonly adminToken: string
  readonly browser: Browser
  /** A page in a fresh browser context (its own cookies), at desktop width. */
  readonly newPage: (options?: { readonly viewport?: { readonly width: number; readonly height: number } }) => Promise<Page>
  /** Opens the dashboard (`path`: "/" or "/admin") and signs in through the sign-in page. */
  readonly signIn: (page: Page, credentials: Credentials, path?: string) => Promise<void>
  /** Signs out with the header's button and waits for the sign-in page. */
  readonly signOut: (page: Page) => Promise<void>
  /** Saves <name>.png at desktop width and <name>-phone.png at 390 px (full page). */
  readonly screenshot: (page: Page, name: string) => Promise<void>
  /** Page errors, failed requests to other hosts and console errors seen so far (CSP violations included). */
  readonly problems: () => ReadonlyArray<string>
  /** Calls the API over HTTP with a key (or the admin token), as any client would. */
  readonly api: (method: string, path: string, options?: { readonly key?: string; readonly body?: unknown }) => Promise<{
    readonly status: number
    readonly body: any
  }>
  /** Pays a dev-rail Lightning invoice, as `spendgate dev pay` does. */
  readonly devPay: (paymentRequest: string) => Promise<{ readonly invoiceId: string; readonly outcome: string }>
  /** Stops the browser and the server and removes the data directory; safe to call twice. */
  readonly close: () => Promise<void>
}

export const startBrowserHarness = async (
  options: { readonly env?: Record<string, string> } = {}
): Promise<BrowserHarness> => {
  if (!chromiumAvailable()) {
    throw new Error(
      `No Chromium at ${chromiumPath()}: install Debian's chromium package (.ci/run does) or set CHROMIUM_PATH`
    )
  }
  mkdirSync(SCREENSHOT_DIR, { recursive: true })
  const dataDir = mkdtempSync(join(tmpdir(), "spendgate-browser-"))
  let server: ServerProcess | undefined
  let browser: Browser | undefined
  const contexts: Array<BrowserContext> = []
  const seen: Array<string> = []
  let closed = false

  const close = async () => {
    if (closed) return
    closed = true
    for (const context of contexts) await context.close().catch(() => undefined)
    await browser?.close().catch(() => undefined)
    await server?.stop().catch(() => undefined)
    rmSync(dataDir, { recursive: true, force: true })
  }
  // A test process that dies leaves no server or browser behind.
  const onExit = () => {
    server?.child.kill("SIGKILL")
  }
  process.once("exit", onExit)

  try {
    server = await startServerProcess({
      DATA_DIR: dataDir,
      HOST: "127.0.0.1",
      ADMIN_TOKEN: BROWSER_ADMIN_TOKEN,
      BTC_USD_RATE: "100000",
      // Every test signs in from 127.0.0.1.
      SESSION_SIGNIN_PER_15_MINUTES: "10000",
      RATE_LIMIT_AGENT_PER_MINUTE: "100000",
      RATE_LIMIT_ACCOUNT_PER_MINUTE: "100000",
      ...options.env
    }, 60_000)
    browser = await chromium.launch({
      executablePath: chromiumPath(),
      headless: true,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync"
      ]
    })
  } catch (error) {
    await close()
    throw error
  }
  const baseUrl = server.baseUrl
  const origin = new URL(baseUrl).origin

  const newPage: BrowserHarness["newPage"] = async (pageOptions = {}) => {
    // Each context is a fresh profile: its own cookies and storage.
    const context = await browser!.newContext({ viewport: pageOptions.viewport ?? DESKTOP })
    contexts.push(context)
    const page = await context.newPage()
    // Long enough for a busy machine, short enough to fail well inside a test's time.
    page.setDefaultTimeout(20_000)
    page.on("pageerror", (error) => seen.push(`page error: ${error.message}`))
    page.on("console", (message) => {
      if (message.type() === "error" && !/status of (401|403|404|409|400|429)/.test(message.text())) {
        seen.push(`console: ${message.text()}`)
      }
    })
    page.on("request", (request) => {
      const url = request.url()
      if (!url.startsWith(origin) && !url.startsWith("data:") && !url.startsWith("about:")) seen.push(`request elsewhere: ${url}`)
    })
    return page
  }

  const signIn: BrowserHarness["signIn"] = async (page, credentials, path = "/") => {
    await page.goto(`${baseUrl}${path}`)
    if ("adminToken" in credentials) {
      await page.getByLabel("Operator token").check()
      await page.getByLabel("Admin token").fill(credentials.adminToken)
    } else {
      await page.getByLabel("API key").fill(credentials.key)
    }
    await page.getByRole("button", { name: "Sign in" }).click()
    await page.getByRole("button", { name: "Sign out" }).waitFor()
  }

  const signOut: BrowserHarness["signOut"] = async (page) => {
    await page.getByRole("button", { name: "Sign out" }).click()
    await page.getByRole("button", { name: "Sign in" }).waitFor()
  }

  const screenshot: BrowserHarness["screenshot"] = async (page, name) => {
    const viewport = page.viewportSize() ?? DESKTOP
    await page.setViewportSize(DESKTOP)
    await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}.png`), fullPage: true })
    await page.setViewportSize(PHONE)
    await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}-phone.png`), fullPage: true })
    await page.setViewportSize(viewport)
  }

  const api: BrowserHarness["api"] = async (method, path, callOptions = {}) => {
    const headers: Record<string, string> = {}
    if (callOptions.key !== undefined) headers["authorization"] = `Bearer ${callOptions.key}`
    if (callOptions.body !== undefined) headers["content-type"] = "application/json"
    const response = await fetch(`${baseUrl}${path}`, {
      method,
      headers,
      ...(callOptions.body === undefined ? {} : { body: JSON.stringify(callOptions.body) })
    })
    const text = await response.text()
    let body: unknown = undefined
    try {
      body = text === "" ? undefined : JSON.parse(text)
    } catch {
      body = text
    }
    return { status: response.status, body }
  }

  const devPay: BrowserHarness["devPay"] = async (paymentRequest) => {
    const paid = await api("POST", "/v1/dev/lightning/pay", { body: { paymentRequest } })
    if (paid.status !== 200) throw new Error(`dev pay: ${paid.status} ${JSON.stringify(paid.body)}`)
    return paid.body
  }

  return {
    server,
    baseUrl,
    adminToken: BROWSER_ADMIN_TOKEN,
    browser,
    newPage,
    signIn,
    signOut,
    screenshot,
    problems: () => [...seen],
    api,
    devPay,
    close: async () => {
      process.removeListener("exit", onExit)
      await close()
    }
  }
}
