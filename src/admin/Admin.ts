import { Clock, Context, Effect, Layer } from "effect"
import type { Agent } from "../domain/Agent.ts"
import type { Invoice } from "../domain/Invoice.ts"
import type { AuditRecord, Transaction } from "../domain/Ledger.ts"
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

export class Admin extends Context.Service<Admin, {
  /** Totals and per-day spend and funding over the last `days` UTC days (default 30). */
  readonly stats: (days: number | undefined) => Effect.Effect<{ readonly window: StatsQuery; readonly stats: Stats }>
  readonly agents: (filter: AdminAgentFilter, page: PageQuery) => Effect.Effect<AdminPage<Agent>>
  readonly transactions: (query: TransactionQuery, page: PageQuery) => Effect.Effect<AdminPage<Transaction>>
  readonly auditLogs: (query: AuditQuery, page: PageQuery) => Effect.Effect<AdminPage<AuditRecord>>
  /** Payments that arrived after their invoice expired (or would have overfilled the wallet): not credited. */
  readonly latePayments: (page: PageQuery) => Effect.Effect<AdminPage<Invoice>>
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
    latePayments: (page) => paged(pageOf(page), store.listLatePayments)
  })
})

export const layer: Layer.Layer<Admin, never, AdminStore | Store> = Layer.effect(Admin, make)
