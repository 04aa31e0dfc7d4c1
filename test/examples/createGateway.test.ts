import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Result } from "effect"
import { createGateway, type PromiseGateway, type Provider, SpendgateError } from "spendgate"
import { afterEach, describe, expect, it } from "vitest"

const opened: Array<PromiseGateway> = []
afterEach(async () => {
  await Promise.all(opened.splice(0).map((gateway) => gateway.close()))
})

const open = async (options: Parameters<typeof createGateway>[0] = {}) => {
  const gateway = await createGateway(options)
  opened.push(gateway)
  return gateway
}

/** The SpendgateError `promise` rejects with. */
const refusal = async (promise: Promise<unknown>): Promise<SpendgateError> => {
  const error = await promise.then(() => undefined, (error: unknown) => error)
  expect(error).toBeInstanceOf(SpendgateError)
  return error as SpendgateError
}

/** An account with 1 USD and a worker agent, on a fresh in-memory gateway. */
const funded = async () => {
  const gateway = await open({ storage: "memory" })
  const account = await gateway.signup("operator")
  const worker = await gateway.createAgent(account.apiKey, { name: "worker" })
  await gateway.credit({ accountId: account.accountId, key: "funding-1", amountMicroUsd: 1_000_000n })
  return { gateway, account, worker }
}

