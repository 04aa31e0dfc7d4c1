import { Effect, Layer, ManagedRuntime } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, describe, expect, it } from "vitest"
import { storeOverClient } from "../../adapters/sql/Database.ts"
import * as PgliteClient from "../../adapters/sql/PgliteClient.ts"
import { sealAuditRecord } from "../../src/audit/chain.ts"
import { Store } from "../../src/ports/Store.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { freshPostgresLayer } from "../support/postgres.ts"
import { call, fundedAccount, testLayer } from "./ledger.contract.ts"

/** The audit chain in SQL storage: append-only in the database, and tampering is detected. */

const backends = [
  ["PGlite", () => PgliteClient.layer({ dataDir: undefined })],
  ["PostgreSQL", () => freshPostgresLayer()]
] as const

describe.each(backends)("audit chain over %s", (_name, client) => {
  const sqlLayer = client()
  const runtime = ManagedRuntime.make(
    Layer.provideMerge(testLayer(storeOverClient), sqlLayer as Layer.Layer<SqlClient.SqlClient, unknown>)
  )
  afterAll(() => runtime.dispose())

  const history = Effect.gen(function*() {
    const owner = yield* fundedAccount(100n)
    const first = yield* call(owner, 10n, { actual: 30_000n })
    const second = yield* call(owner, 10n, { actual: 40_000n })
    yield* call(owner, 5n)
    return { owner, first: first.receipt, second: second.receipt }
  })

  it("refuses to change or delete an audit record", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const { first } = yield* history
      const sql = yield* SqlClient.SqlClient
      const update = yield* Effect.exit(sql`UPDATE audit_log SET amount_micro_usd = 1 WHERE id = ${first.auditId}`)
      expect(update._tag).toBe("Failure")
      const remove = yield* Effect.exit(sql`DELETE FROM audit_log WHERE id = ${first.auditId}`)
      expect(remove._tag).toBe("Failure")
    }))
  })

  it("detects a changed amount, and a record replaced together with its hash", async () => {
    await runtime.runPromise(Effect.gen(function*() {
      const { owner, first, second } = yield* history
      const wallets = yield* Wallets
      const store = yield* Store
      const sql = yield* SqlClient.SqlClient
      const accountId = owner.agent.accountId
      expect(yield* wallets.verifyChain(accountId)).toBeNull()
      expect((yield* wallets.audit(owner, first.auditId)).verified).toBe(true)

      // Someone with database access bypasses the guard and edits a receipt.
      yield* sql`ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_change`
      yield* sql`UPDATE audit_log SET amount_micro_usd = 1 WHERE id = ${first.auditId}`
      const broken = yield* wallets.verifyChain(accountId)
      expect(broken?._tag).toBe("HashMismatch")
      expect(broken && "id" in broken ? broken.id : undefined).toBe(first.auditId)
      expect((yield* wallets.audit(owner, first.auditId)).verified).toBe(false)

      // A careful forger also recomputes the record's hash: the next link breaks.
      const [tampered] = (yield* store.listAudit(accountId, 0n, 100)).filter((r) => r.id === second.auditId)
      const { hash: _old, ...content } = tampered!
      const forged = yield* sealAuditRecord({ ...content, amountMicroUsd: 1n })
      yield* sql`UPDATE audit_log SET amount_micro_usd = 1, hash = ${forged.hash} WHERE id = ${second.auditId}`
      yield* sql`ALTER TABLE audit_log ENABLE TRIGGER audit_log_no_change`
      const records = yield* store.listAudit(accountId, 0n, 100)
      const next = records.find((r) => r.seq === forged.seq + 1n)!
      expect((yield* wallets.audit(owner, second.auditId)).verified).toBe(true)
      expect((yield* wallets.audit(owner, next.id)).verified).toBe(false)
    }))
  })
})
