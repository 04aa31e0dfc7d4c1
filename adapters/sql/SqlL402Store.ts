import { Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { bytesToHex, hexToBytes } from "@noble/hashes/utils.js"
import type { AccountId, AgentId } from "../../src/domain/ids.ts"
import { L402Store, type SalesAccount } from "../../src/ports/L402Store.ts"

/**
 * The L402 seller's state in SQL (tables `l402_settings` and `l402_tokens`,
 * migration 0016). A use is counted by one statement that inserts the
 * token's row or increments it while it is below its allowance, so two
 * concurrent uses of a single-use token cannot both be counted. Storage
 * failures become defects.
 */

export const makeSqlL402Store = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  /** Writes the setting unless it exists; returns the stored value. */
  const setting = (name: "root_key" | "sales_account", value: string) =>
    Effect.gen(function*() {
      yield* sql`INSERT INTO l402_settings (name, value) VALUES (${name}, ${value}) ON CONFLICT (name) DO NOTHING`
      const rows = yield* sql<{ readonly value: string }>`SELECT value FROM l402_settings WHERE name = ${name}`
      return rows[0]!.value
    }).pipe(Effect.orDie)

  const parseAccount = (value: string): SalesAccount => {
    const [accountId, agentId] = value.split(" ")
    return { accountId: accountId as AccountId, agentId: agentId as AgentId }
  }

  return L402Store.of({
    rootKey: (candidate) => Effect.map(setting("root_key", bytesToHex(candidate)), hexToBytes),
    salesAccount: Effect.map(
      sql<{ readonly value: string }>`SELECT value FROM l402_settings WHERE name = 'sales_account'`.pipe(Effect.orDie),
      (rows) => rows.length === 0 ? Option.none() : Option.some(parseAccount(rows[0]!.value))
    ),
    saveSalesAccount: (account) =>
      Effect.map(setting("sales_account", `${account.accountId} ${account.agentId}`), parseAccount),
    useToken: (use) =>
      sql<{ readonly uses: number }>`
        INSERT INTO l402_tokens AS t (token_id, payment_hash, calls_allowed, uses, first_used_at, last_used_at)
        VALUES (${use.tokenId}, ${use.paymentHash}, ${use.callsAllowed}, 1, ${use.at}, ${use.at})
        ON CONFLICT (token_id) DO UPDATE SET uses = t.uses + 1, last_used_at = EXCLUDED.last_used_at
        WHERE t.uses < t.calls_allowed
        RETURNING uses`.pipe(Effect.map((rows) => rows.length === 1), Effect.orDie),
    returnUse: (tokenId) =>
      sql`UPDATE l402_tokens SET uses = uses - 1 WHERE token_id = ${tokenId} AND uses > 0`.pipe(Effect.asVoid, Effect.orDie)
  })
})

export const layer: Layer.Layer<L402Store, never, SqlClient.SqlClient> = Layer.effect(L402Store, makeSqlL402Store)
