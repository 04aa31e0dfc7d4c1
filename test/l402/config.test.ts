import { ConfigProvider, Effect, Exit } from "effect"
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { keepSalesKey, loadL402SellConfig, SALES_KEY_FILE_NAME } from "../../adapters/l402.ts"
import type { AccountId, AgentId } from "../../src/domain/ids.ts"

const load = (env: Record<string, string>, hasRate = true) =>
  Effect.runPromiseExit(
    Effect.provideService(loadL402SellConfig({ hasRate }), ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env }))
  )

const refusal = async (env: Record<string, string>, hasRate = true) => {
  const exit = await load(env, hasRate)
  if (Exit.isSuccess(exit)) throw new Error("expected a refusal")
  return String(exit.cause)
}

describe("L402 selling configuration", () => {
  it("is off unless L402_SELL=on", async () => {
    expect(await load({})).toEqual(Exit.succeed(undefined))
    expect(await load({ L402_SELL: "off", L402_MARGIN_PERCENT: "5" })).toEqual(Exit.succeed(undefined))
  })

  it("has defaults, and reads each setting", async () => {
    expect(await load({ L402_SELL: "on" })).toEqual(Exit.succeed({
      settings: { marginPercent: 10, tokenTtlSeconds: 3600, callsPerToken: 1 },
      anonymousPerMinute: 100
    }))
    expect(await load({
      L402_SELL: "on",
      L402_MARGIN_PERCENT: "0",
      L402_TOKEN_TTL_SECONDS: "600",
      L402_CALLS_PER_TOKEN: "3",
      L402_ANONYMOUS_PER_MINUTE: "20"
    })).toEqual(Exit.succeed({ settings: { marginPercent: 0, tokenTtlSeconds: 600, callsPerToken: 3 }, anonymousPerMinute: 20 }))
  })

  it("refuses bad values with one line naming the variable", async () => {
    expect(await refusal({ L402_SELL: "yes" })).toContain("L402_SELL must be on or off")
    expect(await refusal({ L402_SELL: "on", L402_MARGIN_PERCENT: "-1" })).toContain("L402_MARGIN_PERCENT must be a whole number from 0 to 1000")
    expect(await refusal({ L402_SELL: "on", L402_CALLS_PER_TOKEN: "0" })).toContain("L402_CALLS_PER_TOKEN")
    expect(await refusal({ L402_SELL: "on", L402_TOKEN_TTL_SECONDS: "10" })).toContain("L402_TOKEN_TTL_SECONDS")
  })

  it("needs a BTC/USD rate to sell", async () => {
    expect(await refusal({ L402_SELL: "on" }, false)).toContain("L402_SELL=on needs a BTC/USD rate")
  })
})

describe("the sales agent's key file", () => {
  it("is written once, private, and never overwritten", async () => {
    const dir = mkdtempSync(join(tmpdir(), "spendgate-l402-"))
    try {
      const created = { accountId: "acc_1" as AccountId, agentId: "agt_1" as AgentId, apiKey: "sk_agt_first" }
      await Effect.runPromise(keepSalesKey(dir)(created))
      await Effect.runPromise(keepSalesKey(dir)({ ...created, apiKey: "sk_agt_second" }))
      const path = join(dir, SALES_KEY_FILE_NAME)
      expect(readFileSync(path, "utf8")).toContain("apiKey=sk_agt_first")
      expect(statSync(path).mode & 0o777).toBe(0o600)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