describe("createGateway (the Promise facade)", () => {
  it("meters a paid call: the actual cost is charged, the receipt and the transaction list show it", async () => {
    const { gateway, account, worker } = await funded()
    let calls = 0
    const { value, receipt } = await gateway.spend(worker.apiKey, {
      capability: "search",
      provider: "mine",
      quotedMicroUsd: 30_000,
      run: async () => {
        calls++
        return { value: ["a", "b"], actualMicroUsd: 12_500n }
      }
    })
    expect(calls).toBe(1)
    expect(value).toEqual(["a", "b"])
    expect(receipt.quotedMicroUsd).toBe(30_000n)
    expect(receipt.chargedMicroUsd).toBe(12_500n)
    expect((await gateway.balance(account.apiKey)).usdMicroUsd).toBe(987_500n)
    const page = await gateway.transactions(account.apiKey)
    expect(page.items.map((t) => t.type)).toEqual(expect.arrayContaining(["credit"]))
    expect(page.total).toBeGreaterThanOrEqual(2)
  })

  it("refuses with the API's codes, and a refused call neither runs nor charges", async () => {
    const { gateway, account, worker } = await funded()
    await gateway.setPolicy(account.apiKey, worker.agentId, { maxPerCallMicroUsd: 10_000n, allowedCapabilities: ["search"] })
    let calls = 0
    const run = async () => {
      calls++
      return { value: 1, actualMicroUsd: 1n }
    }
    const overCap = await refusal(gateway.spend(worker.apiKey, { capability: "search", provider: "p", quotedMicroUsd: 10_001n, run }))
    expect(overCap.code).toBe("PER_CALL_LIMIT_EXCEEDED")
    const notAllowed = await refusal(gateway.spend(worker.apiKey, { capability: "reason", provider: "p", quotedMicroUsd: 1n, run }))
    expect(notAllowed.code).toBe("CAPABILITY_NOT_ALLOWED")
    // A worker cannot change its own policy.
    expect((await refusal(gateway.setPolicy(worker.apiKey, worker.agentId, {}))).code).toBe("FORBIDDEN")
    expect((await refusal(gateway.balance("sk_agt_nope"))).code).toBe("UNAUTHORIZED")

    await gateway.kill(account.apiKey, worker.agentId)
    expect((await refusal(gateway.spend(worker.apiKey, { capability: "search", provider: "p", quotedMicroUsd: 1n, run }))).code)
      .toBe("AGENT_KILLED")
    await gateway.revive(account.apiKey, worker.agentId)
    await gateway.spend(worker.apiKey, { capability: "search", provider: "p", quotedMicroUsd: 5n, run })
    expect(calls).toBe(1)
    expect((await gateway.balance(account.apiKey)).usdMicroUsd).toBe(999_999n)
  })

  it("a run that throws releases the hold and its own error is rethrown; nothing is charged", async () => {
    const { gateway, account, worker } = await funded()
    const boom = new Error("upstream down")
    const thrown = await gateway.spend(worker.apiKey, {
      capability: "search",
      provider: "p",
      quotedMicroUsd: 500_000n,
      run: async () => {
        throw boom
      }
    }).then(() => undefined, (error: unknown) => error)
    expect(thrown).toBe(boom)
    const wallet = await gateway.balance(account.apiKey)
    expect(wallet.usdMicroUsd).toBe(1_000_000n)
    // Nothing stays held: the whole balance can still be quoted.
    await gateway.spend(worker.apiKey, { capability: "search", provider: "p", quotedMicroUsd: 1_000_000n, run: async () => ({ value: 0, actualMicroUsd: 0n }) })
  })

  it("bad input is a VALIDATION_ERROR and changes nothing; credit counts once per key", async () => {
    const { gateway, account, worker } = await funded()
    const run = async () => ({ value: 0, actualMicroUsd: 1n })
    for (
      const quotedMicroUsd of [-1n, 1.5, Number.MAX_SAFE_INTEGER + 1, "5" as unknown as number]
    ) {
      expect((await refusal(gateway.spend(worker.apiKey, { capability: "search", provider: "p", quotedMicroUsd, run }))).code)
        .toBe("VALIDATION_ERROR")
    }
    expect((await refusal(gateway.spend(worker.apiKey, { capability: "nonsense", provider: "p", quotedMicroUsd: 1n, run }))).code)
      .toBe("VALIDATION_ERROR")
    // An actual cost that is not an amount: the hold is released, nothing charged.
    expect(
      (await refusal(gateway.spend(worker.apiKey, {
        capability: "search",
        provider: "p",
        quotedMicroUsd: 9n,
        run: async () => ({ value: 0, actualMicroUsd: -3n })
      }))).code
    ).toBe("VALIDATION_ERROR")
    expect((await refusal(gateway.credit({ accountId: account.accountId, key: "k", amountMicroUsd: 0n }))).code)
      .toBe("VALIDATION_ERROR")
    expect((await refusal(gateway.credit({ accountId: "acct_missing", key: "k", amountMicroUsd: 5n }))).code).toBe("NOT_FOUND")
    expect((await refusal(gateway.transactions(account.apiKey, { limit: 0 }))).code).toBe("VALIDATION_ERROR")

    const again = await gateway.credit({ accountId: account.accountId, key: "funding-1", amountMicroUsd: 1_000_000n })
    expect(again.duplicate).toBe(true)
    const wallet = await gateway.balance(account.apiKey)
    expect(wallet.usdMicroUsd).toBe(1_000_000n)
    await gateway.spend(worker.apiKey, { capability: "search", provider: "p", quotedMicroUsd: 1_000_000n, run })
  })

  it("execute runs a configured provider's capability, charged at its actual cost; bad input is refused before any hold", async () => {
    const queries: Array<string> = []
    const provider = {
      name: "own-search",
      capability: "search" as const,
      unitPrice: { per: "query", priceMicroUsd: 2_000n },
      quote: () => Result.succeed({ microUsd: 2_000n }),
      run: (input: { readonly query: string }) =>
        Effect.sync(() => {
          queries.push(input.query)
          return { output: { results: [], query: input.query, totalResults: 0 }, actualMicroUsd: 1_500n }
        })
    } satisfies Provider<"search">
    const gateway = await open({ providers: [provider] })
    const account = await gateway.signup("operator")
    await gateway.credit({ accountId: account.accountId, key: "f", amountMicroUsd: 10_000n })
    const result = await gateway.execute(account.apiKey, "search", { query: "agent wallets" })
    expect(result.provider).toBe("own-search")
    expect(result.data.query).toBe("agent wallets")
    expect(result.receipt.chargedMicroUsd).toBe(1_500n)
    expect(queries).toEqual(["agent wallets"])

    const untyped = gateway.execute as (key: string, capability: string, input: unknown) => Promise<unknown>
    expect((await refusal(untyped(account.apiKey, "search", { query: 42 }))).code).toBe("VALIDATION_ERROR")
    expect((await refusal(untyped(account.apiKey, "teleport", {}))).code).toBe("VALIDATION_ERROR")
    expect(queries).toEqual(["agent wallets"])
    expect((await gateway.balance(account.apiKey)).usdMicroUsd).toBe(8_500n)
  })

  it("keeps its data in PGlite across a close and a reopen; a closed gateway refuses calls", async () => {
    const dir = mkdtempSync(join(tmpdir(), "spendgate-facade-"))
    try {
      const first = await createGateway({ storage: { pglite: dir } })
      const account = await first.signup("operator")
      await first.credit({ accountId: account.accountId, key: "f", amountMicroUsd: 42n })
      await first.close()
      expect((await refusal(first.balance(account.apiKey).then(() => undefined))).code).toBe("CLOSED")
      const second = await createGateway({ storage: { pglite: dir } })
      try {
        expect((await second.balance(account.apiKey)).usdMicroUsd).toBe(42n)
      } finally {
        await second.close()
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)
})
