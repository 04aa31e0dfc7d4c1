import { Effect, Layer, Result } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as SafeHttp from "../../adapters/net/SafeHttp.ts"
import * as DevLightning from "../../adapters/rails/DevLightning.ts"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { parseBtcUsdRate } from "../../src/domain/Money.ts"
import { LightningRail } from "../../src/ports/Rails.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { client, type RunningServer, startServer } from "../support/server.ts"
import { type Paywall, startPaywall } from "./paywall.ts"

/**
 * On the dev rails (memory store): a paywall whose invoices come from the
 * gateway's own dev node is paid by that node, which knows their preimages.
 */

let node: DevLightning.DevLightningNode
let paywall: Paywall
let server: RunningServer
let api: ReturnType<typeof client>

beforeAll(async () => {
  node = await Effect.runPromise(DevLightning.make({ dataDir: undefined }))
  paywall = await startPaywall({
    priceSats: 21,
    issue: (amountMsat, memo) =>
      Effect.runPromise(node.issue({ invoiceId: "l402", amountMsat, memo, expirySeconds: 600, createdAt: new Date() }))
  })
  server = await startServer(MemoryStore.layer, {
    rate: Result.getOrThrow(parseBtcUsdRate("100000")),
    lightning: Layer.succeed(LightningRail, node.rail),
    outbound: SafeHttp.layer({ allowHosts: [paywall.host] })
  })
  api = client(server.baseUrl)
})

afterAll(async () => {
  await server?.close()
  await paywall?.close()
})

describe("paying an L402 paywall on the dev rails", () => {
  it("pays an invoice of the dev node with no routing fee, and the paywall accepts the preimage", async () => {
    const signup = await api.post("/v1/signup", { name: "dev" })
    await server.run(Effect.gen(function*() {
      yield* (yield* Wallets).credit({
        accountId: signup.body.accountId as AccountId,
        key: "seed",
        pocket: "usd",
        amount: 100_000n,
        description: "seed"
      })
    }))
    const owner = signup.body.apiKey as string
    await api.put("/v1/l402/payee-hosts", { hosts: ["127.0.0.1"] }, owner)
    const paid = await api.post("/v1/capabilities/pay", {
      url: `${paywall.url}/joke`,
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{\"topic\":\"sats\"}",
      maxSats: 21
    }, owner)
    expect(paid.status, paid.text).toBe(200)
    expect(paid.body).toMatchObject({ status: 200, l402: "paid", payment: { amountSats: 21, routingFeeSats: 0 } })
    expect(paid.body.metadata.chargedUsdCents).toBe(2.1)
    expect(paywall.accepted).toHaveLength(1)
    // The body went with both the first request and the retry.
    expect(paywall.seen.map((s) => s.body)).toEqual(["{\"topic\":\"sats\"}", "{\"topic\":\"sats\"}"])
    expect(JSON.parse(paid.body.body)).toMatchObject({ echo: "{\"topic\":\"sats\"}" })
  })
})
