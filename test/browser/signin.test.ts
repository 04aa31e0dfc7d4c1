import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type BrowserHarness, startBrowserHarness } from "../support/browser.ts"

/**
 * The sign-in page in a real Chromium against a real server process: a wrong
 * key is refused on the page, an owner key and the operator's token open
 * their areas, and the key is kept nowhere in the browser.
 */

let h: BrowserHarness
let ownerKey = ""

beforeAll(async () => {
  h = await startBrowserHarness()
  const signup = await h.api("POST", "/v1/signup", { body: { name: "Dana" } })
  ownerKey = signup.body.apiKey
}, 120_000)
afterAll(() => h?.close())

// A browser and a server process on a busy CI machine: more time than the default 30 s,
// and up to 15 s for what the page shows (expect.poll waits 1 s by default).
const BROWSER_TIMEOUT_MS = 120_000
const poll = <T>(read: () => T | Promise<T>) => expect.poll(read, { timeout: 15_000, interval: 100 })

describe("sign-in page", () => {
  it("shows an error for a wrong key, with labelled inputs", async () => {
    const page = await h.newPage()
    await page.goto(`${h.baseUrl}/`)
    await page.getByRole("heading", { name: "Sign in to Spendgate" }).waitFor()
    await h.screenshot(page, "signin")
    await page.getByLabel("API key").fill(`sk_agt_${"x".repeat(32)}`)
    await page.getByRole("button", { name: "Sign in" }).click()
    const alert = page.getByRole("alert")
    await alert.waitFor()
    expect(await alert.textContent()).toContain("Invalid key or token")
    expect(await page.getByLabel("API key").inputValue()).toBe("")
    await h.screenshot(page, "signin-error")
  }, BROWSER_TIMEOUT_MS)

  it("an owner key opens the owner area; the key is not kept in the browser; sign-out ends the session", async () => {
    const page = await h.newPage()
    await h.signIn(page, { key: ownerKey })
    expect(await page.getByTestId("signed-in-as").textContent()).toBe("Dana")
    const cookies = await page.context().cookies()
    expect(cookies.map((c) => c.name)).toEqual(["spendgate_session"])
    expect(cookies[0]!.httpOnly).toBe(true)
    expect(cookies[0]!.sameSite).toBe("Strict")
    expect(cookies[0]!.value).not.toContain(ownerKey)
    const stored = await page.evaluate<string>("JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }) + document.cookie")
    expect(stored).not.toContain("sk_agt_")
    expect(await page.content()).not.toContain(ownerKey)
    await h.signOut(page)
    expect(await page.context().cookies()).toEqual([])
    expect(h.problems()).toEqual([])
  }, BROWSER_TIMEOUT_MS)

  it("the operator signs in with the admin token", async () => {
    const page = await h.newPage()
    await h.signIn(page, { adminToken: h.adminToken }, "/admin")
    expect(await page.getByTestId("signed-in-as").textContent()).toBe("Operator")
  }, BROWSER_TIMEOUT_MS)
})

describe("sign-in by keyboard", () => {
  it("focuses the key field, submits with Enter, and shows where focus is", async () => {
    const page = await h.newPage()
    await page.goto(`${h.baseUrl}/`)
    await page.getByRole("heading", { name: "Sign in to Spendgate" }).waitFor()
    await poll(() => page.evaluate<string>("document.activeElement.id")).toBe("signin-secret")
    await page.keyboard.type(ownerKey)
    await page.keyboard.press("Enter")
    await page.getByRole("button", { name: "Sign out" }).waitFor()
    // Tab reaches the navigation; the focused element has a visible outline.
    await page.keyboard.press("Tab")
    const focused = await page.evaluate<{ tag: string; outline: string }>(
      "({ tag: document.activeElement.tagName, outline: getComputedStyle(document.activeElement).outlineStyle })"
    )
    expect(focused.tag).toBe("A")
    expect(focused.outline).toBe("solid")
  }, BROWSER_TIMEOUT_MS)

  it("a killed agent's session says so, and another key can sign in in its place", async () => {
    const worker = await h.api("POST", "/v1/agents", { key: ownerKey, body: { name: "temp" } })
    const page = await h.newPage()
    await h.signIn(page, { key: worker.body.apiKey })
    expect((await h.api("PATCH", `/v1/agents/${worker.body.id}`, { key: ownerKey, body: { killed: true } })).status).toBe(200)
    await page.reload()
    await poll(() => page.getByRole("alert").textContent()).toContain("AGENT_KILLED")
    await page.getByLabel("API key").fill(ownerKey)
    await page.getByRole("button", { name: "Sign in" }).click()
    await poll(() => page.getByTestId("signed-in-as").textContent()).toBe("Dana")
  }, BROWSER_TIMEOUT_MS)
})

describe("a session that ends elsewhere", () => {
  it("the next API call of the page returns to the sign-in page", async () => {
    const page = await h.newPage()
    await h.signIn(page, { key: ownerKey })
    // End the session from outside the page (as an idle timeout or a sign-out in another tab would).
    const cookie = (await page.context().cookies()).map((c) => `${c.name}=${c.value}`).join("; ")
    const session = await fetch(`${h.baseUrl}/session`, { headers: { cookie } }).then((r) => r.json()) as { csrfToken: string }
    const out = await fetch(`${h.baseUrl}/session`, { method: "DELETE", headers: { cookie, "x-csrf-token": session.csrfToken } })
    expect(out.status).toBe(204)
    await page.getByRole("link", { name: "Agents" }).click()
    await page.getByRole("button", { name: "Sign in" }).waitFor()
    await page.getByLabel("API key").waitFor()
  }, BROWSER_TIMEOUT_MS)
})
