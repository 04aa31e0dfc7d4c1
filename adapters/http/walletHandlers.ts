import { Clock, Effect, Option, Stream } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { utcDay } from "../../src/domain/Ledger.ts"
import type { SpendLine, SpendSummary } from "../../src/wallet/reports.ts"
import { csvRecord } from "./csv.ts"
import type { AgentId } from "../../src/domain/ids.ts"
import type { AuditRecord, Transaction } from "../../src/domain/Ledger.ts"
import { formatBtcUsdRate, microUsdToCents, msatToSats, usdToMsatForCharge } from "../../src/domain/Money.ts"
import type { WalletView } from "../../src/wallet/Wallets.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { Api, CurrentPrincipal } from "./Api.ts"
import { toHttpError } from "./errors.ts"

/** Wire shapes of the wallet group; units converted here, nothing decided. */

export const walletJson = (wallet: WalletView) => ({
  accountId: wallet.accountId,
  balanceUsdCents: microUsdToCents(wallet.usdMicroUsd),
  balanceSats: msatToSats(wallet.satsMsat),
  spendableUsdCents: microUsdToCents(wallet.spendableMicroUsd)
})

/**
 * `amountSats` of a charge is its price in sats at the rate snapshot of the
 * call (0 when no rate was known); of a credit or refund, the sats it moved.
 */
export const transactionJson = (t: Transaction) => {
  const rate = t.rateMicroUsdPerBtc === null ? null : { microUsdPerBtc: t.rateMicroUsdPerBtc }
  const amountMsat = t.type === "charge"
    ? rate === null ? 0n : usdToMsatForCharge(t.amountMicroUsd, rate)
    : t.satsMsat
  return {
    id: t.id,
    type: t.type,
    amountUsdCents: microUsdToCents(t.amountMicroUsd),
    amountSats: msatToSats(amountMsat),
    description: t.description,
    agentId: t.agentId,
    capability: t.capability,
    provider: t.provider,
    auditId: t.auditId,
    createdAt: t.createdAt.toISOString(),
    pockets: { usdCents: microUsdToCents(t.usdMicroUsd), sats: msatToSats(t.satsMsat) },
    btcUsdRate: rate === null ? null : Number(formatBtcUsdRate(rate)),
    ...(t.refundOf === null ? {} : { refundOf: t.refundOf })
  }
}

const parseDetails = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

export const auditJson = (record: AuditRecord, verified: boolean) => ({
  id: record.id,
  seq: Number(record.seq),
  kind: record.kind,
  agentId: record.agentId,
  reservationId: record.reservationId,
  transactionId: record.transactionId,
  amountUsdCents: microUsdToCents(record.amountMicroUsd),
  pocketChange: { usdCents: microUsdToCents(record.usdDeltaMicroUsd), sats: msatToSats(record.satsDeltaMsat) },
  details: parseDetails(record.details),
  createdAt: record.createdAt.toISOString(),
  prevHash: record.prevHash,
  hash: record.hash,
  verified
})

/** The columns of the transactions CSV: the JSON's fields, the pockets flattened. */
export const TRANSACTION_CSV_HEADER = [
  "id",
  "createdAt",
  "type",
  "amountUsdCents",
  "amountSats",
  "pocketUsdCents",
  "pocketSats",
  "btcUsdRate",
  "agentId",
  "capability",
  "provider",
  "description",
  "auditId",
  "refundOf"
] as const

export const transactionCsvRecord = (t: Transaction): string => {
  const json = transactionJson(t)
  return csvRecord([
    json.id,
    json.createdAt,
    json.type,
    json.amountUsdCents,
    json.amountSats,
    json.pockets.usdCents,
    json.pockets.sats,
    json.btcUsdRate,
    json.agentId,
    json.capability,
    json.provider,
    json.description,
    json.auditId,
    t.refundOf
  ])
}

