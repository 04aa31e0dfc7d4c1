import { Deferred, Effect, Exit, Option, Result, type Scope } from "effect"
import type { SqlClient, Statement } from "effect/sql"
import { sealAuditRecord, type UnhashedAuditRecord } from "../../src/audit/chain.ts"
import type { Agent, Policy } from "../../src/domain/Agent.ts"
import { type Capability, capabilityNames } from "../../src/domain/Capability.ts"
import type { AccountId, AgentId } from "../../src/domain/ids.ts"
import {
  type AuditKind,
  type AuditRecord,
  newAuditId,
  type Reservation,
  type ReservationStatus,
  type Transaction,
  type TransactionType,
  utcDay,
  type Wallet
} from "../../src/domain/Ledger.ts"
import { type Invoice, type InvoiceStatus, type InvoiceType } from "../../src/domain/Invoice.ts"
import { decidePayment } from "../../src/funding/payment.ts"
import { creditFits, MicroUsd, Msat, pocketMaximum } from "../../src/domain/Money.ts"
import { paged } from "./paging.ts"
import { writeEvents } from "./SqlWebhooks.ts"
import { agentChangeEvents, chargeRefunded, invoiceExpired, invoiceLatePayment, invoicePaid } from "../../src/webhooks/events.ts"
import { reserveEvents } from "../../src/webhooks/spendEvents.ts"
import type {
  CreditInput,
  FundingStore,
  HeldReservation,
  LedgerStore,
  RecentActivity,
  ReserveInput,
  SettleInput,
  SettleOutcome
} from "../../src/ports/Store.ts"
import { refusalKillsAgent, type SettlePlan, usesRecentActivity } from "../../src/wallet/decide.ts"
import type { StoredQuote } from "../../src/quotes/Quote.ts"
import {
  captureSettleInput,
  capturesOnExpiry,
  settleQueuedHere,
  creditEntries,
  heldReservation,
  lateSettleEntries,
  refundEntries,
  reserveAudit,
  settleEntries,
  unpaidEntries
} from "../../src/wallet/entries.ts"
import type { Refunded } from "../../src/wallet/refund.ts"

/**
 * The ledger half of the SQL store. Every write locks the account's wallet
 * row first (then, where needed, the reservation row), so writes of one
 * account are serialised in one order and never deadlock, while different
 * accounts proceed in parallel. No lock is held outside these short
 * transactions: the upstream call happens between `reserve` and `settle`.
 */

type Int8 = bigint | string | number
const big = (value: Int8): bigint => BigInt(value)
/** Stored amounts carry their unit's type from here on (a negative one is a broken database: a defect). */
const microUsd = (value: Int8): MicroUsd => MicroUsd.make(BigInt(value))
const msat = (value: Int8): Msat => Msat.make(BigInt(value))
const bigOrNull = (value: Int8 | null): bigint | null => (value === null ? null : BigInt(value))
const date = (value: Date | string): Date => (value instanceof Date ? value : new Date(value))

interface WalletRow {
  readonly account_id: string
  readonly usd_micro: Int8
  readonly sats_msat: Int8
  readonly audit_seq: Int8
  readonly audit_head: string
}

interface ReservationRow {
  readonly id: string
  readonly account_id: string
  readonly agent_id: string
  readonly capability: string
  readonly provider: string
  readonly quoted_micro_usd: Int8
  readonly held_usd_micro: Int8
  readonly held_sats_msat: Int8
  readonly rate_micro_usd_per_btc: Int8 | null
  readonly day: string
  readonly status: string
  readonly settled_micro_usd: Int8 | null
  readonly created_at: Date | string
  readonly expires_at: Date | string
}

export interface TransactionRow {
  readonly id: string
  readonly account_id: string
  readonly agent_id: string | null
  readonly type: string
  readonly amount_micro_usd: Int8
  readonly usd_micro: Int8
  readonly sats_msat: Int8
  readonly rate_micro_usd_per_btc: Int8 | null
  readonly description: string
  readonly capability: string | null
  readonly provider: string | null
  readonly audit_id: string
  readonly refund_of?: string | null
  readonly created_at: Date | string
}

/** A charge's row with what its refunds gave back so far. */
interface RefundableRow extends TransactionRow {
  readonly refunded_micro_usd: Int8
  readonly refunded_usd_micro: Int8
  readonly refunded_sats_msat: Int8
}

const refundedOfRow = (row: RefundableRow): Refunded => ({
  microUsd: big(row.refunded_micro_usd),
  usdMicroUsd: big(row.refunded_usd_micro),
  satsMsat: big(row.refunded_sats_msat)
})

interface InvoiceRow {
  readonly id: string
  readonly account_id: string
  readonly agent_id: string
  readonly type: string
  readonly amount_msat: Int8 | null
  readonly amount_micro_usd: Int8 | null
  readonly status: string
  readonly rail: string
  readonly external_id: string
  readonly payment_request: string | null
  readonly checkout_url: string | null
  readonly created_at: Date | string
  readonly expires_at: Date | string
  readonly paid_at: Date | string | null
  readonly late_payment_at: Date | string | null
  readonly late_payment_amount: Int8 | null
  readonly transaction_id: string | null
}

export interface AuditRow {
  readonly id: string
  readonly account_id: string
  readonly seq: Int8
  readonly kind: string
  readonly agent_id: string | null
  readonly reservation_id: string | null
  readonly transaction_id: string | null
  readonly amount_micro_usd: Int8
  readonly usd_delta_micro: Int8
  readonly sats_delta_msat: Int8
  readonly details: string
  readonly created_at: Date | string
  readonly prev_hash: string
  readonly hash: string
}

const toWallet = (row: WalletRow): Wallet => ({
  accountId: row.account_id as AccountId,
  usdMicroUsd: microUsd(row.usd_micro),
  satsMsat: msat(row.sats_msat)
})

const toReservation = (row: ReservationRow): Reservation => ({
  id: row.id,
  accountId: row.account_id as AccountId,
  agentId: row.agent_id as AgentId,
  capability: row.capability as Capability,
  provider: row.provider,
  quotedMicroUsd: microUsd(row.quoted_micro_usd),
  heldUsdMicroUsd: microUsd(row.held_usd_micro),
  heldSatsMsat: msat(row.held_sats_msat),
  rateMicroUsdPerBtc: bigOrNull(row.rate_micro_usd_per_btc),
  day: row.day,
  status: row.status as ReservationStatus,
  settledMicroUsd: row.settled_micro_usd === null ? null : microUsd(row.settled_micro_usd),
  createdAt: date(row.created_at),
  expiresAt: date(row.expires_at)
})

interface QuoteRow {
  readonly id: string
  readonly account_id: string
  readonly agent_id: string
  readonly capability: string
  readonly provider: string
  readonly model: string | null
  readonly request_hash: string
  readonly quoted_micro_usd: Int8
  readonly created_at: Date | string
  readonly expires_at: Date | string
  readonly used_at: Date | string | null
  readonly reservation_id: string | null
}

const toQuote = (row: QuoteRow): StoredQuote => ({
  id: row.id,
  accountId: row.account_id as AccountId,
  agentId: row.agent_id as AgentId,
  capability: row.capability as Capability,
  provider: row.provider,
  model: row.model,
  requestHash: row.request_hash,
  quotedMicroUsd: microUsd(row.quoted_micro_usd),
  createdAt: date(row.created_at),
  expiresAt: date(row.expires_at),
  usedAt: row.used_at === null ? null : date(row.used_at),
  reservationId: row.reservation_id
})

export const toTransaction = (row: TransactionRow): Transaction => ({
  id: row.id,
  accountId: row.account_id as AccountId,
  agentId: row.agent_id as AgentId | null,
  type: row.type as TransactionType,
  amountMicroUsd: microUsd(row.amount_micro_usd),
  usdMicroUsd: microUsd(row.usd_micro),
  satsMsat: msat(row.sats_msat),
  rateMicroUsdPerBtc: bigOrNull(row.rate_micro_usd_per_btc),
  description: row.description,
  capability: row.capability as Capability | null,
  provider: row.provider,
  auditId: row.audit_id,
  refundOf: row.refund_of ?? null,
  createdAt: date(row.created_at)
})

export const toAuditRecord = (row: AuditRow): AuditRecord => ({
  id: row.id,
  accountId: row.account_id as AccountId,
  seq: big(row.seq),
  kind: row.kind as AuditKind,
  agentId: row.agent_id as AgentId | null,
  reservationId: row.reservation_id,
  transactionId: row.transaction_id,
  amountMicroUsd: big(row.amount_micro_usd),
  usdDeltaMicroUsd: big(row.usd_delta_micro),
  satsDeltaMsat: big(row.sats_delta_msat),
  details: row.details,
  createdAt: date(row.created_at),
  prevHash: row.prev_hash,
  hash: row.hash
})

/** The capability names the service knows, as `spendgate_reserve` takes them (stored unknown ones are ignored). */
const KNOWN_CAPABILITIES = capabilityNames.join(",")

const MAX_INT8 = 9_223_372_036_854_775_807n
/** An actual cost as the settle function takes it: clamped to what BIGINT holds (it is clamped to the quote anyway). */
const clampActual = (actual: bigint): string => (actual < 0n ? 0n : actual > MAX_INT8 ? MAX_INT8 : actual).toString()

/** What `spendgate_settle` answers: the outcome, the charge, the pockets after, the reservation before. */
interface SettleRow {
  readonly outcome: string
  readonly charged: Int8 | null
  readonly charge_usd: Int8 | null
  readonly charge_sats: Int8 | null
  readonly wallet_usd: Int8 | null
  readonly wallet_sats: Int8 | null
  readonly r_id: string | null
  readonly r_account_id: string
  readonly r_agent_id: string
  readonly r_capability: string
  readonly r_provider: string
  readonly r_quoted_micro_usd: Int8
  readonly r_held_usd_micro: Int8
  readonly r_held_sats_msat: Int8
  readonly r_rate_micro_usd_per_btc: Int8 | null
  readonly r_day: string
  readonly r_status: string
  readonly r_settled_micro_usd: Int8 | null
  readonly r_created_at: Date | string
  readonly r_expires_at: Date | string
}

const settleReservation = (row: SettleRow): ReservationRow => ({
  id: row.r_id!,
  account_id: row.r_account_id,
  agent_id: row.r_agent_id,
  capability: row.r_capability,
  provider: row.r_provider,
  quoted_micro_usd: row.r_quoted_micro_usd,
  held_usd_micro: row.r_held_usd_micro,
  held_sats_msat: row.r_held_sats_msat,
  rate_micro_usd_per_btc: row.r_rate_micro_usd_per_btc,
  day: row.r_day,
  status: row.r_status,
  settled_micro_usd: row.r_settled_micro_usd,
  created_at: row.r_created_at,
  expires_at: row.r_expires_at
})

/** Whether the database charged what `planSettle` plans. */
const sameCharge = (plan: SettlePlan, row: SettleRow): boolean =>
  row.charged !== null && row.charge_usd !== null && row.charge_sats !== null &&
  big(row.charged) === plan.chargedMicroUsd && big(row.charge_usd) === plan.chargeUsdMicroUsd &&
  big(row.charge_sats) === plan.chargeSatsMsat

/** The most reserves coalesced into one call. */
const MAX_BATCH = 64
/** Reserves that may wait for a call. */
const MAX_QUEUED = 4 * MAX_BATCH
/** Reserve calls in flight at once, across wallets (see `reserveCoalesced`). */
const RESERVE_FLIGHTS = 2

