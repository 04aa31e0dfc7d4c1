import { Clock, Context, Effect, Layer } from "effect"
import type { Agent } from "../domain/Agent.ts"
import type { Invoice } from "../domain/Invoice.ts"
import { InvalidAmount, NotFound, type RefundRefusal, ValidationError } from "../domain/errors.ts"
import { newAuditId, newTransactionId, type AuditRecord, type Transaction, type Wallet } from "../domain/Ledger.ts"
import { planRefund, remainingOf, type Refunded } from "../wallet/refund.ts"
import {
  type AdminAgentFilter,
  type AdminAuditFilter,
  AdminStore,
  type AdminTransactionFilter,
  type Stats,
  type StatsQuery
} from "../ports/AdminStore.ts"
import { type Page, type PageRequest, Store } from "../ports/Store.ts"

/**
 * What the operator reads across accounts (`/v1/admin/*`), with its rules:
 * which instants a span of UTC calendar days covers, the stats window, and
 * the default page. The HTTP handlers only translate to and from JSON.
 */

export const MS_PER_DAY = 86_400_000
/** Days reported by the stats when the operator names none. */
export const DEFAULT_STATS_DAYS = 30
export const DEFAULT_PAGE_LIMIT = 50

/** A UTC calendar date, `YYYY-MM-DD` (checked by the caller's schema). */
export type CalendarDate = string

/** The first instant of a UTC calendar day. */
export const dayStartOf = (date: CalendarDate): Date => new Date(`${date}T00:00:00.000Z`)

/**
 * The instants of the UTC calendar days `startDate` to `endDate`, both
 * included: `from` the start of the first day, `until` (exclusive) the start
 * of the day after the last. A bound not given is left open.
 */
export const calendarDays = (
  startDate: CalendarDate | undefined,
  endDate: CalendarDate | undefined
): { readonly from: Date | undefined; readonly until: Date | undefined } => ({
  from: startDate === undefined ? undefined : dayStartOf(startDate),
  until: endDate === undefined ? undefined : new Date(dayStartOf(endDate).getTime() + MS_PER_DAY)
})

/** The last `days` whole UTC days, today included: from midnight `days - 1` days ago to the coming midnight. */
export const statsWindow = (nowMs: number, days: number = DEFAULT_STATS_DAYS): StatsQuery => {
  const until = new Date(Math.floor(nowMs / MS_PER_DAY) * MS_PER_DAY + MS_PER_DAY)
  return { from: new Date(until.getTime() - days * MS_PER_DAY), until }
}

/** The page asked for, with the API's defaults (50 from the start). */
export const pageOf = (query: { readonly limit?: number | undefined; readonly offset?: number | undefined }): PageRequest => ({
  limit: query.limit ?? DEFAULT_PAGE_LIMIT,
  offset: query.offset ?? 0
})

/** A page of results and the page that was asked for. */
export interface AdminPage<A> extends Page<A>, PageRequest {}

export interface TransactionQuery extends Omit<AdminTransactionFilter, "from" | "until"> {
  readonly startDate?: CalendarDate | undefined
  readonly endDate?: CalendarDate | undefined
}

export interface AuditQuery extends Omit<AdminAuditFilter, "from" | "until"> {
  readonly startDate?: CalendarDate | undefined
  readonly endDate?: CalendarDate | undefined
}

export interface PageQuery {
  readonly limit?: number | undefined
  readonly offset?: number | undefined
}

/** The longest refund reason kept (characters). */
export const MAX_REFUND_REASON_LENGTH = 500

export interface RefundRequest {
  /** Undefined: everything that remains of the charge. */
  readonly amountMicroUsd?: bigint | undefined
  readonly reason: string
}

export interface RefundResult {
  readonly refund: Transaction
  readonly charge: Transaction
  readonly refunded: Refunded
  /** What may still be refunded of the charge. */
  readonly remainingMicroUsd: bigint
  readonly wallet: Wallet
}