const spendLineJson = (line: SpendLine) => ({
  calls: line.calls,
  chargedUsdCents: microUsdToCents(line.chargedMicroUsd),
  refundedUsdCents: microUsdToCents(line.refundedMicroUsd)
})

export const spendSummaryJson = (summary: SpendSummary) => ({
  from: summary.from.toISOString(),
  until: summary.until.toISOString(),
  days: summary.days,
  agentId: summary.agentId,
  total: spendLineJson(summary.total),
  byDay: summary.byDay.map((row) => ({ day: row.day, ...spendLineJson(row) })),
  byAgent: summary.byAgent.map((row) => ({ agentId: row.agentId, name: row.name, ...spendLineJson(row) })),
  byCapability: summary.byCapability.map((row) => ({ capability: row.capability, ...spendLineJson(row) })),
  byProvider: summary.byProvider.map((row) => ({ provider: row.provider, ...spendLineJson(row) }))
})

export const WalletHandlers = HttpApiBuilder.group(
  Api,
  "wallet",
  Effect.fn(function*(handlers) {
    const wallets = yield* Wallets
    return handlers
      .handle("wallet", () =>
        Effect.flatMap(CurrentPrincipal, (principal) => Effect.map(wallets.get(principal), walletJson)))
      .handle("agentWallet", ({ params }) =>
        Effect.flatMap(CurrentPrincipal, (principal) =>
          wallets.ofAgent(principal, params.id as AgentId).pipe(
            Effect.mapError(toHttpError),
            Effect.map((view) => ({
              ...walletJson(view),
              agentId: view.agentId,
              dailySpentUsdCents: microUsdToCents(view.dailySpentMicroUsd),
              lifetimeSpentUsdCents: microUsdToCents(view.lifetimeSpentMicroUsd)
            }))
          )))
      .handle("transactions", ({ query }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const page = { limit: query.limit ?? 50, offset: query.offset ?? 0 }
          const result = yield* wallets.transactions(principal, {
            type: query.type,
            agentId: Option.getOrUndefined(Option.fromNullishOr(query.agentId)) as AgentId | undefined,
            startDate: query.startDate,
            endDate: query.endDate
          }, page).pipe(Effect.mapError(toHttpError))
          return { transactions: result.items.map(transactionJson), total: result.total, ...page }
        }))
      .handle("transactionsCsv", ({ query }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const exported = yield* wallets.exportTransactions(principal, {
            type: query.type,
            agentId: query.agentId as AgentId | undefined,
            startDate: query.startDate,
            endDate: query.endDate
          }).pipe(Effect.mapError(toHttpError))
          const today = utcDay(new Date(yield* Clock.currentTimeMillis))
          const body = Stream.concat(
            Stream.make(csvRecord(TRANSACTION_CSV_HEADER)),
            Stream.map(exported.rows, transactionCsvRecord)
          ).pipe(Stream.encodeText)
          return HttpServerResponse.stream(body, {
            contentType: "text/csv; charset=utf-8; header=present",
            headers: {
              "content-disposition": `attachment; filename="spendgate-transactions-${today}.csv"`,
              "x-total-count": String(exported.total),
              "cache-control": "no-store"
            }
          })
        }))
      .handle("transaction", ({ params }) =>
        Effect.flatMap(CurrentPrincipal, (principal) =>
          wallets.transaction(principal, params.transactionId).pipe(Effect.mapError(toHttpError), Effect.map(transactionJson))))
      .handle("spend", ({ query }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const summary = yield* wallets.spendSummary(principal, {
            days: query.days,
            agentId: query.agentId as AgentId | undefined
          }).pipe(Effect.mapError(toHttpError))
          return spendSummaryJson(summary)
        }))
      .handle("audit", ({ params }) =>
        Effect.flatMap(CurrentPrincipal, (principal) =>
          wallets.audit(principal, params.auditId).pipe(
            Effect.mapError(toHttpError),
            Effect.map((view) => auditJson(view.record, view.verified))
          )))
  })
)
