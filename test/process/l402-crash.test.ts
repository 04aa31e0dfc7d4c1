import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { type FakeLnd, MACAROON_HEX, startFakeLnd } from "../rails/fakeLnd.ts"
import { type Paywall, startPaywall } from "../l402/paywall.ts"
import { client } from "../support/server.ts"
import { type ServerProcess, startServerProcess } from "../support/server-process.ts"

/**
 * The real server process, paying an L402 invoice through LND (the fake
 * node), killed with SIGKILL after the payment was sent and before it was
 * settled, then started again on the same data directory: the restart asks
 * the node by payment hash and charges the payment that went through (or
 * releases the one that failed), and never sends a payment again.
 */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const waitFor = async (what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(50)
  }
}

describe("an L402 payment in flight across a kill -9", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "spendgate-l402-"))
  let server: ServerProcess | undefined
  let fake: FakeLnd | undefined
  let paywall: Paywall | undefined
  afterAll(async () => {
    await server?.kill9()
    await paywall?.close()
    await fake?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  it("is charged once after the restart when it succeeded, and released when it failed", async () => {
    fake = await startFakeLnd()
    paywall = await startPaywall({ lndUrl: fake.url, lndMacaroonHex: MACAROON_HEX, priceSats: 50 })
    const env = {
      DATA_DIR: dataDir,
      SIGNUP: "open",
      LIGHTNING_RAIL: "lnd",
      LND_REST_URL: fake.url,
      LND_MACAROON_HEX: MACAROON_HEX,
      BTC_USD_RATE: "100000",
      URL_ALLOW_HOSTS: paywall.host
    }
    server = await startServerProcess(env, 60_000)
    let api = client(server.baseUrl)
    const signup = await api.post("/v1/signup", { name: "owner" })
    const owner = signup.body.apiKey as string
    // Funded over Lightning: the fake node settles the invoice, the subscription credits 10,000 sats ($10).
    const funding = await api.post("/v1/wallet/fund", { amountSats: 10_000 }, owner)
    expect(funding.status, funding.text).toBe(200)
    fake.settle(fake.invoices.at(-1)!)
    await waitFor("the funding credit", async () => (await api.get("/v1/wallet", owner)).body.balanceSats === 10_000)
    expect((await api.put("/v1/l402/payee-hosts", { hosts: [paywall.host] }, owner)).status).toBe(200)

    const crashDuring = async (path: string) => {
      fake!.payBehaviour = () => "hang"
      const before = fake!.sendCalls.length
      const call = api.post("/v1/capabilities/pay", { url: `${paywall!.url}${path}`, method: "GET", maxSats: 100 }, owner)
        .catch(() => undefined)
      await waitFor("the payment in flight", () => fake!.sendCalls.length === before + 1)
      await sleep(200)
      await server!.kill9()
      await call
      return fake!.payments.at(-1)!
    }

    // 1. Sent, then the process dies; the payment then succeeds on the node.
    const paid = await crashDuring("/api/one")
    expect(paid.status).toBe("IN_FLIGHT")
    fake.completePayment(paid.hash, "succeed")
    fake.payBehaviour = undefined
    const sends = fake.sendCalls.length
    server = await startServerProcess(env, 60_000)
    api = client(server.baseUrl)
    const charged = async () =>
      (await api.get("/v1/wallet/transactions", owner)).body.transactions
        .filter((t: { type: string; description: string }) => t.type === "charge" && t.description.includes(paid.hash))
    await waitFor("the charge after the restart", async () => (await charged()).length === 1)
    const wallet = await api.get("/v1/wallet", owner)
    // 50 sats paid + 1 sat routing fee, taken from the sats pocket.
    expect(wallet.body.balanceSats).toBe(10_000 - 51)
    expect(fake.sendCalls.length).toBe(sends)
    expect(fake.payments.filter((p) => p.hash === paid.hash)).toHaveLength(1)

    // 2. Sent, then the process dies; the payment then fails: the hold is released, nothing charged.
    const failed = await crashDuring("/api/two")
    fake.completePayment(failed.hash, "fail")
    fake.payBehaviour = undefined
    server = await startServerProcess(env, 60_000)
    api = client(server.baseUrl)
    await waitFor("the hold released after the restart", async () => {
      const w = (await api.get("/v1/wallet", owner)).body
      return w.balanceSats === 10_000 - 51 && (w.heldUsdCents ?? 0) === 0 && (w.heldSats ?? 0) === 0
    })
    expect((await api.get("/v1/wallet/transactions", owner)).body.transactions
      .filter((t: { type: string; description: string }) => t.type === "charge" && t.description.includes(failed.hash)))
      .toHaveLength(0)
    expect(server.output()).toContain("resolved from the node: Failed")
  }, 240_000)
})
