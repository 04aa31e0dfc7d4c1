import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import { Reactivity } from "effect/reactivity"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { Agents, Capabilities, Spend, Spendgate, Wallets } from "spendgate"
import { FakeProvider } from "../../adapters/testing/index.ts"
import { freshDatabaseUrl } from "../support/postgres.ts"

/**
 * The ready layers of the package entry point: one line per storage gives a
 * gateway that signs up, funds, spends and remembers, with nothing else to
 * provide.
 */

const dirs: Array<string> = []
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })))
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "spendgate-embed-"))
  dirs.push(dir)
  return dir
}

/** Signs up, funds one dollar and spends 1.25 cents of a 3-cent quote; returns the account. */
const fundAndSpend = Effect.gen(function*() {
  const agents = yield* Agents
  const account = yield* agents.signup({ name: "operator" })
  const owner = yield* agents.authenticate(account.apiKey)
  yield* (yield* Wallets).credit({ accountId: account.accountId, key: "funding", pocket: "usd", amount: 1_000_000n, description: "funding" })
  const { receipt } = yield* (yield* Spend).spend(owner, {
    capability: "search",
    provider: "own",
    quotedMicroUsd: 30_000n,
    description: "one search",
    run: Effect.succeed({ value: null, actualMicroUsd: 12_500n })
  })
  return { account, receipt }
})

const balanceOf = (apiKey: string) =>
  Effect.gen(function*() {
    const owner = yield* (yield* Agents).authenticate(apiKey)
    return (yield* (yield* Wallets).get(owner)).spendableMicroUsd
  })

describe("Spendgate ready layers", () => {
  it("memory(): a whole gateway from one layer", async () => {
    const { receipt } = await Effect.runPromise(Effect.provide(fundAndSpend, Spendgate.memory()))
    expect(receipt.chargedMicroUsd).toBe(12_500n)
    expect(receipt.balanceAfterMicroUsd).toBe(987_500n)
  })

  it("memory({ providers }): the providers given are the catalogue", async () => {
    const provider = FakeProvider.make("search", { name: "own-search", priceMicroUsd: 2_000n })
    const providerNames = Effect.gen(function*() {
      const list = yield* (yield* Capabilities).list
      return list.flatMap((capability) => capability.providers.map((p) => `${capability.name}/${p.name}`))
    })
    // Without providers the catalogue has none; with one, it is that one.
    expect(await Effect.runPromise(Effect.provide(providerNames, Spendgate.memory()))).toEqual([])
    expect(await Effect.runPromise(Effect.provide(providerNames, Spendgate.memory({ providers: [provider] }))))
      .toEqual(["search/own-search"])
  })

  it("pglite(dir): the data outlives the layer, and a second process's directory is refused", async () => {
    const dir = tempDir()
    const { account } = await Effect.runPromise(Effect.provide(fundAndSpend, Spendgate.pglite(dir)))
    // Reopened: the same account and balance.
    expect(await Effect.runPromise(Effect.provide(balanceOf(account.apiKey), Spendgate.pglite(dir)))).toBe(987_500n)
    // While one layer holds the directory, another cannot open it.
    const second = await Effect.runPromise(
      Effect.scoped(Effect.gen(function*() {
        yield* Layer.build(Spendgate.pglite(dir))
        return yield* Effect.flip(Layer.build(Spendgate.pglite(dir)))
      }))
    )
    expect((second as { _tag?: string })._tag).toBe("DataDirInUse")
  }, 60_000)

  it("postgres(url): a PostgreSQL server, migrated on open", async () => {
    const charged = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const url = yield* freshDatabaseUrl
      const first = yield* Effect.provide(fundAndSpend, Spendgate.postgres(url))
      expect(yield* Effect.provide(balanceOf(first.account.apiKey), Spendgate.postgres(url))).toBe(987_500n)
      return first.receipt.chargedMicroUsd
    })))
    expect(charged).toBe(12_500n)
  }, 60_000)

  it("postgres(url, { ledger }): the ledger's options reach the store", async () => {
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const url = yield* freshDatabaseUrl
      const sql = yield* PgClient.make({ url: Redacted.make(url), maxConnections: 1 })
      const settles = Effect.map(
        sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM audit_log WHERE kind = 'settle'`,
        (rows) => Number(rows[0]!.n)
      )
      // Settles written in the background, `after` ms after the call answered.
      const settledAfter = (after: number) => Effect.andThen(Effect.sleep(after), settles)
      // The default: the settle writer sends it within milliseconds.
      yield* Effect.provide(
        Effect.andThen(fundAndSpend, Effect.map(settledAfter(500), (n) => expect(n).toBe(1))),
        Spendgate.postgres(url)
      )
      // A settle delay of a minute, and a settle answered with no hold coming left to wait for one:
      // nothing carries it and nothing reads, so it waits (still the one)...
      yield* Effect.provide(
        Effect.andThen(fundAndSpend, Effect.map(settledAfter(500), (n) => expect(n).toBe(1))),
        Spendgate.postgres(url, { ledger: { settleDelayMs: 60_000, settleWhenIdle: "wait" } })
      )
      // ...until the store closes, which lands it.
      expect(yield* settles).toBe(2)
      // The same delay with the default `settleWhenIdle: "now"`: no hold was in flight or waiting
      // when the call answered, so the writer sent its settle at once.
      yield* Effect.provide(
        Effect.andThen(fundAndSpend, Effect.map(settledAfter(500), (n) => expect(n).toBe(3))),
        Spendgate.postgres(url, { ledger: { settleDelayMs: 60_000 } })
      )
    }).pipe(Effect.provide(Reactivity.layer))))
  }, 60_000)
})
