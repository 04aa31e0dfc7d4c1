import { registryOnly } from "../../adapters/services/transport.ts"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Exit, Layer, ManagedRuntime, Option, Redacted, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { storeLayer } from "../../adapters/sql/Database.ts"
import { Agents } from "../../src/agents/Agents.ts"
import { Funding } from "../../src/funding/Funding.ts"
import { PaymentSink } from "../../src/ports/Rails.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { devRails } from "../../adapters/rails/dev.ts"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import * as Gateway from "../../src/Gateway.ts"
import { RateSource } from "../../src/ports/RateSource.ts"
import { freshDatabaseUrl } from "../support/postgres.ts"

/**
 * A settlement delivered five times at once, and again by a new process
 * after a restart: one credit, one transaction, paid once.
 */

const gateway = (database: Parameters<typeof storeLayer>[0], dataDir: string | undefined) =>
  ManagedRuntime.make(
    Gateway.layer.pipe(
      Layer.provideMerge(storeLayer(database)),
      Layer.provide(RateSource.none),
      Layer.provide([Providers.make([]), registryOnly]),
      Layer.provide(devRails({ dataDir, publicUrl: "http://spendgate.test" }))
    )
  )

const firstLife = Effect.gen(function*() {
  const agents = yield* Agents
  const signup = yield* agents.signup({ name: "ops" })
  const owner = yield* agents.authenticate(signup.apiKey)
  const invoice = yield* (yield* Funding).fundLightning(owner, 4_200)
  const sink = yield* PaymentSink
  const notice = { type: "lightning" as const, externalId: invoice.externalId, paidAt: invoice.createdAt, source: "test" }
  const outcomes = yield* Effect.all(Array.from({ length: 5 }, () => sink.record(notice)), { concurrency: "unbounded" })
  return { apiKey: signup.apiKey, notice, outcomes }
})

const secondLife = (apiKey: string, notice: Parameters<PaymentSink["Service"]["record"]>[0]) =>
  Effect.gen(function*() {
    const owner = yield* (yield* Agents).authenticate(apiKey)
    const again = yield* (yield* PaymentSink).record(notice)
    const wallet = yield* (yield* Wallets).get(owner)
    const credits = yield* (yield* Wallets).transactions(owner, { type: "credit" }, { limit: 10, offset: 0 })
    const invoices = yield* (yield* Funding).invoices(owner, undefined, { limit: 10, offset: 0 })
    return { again, wallet, credits, invoices }
  })

const check = async (database: Parameters<typeof storeLayer>[0], dataDir: string | undefined) => {
  const one = gateway(database, dataDir)
  const first = await one.runPromise(firstLife)
  await one.dispose()
  expect([...first.outcomes].sort()).toEqual(["credited", "duplicate", "duplicate", "duplicate", "duplicate"])
  const two = gateway(database, dataDir)
  try {
    const after = await two.runPromise(secondLife(first.apiKey, first.notice))
    expect(after.again).toBe("duplicate")
    expect(after.wallet.satsMsat).toBe(4_200_000n)
    expect(after.credits.total).toBe(1)
    expect(after.invoices.items.map((i) => i.status)).toEqual(["paid"])
  } finally {
    await two.dispose()
  }
}

describe("a settlement replayed after a restart", () => {
  const scope = Effect.runSync(Scope.make())
  const dir = mkdtempSync(join(tmpdir(), "spendgate-restart-"))
  let url: string
  beforeAll(async () => {
    url = await Effect.runPromise(Scope.provide(freshDatabaseUrl, scope))
  })
  afterAll(async () => {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    rmSync(dir, { recursive: true, force: true })
  })

  it("is credited once on PGlite", async () => {
    await check({ databaseUrl: Option.none(), dataDir: join(dir, "pglite") }, join(dir, "pglite"))
  }, 60_000)

  it("is credited once on PostgreSQL", async () => {
    await check({ databaseUrl: Option.some(Redacted.make(url)), dataDir: undefined }, undefined)
  }, 60_000)
})
