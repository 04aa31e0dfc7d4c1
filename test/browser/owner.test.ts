import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type BrowserHarness, startBrowserHarness } from "../support/browser.ts"

/**
 * The owner's dashboard in a real Chromium against a real server process:
 * sign in, create an agent (its key shown once), set its policy, kill it and
 * see its next API call refused, revive it, fund the wallet by Lightning on
 * the dev rail and watch the balance change, fail a CSRF attempt from
 * another origin, sign out. Screenshots of each page go to
 * artifacts/screenshots/.
 */

let h: BrowserHarness
let ownerKey = ""
let agentKey = ""
let agentId = ""

beforeAll(async () => {
  h = await startBrowserHarness()
  const signup = await h.api("POST", "/v1/signup", { body: { name: "Dana" } })
  expect(signup.status).toBe(201)
  ownerKey = signup.body.apiKey
}, 120_000)
afterAll(() => h?.close())

// A browser and a server process on a busy CI machine: more time than the default 30 s,
// and up to 15 s for what the page shows (expect.poll waits 1 s by default).
const BROWSER_TIMEOUT_MS = 120_000
const poll = <T>(read: () => T | Promise<T>) => expect.poll(read, { timeout: 15_000, interval: 100 })

describe("the owner's dashboard", () => {
  it("walks through agents, policy, kill switch, Lightning funding, CSRF and sign-out", async () => {
    const page = await h.newPage()
    await h.signIn(page, { key: ownerKey })

    // ---- create an agent; its key is shown once ----
    await page.getByRole("link", { name: "Agents" }).click()
    await page.getByRole("heading", { name: "Agents", level: 1 }).waitFor()
    await page.getByLabel("Name", { exact: true }).fill("research-bot")
    await page.getByRole("button", { name: "Create agent" }).click()
    const keyBox = page.getByTestId("new-api-key")
    await keyBox.waitFor()
    agentKey = (await keyBox.textContent())!.trim()
    expect(agentKey).toMatch(/^sk_agt_[A-Za-z0-9]{32}$/)
    await poll(() => page.getByText("it is shown once").count()).toBe(1)
    await page.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin: h.baseUrl })
    await page.getByRole("button", { name: "Copy key" }).click()
    await page.getByText("Copied", { exact: true }).waitFor()
    expect(await page.evaluate<string>("navigator.clipboard.readText()")).toBe(agentKey)
    await h.screenshot(page, "agents-new-key")
    const me = await h.api("GET", "/v1/agents/me", { key: agentKey })
    expect(me.status).toBe(200)
    agentId = me.body.id
    await page.getByRole("button", { name: "I have stored it" }).click()
    expect(await page.getByTestId("new-api-key").count()).toBe(0)

    // ---- rename from the list ----
    await page.getByRole("button", { name: "Rename research-bot" }).click()
    await page.getByLabel("New name for research-bot").fill("research-bot-2")
    await page.getByRole("button", { name: "Save name" }).click()
    await page.getByRole("link", { name: "research-bot-2" }).waitFor()
    expect((await h.api("GET", `/v1/agents/${agentId}`, { key: ownerKey })).body.name).toBe("research-bot-2")
    await h.screenshot(page, "agents")

    // ---- the agent's page: set a policy ----
    await page.getByRole("link", { name: "research-bot-2" }).click()
    await page.getByRole("heading", { name: "Policy" }).waitFor()
    const perDay = page.getByRole("group", { name: "Per day", exact: true })
    await perDay.getByLabel("Limit", { exact: true }).check()
    await page.getByLabel("Per day limit (USD)").fill("5")
    const perCall = page.getByRole("group", { name: "Per call", exact: true })
    await perCall.getByLabel("Limit", { exact: true }).check()
    await page.getByLabel("Per call limit (USD)").fill("0.25")
    await page.getByLabel("Only these:").check()
    await page.getByLabel("search", { exact: true }).check()
    await page.getByLabel("reason", { exact: true }).check()
    await page.getByRole("button", { name: "Save policy" }).click()
    await page.getByText("Policy saved").waitFor()
    const policy = (await h.api("GET", `/v1/agents/${agentId}/policy`, { key: ownerKey })).body
    expect(policy.maxPerDayUsdCents).toBe(500)
    expect(policy.maxPerCallUsdCents).toBe(25)
    expect(policy.maxPerMonthUsdCents).toBe(0)
    expect([...policy.allowedCapabilities].sort()).toEqual(["reason", "search"])
    await h.screenshot(page, "agent")

    // "No limit" is explicit: lifting the per-call cap sends null.
    await perCall.getByLabel("No limit").check()
    await page.getByRole("button", { name: "Save policy" }).click()
    await poll(async () => (await h.api("GET", `/v1/agents/${agentId}/policy`, { key: ownerKey })).body.maxPerCallUsdCents)
      .toBe(0)

    // ---- kill with one click and a confirmation; its next call is refused ----
    await page.getByRole("button", { name: "Kill research-bot-2" }).click()
    const dialog = page.getByRole("dialog", { name: "Kill research-bot-2?" })
    await dialog.waitFor()
    await h.screenshot(page, "agent-kill-dialog")
    await dialog.getByRole("button", { name: "Kill agent" }).click()
    await page.getByText("Killed", { exact: true }).waitFor()
    const refused = await h.api("GET", "/v1/agents/me", { key: agentKey })
    expect(refused.status).toBe(403)
    expect(refused.body.error.code).toBe("AGENT_KILLED")
    await h.screenshot(page, "agent-killed")

    // ---- revive ----
    await page.getByRole("button", { name: "Revive research-bot-2" }).click()
    await page.getByRole("dialog", { name: "Revive research-bot-2?" }).getByRole("button", { name: "Revive agent" }).click()
    await page.getByText("Active", { exact: true }).waitFor()
    expect((await h.api("GET", "/v1/agents/me", { key: agentKey })).status).toBe(200)

    // ---- rotate the key: the new one is shown once, the old one stops at once ----
    await page.getByRole("button", { name: "Rotate key" }).click()
    await page.getByRole("dialog", { name: "Rotate the key of research-bot-2?" }).getByRole("button", { name: "Rotate key" }).click()
    const rotatedBox = page.getByTestId("new-api-key")
    await rotatedBox.waitFor()
    const rotatedKey = (await rotatedBox.textContent())!.trim()
    expect(rotatedKey).not.toBe(agentKey)
    expect((await h.api("GET", "/v1/agents/me", { key: agentKey })).status).toBe(401)
    agentKey = rotatedKey
    expect((await h.api("GET", "/v1/agents/me", { key: agentKey })).status).toBe(200)
    await page.getByRole("button", { name: "I have stored it" }).click()

    // ---- fund by Lightning on the dev rail; the balance changes on the page ----
    await page.getByRole("link", { name: "Funding" }).click()
    await page.getByRole("heading", { name: "Funding", level: 1 }).waitFor()
    await poll(() => page.getByTestId("balance-sats").textContent()).toBe("0 sats")
    await page.getByLabel("Amount (sats)").fill("20000")
    await page.getByRole("button", { name: "Create invoice" }).click()
    const bolt11 = (await page.getByTestId("bolt11").inputValue()).trim()
    expect(bolt11).toMatch(/^lnbcrt/)
    // The QR code is an image drawn by this server.
    await poll(() => page.locator("img.qr").evaluate((img: { naturalWidth: number }) => img.naturalWidth)).toBeGreaterThan(0)
    await poll(() => page.getByTestId("invoice-status").textContent()).toContain("Waiting for payment")
    await h.screenshot(page, "funding-invoice")
    const paid = await h.devPay(bolt11)
    expect(paid.outcome).toBe("credited")
    await poll(() => page.getByTestId("invoice-status").textContent()).toContain("Paid")
    await poll(() => page.getByTestId("balance-sats").textContent()).toBe("20,000 sats")
    // 20,000 sats at $100,000 per BTC (BTC_USD_RATE of the harness) = $20.00.
    await poll(() => page.getByTestId("spendable").textContent()).toBe("$20.00")
    await poll(() => page.getByTestId("invoice-list").getByText("paid").count()).toBeGreaterThan(0)

    // Card checkout: the API's checkout URL is linked.
    await page.getByLabel("Amount (USD)").fill("25")
    await page.getByRole("button", { name: "Start card checkout" }).click()
    const checkout = page.getByRole("link", { name: "Open the checkout page" })
    await checkout.waitFor()
    expect(await checkout.getAttribute("href")).toMatch(/^https?:\/\//)
    await h.screenshot(page, "funding")

    // ---- a CSRF attempt from another origin of the same site fails ----
    const attacker = await startAttacker(h.baseUrl, agentId)
    try {
      const evil = await page.context().newPage()
      await evil.goto(`${attacker.url}/`)
      await evil.waitForURL(`${h.baseUrl}/v1/agents`)
      // The form's POST reached Spendgate with the session cookie (same site) and was refused for CSRF.
      expect(await evil.textContent("body")).toContain("CSRF_FAILED")
      await evil.goto(`${attacker.url}/fetch`)
      await poll(() => evil.textContent("#done")).toBe("done")
      await evil.close()
    } finally {
      await attacker.close()
    }
    const agents = (await h.api("GET", "/v1/agents", { key: ownerKey })).body.agents as ReadonlyArray<{ name: string; killed: boolean; id: string }>
    expect(agents.map((a) => a.name).sort()).toEqual(["Dana", "research-bot-2"])
    expect(agents.find((a) => a.id === agentId)!.killed).toBe(false)
    expect((await h.api("GET", "/v1/agents/me", { key: agentKey })).status).toBe(200)
    // And the session itself still works (the forged sign-out did nothing).
    await page.reload()
    await page.getByRole("button", { name: "Sign out" }).waitFor()

    // ---- sign out ----
    await h.signOut(page)
    expect(await page.context().cookies()).toEqual([])
    await page.goto(`${h.baseUrl}/#/agents`)
    await page.getByRole("button", { name: "Sign in" }).waitFor()
    expect(h.problems()).toEqual([])
  }, BROWSER_TIMEOUT_MS)

  it("an agent key's session shows its own agent, read-only", async () => {
    expect(agentKey).not.toBe("")
    const page = await h.newPage()
    await h.signIn(page, { key: agentKey })
    await page.getByRole("heading", { name: "Policy" }).waitFor()
    await page.getByTestId("policy-view").waitFor()
    expect(await page.getByRole("button", { name: "Save policy" }).count()).toBe(0)
    expect(await page.getByRole("button", { name: /^Kill/ }).count()).toBe(0)
    expect(await page.getByTestId("policy-view").textContent()).toContain("$5.00")
    expect(await page.getByTestId("policy-view").textContent()).toContain("No limit")
    await h.screenshot(page, "agent-readonly")
    expect(h.problems()).toEqual([])
  }, BROWSER_TIMEOUT_MS)
})

