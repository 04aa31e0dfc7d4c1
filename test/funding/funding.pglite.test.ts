import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import * as PgliteClient from "../../adapters/sql/PgliteClient.ts"
import { storeOverClient } from "../../adapters/sql/Database.ts"
import { fundingContract } from "./funding.contract.ts"

fundingContract("PGlite", () => storeOverClient.pipe(Layer.provide(PgliteClient.layer({ dataDir: undefined }))))

describe("PGlite schema: pocket maximums", () => {
  layer(storeOverClient.pipe(Layer.provideMerge(PgliteClient.layer({ dataDir: undefined }))), { timeout: 120_000 })((it) => {
    it.effect("the database itself refuses a pocket above 10^15 and accepts one at it; invoices may be 'refused'", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`INSERT INTO accounts (id, created_at) VALUES ('acc_bounds', now())`
        yield* sql`INSERT INTO wallets (account_id) VALUES ('acc_bounds')`
        yield* sql`UPDATE wallets SET usd_micro = 1000000000000000, sats_msat = 1000000000000000 WHERE account_id = 'acc_bounds'`
        // Only the new maximums can be broken by adding 1 to a non-negative pocket.
        for (
          const over of [
            sql`UPDATE wallets SET usd_micro = usd_micro + 1 WHERE account_id = 'acc_bounds'`,
            sql`UPDATE wallets SET sats_msat = sats_msat + 1 WHERE account_id = 'acc_bounds'`
          ]
        ) {
          const failed = yield* Effect.flip(over)
          assert.include(`${String(failed)} ${String((failed as { cause?: unknown }).cause)}`, "ConstraintError")
        }
        const [row] = yield* sql<{ usd_micro: string; sats_msat: string }>`
          SELECT usd_micro::text AS usd_micro, sats_msat::text AS sats_msat FROM wallets WHERE account_id = 'acc_bounds'`
        assert.deepStrictEqual(row, { usd_micro: "1000000000000000", sats_msat: "1000000000000000" })
        const [check] = yield* sql<{ def: string }>`
          SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname = 'invoices_status_check'`
        assert.include(check!.def, "refused")
      }))
  })
})
