import { readFileSync } from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import type { Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { chatCompletion } from "../providers/fakeLlm.ts"
import { type BrowserHarness, startBrowserHarness } from "../support/browser.ts"

/**
 * The owner's reports and the operator's area in a real Chromium against a
 * real server process whose `reason` providers ("local" and "openai") are a
 * local server speaking OpenAI's chat-completions wire format: paid calls
 * are made over the API, then the overview's charts, the transactions list
 * with its filters and CSV, a receipt, and the operator's stats, service
 * health, late payments, registry review and rate are read in the browser.
 */

let h: BrowserHarness
let upstream: Http.Server
let upstreamOrigin = ""
let ownerKey = ""
let workerKey = ""
let workerId = ""
const slug = `weather-${Math.random().toString(36).slice(2, 8)}`

const startUpstream = () =>
  new Promise<{ server: Http.Server; origin: string }>((resolve) => {
    const server = Http.createServer((req, res) => {
      let text = ""
      req.on("data", (chunk) => (text += chunk))
      req.on("end", () => {
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify(chatCompletion(JSON.parse(text || "{}"), { promptTokens: 120, completionTokens: 300 })))
      })
    })
    server.listen(0, "127.0.0.1", () =>
      resolve({ server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }))
  })

const reason = async (key: string, provider: string, model: string) => {
  const res = await h.api("POST", "/v1/capabilities/reason", { key, body: { prompt: "Why is the sky blue?", provider, model, maxTokens: 400 } })
  if (res.status !== 200) throw new Error(`reason: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body
}

beforeAll(async () => {
  const started = await startUpstream()
  upstream = started.server
  upstreamOrigin = started.origin
  h = await startBrowserHarness({
    env: {
      LLM_BASE_URL: `${started.origin}/v1`,
      OPENAI_API_KEY: "sk-test-upstream",
      OPENAI_BASE_URL: `${started.origin}/v1`,
      BUILTIN_READ: "off",
      BUILTIN_SCRAPE: "off",
      BUILTIN_SPEAK: "off",
      BUILTIN_EXECUTE: "off",
      // The registry submission below names the local server, which the URL rules refuse unless allowed.
      URL_ALLOW_HOSTS: new URL(started.origin).host
    }
  })
  const signup = await h.api("POST", "/v1/signup", { body: { name: "Dana" } })
  ownerKey = signup.body.apiKey
  const worker = await h.api("POST", "/v1/agents", { key: ownerKey, body: { name: "research-bot" } })
  workerKey = worker.body.apiKey
  workerId = worker.body.id
  const invoice = await h.api("POST", "/v1/wallet/fund", { key: ownerKey, body: { amountSats: 200_000 } })
  expect((await h.devPay(invoice.body.paymentRequest)).outcome).toBe("credited")
  await reason(ownerKey, "local", "local-model")
  await reason(ownerKey, "local", "local-model")
  await reason(workerKey, "openai", "gpt-4o-mini")
  const submitted = await h.api("POST", "/v1/registry/submit", {
    key: ownerKey,
    body: {
      slug,
      name: "Weather",
      description: "Forecasts for any city",
      baseUrl: `https://${new URL(upstreamOrigin).host}/weather`,
      capabilities: ["search"],
      endpoints: [{ path: "/forecast", method: "GET", description: "A forecast" }],
      pricing: { "/forecast": { perCallUsdCents: 0.25 } },
      contact: "ops@weather.example.com"
    }
  })
  if (submitted.status !== 201) throw new Error(`submit: ${submitted.status} ${JSON.stringify(submitted.body)}`)
}, 180_000)

afterAll(async () => {
  await h?.close()
  await new Promise<void>((done) => (upstream ? upstream.close(() => done()) : done()))
})

// A browser and a server process on a busy CI machine: more time than the default 30 s per
// test, and up to 15 s for what the page shows (expect.poll waits 1 s by default).
const BROWSER_TIMEOUT_MS = 120_000
const poll = <T>(read: () => T | Promise<T>) => expect.poll(read, { timeout: 15_000, interval: 100 })