/** A pause in real time, whatever clock the caller runs on (the settle writer is the store's own). */
const realSleep = (ms: number) =>
  Effect.callback<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), ms)
    return Effect.sync(() => clearTimeout(timer))
  })

/** The longest a hold (or a read) waits for its wallet's settles being written elsewhere to land. */
const WRITTEN_WAIT_MS = 2_000
/** How long a queued settle waits for a reserve of its wallet to carry it before the writer sends it. */
const SETTLE_DELAY_MS = 2
/** The most settles the writer sends in one call. */
const MAX_SETTLE_BATCH = 256
/** Failed attempts at writing one settle between two error logs. */
const SETTLE_ATTEMPTS = 12
/** The longest pause before a failed settle is tried again (ms). */
const SETTLE_RETRY_MAX_PAUSE_MS = 5_000
/** How long closing the store waits for queued settles to land (ms). */
const SETTLE_SHUTDOWN_TIMEOUT_MS = 10_000

/** A settle taken off the caller's path, waiting to be written. */
interface QueuedSettle {
  readonly input: SettleInput
  /** Done once it has landed: what shutdown waits for, detached or not. */
  readonly landing: Deferred.Deferred<void>
  attempts: number
  /** Failed SETTLE_ATTEMPTS times: still retried, no longer waited for by reads. */
  detached: boolean
  /**
   * Told once, when it has landed or reads stop waiting for it (`detached`): the reserves waiting
   * for it (`written`), without a fiber of their own. A wait that ends first takes its own back.
   */
  whenDone: Array<() => void> | undefined
  landed: boolean
  /** A retry of it is waiting for its pause to end (it is neither queued nor being written). */
  retrying: boolean
}

/** A reserve waiting for a call: told its outcome, or to lead the next call. */
interface Waiter {
  readonly input: ReserveInput
  readonly done: Deferred.Deferred<Signal, unknown>
}
type ReserveResult = Effect.Success<ReturnType<LedgerStore["reserve"]>>
type Signal =
  | { readonly _tag: "Done"; readonly result: ReserveResult }
  | { readonly _tag: "Lead" }

/** How holds are batched and how the settles taken off the caller's path are written (the store's options). */
export interface LedgerOptions {
  /** How long an answered call's settle waits for the next reserve call before it is written alone (ms, default 2). */
  readonly settleDelayMs?: number | undefined
  /**
   * What the settle writer does with a settle answered while no reserve is in flight or waiting:
   * `"now"` writes it at once, since no reserve is there to carry it soon and its work then
   * leaves the next call's path; `"wait"` gives the next reserve `settleDelayMs` to carry it in
   * its own commit, as when reserves are in flight (one commit for both). The SQL store's
   * default: `"now"` on PostgreSQL, `"wait"` on PGlite (SqlStore.ts).
   */
  readonly settleWhenIdle?: "now" | "wait" | undefined
  /** The longest pause before a settle the database refused is tried again (ms, default 5000). */
  readonly settleRetryMaxPauseMs?: number | undefined
  /** How long closing the store waits for queued settles to land before it logs and gives up (ms, default 10000). */
  readonly settleShutdownTimeoutMs?: number | undefined
  /**
   * How many reserve calls may be in flight at once, across wallets (default 2, at least 1):
   * reserves that arrive meanwhile wait and go together in the next call.
   */
  readonly reserveFlights?: number | undefined
  /**
   * How many reserves may wait for a call (default 256, at least 1). Beyond that a reserve of a
   * wallet with none waiting or in flight takes its wallet's lock on its own; a reserve of a
   * wallet with some still waits behind them, so it never passes one of its own wallet.
   */
  readonly maxQueued?: number | undefined
}

