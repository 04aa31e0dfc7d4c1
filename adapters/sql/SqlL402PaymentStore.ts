import { Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { AccountId, AgentId } from "../../src/domain/ids.ts"
import { L402PaymentStore, type OutboundPayment, type OutboundPaymentStatus } from "../../src/ports/L402PaymentStore.ts"
import { writeEvents } from "./SqlWebhooks.ts"

/**
 * The L402 records in SQL (migration 0017): `l402_payee_hosts` and
 * `l402_payments`; the `pay.*` webhook events go to the outbox with the
 * payment's resolution. Storage failures become defects.
 */

interface PaymentRow {
  readonly payment_hash: string
  readonly account_id: string
  readonly agent_id: string
  readonly reservation_id: string
  readonly url: string
  readonly payment_request: string
  readonly amount_msat: bigint | number | string
  readonly fee_limit_msat: bigint | number | string
  readonly rate_micro_usd_per_btc: bigint | number | string
  readonly status: string
  readonly preimage: string | null
  readonly fee_msat: bigint | number | string | null
  readonly transaction_id: string | null
  readonly created_at: Date
  readonly resolved_at: Date | null
}

const toPayment = (row: PaymentRow): OutboundPayment => ({
  paymentHash: row.payment_hash,
  accountId: row.account_id as AccountId,
  agentId: row.agent_id as AgentId,
  reservationId: row.reservation_id,
  url: row.url,
  paymentRequest: row.payment_request,
  amountMsat: BigInt(row.amount_msat),
  feeLimitMsat: BigInt(row.fee_limit_msat),
  rateMicroUsdPerBtc: BigInt(row.rate_micro_usd_per_btc),
  status: row.status as OutboundPaymentStatus,
  preimage: row.preimage,
  feeMsat: row.fee_msat === null ? null : BigInt(row.fee_msat),
  transactionId: row.transaction_id,
  createdAt: new Date(row.created_at),
  resolvedAt: row.resolved_at === null ? null : new Date(row.resolved_at)
})

export const makeSqlL402PaymentStore = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  return L402PaymentStore.of({
    payeeHosts: (accountId) =>
      sql<{ readonly host: string }>`SELECT host FROM l402_payee_hosts WHERE account_id = ${accountId} ORDER BY host`.pipe(
        Effect.map((rows) => rows.map((r) => r.host)),
        Effect.orDie
      ),
    setPayeeHosts: (accountId, hosts, now) =>
      sql.withTransaction(Effect.gen(function*() {
        yield* sql`DELETE FROM l402_payee_hosts WHERE account_id = ${accountId}`
        for (const host of hosts) {
          yield* sql`INSERT INTO l402_payee_hosts (account_id, host, created_at) VALUES (${accountId}, ${host}, ${now})`
        }
      })).pipe(Effect.orDie),
    beginPayment: (p) =>
      sql`
        INSERT INTO l402_payments AS p (payment_hash, account_id, agent_id, reservation_id, url, payment_request,
          amount_msat, fee_limit_msat, rate_micro_usd_per_btc, status, created_at)
        VALUES (${p.paymentHash}, ${p.accountId}, ${p.agentId}, ${p.reservationId}, ${p.url}, ${p.paymentRequest},
          ${p.amountMsat.toString()}, ${p.feeLimitMsat.toString()}, ${p.rateMicroUsdPerBtc.toString()}, 'pending', ${p.createdAt})
        ON CONFLICT (payment_hash) DO UPDATE SET
          account_id = EXCLUDED.account_id, agent_id = EXCLUDED.agent_id, reservation_id = EXCLUDED.reservation_id,
          url = EXCLUDED.url, payment_request = EXCLUDED.payment_request, amount_msat = EXCLUDED.amount_msat,
          fee_limit_msat = EXCLUDED.fee_limit_msat, rate_micro_usd_per_btc = EXCLUDED.rate_micro_usd_per_btc,
          status = 'pending', preimage = NULL, fee_msat = NULL, transaction_id = NULL,
          created_at = EXCLUDED.created_at, resolved_at = NULL
        WHERE p.status = 'failed'
        RETURNING 1 AS begun`.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie),
    resolvePayment: (hash, r, events = []) =>
      sql.withTransaction(Effect.gen(function*() {
        const updated = yield* sql`
          UPDATE l402_payments
          SET status = ${r.status}, preimage = ${r.preimage}, fee_msat = ${r.feeMsat === null ? null : r.feeMsat.toString()},
            transaction_id = ${r.transactionId}, resolved_at = ${r.resolvedAt}
          WHERE payment_hash = ${hash} AND status = 'pending'
          RETURNING 1 AS resolved`
        if (updated.length > 0) yield* writeEvents(sql, events)
      })).pipe(Effect.orDie),
    findPayment: (hash) =>
      sql<PaymentRow>`SELECT * FROM l402_payments WHERE payment_hash = ${hash}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toPayment)),
        Effect.orDie
      ),
    pendingPayments: (limit) =>
      sql<PaymentRow>`SELECT * FROM l402_payments WHERE status = 'pending' ORDER BY created_at LIMIT ${limit}`.pipe(
        Effect.map((rows) => rows.map(toPayment)),
        Effect.orDie
      )
  })
})

export const layer: Layer.Layer<L402PaymentStore, never, SqlClient.SqlClient> = Layer.effect(L402PaymentStore, makeSqlL402PaymentStore)