/** Form controls on the page that no label names (none is allowed). */
const unlabelled = (page: Page) =>
  page.locator("input, select, textarea").evaluateAll((controls) =>
    controls
      .filter((c) =>
        (c as unknown as { readonly labels: { readonly length: number } | null }).labels?.length === 0 &&
        !c.getAttribute("aria-label") && !c.getAttribute("aria-labelledby")
      )
      .map((c) => c.outerHTML.slice(0, 80))
  )

const barLabels = async (page: Page, testId: string) =>
  page.getByTestId(testId).locator("table tbody th").allTextContents()

describe("owner reports in the browser", () => {
  it("the overview shows both pockets, spendable value and spend charts by agent, capability and provider", async () => {
    const page = await h.newPage()
    await h.signIn(page, { key: ownerKey })
    await page.getByRole("heading", { name: "Overview" }).waitFor()
    await page.getByTestId("chart-agents").locator("svg").waitFor()
    // Lightning funded the sats pocket; the calls were paid from it (the USD pocket is empty).
    const wallet = (await h.api("GET", "/v1/wallet", { key: ownerKey })).body
    expect(wallet.balanceSats).toBeLessThan(200_000)
    await poll(() => page.getByTestId("pocket-sats").textContent()).toBe(`Sats pocket${wallet.balanceSats.toLocaleString("en-US")} sats`)
    await poll(() => page.getByTestId("pocket-usd").textContent()).toBe("USD pocket$0.00")
    // 200,000 sats at 100,000 USD/BTC is $200, less the calls (a fraction of a cent here).
    expect(wallet.spendableUsdCents).toBeLessThan(20_000)
    const dollars = (wallet.spendableUsdCents / 100).toLocaleString("en-US", { style: "currency", currency: "USD" })
    await poll(async () => (await page.getByTestId("spendable").textContent())?.startsWith(`Spendable value${dollars}`)).toBe(true)
    await poll(() => page.getByTestId("spend-today").textContent()).toContain("3 calls")
    await poll(() => page.getByTestId("spend-last-30-days").textContent()).toContain("3 calls")
    expect(new Set(await barLabels(page, "chart-agents"))).toEqual(new Set(["Dana", "research-bot"]))
    expect(await barLabels(page, "chart-capabilities")).toEqual(["reason"])
    expect(new Set(await barLabels(page, "chart-providers"))).toEqual(new Set(["local", "openai"]))
    // The charts are pictures with a text alternative.
    const title = await page.getByTestId("chart-agents").locator("svg title").first().textContent()
    expect(title).toMatch(/By agent, last 7 days: 2 entries, the largest/)
    await poll(() => page.getByTestId("chart-days").locator("rect.bar").count()).toBe(7)
    await h.screenshot(page, "overview")
    expect(await unlabelled(page)).toEqual([])
    // The period is a labelled control kept in the address.
    await page.getByLabel("Today").check()
    await page.waitForURL(/#\/\?days=1$/)
    await page.getByText("By agent, today", { exact: true }).waitFor()
    await poll(() => page.getByTestId("chart-days").count()).toBe(0)
    await page.getByLabel("Last 30 days").check()
    await page.getByText("By agent, last 30 days", { exact: true }).waitFor()
    await poll(() => page.getByTestId("chart-days").locator("rect.bar").count()).toBe(30)
    expect(h.problems()).toEqual([])
  }, BROWSER_TIMEOUT_MS)

  it("transactions: filters change the list and the address, pages, CSV download, receipt links", async () => {
    const page = await h.newPage()
    await h.signIn(page, { key: ownerKey })
    await page.getByRole("link", { name: "Transactions" }).click()
    const count = page.getByTestId("tx-count")
    await poll(() => count.textContent()).toBe("Showing 1–4 of 4")
    expect(await page.locator("table.tx tbody tr").count()).toBe(4)
    await h.screenshot(page, "transactions")
    expect(await unlabelled(page)).toEqual([])
    // Keyboard: the filters are reachable and usable without a mouse.
    await page.getByLabel("Type").focus()
    await page.keyboard.press("Tab")
    expect(await page.evaluate<string>("document.activeElement.id")).toBe("f-agent")

    await page.getByLabel("Type").selectOption("charge")
    await page.getByRole("button", { name: "Apply filters" }).click()
    await page.waitForURL(/#\/transactions\?type=charge$/)
    await poll(() => count.textContent()).toBe("Showing 1–3 of 3")
    expect(new Set(await page.locator("table.tx tbody tr").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-type")))))
      .toEqual(new Set(["charge"]))

    await page.getByLabel("Agent").selectOption(workerId)
    await page.getByRole("button", { name: "Apply filters" }).click()
    await poll(() => count.textContent()).toBe("Showing 1–1 of 1")
    expect(page.url()).toContain(`agentId=${workerId}`)

    // The CSV carries the same filters.
    const [download] = await Promise.all([page.waitForEvent("download"), page.getByTestId("csv-download").click()])
    expect(download.suggestedFilename()).toMatch(/^spendgate-transactions-\d{4}-\d{2}-\d{2}\.csv$/)
    const csv = readFileSync((await download.path())!, "utf8").trim().split("\r\n")
    expect(csv[0]).toBe("id,createdAt,type,amountUsdCents,amountSats,pocketUsdCents,pocketSats,btcUsdRate,agentId,capability,provider,description,auditId,refundOf")
    expect(csv).toHaveLength(2)
    expect(csv[1]).toContain(`,charge,`)
    expect(csv[1]).toContain(`,${workerId},reason,openai,`)

    // Pages as the API pages them.
    await page.getByRole("button", { name: "Clear" }).click()
    // The cleared list first: "Per page" keeps the filters of the address it is changed on.
    await poll(() => count.textContent()).toBe("Showing 1–4 of 4")
    await page.getByLabel("Per page").selectOption("25")
    await poll(() => count.textContent()).toBe("Showing 1–4 of 4")
    expect(await page.getByRole("button", { name: "Next page" }).isDisabled()).toBe(true)
    expect(await page.getByRole("button", { name: "Previous page" }).isDisabled()).toBe(true)

    // Past dates match nothing.
    await page.getByLabel("From (UTC day)").fill("2020-01-01")
    await page.getByLabel("To (UTC day, included)").fill("2020-12-31")
    await page.getByRole("button", { name: "Apply filters" }).click()
    await poll(() => count.textContent()).toBe("No transactions match.")
    expect(h.problems()).toEqual([])
  }, BROWSER_TIMEOUT_MS)

  it("a receipt shows the audit record, its hash and previous hash, and that its link verifies", async () => {
    const page = await h.newPage()
    await h.signIn(page, { key: ownerKey })
    await page.goto(`${h.baseUrl}/#/transactions?type=charge`)
    await page.getByRole("link", { name: /^Receipt of charge/ }).first().click()
    await page.getByRole("heading", { name: "Receipt" }).waitFor()
    const verdict = page.getByTestId("chain-verdict")
    await verdict.getByText("Link verifies").waitFor()
    await poll(() => page.getByTestId("local-verdict").textContent()).toContain("matches.")
    expect(await page.getByTestId("hash").textContent()).toMatch(/^[0-9a-f]{64}$/)
    expect(await page.getByTestId("prev-hash").textContent()).toMatch(/^[0-9a-f]{64}$/)
    expect(await page.getByText("Audit record: Charge (settle)").count()).toBe(1)
    // The transaction the record is about, read by its id.
    const transaction = page.getByTestId("receipt-transaction")
    await transaction.waitFor()
    expect(await transaction.textContent()).toContain("reason via openai")
    await h.screenshot(page, "receipt")
    expect(h.problems()).toEqual([])
  }, BROWSER_TIMEOUT_MS)

  it("an address set as the signed-in page first renders, before the router listens for changes, is followed", async () => {
    const page = await h.newPage()
    // Sets the address in the same task as the render that shows "Sign out" (a MutationObserver's
    // callback runs before the page's effects, where the router starts listening).
    // (Page code as text: these tests are type-checked without the DOM's types.)
    await page.addInitScript(`
      const observer = new MutationObserver(() => {
        if ([...document.querySelectorAll("button")].some((button) => button.textContent === "Sign out")) {
          observer.disconnect()
          location.hash = "#/transactions?type=charge"
        }
      })
      observer.observe(document, { childList: true, subtree: true })
    `)
    await h.signIn(page, { key: ownerKey })
    await page.getByTestId("tx-count").waitFor({ timeout: 5_000 })
    expect(await page.getByLabel("Type").inputValue()).toBe("charge")
    expect(h.problems()).toEqual([])
  }, BROWSER_TIMEOUT_MS)

  it("an agent-role key sees only its own transactions", async () => {
    const page = await h.newPage()
    await h.signIn(page, { key: workerKey })
    await page.getByRole("link", { name: "Transactions" }).click()
    await poll(() => page.getByTestId("tx-count").textContent()).toBe("Showing 1–1 of 1")
    expect(await page.getByLabel("Agent").count()).toBe(0)
    await h.screenshot(page, "transactions-agent")
  }, BROWSER_TIMEOUT_MS)
})

describe("operator area in the browser", () => {
  it("shows stats with charts, service health, late payments and the rate; approves a registry submission", async () => {
    const page = await h.newPage()
    await h.signIn(page, { adminToken: h.adminToken }, "/admin")
    await page.getByRole("heading", { name: "Operator" }).waitFor()
    await page.getByTestId("admin-chart-providers").locator("svg").waitFor()
    expect(Number(await page.getByTestId("stat-accounts").locator(".stat-value").textContent())).toBeGreaterThanOrEqual(1)
    expect(await page.getByTestId("stat-spend").textContent()).toContain("3 calls")
    expect(new Set(await barLabels(page, "admin-chart-providers"))).toEqual(new Set(["local", "openai"]))
    await h.screenshot(page, "admin-stats")
    expect(await unlabelled(page)).toEqual([])

    await page.getByRole("link", { name: "Service health" }).click()
    const health = page.getByTestId("health-table")
    await health.waitFor()
    expect(await health.locator("tbody th").allTextContents()).toEqual(expect.arrayContaining(["local", "openai"]))
    expect(await health.getByText("ok").count()).toBeGreaterThanOrEqual(2)
    await h.screenshot(page, "admin-health")

    await page.getByRole("link", { name: "Late payments" }).click()
    await page.getByTestId("late-empty").waitFor()
    await h.screenshot(page, "admin-late")

    await page.getByRole("link", { name: "Rate" }).click()
    await poll(() => page.getByTestId("rate-value").textContent()).toContain("$100,000.00")
    await h.screenshot(page, "admin-rate")

    await page.getByRole("link", { name: "Registry review" }).click()
    const card = page.getByTestId(`submission-${slug}`)
    await card.waitFor()
    await h.screenshot(page, "admin-registry")
    await card.getByRole("button", { name: "Approve…" }).click()
    await card.getByLabel("Note for the submitter (optional)").fill("Looks good")
    await h.screenshot(page, "admin-registry-confirm")
    expect(await unlabelled(page)).toEqual([])
    // Cancelling changes nothing.
    await card.getByRole("button", { name: "Cancel" }).click()
    expect((await h.api("GET", "/v1/services", { key: ownerKey })).body.some((s: { slug: string }) => s.slug === slug)).toBe(false)
    await card.getByRole("button", { name: "Approve…" }).click()
    await card.getByRole("button", { name: "Yes, approve" }).click()
    await page.getByTestId("registry-empty").waitFor()
    const services = await h.api("GET", "/v1/services", { key: ownerKey })
    expect(services.body.some((s: { slug: string }) => s.slug === slug)).toBe(true)
    await page.getByLabel("Show").selectOption("approved")
    await page.getByTestId(`submission-${slug}`).getByText("approved").first().waitFor()
    expect(await page.getByTestId(`submission-${slug}`).textContent()).toContain("Looks good")
    expect(h.problems()).toEqual([])
  }, BROWSER_TIMEOUT_MS)
})
