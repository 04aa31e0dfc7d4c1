import { Effect, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import * as Sandbox from "../../adapters/providers/execute/sandbox.ts"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { client, errorCode, type RunningServer, startServer } from "../support/server.ts"

/** `execute` end to end: a funded wallet runs code in the real sandbox and pays for the wall time used. */
describe("execute over HTTP", () => {
  let server: RunningServer
  let api: ReturnType<typeof client>

  beforeAll(async () => {
    // 0.01 cents (100 µUSD) per second of wall time.
    const providers = Layer.effect(
      Providers,
      Effect.map(Sandbox.make({ unitPrice: { per: "second", priceMicroUsd: 100n } }), (sandbox) => ({ all: [sandbox] }))
    )
    server = await startServer(MemoryStore.layer, { providers })
    api = client(server.baseUrl)
  })
  afterAll(() => server?.close())

  const funded = async () => {
    const signup = await api.post("/v1/signup", { name: "ops" })
    await server.run(Effect.gen(function*() {
      yield* (yield* Wallets).credit({ accountId: signup.body.accountId as AccountId, key: "s", pocket: "usd", amount: 1_000_000n, description: "seed" })
    }))
    return signup.body.apiKey as string
  }

  it("runs Python in the sandbox, quotes the timeout and charges the seconds used", async () => {
    const key = await funded()
    const res = await api.post("/v1/capabilities/execute", {
      language: "python",
      code: "import time\ntime.sleep(1.2)\nprint('done')",
      timeout: 5000
    }, key)
    expect(res.status).toBe(200)
    expect(res.body.data).toMatchObject({ stdout: "done\n", exitCode: 0, timedOut: false, truncated: false })
    expect(res.body.data.durationMs).toBeGreaterThanOrEqual(1200)
    // quote: 5 s × 100 µUSD; charge: ceil(1.2…) = 2 s × 100 µUSD
    expect(res.body.metadata).toMatchObject({ quotedUsdCents: 0.05, chargedUsdCents: 0.02, provider: "sandbox" })
    expect((await api.get("/v1/wallet", key)).body.balanceUsdCents).toBe(99.98)
  })

  it("kills a runaway program at its timeout and charges the whole timeout", async () => {
    const key = await funded()
    const res = await api.post("/v1/capabilities/execute", { language: "bash", code: "while true; do :; done", timeout: 1000 }, key)
    expect(res.status).toBe(200)
    expect(res.body.data).toMatchObject({ timedOut: true, exitCode: null })
    expect(res.body.metadata.chargedUsdCents).toBe(0.01)
  })

  it("validates the body", async () => {
    const key = await funded()
    for (const body of [{ language: "ruby", code: "x" }, { language: "python" }, { language: "python", code: "x", timeout: 600_000 }]) {
      expect(errorCode(await api.post("/v1/capabilities/execute", body, key))).toBe("VALIDATION_ERROR")
    }
  })
})
