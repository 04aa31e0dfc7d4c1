import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { client } from "../support/server.ts"
import { startServerProcess } from "../support/server-process.ts"

/**
 * The real server process with QUOTE_TTL_SECONDS: quotes live that long, and a
 * quote pays for a call of the local speech provider (espeak-ng, no network)
 * once, until it expires.
 */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe("binding quotes in the server process", () => {
  it("QUOTE_TTL_SECONDS sets the lifetime; a quote pays for one call before it, none after", async () => {
    const dir = mkdtempSync(join(tmpdir(), "spendgate-quotes-"))
    const server = await startServerProcess({ DATA_DIR: dir, QUOTE_TTL_SECONDS: "2" }, 60_000)
    try {
      const api = client(server.baseUrl)
      const signup = await api.post("/v1/signup", { name: "ops" })
      const key: string = signup.body.apiKey
      const card = await api.post("/v1/wallet/fund-card", { amountUsdCents: 1500 }, key)
      expect((await fetch(`${server.baseUrl}${new URL(card.body.checkoutUrl).pathname}/pay`, { method: "POST" })).status).toBe(200)

      const input = { text: "Hello from Spendgate" }
      const quote = async () => {
        const res = await api.post("/v1/quotes", { capability: "speak", input }, key)
        expect(res.status).toBe(201)
        expect(res.body.provider).toBe("espeak")
        expect(Date.parse(res.body.expiresAt) - Date.parse(res.body.createdAt)).toBe(2_000)
        return res.body
      }
      const call = (quoteId: string) =>
        api.call("POST", "/v1/capabilities/speak", { key, body: input, headers: { "x-spendgate-quote": quoteId } })

      const first = await quote()
      const paid = await call(first.quoteId)
      expect(paid.status).toBe(200)
      expect(paid.body.metadata).toMatchObject({ provider: "espeak", quotedUsdCents: first.quotedUsdCents, quoteId: first.quoteId })
      expect(paid.body.metadata.chargedUsdCents).toBeLessThanOrEqual(first.quotedUsdCents)
      expect((await call(first.quoteId)).body.error.code).toBe("QUOTE_USED")

      const second = await quote()
      await sleep(2_200)
      const late = await call(second.quoteId)
      expect(late.status).toBe(409)
      expect(late.body.error.code).toBe("QUOTE_EXPIRED")
      const charges = await api.get("/v1/wallet/transactions?type=charge", key)
      expect(charges.body.total).toBe(1)
    } finally {
      await server.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  }, 90_000)
})