/**
 * A page on another origin of the same site (127.0.0.1, another port): a
 * form that posts JSON-looking text to create an agent, and credentialed
 * fetches that try to kill the agent, create one and sign the owner out.
 */
const startAttacker = async (target: string, victimId: string) => {
  const formPage = `<!doctype html><html><body>
<form id="f" method="POST" action="${target}/v1/agents" enctype="text/plain">
<input name='{"name":"evil","x":"' value='"}'>
</form>
<script>document.getElementById("f").submit()</script>
</body></html>`
  const fetchPage = `<!doctype html><html><body><p id="done"></p>
<script>
const opts = (method, body) => ({ method, credentials: "include", mode: "no-cors", headers: { "content-type": "text/plain" }, body })
Promise.allSettled([
  fetch("${target}/v1/agents", opts("POST", JSON.stringify({ name: "evil-fetch" }))),
  fetch("${target}/v1/agents/${victimId}", { method: "PATCH", credentials: "include", headers: { "content-type": "application/json" }, body: JSON.stringify({ killed: true }) }),
  fetch("${target}/session", { method: "DELETE", credentials: "include", mode: "no-cors" })
]).then(() => { document.getElementById("done").textContent = "done" })
</script></body></html>`
  const server: Server = createServer((request, response) => {
    response.writeHead(200, { "content-type": "text/html; charset=utf-8" })
    response.end(request.url === "/fetch" ? fetchPage : formPage)
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}
