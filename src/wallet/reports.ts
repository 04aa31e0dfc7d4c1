import type { AgentId } from "../domain/ids.ts"
import { utcDay } from "../domain/Ledger.ts"
import type { SpendGroupRow, SpendGroups } from "../ports/Store.ts"

/**
 * The owner's reports over the ledger: the spend summary behind the
 * dashboard's charts and the limits of a transactions export. Pure rules;
 * the stores only group rows (`StoreShape.spendGroups`), so memory, PGlite
 * and PostgreSQL cannot disagree on order, gaps or windows.
 */

export const MS_PER_DAY = 86_400_000
/** Days summarised when the caller names none. */
export const DEFAULT_SPEND_DAYS = 30
/** The longest window a summary covers (one leap year). */
export const MAX_SPEND_DAYS = 366

/** The most rows one export may hold; a larger export is refused (narrow the dates). */
export const MAX_EXPORT_ROWS = 100_000
/** Rows read from the store per step of an export. */
export const EXPORT_PAGE_ROWS = 500

/**
 * The last `days` whole UTC calendar days, today included: `from` midnight
 * `days - 1` days ago, `until` (exclusive) the coming midnight. `days = 1` is
 * today, 7 the last seven days.
 */
export const spendWindow = (nowMs: number, days: number): { readonly from: Date; readonly until: Date } => {
  const until = Math.floor(nowMs / MS_PER_DAY) * MS_PER_DAY + MS_PER_DAY
  return { from: new Date(until - days * MS_PER_DAY), until: new Date(until) }
}

export interface SpendLine {
  /** Charges (calls that were paid for). */
  readonly calls: number
  readonly chargedMicroUsd: bigint
  /** Refunds made in the window of charges of that group (whatever the charge's date). */
  readonly refundedMicroUsd: bigint
}

export interface SpendSummary {
  readonly from: Date
  readonly until: Date
  readonly days: number
  readonly agentId: AgentId | null
  readonly total: SpendLine
  /** Every day of the window, oldest first, days without spend included (zeros). */
  readonly byDay: ReadonlyArray<SpendLine & { readonly day: string }>
  /** Largest charge total first; `name` null when the agent is not found. */
  readonly byAgent: ReadonlyArray<SpendLine & { readonly agentId: string; readonly name: string | null }>
  readonly byCapability: ReadonlyArray<SpendLine & { readonly capability: string }>
  readonly byProvider: ReadonlyArray<SpendLine & { readonly provider: string }>
}

const ZERO: SpendLine = { calls: 0, chargedMicroUsd: 0n, refundedMicroUsd: 0n }

const line = (row: SpendGroupRow): SpendLine => ({
  calls: row.calls,
  chargedMicroUsd: row.chargedMicroUsd,
  refundedMicroUsd: row.refundedMicroUsd
})

/** Largest charge first, then most calls, then the key: a stable order whatever the store returned. */
const largestFirst = (a: SpendGroupRow, b: SpendGroupRow): number =>
  a.chargedMicroUsd === b.chargedMicroUsd
    ? b.calls - a.calls || ((a.key ?? "") < (b.key ?? "") ? -1 : (a.key ?? "") > (b.key ?? "") ? 1 : 0)
    : a.chargedMicroUsd > b.chargedMicroUsd
    ? -1
    : 1

/** A row with no key (a ledger row without agent, capability or provider) is named "unknown". */
const UNKNOWN = "unknown"

export const summarizeSpend = (input: {
  readonly window: { readonly from: Date; readonly until: Date }
  readonly days: number
  readonly agentId: AgentId | null
  readonly groups: SpendGroups
  readonly names: ReadonlyMap<string, string>
}): SpendSummary => {
  const { window, groups } = input
  const perDay = new Map(groups.byDay.map((row) => [row.key ?? "", row]))
  const byDay: Array<SpendLine & { readonly day: string }> = []
  for (let at = window.from.getTime(); at < window.until.getTime(); at += MS_PER_DAY) {
    const day = utcDay(new Date(at))
    const row = perDay.get(day)
    byDay.push({ day, ...(row === undefined ? ZERO : line(row)) })
  }
  const total = byDay.reduce<SpendLine>((sum, row) => ({
    calls: sum.calls + row.calls,
    chargedMicroUsd: sum.chargedMicroUsd + row.chargedMicroUsd,
    refundedMicroUsd: sum.refundedMicroUsd + row.refundedMicroUsd
  }), ZERO)
  const sorted = (rows: ReadonlyArray<SpendGroupRow>) => [...rows].sort(largestFirst)
  return {
    from: window.from,
    until: window.until,
    days: input.days,
    agentId: input.agentId,
    total,
    byDay,
    byAgent: sorted(groups.byAgent).map((row) => ({
      agentId: row.key ?? UNKNOWN,
      name: row.key === null ? null : input.names.get(row.key) ?? null,
      ...line(row)
    })),
    byCapability: sorted(groups.byCapability).map((row) => ({ capability: row.key ?? UNKNOWN, ...line(row) })),
    byProvider: sorted(groups.byProvider).map((row) => ({ provider: row.key ?? UNKNOWN, ...line(row) }))
  }
}