export const makeSqlLedger = (
  sql: SqlClient.SqlClient,
  readAgent: (row: any) => { agent: Agent; policy: Policy },
  options: LedgerOptions = {}
): LedgerStore & FundingStore & { readonly settleWriter: Effect.Effect<void, never, Scope.Scope> } => {
  const settleDelayMs = options.settleDelayMs ?? SETTLE_DELAY_MS
  const settleWhenIdle = options.settleWhenIdle ?? "wait"
  const settleRetryMaxPauseMs = options.settleRetryMaxPauseMs ?? SETTLE_RETRY_MAX_PAUSE_MS
  const settleShutdownTimeoutMs = options.settleShutdownTimeoutMs ?? SETTLE_SHUTDOWN_TIMEOUT_MS
  const reserveFlights = Math.max(1, Math.floor(options.reserveFlights ?? RESERVE_FLIGHTS))
  const maxQueued = Math.max(1, Math.floor(options.maxQueued ?? MAX_QUEUED))
  const lockWallet = (accountId: AccountId) =>
    Effect.flatMap(
      sql<WalletRow>`SELECT * FROM wallets WHERE account_id = ${accountId} FOR UPDATE`,
      (rows) => rows[0] === undefined ? Effect.die(new Error(`no wallet for ${accountId}`)) : Effect.succeed(rows[0])
    )

  /** Seals the next record of the wallet's chain (stored by `applyWrites`). */
  const seal = (wallet: WalletRow, record: Omit<UnhashedAuditRecord, "seq" | "prevHash">) =>
    sealAuditRecord({ ...record, seq: big(wallet.audit_seq) + 1n, prevHash: wallet.audit_head })

  const auditInsert = (sealed: AuditRecord) =>
    sql`INSERT INTO audit_log ${
      sql.insert({
        id: sealed.id,
        account_id: sealed.accountId,
        seq: sealed.seq,
        kind: sealed.kind,
        agent_id: sealed.agentId,
        reservation_id: sealed.reservationId,
        transaction_id: sealed.transactionId,
        amount_micro_usd: sealed.amountMicroUsd,
        usd_delta_micro: sealed.usdDeltaMicroUsd,
        sats_delta_msat: sealed.satsDeltaMsat,
        details: sealed.details,
        created_at: sealed.createdAt,
        prev_hash: sealed.prevHash,
        hash: sealed.hash
      })
    }`

  /**
   * All writes of one ledger step in one statement (one round trip): the
   * audit record and `extra` writes run as data-modifying CTEs, and the
   * wallet's pockets and chain head move in the main UPDATE. The pockets'
   * CHECK constraints still refuse anything that would go negative.
   */
  const applyWrites = (
    accountId: AccountId,
    usdDelta: bigint,
    satsDelta: bigint,
    audit: AuditRecord,
    extra: ReadonlyArray<Statement.Fragment>
  ) => {
    const ctes = [auditInsert(audit), ...extra].map((write, i) => sql`${sql.literal(`write_${i}`)} AS (${write})`)
    return sql<WalletRow>`
      WITH ${sql.csv(ctes)}
      UPDATE wallets SET usd_micro = usd_micro + ${usdDelta}, sats_msat = sats_msat + ${satsDelta},
        audit_seq = ${audit.seq}, audit_head = ${audit.hash}
      WHERE account_id = ${accountId} RETURNING *`.pipe(Effect.map((rows) => toWallet(rows[0]!)))
  }

  // A hold adds to the day's row (creating it); a settle or release only ever
  // lowers an existing row, so it is a plain UPDATE (an INSERT of a negative
  // amount would trip the CHECK even when it would end in the UPDATE branch).
  // The row's hours (hours_micro_usd, migration 0023) move with it, in the UTC hour of the
  // reservation's time, as the ledger functions move them: `hold` counts by
  // the hour when the agent has an hourly limit (a new row starts its hours)
  // and makes the day's hours incomplete (NULL) otherwise; `late` (a late
  // settle's charge) adds to hours that are complete and starts none.
  const raiseDaily = (agentId: AgentId, day: string, createdAt: Date, amount: bigint, hours: "hold" | "hold, no hours" | "late") => {
    const hour = createdAt.getUTCHours()
    const fresh = hours === "hold"
      ? sql`array_fill(0::bigint, ARRAY[${hour}::int]) || ${amount}::bigint || array_fill(0::bigint, ARRAY[${23 - hour}::int])`
      : sql`NULL::bigint[]`
    const added = hours === "hold, no hours"
      ? sql`NULL::bigint[]`
      : sql`spendgate_hours_add(agent_daily_spend.hours_micro_usd, ${hour}::int, ${amount}::bigint)`
    return sql`
      INSERT INTO agent_daily_spend (agent_id, day, spent_micro_usd, hours_micro_usd) VALUES (${agentId}, ${day}, ${amount}, ${fresh})
      ON CONFLICT (agent_id, day) DO UPDATE SET spent_micro_usd = agent_daily_spend.spent_micro_usd + ${amount},
        hours_micro_usd = ${added}`
  }
  /**
   * The spend of the calendar month of `day` (YYYY-MM-DD): the sum of that
   * month's daily rows, read under the wallet lock like the day's own row.
   */
  const monthSpent = (agentId: Statement.Fragment | AgentId, day: string) =>
    sql`(SELECT COALESCE(SUM(m.spent_micro_usd), 0) FROM agent_daily_spend m
      WHERE m.agent_id = ${agentId} AND m.day >= ${`${day.slice(0, 7)}-01`} AND m.day <= ${`${day.slice(0, 7)}-31`})`
  /**
   * The agent's reservations of the last hour and minute before `now` (see
   * `reservationSpend`), and any stamped after `now`: a call that waited for
   * the wallet lock was stamped before the calls that committed while it
   * waited, and those must count against it too.
   */
  const recentOf = (agentId: AgentId, now: Date) =>
    Effect.map(
      sql<{ spent: Int8; calls: Int8; oldest: Date | string | null }>`
        SELECT
          COALESCE(SUM(CASE WHEN status = 'held' THEN quoted_micro_usd
                            WHEN status = 'settled' THEN COALESCE(settled_micro_usd, 0)
                            ELSE 0 END), 0) AS spent,
          COUNT(*) FILTER (WHERE created_at > ${new Date(now.getTime() - 60_000)}) AS calls,
          MIN(created_at) FILTER (WHERE created_at > ${new Date(now.getTime() - 60_000)}) AS oldest
        FROM reservations
        WHERE agent_id = ${agentId} AND created_at > ${new Date(now.getTime() - 3_600_000)}`,
      (rows): RecentActivity => ({
        spentLastHourMicroUsd: big(rows[0]?.spent ?? 0),
        callsLastMinute: Number(rows[0]?.calls ?? 0),
        oldestCallLastMinuteAt: rows[0]?.oldest == null ? null : date(rows[0].oldest)
      })
    )
  const NO_RECENT_ACTIVITY: RecentActivity = { spentLastHourMicroUsd: 0n, callsLastMinute: 0, oldestCallLastMinuteAt: null }
  /** The agent's calls of the last minute before `now` (and any stamped after it), as `recentOf` counts them. */
  const minuteOf = (agentId: AgentId, now: Date) =>
    Effect.map(
      sql<{ calls: Int8; oldest: Date | string | null }>`
        SELECT COUNT(*) AS calls, MIN(created_at) AS oldest FROM reservations
        WHERE agent_id = ${agentId} AND created_at > ${new Date(now.getTime() - 60_000)}`,
      (rows) => ({ calls: Number(rows[0]?.calls ?? 0), oldest: rows[0]?.oldest == null ? null : date(rows[0].oldest) })
    )
  /**
   * A bound (µUSD) of the agent's spend in the last hour before `now` (and after it), from its day
   * counters, as `spendgate_reserve` takes it (migration 0023): the hours from the UTC hour an
   * hour ago on of that hour's day, and every later day whole; a day whose hours are not all
   * counted (NULL) counts whole. Every reservation of the window is in those hours, and an
   * hour's counter is never below what its reservations spend.
   */
  const hourBoundOf = (agentId: AgentId, now: Date) => {
    const from = new Date(now.getTime() - 3_600_000)
    const fromDay = utcDay(from)
    return Effect.map(
      sql<{ bound: Int8 }>`
        SELECT COALESCE(SUM(CASE WHEN day = ${fromDay} AND hours_micro_usd IS NOT NULL
                                 THEN (SELECT COALESCE(SUM(h), 0) FROM unnest(hours_micro_usd[${from.getUTCHours() + 1}::int : 24]) AS h)
                                 ELSE spent_micro_usd END), 0) AS bound
        FROM agent_daily_spend WHERE agent_id = ${agentId} AND day >= ${fromDay}`,
      (rows) => big(rows[0]?.bound ?? 0)
    )
  }
  /**
   * What `decide` needs of the agent's last hour and minute, read no further than it can
   * matter. A `decide` that is not `planHold` (`standardRules`) gets `recentOf` whole. For
   * `planHold`, which compares the hour's spend only with the hourly limit and the minute's
   * calls only with the minute's: under an hourly limit the counters' bound comes first, and
   * when the bound plus the quote fits, the hour's reservations are not read and the bound
   * stands for the spend (the decision is the one the exact figure gives; a refusal is
   * decided on the exact figure, and names it); without an hourly limit nothing compares the
   * hour's spend (0 here); the minute's calls are read only under a minute limit, and then
   * only the minute's reservations. (docs/performance.md, "The general path bounded by the hour")
   */
  const recentFor = Effect.fnUntraced(function*(input: ReserveInput, policy: Policy) {
    if (!usesRecentActivity(policy)) return NO_RECENT_ACTIVITY
    if (input.standardRules !== true) return yield* recentOf(input.agentId, input.now)
    const hourlyLimitMicroUsd = policy.maxPerHourMicroUsd
    const boundMicroUsd = hourlyLimitMicroUsd === null ? 0n : yield* hourBoundOf(input.agentId, input.now)
    if (hourlyLimitMicroUsd !== null && boundMicroUsd + input.quotedMicroUsd > hourlyLimitMicroUsd) {
      return yield* recentOf(input.agentId, input.now)
    }
    const minute = policy.maxCallsPerMinute === null ? undefined : yield* minuteOf(input.agentId, input.now)
    return {
      spentLastHourMicroUsd: boundMicroUsd,
      callsLastMinute: minute?.calls ?? 0,
      oldestCallLastMinuteAt: minute?.oldest ?? null
    } satisfies RecentActivity
  })
  const lowerDaily = (agentId: AgentId, day: string, createdAt: Date, amount: bigint) =>
    sql`
      UPDATE agent_daily_spend SET spent_micro_usd = spent_micro_usd - ${amount},
        hours_micro_usd = spendgate_hours_add(hours_micro_usd, ${createdAt.getUTCHours()}::int, ${-amount}::bigint)
      WHERE agent_id = ${agentId} AND day = ${day}`

  const insertTransaction = (t: Transaction, creditKey: string | null) =>
    sql`INSERT INTO transactions ${
      sql.insert({
        id: t.id,
        account_id: t.accountId,
        agent_id: t.agentId,
        type: t.type,
        amount_micro_usd: t.amountMicroUsd,
        usd_micro: t.usdMicroUsd,
        sats_msat: t.satsMsat,
        rate_micro_usd_per_btc: t.rateMicroUsdPerBtc,
        description: t.description,
        capability: t.capability,
        provider: t.provider,
        audit_id: t.auditId,
        refund_of: t.refundOf,
        credit_key: creditKey,
        created_at: t.createdAt
      })
    }`

  /**
   * Locks the wallet and the reservation in one statement (the same shape
   * for settle, release and the sweep, so their lock order never differs).
   */
  const lockHeld = (accountId: AccountId, reservationId: string) =>
    Effect.map(
      sql<ReservationRow & { readonly audit_seq: Int8; readonly audit_head: string }>`
        SELECT r.*, w.audit_seq, w.audit_head FROM wallets w
        JOIN reservations r ON r.account_id = w.account_id
        WHERE w.account_id = ${accountId} AND r.id = ${reservationId}
        FOR UPDATE`,
      (rows) =>
        rows[0] === undefined
          ? null
          : { reservation: toReservation(rows[0]), wallet: rows[0] as unknown as WalletRow }
    )

  /** Release in one round trip: `spendgate_release` (migration 0014) locks, checks and writes. */
  const release: LedgerStore["release"] = (input) =>
    sql<{ outcome: string }>`
      SELECT spendgate_release(${input.accountId}::text, ${input.reservationId}::text, ${input.auditId}::text,
        ${input.reason}::text, ${input.now}::timestamptz) AS outcome`.pipe(
        Effect.map((rows) => rows[0]?.outcome === "Released" ? "Released" as const : "NotHeld" as const),
        Effect.orDie
      )

  /**
   * Each pocket with what its held reservations will give back at most: the
   * figure a credit is bounded by, so that no later release or refund can take
   * the pocket above its maximum. Read under the wallet lock.
   */
  const boundedBalances = (wallet: WalletRow) =>
    Effect.map(
      sql<{ usd: Int8; sats: Int8 }>`
        SELECT COALESCE(SUM(held_usd_micro), 0) AS usd, COALESCE(SUM(held_sats_msat), 0) AS sats
        FROM reservations WHERE account_id = ${wallet.account_id} AND status = 'held'`,
      (rows) => ({
        usdMicroUsd: big(wallet.usd_micro) + big(rows[0]?.usd ?? 0),
        satsMsat: big(wallet.sats_msat) + big(rows[0]?.sats ?? 0)
      })
    )

  /** A credit inside a transaction that already holds the wallet lock. */
  const creditLocked = (wallet: WalletRow, input: CreditInput) =>
    Effect.gen(function*() {
        const existing = yield* sql<TransactionRow>`
          SELECT * FROM transactions WHERE account_id = ${input.accountId} AND credit_key = ${input.creditKey}`
        if (existing[0] !== undefined) return { _tag: "Duplicate", transaction: toTransaction(existing[0]) } as const
        const bounded = yield* boundedBalances(wallet)
        const balance = input.pocket === "usd" ? bounded.usdMicroUsd : bounded.satsMsat
        if (input.amount <= 0n || !creditFits(input.pocket, balance, input.amount)) {
          return { _tag: "Refused", maximum: pocketMaximum(input.pocket) } as const
        }
        const { transaction, audit: draft, usdMicroUsd: usd, satsMsat: sats } = creditEntries(input)
        const audit = yield* seal(wallet, draft)
        const next = yield* applyWrites(input.accountId, usd, sats, audit, [insertTransaction(transaction, input.creditKey)])
        return { _tag: "Credited", transaction, wallet: next } as const
    })

  const invoiceRow = (row: InvoiceRow): Invoice => ({
    id: row.id,
    accountId: row.account_id as AccountId,
    agentId: row.agent_id as AgentId,
    type: row.type as InvoiceType,
    amountMsat: bigOrNull(row.amount_msat),
    amountMicroUsd: bigOrNull(row.amount_micro_usd),
    status: row.status as InvoiceStatus,
    rail: row.rail,
    externalId: row.external_id,
    paymentRequest: row.payment_request,
    checkoutUrl: row.checkout_url,
    createdAt: date(row.created_at),
    expiresAt: date(row.expires_at),
    paidAt: row.paid_at === null ? null : date(row.paid_at),
    latePaymentAt: row.late_payment_at === null ? null : date(row.late_payment_at),
    latePaymentAmount: bigOrNull(row.late_payment_amount),
    transactionId: row.transaction_id
  })

  const funding: FundingStore = {
    createInvoice: (invoice) =>
      sql`INSERT INTO invoices ${
        sql.insert({
          id: invoice.id,
          account_id: invoice.accountId,
          agent_id: invoice.agentId,
          type: invoice.type,
          amount_msat: invoice.amountMsat,
          amount_micro_usd: invoice.amountMicroUsd,
          status: invoice.status,
          rail: invoice.rail,
          external_id: invoice.externalId,
          payment_request: invoice.paymentRequest,
          checkout_url: invoice.checkoutUrl,
          created_at: invoice.createdAt,
          expires_at: invoice.expiresAt,
          paid_at: invoice.paidAt,
          late_payment_at: invoice.latePaymentAt,
          late_payment_amount: invoice.latePaymentAmount,
          transaction_id: invoice.transactionId
        })
      }`.pipe(Effect.asVoid, Effect.orDie),

    findInvoice: (by) =>
      ("paymentRequest" in by
        ? sql<InvoiceRow>`SELECT * FROM invoices WHERE payment_request = ${by.paymentRequest} LIMIT 1`
        : sql<InvoiceRow>`SELECT * FROM invoices WHERE type = ${by.type} AND external_id = ${by.externalId}`).pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), invoiceRow)),
          Effect.orDie
        ),

    payInvoice: (input) =>
      Effect.gen(function*() {
        const [found] = yield* sql<{ account_id: string }>`
          SELECT account_id FROM invoices WHERE type = ${input.type} AND external_id = ${input.externalId}`
        if (found === undefined) return "unknown" as const
        return yield* sql.withTransaction(Effect.gen(function*() {
          // Wallet first, then the invoice: the same order as every ledger write.
          const wallet = yield* lockWallet(found.account_id as AccountId)
          const [row] = yield* sql<InvoiceRow>`
            SELECT * FROM invoices WHERE type = ${input.type} AND external_id = ${input.externalId} FOR UPDATE`
          const invoice = invoiceRow(row!)
          const decision = decidePayment(invoice, input, yield* boundedBalances(wallet))
          if (decision._tag === "Duplicate") return "duplicate" as const
          if (decision._tag === "Late" || decision._tag === "Refused") {
            const status = decision._tag === "Late" ? "expired" : "refused"
            yield* sql`
              UPDATE invoices SET status = ${status},
                late_payment_at = COALESCE(late_payment_at, ${input.paidAt}),
                late_payment_amount = COALESCE(late_payment_amount, ${decision.amount})
              WHERE id = ${invoice.id}`
            if (invoice.latePaymentAt === null) {
              yield* writeEvents(sql, [invoiceLatePayment(invoice, status, input.paidAt, decision.amount, input.now)])
            }
            return decision._tag === "Late" ? ("late" as const) : ("refused" as const)
          }
          const credited = yield* creditLocked(wallet, decision.credit)
          if (credited._tag === "Refused") return yield* Effect.die(new Error("a credit decided to fit was refused"))
          yield* sql`
            UPDATE invoices SET status = 'paid', paid_at = ${input.paidAt}, transaction_id = ${credited.transaction.id}
            WHERE id = ${invoice.id}`
          if (credited._tag === "Credited") {
            yield* writeEvents(sql, [invoicePaid(invoice, input.paidAt, credited.transaction.id, input.now)])
          }
          return credited._tag === "Credited" ? ("credited" as const) : ("duplicate" as const)
        }))
      }).pipe(Effect.orDie),

    expireInvoice: (type, externalId, at) =>
      sql.withTransaction(Effect.gen(function*() {
        const rows = yield* sql<InvoiceRow>`
          UPDATE invoices SET status = 'expired'
          WHERE type = ${type} AND external_id = ${externalId} AND status = 'pending' RETURNING *`
        yield* writeEvents(sql, rows.map((row) => invoiceExpired(invoiceRow(row), at)))
      })).pipe(Effect.asVoid, Effect.orDie),

    expireDue: (now, limit) =>
      sql.withTransaction(Effect.gen(function*() {
        const rows = yield* sql<InvoiceRow>`
          UPDATE invoices SET status = 'expired'
          WHERE id IN (
            SELECT id FROM invoices WHERE status = 'pending' AND expires_at <= ${now}
            ORDER BY expires_at LIMIT ${limit} FOR UPDATE SKIP LOCKED
          ) AND status = 'pending'
          RETURNING *`
        yield* writeEvents(sql, rows.map((row) => invoiceExpired(invoiceRow(row), now)))
        return rows.length
      })).pipe(Effect.orDie),

    listInvoices: (accountId, filter, request) =>
      Effect.gen(function*() {
        const conditions = [sql`account_id = ${accountId}`]
        if (filter.status === "paid") conditions.push(sql`status = 'paid'`)
        if (filter.status === "refused") conditions.push(sql`status = 'refused'`)
        if (filter.status === "pending") conditions.push(sql`status = 'pending' AND expires_at > ${filter.now}`)
        if (filter.status === "expired") {
          conditions.push(sql`(status = 'expired' OR (status = 'pending' AND expires_at <= ${filter.now}))`)
        }
        return yield* paged(sql, "invoices", sql.and(conditions), invoiceRow, request)
      }).pipe(Effect.orDie),

    listLatePayments: (request) =>
      paged(sql, "invoices", sql`late_payment_at IS NOT NULL`, invoiceRow, request, `late_payment_at DESC, id COLLATE "C" DESC`)
        .pipe(Effect.orDie),

    loadCursor: (name) =>
      sql<{ value: string }>`SELECT value FROM rail_cursors WHERE name = ${name}`.pipe(
        Effect.map((rows) => rows[0]?.value ?? null),
        Effect.orDie
      ),

    saveCursor: (name, value) =>
      sql`
        INSERT INTO rail_cursors (name, value) VALUES (${name}, ${value})
        ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value`.pipe(Effect.asVoid, Effect.orDie)
  }


  /** The general reserve: a snapshot read under the wallet lock, `decide` in TypeScript, then the writes. */
  const reserveInTransaction = (input: ReserveInput) =>
    sql.withTransaction(Effect.gen(function*() {
        // Lock first, then read: under READ COMMITTED a statement that waited
        // for the lock would otherwise see the daily spend as it was before
        // the transaction it waited for committed.
        const locked = yield* lockWallet(input.accountId)
        // A quote is read under the wallet lock (every use of it takes that lock first).
        let claimed: StoredQuote | undefined
        if (input.quote !== undefined) {
          const [found] = yield* sql<QuoteRow>`
            SELECT * FROM quotes WHERE id = ${input.quote.quoteId} AND account_id = ${input.accountId} FOR UPDATE`
          const checked = input.quote.check(found === undefined ? null : toQuote(found), input.now)
          if (Result.isFailure(checked)) return Result.fail(checked.failure)
          claimed = checked.success
        }
        const rows = yield* sql<Record<string, unknown>>`
          SELECT a.*, COALESCE(d.spent_micro_usd, 0) AS daily_spent, ${monthSpent(sql`a.id`, input.day)} AS monthly_spent
          FROM agents a
          LEFT JOIN agent_daily_spend d ON d.agent_id = a.id AND d.day = ${input.day}
          WHERE a.id = ${input.agentId} AND a.account_id = ${input.accountId}`
        const row = rows[0]
        if (row === undefined) return yield* Effect.die(new Error("reserve: unknown agent"))
        const wallet = toWallet(locked)
        const { agent, policy } = readAgent(row)
        const snapshot = {
          agent,
          policy,
          dailySpentMicroUsd: big(row["daily_spent"] as Int8),
          monthlySpentMicroUsd: big(row["monthly_spent"] as Int8),
          // The last hour's reservations are read only under a velocity limit, and only as far as
          // the day counters cannot decide (`recentFor`): the scan grows with the agent's call rate.
          recent: yield* recentFor(input, policy),
          now: input.now,
          wallet
        }
        const decision = input.decide(snapshot)
        const threshold = (locked as unknown as { low_balance_threshold_micro_usd: Int8 | null }).low_balance_threshold_micro_usd
        yield* writeEvents(sql, reserveEvents(input, snapshot, decision, bigOrNull(threshold ?? null)))
        if (Result.isFailure(decision)) {
          if (refusalKillsAgent(decision.failure)) {
            const killed = yield* sql<Record<string, unknown>>`
              UPDATE agents SET killed = TRUE, kill_reason = 'velocity'
              WHERE id = ${input.agentId} AND account_id = ${input.accountId} AND NOT killed RETURNING *`
            if (killed[0] !== undefined) {
              yield* writeEvents(sql, agentChangeEvents(agent, readAgent(killed[0]).agent, input.now))
            }
          }
          return Result.fail(decision.failure)
        }
        const plan = decision.success
        const audit = yield* seal(locked, reserveAudit(input, plan))
        const reservation = heldReservation(input, plan)
        yield* applyWrites(input.accountId, -plan.fromUsdMicroUsd, -plan.fromSatsMsat, audit, [
          sql`INSERT INTO reservations ${
            sql.insert({
              id: reservation.id,
              account_id: reservation.accountId,
              agent_id: reservation.agentId,
              capability: reservation.capability,
              provider: reservation.provider,
              quoted_micro_usd: reservation.quotedMicroUsd,
              held_usd_micro: reservation.heldUsdMicroUsd,
              held_sats_msat: reservation.heldSatsMsat,
              rate_micro_usd_per_btc: reservation.rateMicroUsdPerBtc,
              day: reservation.day,
              status: reservation.status,
              settled_micro_usd: null,
              created_at: reservation.createdAt,
              expires_at: reservation.expiresAt
            })
          }`,
          raiseDaily(input.agentId, input.day, reservation.createdAt, input.quotedMicroUsd,
            policy.maxPerHourMicroUsd === null ? "hold, no hours" : "hold")
        ])
        if (claimed !== undefined) {
          const used = yield* sql`
            UPDATE quotes SET used_at = ${input.now}, reservation_id = ${reservation.id}
            WHERE id = ${claimed.id} AND used_at IS NULL RETURNING id`
          // The row was locked and unused: anything else is a broken invariant, and rolls the hold back.
          if (used.length !== 1) return yield* Effect.die(new Error(`quote ${claimed.id} was used concurrently`))
        }
        return Result.succeed(reservation)
      }))

  /** A reserve as `spendgate_ledger_batch` takes it. */
  const reserveJson = (input: ReserveInput) => ({
    accountId: input.accountId,
    agentId: input.agentId,
    reservationId: input.reservationId,
    auditId: input.auditId,
    capability: input.capability,
    provider: wellFormed(input.provider),
    quoted: input.quotedMicroUsd.toString(),
    rate: input.rate === null ? null : input.rate.rate.microUsdPerBtc.toString(),
    day: input.day,
    now: input.now.toISOString(),
    expiresAt: input.expiresAt.toISOString()
  })
  /** Text as jsonb takes it: a lone UTF-16 surrogate (which jsonb refuses) becomes U+FFFD, as a text parameter would. */
  const wellFormed = (text: string) => text.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "\uFFFD")
  /** A settle as `spendgate_ledger_batch` takes it. */
  const settleJson = (input: SettleInput) => ({
    accountId: input.accountId,
    reservationId: input.reservationId,
    actual: clampActual(input.actualMicroUsd),
    transactionId: input.transactionId,
    auditId: input.auditId,
    description: wellFormed(input.description),
    now: input.now.toISOString()
  })

  /** A reserve's answer: `spendgate_hold`'s row, or `spendgate_ledger_batch`'s (with its `ord`). */
  interface HoldRow {
    readonly outcome: string
    readonly from_usd: Int8 | null
    readonly from_sats: Int8 | null
    readonly wallet_usd: Int8 | null
    readonly wallet_sats: Int8 | null
  }
  interface BatchRow extends HoldRow {
    readonly ord: Int8
  }

  /** The reserve's hold, with the wallet's pockets after it (the receipt's balance); null when it was not held. */
  const heldFrom = (input: ReserveInput, row: HoldRow | undefined): ReserveResult | null => {
    if (row === undefined || row.outcome !== "held") return null
    const reservation: HeldReservation = {
      ...heldReservation(input, { fromUsdMicroUsd: microUsd(row.from_usd!), fromSatsMsat: msat(row.from_sats!) }),
      walletAfterHold: { accountId: input.accountId, usdMicroUsd: microUsd(row.wallet_usd!), satsMsat: msat(row.wallet_sats!) }
    }
    return Result.succeed(reservation)
  }

  /** What one ledger call decided: each reserve's hold (null: not held), each settle's outcome. */
  interface LedgerCallResult {
    readonly held: ReadonlyArray<ReserveResult | null>
    readonly settled: ReadonlyArray<string>
  }

  /**
   * A lone reserve (no settle carried) by `spendgate_hold` (migration 0021): the same decision and
   * writes as through `spendgate_ledger_batch`, with typed arguments instead of a JSON document
   * the database parses and loops over (docs/performance.md, "Typed calls for a lone hold or settle").
   */
  const holdAlone = (input: ReserveInput): Effect.Effect<LedgerCallResult, unknown> =>
    // Suspended, as the batch: a parameter that cannot be built fails this call's Effect.
    Effect.suspend(() => Effect.map(
      sql<HoldRow>`
        SELECT * FROM spendgate_hold(${input.accountId}::text, ${input.agentId}::text, ${input.reservationId}::text,
          ${input.auditId}::text, ${input.capability}::text, ${input.provider}::text,
          ${input.quotedMicroUsd}::bigint, ${input.rate === null ? null : input.rate.rate.microUsdPerBtc}::bigint,
          ${input.day}::text, ${input.now}::timestamptz, ${input.expiresAt}::timestamptz, ${KNOWN_CAPABILITIES}::text)`,
      (rows) => ({ held: [heldFrom(input, rows[0])], settled: [] })
    ))

  /**
   * `spendgate_settle` (migration 0014, lighter since 0019) with typed arguments: one statement, one
   * commit, answering the `columns` the caller reads.
   */
  const settleCall = <Row extends { readonly outcome: string }>(input: SettleInput, columns: "*" | "outcome") =>
    sql<Row>`
      SELECT ${sql.literal(columns)} FROM spendgate_settle(${input.accountId}::text, ${input.reservationId}::text,
        ${clampActual(input.actualMicroUsd)}::numeric, ${input.transactionId}::text, ${input.auditId}::text,
        ${input.description}::text, ${input.now}::timestamptz)`

  /** A lone settle (the settle writer's usual call at low load) by `spendgate_settle` itself, likewise. */
  const settleAlone = (input: SettleInput): Effect.Effect<LedgerCallResult, unknown> =>
    // Its outcome only: the writer reads nothing else, and the row is 20 columns wide.
    Effect.suspend(() => Effect.map(settleCall(input, "outcome"), (rows) => ({ held: [], settled: [rows[0]!.outcome] })))

  /**
   * One call, one transaction, one commit: a lone reserve by `spendgate_hold`, a lone settle by
   * `spendgate_settle`, anything more by `spendgate_ledger_batch` (migration 0018): the settles
   * given, then the reserves, each decided by the mirror of `planHold` under the wallet lock in
   * the order given, up to the first that is not held (null: a refusal, or a hold the general
   * path must record). The settles' outcomes are handed to `settlesDone`.
   */
  const reserveManyInOneCall = (
    inputs: ReadonlyArray<ReserveInput>,
    settles: ReadonlyArray<QueuedSettle> = []
  ): Effect.Effect<LedgerCallResult, unknown> =>
    inputs.length === 1 && settles.length === 0
      ? holdAlone(inputs[0]!)
      : inputs.length === 0 && settles.length === 1
      ? settleAlone(settles[0]!.input)
      : reserveManyInBatch(inputs, settles)

  const reserveManyInBatch = (inputs: ReadonlyArray<ReserveInput>, settles: ReadonlyArray<QueuedSettle>) =>
    // Suspended: a parameter that cannot be built fails this call's Effect, never its caller's code.
    Effect.suspend(() => Effect.map(
      sql<BatchRow>`
        SELECT * FROM spendgate_ledger_batch(${JSON.stringify(settles.map((queued) => settleJson(queued.input)))}::jsonb,
          ${JSON.stringify(inputs.map(reserveJson))}::jsonb, ${KNOWN_CAPABILITIES}::text)`,
      (rows) => {
        const byOrd = new Map(rows.map((row) => [Number(row.ord), row]))
        const settled = settles.map((_, i) => byOrd.get(-(i + 1))?.outcome ?? "NotHeld")
        const held = inputs.map((input, i) => heldFrom(input, byOrd.get(i + 1)))
        return { held, settled }
      }
    ))

  // ---- settles off the caller's path ------------------------------------
  //
  // `settleLater` queues a settle and answers at once. The queued settles of
  // a wallet ride in the next reserve call, of that wallet or of others
  // (`carriedSettles`: one commit for both, so a hot wallet, or calls one
  // after another over many wallets, pay one commit per call); those no reserve picks up
  // within SETTLE_DELAY_MS are written by the settle writer, several wallets
  // in one call. Until a settle has landed, reads of its account on this
  // instance wait for it (`landed`). A settle that cannot be written is
  // retried while the process lives; if the process dies first, recovery
  // captures its hold at the quote under the same ids (docs/ledger-recovery.md).

  /** Pending settles of each account, oldest first, not yet sent. */
  const queuedSettles = new Map<string, Array<QueuedSettle>>()
  /** Settles of each account queued or in flight: what a read of the account waits for. */
  const unsettled = new Map<string, Set<QueuedSettle>>()
  /** Every settle not landed yet, detached ones included: what shutdown waits for. */
  const notLanded = new Set<QueuedSettle>()
  /** Set when the store has closed: pending retries end instead of queueing again. */
  const stopped = Deferred.makeUnsafe<void>()
  let isStopped = false
  let queuedCount = 0
  let writerWake: Deferred.Deferred<void> | undefined
  let writeNow = false
  /** Cuts the writer's pause short when a read or shutdown needs the settles now. */
  let hurry: (() => void) | undefined

  const wakeWriter = (now: boolean) => {
    if (now) {
      writeNow = true
      hurry?.()
    }
    if (writerWake !== undefined) {
      const wake = writerWake
      writerWake = undefined
      Deferred.doneUnsafe(wake, Effect.void)
    }
  }

  const enqueueSettles = (items: ReadonlyArray<QueuedSettle>, front: boolean) => {
    for (const item of front ? [...items].reverse() : items) {
      const accountId = item.input.accountId
      let queue = queuedSettles.get(accountId)
      if (queue === undefined) queuedSettles.set(accountId, queue = [])
      if (front) queue.unshift(item)
      else queue.push(item)
      queuedCount++
      if (item.detached) continue
      let open = unsettled.get(accountId)
      if (open === undefined) unsettled.set(accountId, open = new Set())
      open.add(item)
    }
    wakeWriter(false)
  }

  /**
   * Takes the account's queued settles (they stay `unsettled` until
   * `settleDone`): `all`; `fresh`, those never tried before (what a reserve
   * batch or a read writes: one that failed is retried by the writer alone,
   * so it cannot fail a batch of reserves again and again); `retried`, the
   * others (what the writer takes from a wallet whose reserve batch is in flight).
   */
  const takeSettles = (accountId: string, which: "all" | "fresh" | "retried"): Array<QueuedSettle> => {
    const queue = queuedSettles.get(accountId)
    if (queue === undefined) return []
    const isTaken = (item: QueuedSettle) => which === "all" || (which === "fresh") === (item.attempts === 0)
    const taken = queue.filter(isTaken)
    const left = queue.filter((item) => !isTaken(item))
    if (left.length > 0) queuedSettles.set(accountId, left)
    else queuedSettles.delete(accountId)
    queuedCount -= taken.length
    // Nothing left for the writer to wait for: its pause ends now rather than wake the process later.
    if (queuedCount === 0 && taken.length > 0) hurry?.()
    return taken
  }

  /** Reads stop waiting for the item (it still lands when it can; its call's `onLanded` is told then). */
  const detach = (item: QueuedSettle) => {
    item.detached = true
    const open = unsettled.get(item.input.accountId)
    if (open !== undefined) {
      open.delete(item)
      if (open.size === 0) unsettled.delete(item.input.accountId)
    }
    const listeners = item.whenDone
    item.whenDone = undefined
    if (listeners !== undefined) for (const listener of listeners) listener()
  }

  /** Marks the item landed and tells its call; the call's callback failing is logged, never the writer's failure. */
  const settleDone = (item: QueuedSettle): Effect.Effect<void> => {
    if (item.landed) return Effect.void
    item.landed = true
    notLanded.delete(item)
    detach(item)
    Deferred.doneUnsafe(item.landing, Effect.void)
    return tellLanded(item.input)
  }

  /** Tells the call its settle landed; a callback that throws is logged, never anyone's failure. */
  const tellLanded = (input: SettleInput): Effect.Effect<void> => {
    try {
      input.onLanded?.()
      return Effect.void
    } catch (error) {
      return Effect.logError(`Settle of ${input.reservationId} landed; its onLanded callback threw`, error)
    }
  }

  /**
   * Puts a settle that could not be written back in the queue: it is tried
   * for as long as the process lives (its call stays `running` meanwhile, so
   * an expired hold is released by this process's sweep and the settle, once
   * it lands, charges it late). Logged from the SETTLE_ATTEMPTS-th attempt.
   */
  const retryLater = (item: QueuedSettle, cause: unknown) =>
    Effect.gen(function*() {
      item.retrying = true
      item.attempts++
      if (item.attempts % SETTLE_ATTEMPTS === 0) {
        yield* Effect.logError(
          `Settle of ${item.input.reservationId} could not be written after ${item.attempts} attempts; still trying ` +
            `(if the process ends first, recovery charges the hold at its quote)`,
          cause
        )
      }
      // After SETTLE_ATTEMPTS failures reads of the account stop waiting for it.
      if (item.attempts >= SETTLE_ATTEMPTS && !item.detached) detach(item)
      // Back in the queue after a pause that grows with its failures (the writer goes on meanwhile).
      // The pause ends early when the store closes (no timer outlives it; the hold is recovery's then).
      yield* Effect.forkDetach(
        Effect.andThen(
          Effect.raceFirst(
            realSleep(Math.min(settleRetryMaxPauseMs, 50 * 2 ** Math.min(item.attempts, 7))),
            Deferred.await(stopped)
          ),
          // A retry does not wait for a reserve to carry it.
          Effect.sync(() => {
            item.retrying = false
            if (isStopped) return
            enqueueSettles([item], true)
            wakeWriter(true)
          })
        )
      )
    })

  /** A settle's outcome from a batch: logged when it was not the plain settle it was queued as. Never fails. */
  const settleOutcome: (item: QueuedSettle, outcome: string) => Effect.Effect<void> = Effect.fnUntraced(function*(
    item: QueuedSettle,
    outcome: string
  ) {
    if (outcome === "slow") {
      // The hold was swept as its call's (released) while this settle waited: a late settle.
      const late = yield* Effect.exit(settleInTransaction(item.input))
      if (Exit.isFailure(late)) return yield* retryLater(item, late.cause)
    } else if (outcome !== "Settled") {
      // Nothing held: an earlier attempt of this settle landed (its answer was lost), or recovery
      // captured the hold first. The charge the books hold under the receipt's id tells which.
      const charge = yield* Effect.exit(
        sql<{ description: string; amount_micro_usd: Int8 }>`
          SELECT description, amount_micro_usd FROM transactions
          WHERE id = ${item.input.transactionId} AND account_id = ${item.input.accountId}`
      )
      const row = Exit.isSuccess(charge) ? charge.value[0] : undefined
      if (row !== undefined && row.description === item.input.description) {
        yield* Effect.logDebug(`Settle of ${item.input.reservationId} had already landed (an earlier attempt's answer was lost)`)
      } else {
        yield* Effect.logWarning(
          `Settle of ${item.input.reservationId} found nothing held (${outcome}): ` +
            (row !== undefined
              ? `recovery captured it at its quote first (charged ${big(row.amount_micro_usd)} µUSD)`
              : "the hold was ended without this settle")
        )
      }
    }
    yield* settleDone(item)
  })

  /** Writes settles the writer took, all in one call; on failure each is tried alone, and one that fails again is retried later. */
  const writeSettles = Effect.fnUntraced(function*(batch: ReadonlyArray<QueuedSettle>) {
    const all = yield* Effect.exit(reserveManyInOneCall([], batch))
    if (Exit.isSuccess(all)) {
      for (let i = 0; i < batch.length; i++) yield* settleOutcome(batch[i]!, all.value.settled[i]!)
      return
    }
    for (const item of batch) {
      const alone = yield* Effect.exit(reserveManyInOneCall([], [item]))
      if (Exit.isSuccess(alone)) yield* settleOutcome(item, alone.value.settled[0]!)
      else yield* retryLater(item, alone.cause)
    }
  })

  /**
   * The writer's moment for a reserve to carry the settles: SETTLE_DELAY_MS of real time, cut
   * short by `wakeWriter(true)`. One timer, no fiber of its own: it runs after every answered
   * call that finds the writer idle.
   */
  const writerPause = Effect.callback<void>((resume) => {
    const timer = setTimeout(() => {
      hurry = undefined
      resume(Effect.void)
    }, settleDelayMs)
    hurry = () => {
      clearTimeout(timer)
      hurry = undefined
      resume(Effect.void)
    }
    return Effect.sync(() => {
      clearTimeout(timer)
      hurry = undefined
    })
  })

  /** The settle writer: runs for the life of the store (see `settleWriter`). */
  const settleWriterLoop = Effect.gen(function*() {
    // Whether the writer's last pass found nothing it could take (every queued settle was of a
    // wallet whose reserves carry it): it pauses before it looks again, never spins.
    let tookNothing = false
    for (;;) {
      if (queuedCount === 0) {
        const wake = Deferred.makeUnsafe<void>()
        writerWake = wake
        yield* Deferred.await(wake)
        tookNothing = false
      }
      // A moment for the next reserve call to carry the settles in its own commit, when one is
      // coming (a reserve in flight or waiting). With none, and settleWhenIdle "now" (the SQL
      // store's default on PostgreSQL), nothing would carry them soon: they are written at once,
      // off the next call's path.
      if (!writeNow && (tookNothing || settleWhenIdle === "wait" || flights > 0 || reserveQueue.length > 0)) {
        yield* writerPause
      }
      writeNow = false
      const batch: Array<QueuedSettle> = []
      for (const accountId of [...queuedSettles.keys()]) {
        if (batch.length >= MAX_SETTLE_BATCH) break
        // A wallet with reserves waiting or in a call: that call carries the fresh ones (it took,
        // or will take, them under the wallet's lock, in order with its reserves); one that failed
        // before is the writer's alone, so a wallet that is never idle does not strand it.
        batch.push(...(reserving.has(accountId) ? takeSettles(accountId, "retried") : takeSettles(accountId, "all")))
      }
      tookNothing = batch.length === 0
      if (batch.length > 0) {
        yield* writeSettles(batch).pipe(
          // The writer must outlive anything one batch does: what was not done goes back.
          Effect.catchCause((cause) =>
            Effect.gen(function*() {
              yield* Effect.logError("Settle writer: a batch failed", cause)
              for (const item of batch) {
                if (item.landed || item.retrying || queueHas(item)) continue
                yield* retryLater(item, cause)
              }
              yield* realSleep(100)
            })
          )
        )
      }
    }
  })

  const queueHas = (item: QueuedSettle) => queuedSettles.get(item.input.accountId)?.includes(item) === true

  /**
   * Waits until the account's settles answered before now have landed: those
   * still queued are written at once, here, in one call (the writer leaves
   * the wallet of a reserve batch in flight to that batch, so waiting for it
   * could take as long as the wallet stays busy); those being written
   * elsewhere are waited for. A read never waits more than 2 s for a
   * database that does not answer.
   */
  const landed = (accountId: string) =>
    Effect.gen(function*() {
      if (!unsettled.has(accountId)) return
      const mine = takeSettles(accountId, "fresh")
      // Written on a fiber of its own: a read that stops waiting never strands what it took.
      if (mine.length > 0) {
        yield* Effect.forkDetach(
          Effect.exit(reserveManyInOneCall([], mine)).pipe(
            Effect.flatMap((result) =>
              Exit.isSuccess(result)
                ? Effect.forEach(mine, (item, i) => settleOutcome(item, result.value.settled[i]!), { discard: true })
                : Effect.forEach(mine, (item) => retryLater(item, result.cause), { discard: true })
            )
          )
        )
      }
      yield* written(accountId)
    })

  /**
   * Waits until the account's settles already being written (taken by the
   * writer, not queued) have landed: a reserve batch then decides on a view
   * that has them (it carries the queued ones itself). Never past `deadline`
   * (epoch ms; by default 2 s from now): a database that does not take a
   * settle holds up the wallet's holds that long, not for as long as it fails.
   */
  const written = (accountId: string, deadline = Date.now() + WRITTEN_WAIT_MS) =>
    Effect.suspend(() => {
      const open = unsettled.get(accountId)
      if (open === undefined) return Effect.void
      const queued = queuedSettles.get(accountId)
      const writing = [...open].filter((item) => queued === undefined || !queued.includes(item))
      if (writing.length === 0) return Effect.void
      const left = deadline - Date.now()
      return left > 0 ? writtenOrTimeout(writing, left) : Effect.void
    })

  /**
   * Resumes once every item is done (landed, or no longer waited for), or after `ms`: one timer
   * and a listener on each item, no fibers (this is on a hot wallet's every call). A wait that
   * times out or is interrupted takes its listeners back, so a settle that keeps failing does not
   * collect one from every hold of its wallet meanwhile.
   */
  const writtenOrTimeout = (items: ReadonlyArray<QueuedSettle>, ms: number) =>
    Effect.callback<void>((resume) => {
      let left = items.length
      let finished = false
      const stop = () => {
        finished = true
        clearTimeout(timer)
        for (const item of items) {
          const listeners = item.whenDone
          if (listeners === undefined) continue
          const at = listeners.indexOf(one)
          if (at >= 0) listeners.splice(at, 1)
        }
      }
      const finish = () => {
        if (finished) return
        stop()
        resume(Effect.void)
      }
      const timer = setTimeout(finish, ms)
      const one = () => {
        if (--left === 0) finish()
      }
      for (const item of items) {
        if (item.detached) one()
        else (item.whenDone ??= []).push(one)
      }
      return Effect.sync(() => {
        if (!finished) stop()
      })
    })

  /** Shutdown: waits until every settle not landed yet has landed (detached ones too), for at most `timeoutMs`. */
  const allLanded = (timeoutMs: number) =>
    Effect.suspend(() => {
      if (notLanded.size === 0) return Effect.void
      // Settles queued meanwhile (a call that finished during the wait) are waited for too, and
      // so are those reads no longer wait for (detached after repeated failures).
      const untilEmpty: Effect.Effect<boolean> = Effect.suspend(() => {
        const open = [...notLanded]
        if (open.length === 0) return Effect.succeed(true)
        wakeWriter(true)
        return Effect.andThen(Effect.forEach(open, (item) => Deferred.await(item.landing), { discard: true }), untilEmpty)
      })
      return Effect.raceFirst(untilEmpty, Effect.as(realSleep(timeoutMs), false)).pipe(
        Effect.flatMap((done) =>
          done
            ? Effect.void
            : Effect.logError(
              `${notLanded.size} settle(s) not confirmed landed after ${timeoutMs} ms; ` +
                `if the process ends now, recovery charges their holds at their quotes`
            )
        )
      )
    })

  /**
   * The reserves of a batch, decided in order: holds in one call up to the
   * first that is not held, which then takes the general path (recording its
   * refusal's events or kill, or its hold's events) before the rest go on.
   * The wallets' queued settles ride in the first call; if that call fails,
   * they go back to the writer and the reserves are tried once without them.
   */
  const decideInOrder = Effect.fnUntraced(function*(inputs: ReadonlyArray<ReserveInput>, settles: ReadonlyArray<QueuedSettle>) {
    // Each step commits on its own: when one fails, the decisions already committed stand and
    // are handed out; only the failed reserve and those after it fail.
    const results: Array<ReserveResult> = []
    let rest = inputs
    let carried = settles
    while (rest.length > 0) {
      let step = yield* Effect.exit(reserveManyInOneCall(rest, carried))
      if (Exit.isFailure(step) && carried.length > 0) {
        // Retried by the writer alone from now on (one of them may be what failed the batch).
        for (const item of carried) item.attempts++
        enqueueSettles(carried, true)
        carried = []
        step = yield* Effect.exit(reserveManyInOneCall(rest))
      }
      if (Exit.isFailure(step)) return { results, failure: step.cause }
      for (let i = 0; i < carried.length; i++) yield* settleOutcome(carried[i]!, step.value.settled[i]!)
      carried = []
      const held = step.value.held
      const stop = held.findIndex((h) => h === null)
      if (stop === -1) {
        results.push(...(held as Array<ReserveResult>))
        break
      }
      results.push(...(held.slice(0, stop) as Array<ReserveResult>))
      const general = yield* Effect.exit(Effect.andThen(landed(rest[stop]!.accountId), reserveInTransaction(rest[stop]!)))
      if (Exit.isFailure(general)) return { results, failure: general.cause }
      results.push(general.value)
      rest = rest.slice(stop + 1)
    }
    return { results, failure: undefined }
  })

  /**
   * Group commit of holds, across wallets. Reserves wait in one queue, in
   * arrival order; at most `reserveFlights` calls are in flight at once, and
   * a wallet is in at most one of them. A reserve that arrives while a call
   * can start (fewer in flight, its wallet in none) leads one at once, so a
   * lone caller never waits; otherwise it waits, and whenever a call ends
   * the first waiting reserve leads the next one with every waiting reserve
   * of a wallet not in flight (at most MAX_BATCH), in arrival order — with
   * their wallets' queued settles, one call, one transaction, one commit.
   * Each reserve gets its own decision, made under its wallet's lock, in
   * arrival order within its wallet (see `decideInOrder`); the call takes
   * the wallets' locks in account order, as the settle writer does, so two
   * calls never wait for each other's locks the other way round. A failure
   * fails the call's reserves not yet decided, of every wallet in it. At most
   * `maxQueued` wait; beyond that a reserve of a wallet with none waiting or
   * in flight takes the general path (one of a wallet with some still waits).
   */
  const reserveQueue: Array<Waiter> = []
  /** Wallets in a call in flight: their next reserves wait for it, so a wallet's decisions keep arrival order. */
  const walletsInFlight = new Set<string>()
  /** Per wallet, its reserves waiting or in flight (the settle writer leaves their fresh settles to that call). */
  const reserving = new Map<string, number>()
  let flights = 0

  const countReserving = (accountId: string, delta: number) => {
    const count = (reserving.get(accountId) ?? 0) + delta
    if (count > 0) reserving.set(accountId, count)
    else reserving.delete(accountId)
  }

  /**
   * Starts calls while there is room for one and a waiting reserve's wallet is in none: the
   * first such reserve (the earliest of its wallet) leads it, its wallet claimed for the call.
   */
  const startFlights = () => {
    while (flights < reserveFlights) {
      const leader = reserveQueue.find((waiter) => !walletsInFlight.has(waiter.input.accountId))
      if (leader === undefined) return
      flights++
      walletsInFlight.add(leader.input.accountId)
      Deferred.doneUnsafe(leader.done, Effect.succeed({ _tag: "Lead" } as const))
    }
  }

  /**
   * The call's reserves, taken when its leader runs (so that those which came meanwhile go
   * too): the leader, then every waiting reserve of its wallet or of a wallet in no call, in
   * arrival order, at most MAX_BATCH; their wallets are claimed for the call. Once the batch
   * is full nothing more is taken, so no reserve ever passes one of its own wallet.
   */
  const takeBatch = (leader: Waiter): Array<Waiter> => {
    const mine = new Set([leader.input.accountId])
    const batch: Array<Waiter> = [leader]
    let kept = 0
    for (const waiter of reserveQueue) {
      if (waiter === leader) continue
      const accountId = waiter.input.accountId
      if (batch.length < MAX_BATCH && (mine.has(accountId) || !walletsInFlight.has(accountId))) {
        batch.push(waiter)
        mine.add(accountId)
        walletsInFlight.add(accountId)
      } else {
        reserveQueue[kept++] = waiter
      }
    }
    reserveQueue.length = kept
    return batch
  }

  /** Wallet by wallet in account order (byte order, as the database's COLLATE "C"), arrival order within each. */
  const byAccount = (a: Waiter, b: Waiter) =>
    a.input.accountId < b.input.accountId ? -1 : a.input.accountId > b.input.accountId ? 1 : 0

  /**
   * The settles a reserve call carries: its wallets' fresh ones, then the fresh ones of other
   * wallets that no call has claimed and whose earlier settles are not being written elsewhere
   * (so a wallet's settles still land in the order they were answered), at most MAX_SETTLE_BATCH
   * in all. Over many wallets a hold's commit then lands the settles answered since the last
   * call, rather than the writer paying a commit of its own for them SETTLE_DELAY_MS later.
   * The call takes those wallets' locks in account order with its own, as every call does.
   */
  const carriedSettles = (accounts: ReadonlyArray<string>): Array<QueuedSettle> => {
    const carried = accounts.flatMap((accountId) => takeSettles(accountId, "fresh"))
    for (const accountId of [...queuedSettles.keys()]) {
      if (carried.length >= MAX_SETTLE_BATCH) break
      if (walletsInFlight.has(accountId)) continue
      const queued = queuedSettles.get(accountId)!
      // Every settle of the wallet not landed is queued: none is on its way in another call.
      if (unsettled.get(accountId)?.size !== queued.length) continue
      carried.push(...takeSettles(accountId, "fresh"))
    }
    return carried
  }

  /** A call of reserves in flight: its leader, what it took, whether it has ended. */
  interface Flight {
    readonly leader: Waiter
    batch: ReadonlyArray<Waiter>
    accounts: ReadonlyArray<string>
    ended: boolean
  }

  const endFlight = (flight: Flight) => {
    if (flight.ended) return
    flight.ended = true
    flights--
    for (const accountId of flight.accounts) walletsInFlight.delete(accountId)
    for (const waiter of flight.batch) countReserving(waiter.input.accountId, -1)
    startFlights()
  }

  // Made once, not per call (docs/performance.md, "Generators made once").
  const flightCall = Effect.fnUntraced(function*(flight: Flight) {
    const leader = flight.leader
    // One bound for all the call's waits below, not one per wallet.
    const deadline = Date.now() + WRITTEN_WAIT_MS
    // The leader's wallet's settles that the writer is writing land first (more reserves join meanwhile).
    yield* written(leader.input.accountId, deadline)
    flight.batch = takeBatch(leader)
    const accounts = [...new Set(flight.batch.map((waiter) => waiter.input.accountId))]
    flight.accounts = accounts
    // So do the other wallets': the decisions see every settle answered before them.
    for (const accountId of accounts) yield* written(accountId, deadline)
    // Array.prototype.sort is stable: arrival order stays within each wallet.
    const ordered = [...flight.batch].sort(byAccount)
    const { results, failure } = yield* decideInOrder(ordered.map((waiter) => waiter.input), carriedSettles(accounts))
    endFlight(flight)
    let own: ReserveResult | undefined
    for (let i = 0; i < ordered.length; i++) {
      const waiter = ordered[i]!
      if (i >= results.length) {
        if (waiter !== leader) yield* Deferred.failCause(waiter.done, failure!)
      } else if (waiter === leader) own = results[i]!
      else yield* Deferred.succeed(waiter.done, { _tag: "Done", result: results[i]! } as const)
    }
    return own !== undefined ? own : yield* Effect.failCause(failure!)
  })

  /** The leader's call: its batch decided, the flight ended (the next one started), each reserve told its outcome. */
  const fly = (leader: Waiter) => {
    const flight: Flight = { leader, batch: [leader], accounts: [leader.input.accountId], ended: false }
    return flightCall(flight).pipe(
      // Whatever ends the call (a defect included), the flight ends and no reserve of it is left waiting.
      Effect.onExit((exit) =>
        Effect.suspend(() => {
          endFlight(flight)
          if (Exit.isSuccess(exit)) return Effect.void
          return Effect.forEach(flight.batch, (waiter) => waiter === leader ? Effect.void : Deferred.failCause(waiter.done, exit.cause), {
            discard: true
          })
        })
      )
    )
  }

  const reserveCoalesced = (input: ReserveInput) =>
    Effect.suspend(() => {
      // A queue this long is a burst the calls cannot absorb: a reserve of a wallet with none
      // waiting or in flight takes its wallet's lock on its own (still exact: the lock orders it),
      // rather than waiting without bound. One of a wallet with some waits behind them: on its own
      // it could be decided before them, out of arrival order.
      if (reserveQueue.length >= maxQueued && !reserving.has(input.accountId)) {
        return Effect.andThen(landed(input.accountId), reserveInTransaction(input))
      }
      const me: Waiter = { input, done: Deferred.makeUnsafe<Signal, unknown>() }
      reserveQueue.push(me)
      countReserving(input.accountId, 1)
      startFlights()
      return Effect.flatMap(
        Deferred.await(me.done),
        (signal): Effect.Effect<ReserveResult, unknown> => signal._tag === "Done" ? Effect.succeed(signal.result) : fly(me)
      )
    }).pipe(
      // A leader or waiter that went away would strand the reserves queued behind it.
      Effect.uninterruptible
    )

  /** A reserve: on its own when decided on a snapshot, otherwise with others in one call (made once, not per call). */
  const reserveAny = Effect.fnUntraced(function*(input: ReserveInput) {
    if (input.standardRules !== true || input.quote !== undefined) {
      // Decided on a snapshot: the wallet's settles answered before it are in it.
      yield* landed(input.accountId)
      return yield* reserveInTransaction(input)
    }
    // A refusal (with its events and, for velocity, the kill) or a hold that fires an
    // event is decided again, and recorded, by the general path under its own lock.
    return yield* reserveCoalesced(input)
  })

  /**
   * Settle in one round trip: `spendgate_settle` (migration 0014) locks the
   * wallet and the reservation, charges by the mirror of `planSettle` and
   * writes. Null for a reservation the sweep released unsettled (a late settle).
   */
  const settleInOneCall = (input: SettleInput) =>
    Effect.flatMap(
      settleCall<SettleRow>(input, "*"),
      (rows): Effect.Effect<SettleOutcome | null> => {
        const row = rows[0]!
        if (row.outcome === "slow") return Effect.succeed(null)
        const reservation = row.r_id === null ? null : toReservation(settleReservation(row))
        if (row.outcome === "NotHeld" || reservation === null) return Effect.succeed({ _tag: "NotHeld", reservation })
        const plan = input.plan(reservation)
        const entries = settleEntries(reservation, plan, input)
        const settled: SettleOutcome = {
          _tag: "Settled",
          transaction: entries.transaction,
          wallet: { accountId: input.accountId, usdMicroUsd: microUsd(row.wallet_usd!), satsMsat: msat(row.wallet_sats!) },
          reservation: entries.reservation,
          late: false
        }
        // The call has committed: failing now would hide a charge that stands (and a retry would
        // find nothing held). ledger-functions.property.test.ts keeps the two rules equal; a
        // difference here is logged loudly instead.
        return sameCharge(plan, row)
          ? Effect.succeed(settled)
          : Effect.as(Effect.logError(`settle: the database's charge of ${reservation.id} differs from planSettle`), settled)
      }
    )

  /** The general settle: the wallet and reservation locked, the plan in TypeScript, then the writes. */
  const settleInTransaction = (input: SettleInput) =>
    sql.withTransaction(Effect.gen(function*() {
        const locked = yield* lockHeld(input.accountId, input.reservationId)
        if (locked === null) return { _tag: "NotHeld", reservation: null } as const
        const { reservation, wallet } = locked
        if (reservation.status === "released" && reservation.settledMicroUsd === null && input.onlyHeld !== true) {
          // The sweep returned the hold while the call ran: settle late, under the same lock.
          const rows = yield* sql<Record<string, unknown>>`
            SELECT a.*, COALESCE(d.spent_micro_usd, 0) AS daily_spent,
              ${monthSpent(sql`a.id`, reservation.day)} AS monthly_spent
            FROM agents a
            LEFT JOIN agent_daily_spend d ON d.agent_id = a.id AND d.day = ${reservation.day}
            WHERE a.id = ${reservation.agentId} AND a.account_id = ${reservation.accountId}`
          const row = rows[0]
          if (row === undefined) return yield* Effect.die(new Error("settle: unknown agent"))
          // The lock's row carries the chain head only; the pockets are read here (the wallet is locked).
          const pockets = yield* sql<WalletRow>`SELECT * FROM wallets WHERE account_id = ${reservation.accountId}`
          const late = input.planLate(reservation, {
            policy: readAgent(row).policy,
            dailySpentMicroUsd: big(row["daily_spent"] as Int8),
            monthlySpentMicroUsd: big(row["monthly_spent"] as Int8),
            wallet: toWallet(pockets[0]!)
          })
          if (late._tag === "Unpaid") {
            const unpaid = unpaidEntries(reservation, late, input)
            const audit = yield* seal(wallet, unpaid.audit)
            yield* applyWrites(reservation.accountId, 0n, 0n, audit, [
              sql`UPDATE reservations SET settled_micro_usd = ${late.owedMicroUsd} WHERE id = ${reservation.id}`
            ])
            return { _tag: "Unpaid", reservation: unpaid.reservation, plan: late } as const
          }
          const entries = lateSettleEntries(reservation, late, input)
          const audit = yield* seal(wallet, entries.audit)
          const next = yield* applyWrites(reservation.accountId, -late.chargeUsdMicroUsd, -late.chargeSatsMsat, audit, [
            sql`UPDATE reservations SET status = 'settled', settled_micro_usd = ${late.chargedMicroUsd}
                WHERE id = ${reservation.id}`,
            raiseDaily(reservation.agentId, reservation.day, reservation.createdAt, late.chargedMicroUsd, "late"),
            insertTransaction(entries.transaction, null)
          ])
          return {
            _tag: "Settled",
            transaction: entries.transaction,
            wallet: next,
            reservation: entries.reservation,
            late: true
          } as const
        }
        if (reservation.status !== "held") return { _tag: "NotHeld", reservation } as const
        const plan = input.plan(reservation)
        const entries = settleEntries(reservation, plan, input)
        const transaction = entries.transaction
        const audit = yield* seal(wallet, entries.audit)
        const next = yield* applyWrites(reservation.accountId, plan.refundUsdMicroUsd, plan.refundSatsMsat, audit, [
          sql`UPDATE reservations SET status = 'settled', settled_micro_usd = ${plan.chargedMicroUsd}
              WHERE id = ${reservation.id}`,
          lowerDaily(reservation.agentId, reservation.day, reservation.createdAt, reservation.quotedMicroUsd - plan.chargedMicroUsd),
          insertTransaction(transaction, null)
        ])
        return {
          _tag: "Settled",
          transaction,
          wallet: next,
          reservation: entries.reservation,
          late: false
        } as const
      }))

  const settleAny = (input: SettleInput) =>
    Effect.gen(function*() {
      if (input.standardRules === true) {
        const settled = yield* settleInOneCall(input)
        if (settled !== null) return settled
        // Released, never settled: recovery's capture leaves it alone.
        if (input.onlyHeld === true) return { _tag: "NotHeld", reservation: null } as const
      }
      // A reservation the sweep released while the call ran: settled late, in TypeScript.
      return yield* settleInTransaction(input)
    })

  const ledger: LedgerStore & FundingStore = {
    getWallet: (accountId) =>
      sql<WalletRow>`SELECT * FROM wallets WHERE account_id = ${accountId}`.pipe(
        Effect.flatMap((rows) =>
          rows[0] === undefined ? Effect.die(new Error(`no wallet for ${accountId}`)) : Effect.succeed(toWallet(rows[0]))
        ),
        Effect.orDie
      ),

    reserve: (input) => Effect.orDie(reserveAny(input)),

    settle: (input) => Effect.orDie(settleAny(input)),

    release,

    sweepExpired: (now, limit, capture) =>
      Effect.gen(function*() {
        const expired = yield* sql<ReservationRow>`
          SELECT * FROM reservations
          WHERE status = 'held' AND expires_at < ${now}
          ORDER BY expires_at LIMIT ${limit}`
        let ended = 0
        for (const row of expired) {
          const reservation = toReservation(row)
          // Its settle is queued here (the caller has its receipt): it lands as the receipt says.
          if (settleQueuedHere(reservation, capture)) continue
          if (capture !== undefined && capturesOnExpiry(reservation, capture.running)) {
            // Recovery's rule: the call started and its settle never landed: charged at its quote.
            const settled = yield* settleAny(captureSettleInput(reservation, now))
            if (settled._tag === "Settled") ended++
            continue
          }
          const outcome = yield* release({
            reservationId: reservation.id,
            accountId: reservation.accountId,
            auditId: newAuditId(),
            reason: "expired",
            now
          })
          if (outcome === "Released") ended++
        }
        return ended
      }).pipe(Effect.orDie),

    createQuote: (quote) =>
      sql`INSERT INTO quotes ${
        sql.insert({
          id: quote.id,
          account_id: quote.accountId,
          agent_id: quote.agentId,
          capability: quote.capability,
          provider: quote.provider,
          model: quote.model,
          request_hash: quote.requestHash,
          quoted_micro_usd: quote.quotedMicroUsd,
          created_at: quote.createdAt,
          expires_at: quote.expiresAt,
          used_at: quote.usedAt,
          reservation_id: quote.reservationId
        })
      }`.pipe(Effect.asVoid, Effect.orDie),

    findQuote: (accountId, quoteId) =>
      sql<QuoteRow>`SELECT * FROM quotes WHERE id = ${quoteId} AND account_id = ${accountId}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toQuote)),
        Effect.orDie
      ),

    deleteExpiredQuotes: (before, limit) =>
      sql<{ id: string }>`
        DELETE FROM quotes WHERE id IN (
          SELECT id FROM quotes WHERE expires_at < ${before} ORDER BY expires_at LIMIT ${limit}
        ) RETURNING id`.pipe(Effect.map((rows) => rows.length), Effect.orDie),

    credit: (input) =>
      sql.withTransaction(Effect.flatMap(lockWallet(input.accountId), (wallet) => creditLocked(wallet, input)))
        .pipe(Effect.orDie),

    refund: (input) =>
      Effect.gen(function*() {
        const [found] = yield* sql<{ account_id: string }>`SELECT account_id FROM transactions WHERE id = ${input.chargeId}`
        if (found === undefined) return { _tag: "NotFound" } as const
        return yield* sql.withTransaction(Effect.gen(function*() {
          // Wallet first, then the charge: the same order as every ledger write.
          const wallet = yield* lockWallet(found.account_id as AccountId)
          const [row] = yield* sql<RefundableRow>`SELECT * FROM transactions WHERE id = ${input.chargeId} FOR UPDATE`
          const charge = toTransaction(row!)
          const decision = input.plan({
            charge,
            refunded: refundedOfRow(row!),
            bounded: yield* boundedBalances(wallet)
          })
          if (Result.isFailure(decision)) return { _tag: "Refused", refusal: decision.failure } as const
          const plan = decision.success
          const entries = refundEntries(charge, plan, input)
          const audit = yield* seal(wallet, entries.audit)
          const next = yield* applyWrites(charge.accountId, plan.usdMicroUsd, plan.satsMsat, audit, [
            sql`UPDATE transactions SET refunded_micro_usd = ${plan.refundedAfter.microUsd},
                refunded_usd_micro = ${plan.refundedAfter.usdMicroUsd},
                refunded_sats_msat = ${plan.refundedAfter.satsMsat}
                WHERE id = ${charge.id}`,
            insertTransaction(entries.transaction, null)
          ])
          // The event commits with the refund, in its transaction.
          yield* writeEvents(sql, [chargeRefunded(entries.transaction, charge.id, input.now)])
          return { _tag: "Refunded", refund: entries.transaction, charge, refunded: plan.refundedAfter, wallet: next } as const
        }))
      }).pipe(Effect.orDie),

    refundedOf: (chargeId) =>
      sql<RefundableRow>`SELECT * FROM transactions WHERE id = ${chargeId}`.pipe(
        Effect.map((rows) =>
          Option.map(Option.fromNullishOr(rows[0]), (row) => ({ charge: toTransaction(row), refunded: refundedOfRow(row) }))
        ),
        Effect.orDie
      ),

    ...funding,

    getTransaction: (accountId, transactionId) =>
      sql<TransactionRow>`SELECT * FROM transactions WHERE id = ${transactionId} AND account_id = ${accountId}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toTransaction)),
        Effect.orDie
      ),

    listTransactions: (accountId, filter, request) =>
      Effect.gen(function*() {
        const conditions = [sql`account_id = ${accountId}`]
        if (filter.type !== undefined) conditions.push(sql`type = ${filter.type}`)
        if (filter.agentId !== undefined) conditions.push(sql`agent_id = ${filter.agentId}`)
        if (filter.from !== undefined) conditions.push(sql`created_at >= ${filter.from}`)
        if (filter.until !== undefined) conditions.push(sql`created_at < ${filter.until}`)
        if (filter.before !== undefined) {
          const { createdAt, id } = filter.before
          conditions.push(sql`(created_at < ${createdAt} OR (created_at = ${createdAt} AND id COLLATE "C" < ${id}))`)
        }
        return yield* paged(sql, "transactions", sql.and(conditions), toTransaction, request)
      }).pipe(Effect.orDie),

    // One statement, so the four groupings describe the same snapshot.
    spendGroups: (accountId, query) =>
      Effect.gen(function*() {
        const agent = query.agentId === undefined ? sql`TRUE` : sql`agent_id = ${query.agentId}`
        const rows = yield* sql<{
          dimension: string
          key: string | null
          calls: Int8
          charged: Int8 | null
          refunded: Int8 | null
        }>`
          WITH w AS (
            SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
                   agent_id, capability, provider, type, amount_micro_usd
            FROM transactions
            WHERE account_id = ${accountId} AND type IN ('charge', 'refund')
              AND created_at >= ${query.from} AND created_at < ${query.until} AND ${agent}
          )
          SELECT CASE WHEN GROUPING(day) = 0 THEN 'day'
                      WHEN GROUPING(agent_id) = 0 THEN 'agent'
                      WHEN GROUPING(capability) = 0 THEN 'capability'
                      ELSE 'provider' END AS dimension,
                 CASE WHEN GROUPING(day) = 0 THEN day
                      WHEN GROUPING(agent_id) = 0 THEN agent_id
                      WHEN GROUPING(capability) = 0 THEN capability
                      ELSE provider END AS key,
                 count(*) FILTER (WHERE type = 'charge') AS calls,
                 sum(amount_micro_usd) FILTER (WHERE type = 'charge') AS charged,
                 sum(amount_micro_usd) FILTER (WHERE type = 'refund') AS refunded
          FROM w GROUP BY GROUPING SETS ((day), (agent_id), (capability), (provider))`
        const of = (dimension: string) =>
          rows.filter((row) => row.dimension === dimension).map((row) => ({
            key: row.key,
            calls: Number(row.calls),
            chargedMicroUsd: row.charged === null ? 0n : big(row.charged),
            refundedMicroUsd: row.refunded === null ? 0n : big(row.refunded)
          }))
        return { byDay: of("day"), byAgent: of("agent"), byCapability: of("capability"), byProvider: of("provider") }
      }).pipe(Effect.orDie),

    listReservations: (accountId, request) =>
      paged(sql, "reservations", sql`account_id = ${accountId}`, toReservation, request).pipe(Effect.orDie),

    agentSpend: (accountId, agentId, day) =>
      Effect.gen(function*() {
        // One statement, one snapshot: the day's row and the month's rows (at most 31).
        const [row] = yield* sql<{ daily: Int8 | null; monthly: Int8 }>`
          SELECT (SELECT d.spent_micro_usd FROM agent_daily_spend d WHERE d.agent_id = a.id AND d.day = ${day}) AS daily,
            ${monthSpent(sql`a.id`, day)} AS monthly
          FROM agents a WHERE a.id = ${agentId} AND a.account_id = ${accountId}`
        return {
          dailySpentMicroUsd: row?.daily == null ? 0n : big(row.daily),
          monthlySpentMicroUsd: row === undefined ? 0n : big(row.monthly)
        }
      }).pipe(Effect.orDie),

    agentLifetimeSpend: (accountId, agentId) =>
      Effect.map(
        sql<{ total: Int8 | null }>`
          SELECT COALESCE(SUM(amount_micro_usd), 0) AS total FROM transactions
          WHERE agent_id = ${agentId} AND account_id = ${accountId} AND type = 'charge'`,
        ([row]) => row?.total == null ? 0n : big(row.total)
      ).pipe(Effect.orDie),

    recentActivity: (accountId, agentId, now) =>
      Effect.gen(function*() {
        const [found] = yield* sql`SELECT 1 FROM agents WHERE id = ${agentId} AND account_id = ${accountId}`
        if (found === undefined) return { spentLastHourMicroUsd: 0n, callsLastMinute: 0, oldestCallLastMinuteAt: null }
        return yield* recentOf(agentId, now)
      }).pipe(Effect.orDie),

    getAudit: (accountId, auditId) =>
      sql<AuditRow>`SELECT * FROM audit_log WHERE id = ${auditId} AND account_id = ${accountId}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toAuditRecord)),
        Effect.orDie
      ),

    listAudit: (accountId, afterSeq, limit) =>
      sql<AuditRow>`
        SELECT * FROM audit_log WHERE account_id = ${accountId} AND seq > ${afterSeq}
        ORDER BY seq LIMIT ${limit}`.pipe(Effect.map((rows) => rows.map(toAuditRecord)), Effect.orDie)
  }

  /** Reads of an account see the settles this instance answered before them (read your own writes). */
  const afterSettles = <Args extends [AccountId, ...Array<any>], A>(read: (...args: Args) => Effect.Effect<A>) =>
    (...args: Args) => Effect.andThen(landed(args[0]), read(...args))
  /** Every settle queued when it is called has landed (each account's at most 2 s). */
  const landedSoFar = Effect.suspend(() =>
    Effect.forEach([...unsettled.keys()], landed, { concurrency: "unbounded", discard: true })
  )
  /** Reads found by a charge's id, whose account is not known: after every settle queued so far. */
  const afterAllSettles = <Args extends Array<any>, A>(read: (...args: Args) => Effect.Effect<A>) =>
    (...args: Args) => Effect.andThen(landedSoFar, read(...args))

  return {
    ...ledger,
    getWallet: afterSettles(ledger.getWallet),
    getTransaction: afterSettles(ledger.getTransaction),
    listTransactions: afterSettles(ledger.listTransactions),
    listReservations: afterSettles(ledger.listReservations),
    spendGroups: afterSettles(ledger.spendGroups),
    agentSpend: afterSettles(ledger.agentSpend),
    agentLifetimeSpend: afterSettles(ledger.agentLifetimeSpend),
    recentActivity: afterSettles(ledger.recentActivity),
    getAudit: afterSettles(ledger.getAudit),
    listAudit: afterSettles(ledger.listAudit),
    // A write on the caller's path comes after the account's settles already answered.
    settle: (input) => Effect.andThen(landed(input.accountId), ledger.settle(input)),
    release: (input) => Effect.andThen(landed(input.accountId), ledger.release(input)),
    refund: afterAllSettles(ledger.refund),
    refundedOf: afterAllSettles(ledger.refundedOf),
    settleLater: (input) =>
      isStopped
        // The store has closed its queue (shutdown): written here, on the caller's path, or left to recovery.
        ? Effect.gen(function*() {
          const settled = yield* Effect.exit(settleAny(input))
          if (Exit.isFailure(settled)) {
            return yield* Effect.logError(
              `Settle of ${input.reservationId} after the store closed its queue could not be written; recovery charges the hold at its quote`,
              settled.cause
            )
          }
          yield* tellLanded(input)
        })
        : Effect.sync(() => {
          const item: QueuedSettle = {
            input,
            whenDone: undefined,
            landing: Deferred.makeUnsafe<void>(),
            attempts: 0,
            detached: false,
            landed: false,
            retrying: false
          }
          notLanded.add(item)
          enqueueSettles([item], false)
        }),
    /** Runs the settle writer for the life of the scope; at its end, waits (bounded) for queued settles to land. */
    settleWriter: Effect.gen(function*() {
      yield* Effect.forkScoped(settleWriterLoop)
      yield* Effect.addFinalizer(() =>
        Effect.ensuring(
          allLanded(settleShutdownTimeoutMs),
          Effect.sync(() => {
            isStopped = true
            Deferred.doneUnsafe(stopped, Effect.void)
          })
        )
      )
    })
  }
}
