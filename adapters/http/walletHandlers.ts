import { Effect, Option } from "effect"
import { HttpApiBuilder } from "effect/http-api"
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
          if (query.startDate !== undefined && query.endDate !== undefined && query.startDate > query.endDate) {
            return yield* Effect.fail(toHttpError({
              code: "VALIDATION_ERROR",
              message: "startDate must not be after endDate",
              details: { issues: [{ path: "startDate", message: "must not be after endDate" }] }
            }))
          }
          const page = { limit: query.limit ?? 50, offset: query.offset ?? 0 }
          const result = yield* wallets.transactions(principal, {
            type: query.type,
            agentId: Option.getOrUndefined(Option.fromNullishOr(query.agentId)) as AgentId | undefined,
            startDate: query.startDate,
            endDate: query.endDate
          }, page).pipe(Effect.mapError(toHttpError))
          return { transactions: result.items.map(transactionJson), total: result.total, ...page }
        }))
      .handle("audit", ({ params }) =>
        Effect.flatMap(CurrentPrincipal, (principal) =>
          wallets.audit(principal, params.auditId).pipe(
            Effect.mapError(toHttpError),
            Effect.map((view) => auditJson(view.record, view.verified))
          )))
  })
)
