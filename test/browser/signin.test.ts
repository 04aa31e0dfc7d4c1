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
  })

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
  })

  it("the operator signs in with the admin token", async () => {
    const page = await h.newPage()
    await h.signIn(page, { adminToken: h.adminToken }, "/admin")
    expect(await page.getByTestId("signed-in-as").textContent()).toBe("Operator")
  })
})