export class Admin extends Context.Service<Admin, {
  /** Totals and per-day spend and funding over the last `days` UTC days (default 30). */
  readonly stats: (days: number | undefined) => Effect.Effect<{ readonly window: StatsQuery; readonly stats: Stats }>
  readonly agents: (filter: AdminAgentFilter, page: PageQuery) => Effect.Effect<AdminPage<Agent>>
  readonly transactions: (query: TransactionQuery, page: PageQuery) => Effect.Effect<AdminPage<Transaction>>
  readonly auditLogs: (query: AuditQuery, page: PageQuery) => Effect.Effect<AdminPage<AuditRecord>>
  /** Payments that arrived after their invoice expired (or would have overfilled the wallet): not credited. */
  readonly latePayments: (page: PageQuery) => Effect.Effect<AdminPage<Invoice>>
  /**
   * Refunds a charge of any account, all that remains of it or a part
   * (src/wallet/refund.ts): unknown transaction 404, not a charge or more
   * than remains 409, a non-positive amount 400.
   */
  readonly refund: (
    chargeId: string,
    request: RefundRequest
  ) => Effect.Effect<RefundResult, NotFound | InvalidAmount | ValidationError | RefundRefusal>
}>()("spendgate/Admin") {}

const paged = <A>(page: PageRequest, run: (page: PageRequest) => Effect.Effect<Page<A>>): Effect.Effect<AdminPage<A>> =>
  Effect.map(run(page), (result) => ({ ...result, ...page }))

export const make: Effect.Effect<Admin["Service"], never, AdminStore | Store> = Effect.gen(function*() {
  const admin = yield* AdminStore
  const store = yield* Store
  return Admin.of({
    stats: (days) =>
      Effect.gen(function*() {
        const window = statsWindow(yield* Clock.currentTimeMillis, days)
        return { window, stats: yield* admin.stats(window) }
      }),
    agents: (filter, page) => paged(pageOf(page), (p) => admin.agents(filter, p)),
    transactions: ({ startDate, endDate, ...filter }, page) =>
      paged(pageOf(page), (p) => admin.transactions({ ...filter, ...calendarDays(startDate, endDate) }, p)),
    auditLogs: ({ startDate, endDate, ...filter }, page) =>
      paged(pageOf(page), (p) => admin.auditLogs({ ...filter, ...calendarDays(startDate, endDate) }, p)),
    latePayments: (page) => paged(pageOf(page), store.listLatePayments),
    refund: Effect.fn("Admin.refund")(function*(chargeId: string, request: RefundRequest) {
      const reason = request.reason.trim()
      if (reason.length === 0 || reason.length > MAX_REFUND_REASON_LENGTH) {
        const message = `reason must be 1 to ${MAX_REFUND_REASON_LENGTH} characters`
        return yield* new ValidationError({ message, issues: [{ path: "reason", message }] })
      }
      if (request.amountMicroUsd !== undefined && request.amountMicroUsd <= 0n) {
        return yield* new InvalidAmount({ message: "amountUsdCents must be positive; leave it out to refund all that remains" })
      }
      const outcome = yield* store.refund({
        chargeId,
        refundTransactionId: newTransactionId(),
        auditId: newAuditId(),
        reason,
        now: new Date(yield* Clock.currentTimeMillis),
        plan: (snapshot) => planRefund(snapshot, request.amountMicroUsd)
      })
      if (outcome._tag === "NotFound") return yield* new NotFound({ resource: "Transaction" })
      if (outcome._tag === "Refused") return yield* Effect.fail(outcome.refusal)
      return {
        refund: outcome.refund,
        charge: outcome.charge,
        refunded: outcome.refunded,
        remainingMicroUsd: remainingOf(outcome.charge, outcome.refunded),
        wallet: outcome.wallet
      }
    })
  })
})

export const layer: Layer.Layer<Admin, never, AdminStore | Store> = Layer.effect(Admin, make)
