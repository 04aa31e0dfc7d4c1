import { Effect, Exit, Layer, ManagedRuntime } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, describe, expect, it } from "vitest"
import { storeOverClient } from "../../../adapters/sql/Database.ts"
import * as PgliteClient from "../../../adapters/sql/PgliteClient.ts"
import { verifyChainSegment } from "../../../src/audit/chain.ts"
import { Store } from "../../../src/ports/Store.ts"
import { Wallets } from "../../../src/wallet/Wallets.ts"
import { freshPostgresLayer } from "../../support/postgres.ts"
import { call, fundedAccount, testLayer } from "../../wallet/ledger.contract.ts"

/**
 * Group commit of a hot wallet's holds: concurrent reserves of one wallet are
 * coalesced into one transaction (the reserve audit records of a batch share
 * the transaction id that wrote them), each still decided on its own, in
 * arrival order, under the wallet lock.
 */

const backends = [
  ["PGlite", () => PgliteClient.layer({ dataDir: undefined })],
  ["PostgreSQL", () => freshPostgresLayer(8)]
] as const

describe.each(backends)("batched holds over %s", (_name, client) => {
  const runtime = ManagedRuntime.make(
    Layer.provideMerge(testLayer(storeOverClient), client() as Layer.Layer<SqlClient.SqlClient, unknown>)
  )
  afterAll(() => runtime.dispose())

  it("30 concurrent 10-cent calls on a 100-cent wallet: exactly 10 held, in fewer transactions than holds", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const owner = yield* fundedAccount(100n)
      const exits = yield* Effect.all(
        Array.from({ length: 30 }, () => Effect.exit(call(owner, 10n))),
        { concurrency: "unbounded" }
      )
      expect(exits.filter(Exit.isSuccess).length).toBe(10)
      expect((yield* (yield* Wallets).get(owner)).usdMicroUsd).toBe(0n)
      const sql = yield* SqlClient.SqlClient
      // xmin: the transaction that wrote the row (audit records are never updated).
      const rows = yield* sql<{ holds: number | string; transactions: number | string }>`
        SELECT COUNT(*) AS holds, COUNT(DISTINCT xmin::text) AS transactions FROM audit_log
        WHERE account_id = ${owner.agent.accountId} AND kind = 'reserve'`
      expect(Number(rows[0]!.holds)).toBe(10)
      expect(Number(rows[0]!.transactions)).toBeLessThan(10)
      const store = yield* Store
      const audit = yield* store.listAudit(owner.agent.accountId, 0n, 1000)
      expect(yield* verifyChainSegment(null, audit)).toBeNull()
    }))
  }, 60_000)

  it("a batch with a hold that fires an event: it is recorded with its event, once, in order", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const owner = yield* fundedAccount(100n)
      const store = yield* Store
      const accountId = owner.agent.accountId
      // The 6th 10-cent hold takes the wallet from 50 cents to 40: below the threshold.
      yield* store.setLowBalanceThreshold(accountId, 450_000n)
      const exits = yield* Effect.all(
        Array.from({ length: 30 }, () => Effect.exit(call(owner, 10n))),
        { concurrency: "unbounded" }
      )
      expect(exits.filter(Exit.isSuccess).length).toBe(10)
      expect((yield* (yield* Wallets).get(owner)).usdMicroUsd).toBe(0n)
      const events = (yield* store.listWebhookEvents(accountId, { limit: 100, offset: 0 })).items
      expect(events.filter((event) => event.type === "wallet.low_balance").length).toBe(1)
      // Every refusal after the wallet ran dry recorded its spend.refused (one per minute: the outbox keeps one).
      expect(events.filter((event) => event.type === "spend.refused").length).toBe(1)
      const audit = yield* store.listAudit(accountId, 0n, 1000)
      expect(audit.filter((record) => record.kind === "reserve").length).toBe(10)
      expect(yield* verifyChainSegment(null, audit)).toBeNull()
    }))
  }, 60_000)
})
