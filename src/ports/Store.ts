import { Context, type Effect, type Option, type Result } from "effect"
import type { Agent, Policy } from "../domain/Agent.ts"
import type { Capability } from "../domain/Capability.ts"
import type { SpendRefusal } from "../domain/errors.ts"
import type { AccountId, AgentId } from "../domain/ids.ts"
import type {
  AuditRecord,
  Pocket,
  RateSnapshot,
  Reservation,
  Transaction,
  TransactionType,
  Wallet
} from "../domain/Ledger.ts"
import type { Invoice, InvoiceStatus, InvoiceType, PaymentOutcome } from "../domain/Invoice.ts"
import type { MicroUsd } from "../domain/Money.ts"
import type {
  HoldPlan,
  LateSettlePlan,
  LateSettleSnapshot,
  RecentActivity,
  ReserveSnapshot,
  SettlePlan
} from "../wallet/decide.ts"

export type { RecentActivity }
import type { Refunded, RefundPlan, RefundSnapshot } from "../wallet/refund.ts"
import type { RefundRefusal } from "../domain/errors.ts"
import type { AgentChange } from "../agents/owners.ts"
import type { QuoteRefusal, StoredQuote } from "../quotes/Quote.ts"
import type { WebhookStoreShape } from "./WebhookStore.ts"

/**
 * The storage port. Implementations: SQL (PostgreSQL and embedded PGlite,
 * adapters/sql) and in-memory (adapters/memory). Both pass one contract suite
 * (test/ports/store.contract.ts).
 *
 * Storage failures are defects, not typed errors: the core cannot recover
 * from them and the HTTP adapter answers 500 INTERNAL / health "down".
 * Every method is atomic on its own.
 */

export interface Page<A> {
  readonly items: ReadonlyArray<A>
  readonly total: number
}

export interface PageRequest {
  readonly limit: number
  readonly offset: number
}

export interface NewAgent {
  readonly agent: Agent
  readonly keyHash: string
  readonly policy: Policy
}

export interface PolicyPatch {
  readonly maxPerCallMicroUsd?: bigint | null | undefined
  readonly maxPerDayMicroUsd?: bigint | null | undefined
  readonly maxPerMonthMicroUsd?: bigint | null | undefined
  readonly maxPerHourMicroUsd?: bigint | null | undefined
  readonly maxCallsPerMinute?: number | null | undefined
  readonly autoKill?: boolean | undefined
  readonly allowedCapabilities?: ReadonlyArray<Capability> | undefined
}

/** A new key for an agent; the current one stays valid until `previousExpiresAt` (null: revoked at once). */
export interface KeyRotation {
  readonly keyHash: string
  readonly previousExpiresAt: Date | null
}

export interface AgentWithPolicy {
  readonly agent: Agent
  readonly policy: Policy
}

/** What an update may change; the last-live-owner rule (src/agents/owners.ts) decides whether it may. */
export type AgentChanges = AgentChange

/** Result of an update that must keep at least one live owner per account. */
export type UpdateAgentResult =
  | { readonly _tag: "Updated"; readonly agent: Agent }
  | { readonly _tag: "NotFound" }
  | { readonly _tag: "LastLiveOwner" }

export interface StoreShape extends LedgerStore, FundingStore, WebhookStoreShape {
  /** Cheap liveness check for /health. Fails (defect) when storage is unreachable. */
  readonly ping: Effect.Effect<void>
  /** Creates an account together with its first (owner) agent, atomically. */
  readonly createAccount: (input: {
    readonly accountId: AccountId
    readonly createdAt: Date
    readonly owner: NewAgent
  }) => Effect.Effect<void>
  readonly createAgent: (input: NewAgent) => Effect.Effect<void>
  /**
   * The agent whose current key has this hash, or whose previous key (kept
   * by a rotation with a grace period) has it and expires after `now`. A
   * deleted agent is never found.
   */
  readonly findAgentByKeyHash: (keyHash: string, now: Date) => Effect.Effect<Option.Option<Agent>>
  /**
   * The agent only if it belongs to `accountId`; a deleted agent is found
   * (with `deletedAt` set), so that history can still name it.
   */
  readonly getAgent: (accountId: AccountId, agentId: AgentId) => Effect.Effect<Option.Option<AgentWithPolicy>>
  /**
   * The names of these agents of the account, in one read: deleted agents
   * are named too (history names them); an id not in the account is left
   * out of the map.
   */
  readonly agentNames: (accountId: AccountId, agentIds: ReadonlyArray<AgentId>) => Effect.Effect<ReadonlyMap<AgentId, string>>
  /**
   * Atomically: the current key becomes the previous one (valid until
   * `previousExpiresAt`; with null it is revoked at once) and `keyHash` the
   * current one. A previous key still in its grace is revoked: an agent has
   * at most two valid keys. None when the agent is not in the account or is
   * deleted.
   */
  readonly rotateKey: (accountId: AccountId, agentId: AgentId, rotation: KeyRotation) => Effect.Effect<Option.Option<Agent>>
  /** Newest first (createdAt, then id, descending); deleted agents are left out. */
  readonly listAgents: (accountId: AccountId, page: PageRequest) => Effect.Effect<Page<Agent>>
  /**
   * Applies the changes as `planAgentChange` (src/agents/owners.ts) plans
   * them, over a snapshot read under the account's lock: killing the
   * account's last live owner is refused with `LastLiveOwner` and changes
   * nothing; the check and the write are one atomic step, so two owners
   * killing each other concurrently cannot both win. Deleting
   * (`deletedAt`) follows the same rule; a deleted agent is `NotFound`.
   */
  readonly updateAgent: (
    accountId: AccountId,
    agentId: AgentId,
    changes: AgentChanges
  ) => Effect.Effect<UpdateAgentResult>
  /** Sets lastActiveAt to `at` when it is older than `staleBefore` (or unset). */
  readonly touchAgent: (agentId: AgentId, at: Date, staleBefore: Date) => Effect.Effect<void>
  /** Changes only the given fields, atomically; None when the agent is not in the account or is deleted. */
  readonly updatePolicy: (
    accountId: AccountId,
    agentId: AgentId,
    patch: PolicyPatch
  ) => Effect.Effect<Option.Option<Policy>>
}

// ---- ledger --------------------------------------------------------------

export interface ReserveInput {
  readonly reservationId: string
  readonly auditId: string
  readonly accountId: AccountId
  readonly agentId: AgentId
  readonly capability: Capability
  readonly provider: string
  readonly quotedMicroUsd: MicroUsd
  readonly rate: RateSnapshot | null
  readonly day: string
  readonly now: Date
  readonly expiresAt: Date
  /** The rules (src/wallet/decide.ts), applied to a snapshot read under the wallet lock. */
  readonly decide: (snapshot: ReserveSnapshot) => Result.Result<HoldPlan, SpendRefusal>
  /**
   * True when `decide` is exactly `planHold(snapshot, capability, quotedMicroUsd, rate?.rate ?? null)`:
   * a store may then apply its own mirror of that rule inside the database
   * (proved identical by test) instead of reading a snapshot for `decide`.
   * It may also read no more of the agent's recent activity than `planHold`
   * compares: under an hourly limit, an upper bound of the last hour's spend
   * in place of the exact figure when the bound plus the quote is within the
   * limit (the decision is the same; a refusal gets the exact figure), and
   * the minute's calls only under a minute limit.
   */
  readonly standardRules?: boolean | undefined
  /** A call made with a quote: the quote is checked, and used up, with the hold. */
  readonly quote?: QuoteClaim | undefined
}

/**
 * The quote a call names. Under the wallet lock, before `decide`, the store
 * reads the quote (null when the account has no quote of that id) and asks
 * `check` at the reservation's time (src/quotes/Quote.ts `checkQuoteUse`); a refusal changes nothing.
 * When the hold is made, the quote is marked used (`usedAt` = the
 * reservation's time, `reservationId`) in the same atomic step; when the
 * hold is refused, the quote stays unused.
 */
export interface QuoteClaim {
  readonly quoteId: string
  /** `now` is the reservation's time (`ReserveInput.now`). */
  readonly check: (quote: StoredQuote | null, now: Date) => Result.Result<StoredQuote, QuoteRefusal>
}

export interface SettleInput {
  readonly reservationId: string
  readonly accountId: AccountId
  readonly actualMicroUsd: bigint
  readonly transactionId: string
  readonly auditId: string
  readonly description: string
  readonly now: Date
  readonly plan: (reservation: Reservation) => SettlePlan
  /**
   * True when `plan` is exactly `planSettle(reservation, actualMicroUsd)`: a
   * store may then apply its own mirror of that rule inside the database.
   */
  readonly standardRules?: boolean | undefined
  /** For a reservation the recovery sweep already released (src/wallet/decide.ts `planLateSettle`). */
  readonly planLate: (reservation: Reservation, snapshot: LateSettleSnapshot) => LateSettlePlan
  /**
   * Recovery's capture: act only on a hold still `held`; a hold the sweep
   * released (or that was released after its call failed) is `NotHeld`,
   * never charged late.
   */
  readonly onlyHeld?: boolean | undefined
  /** `settleLater` only: told once the settle has landed (never if it does not land before the process ends: recovery then captures the hold). */
  readonly onLanded?: (() => void) | undefined
}

/** A hold as `reserve` made it, with the wallet as that hold left it when the store knows it. */
export interface HeldReservation extends Reservation {
  readonly walletAfterHold?: Wallet | undefined
}

/** See `sweepExpired`. */
export interface SweepCapture {
  /** Reservations whose calls are running in this process: released, and settled late by their call. */
  readonly running: ReadonlySet<string>
  /**
   * Reservations whose settle this process has queued (their caller has its
   * receipt): left alone, neither released nor captured, until the settle lands.
   */
  readonly settling?: ReadonlySet<string> | undefined
}

/**
 * The ids of a reservation's settle: its charge transaction and its audit
 * record, derived from the reservation's id. The receipt names them before
 * the settle lands, and recovery's capture uses the same ids, so the ids a
 * caller was given always name the charge, whichever wrote it.
 */
export const settleIdsOf = (reservationId: string): { readonly transactionId: string; readonly auditId: string } => {
  const suffix = reservationId.startsWith("rsv_") ? reservationId.slice(4) : reservationId
  return { transactionId: `txn_${suffix}`, auditId: `aud_${suffix}` }
}

/** The description of a charge made by recovery's capture. */
export const capturedDescription = (capability: string, provider: string): string =>
  `${capability} call via ${provider}: charged at its quote by recovery (its settle did not land)`

export type SettleOutcome =
  | {
    readonly _tag: "Settled"
    readonly transaction: Transaction
    readonly wallet: Wallet
    readonly reservation: Reservation
    /** The hold had been swept: the charge was a new debit. */
    readonly late: boolean
  }
  /** The hold had been swept and the charge could not be taken: recorded as owed. */
  | { readonly _tag: "Unpaid"; readonly reservation: Reservation; readonly plan: Extract<LateSettlePlan, { readonly _tag: "Unpaid" }> }
  | { readonly _tag: "NotHeld"; readonly reservation: Reservation | null }

export interface ReleaseInput {
  readonly reservationId: string
  readonly accountId: AccountId
  readonly auditId: string
  readonly reason: string
  readonly now: Date
}

export interface CreditInput {
  readonly accountId: AccountId
  readonly agentId: AgentId | null
  /** Caller-given idempotency key: a second credit with the same key is a no-op. */
  readonly creditKey: string
  readonly pocket: Pocket
  /** Amount in the pocket's unit: micro-dollars for `usd`, millisatoshis for `sats`. */
  readonly amount: bigint
  /** USD value recorded on the transaction (0 when no rate is known for a sats credit). */
  readonly valueMicroUsd: bigint
  readonly rateMicroUsdPerBtc: bigint | null
  readonly description: string
  readonly transactionId: string
  readonly auditId: string
  readonly now: Date
}

export type CreditOutcome =
  | { readonly _tag: "Credited"; readonly transaction: Transaction; readonly wallet: Wallet }
  | { readonly _tag: "Duplicate"; readonly transaction: Transaction }
  /** The pocket would go above `maximum` (its unit; see `pocketMaximum`), or the amount is not positive: nothing changed. */
  | { readonly _tag: "Refused"; readonly maximum: bigint }

export interface RefundInput {
  /** The charge to refund. */
  readonly chargeId: string
  /** Ids of the refund transaction and its audit record, used only when the refund happens. */
  readonly refundTransactionId: string
  readonly auditId: string
  readonly reason: string
  readonly now: Date
  /** The rule (src/wallet/refund.ts `planRefund`), applied to a snapshot read under the wallet lock. */
  readonly plan: (snapshot: RefundSnapshot) => Result.Result<RefundPlan, RefundRefusal>
}

export type RefundOutcome =
  | {
    readonly _tag: "Refunded"
    readonly refund: Transaction
    /** The charge, and its refunded totals with this refund included. */
    readonly charge: Transaction
    readonly refunded: Refunded
    readonly wallet: Wallet
  }
  | { readonly _tag: "Refused"; readonly refusal: RefundRefusal }
  | { readonly _tag: "NotFound" }

export interface TransactionFilter {
  readonly type?: TransactionType | undefined
  readonly agentId?: AgentId | undefined
  /** Inclusive lower bound. */
  readonly from?: Date | undefined
  /** Exclusive upper bound. */
  readonly until?: Date | undefined
  /**
   * Only rows after this one in the listing's order (newest first): older
   * `createdAt`, or the same instant and a smaller id. Lets an export walk
   * every page without rows written meanwhile shifting the pages.
   */
  readonly before?: { readonly createdAt: Date; readonly id: string } | undefined
}

/** The window of a spend summary: charges and refunds with `from <= createdAt < until`. */
export interface SpendQuery {
  readonly from: Date
  readonly until: Date
  readonly agentId?: AgentId | undefined
}

/** One group of a spend summary, in internal units. */
export interface SpendGroupRow {
  /** The day (YYYY-MM-DD, UTC), agent id, capability or provider; null when the rows have none. */
  readonly key: string | null
  /** Number of charges. */
  readonly calls: number
  readonly chargedMicroUsd: bigint
  readonly refundedMicroUsd: bigint
}

/** The window's charges and refunds grouped four ways, each in any order (src/wallet/reports.ts orders them). */
export interface SpendGroups {
  readonly byDay: ReadonlyArray<SpendGroupRow>
  readonly byAgent: ReadonlyArray<SpendGroupRow>
  readonly byCapability: ReadonlyArray<SpendGroupRow>
  readonly byProvider: ReadonlyArray<SpendGroupRow>
}

export interface AgentSpend {
  readonly dailySpentMicroUsd: bigint
  /** Held plus settled spend of the calendar month (UTC) of `day`, up to and including `day`. */
  readonly monthlySpentMicroUsd: bigint
}

export interface LedgerStore {
  readonly getWallet: (accountId: AccountId) => Effect.Effect<Wallet>
  /**
   * Under the wallet lock: reads the agent, its policy, its spend for `day`
   * and the wallet; asks `decide`; on success debits the pockets by the plan,
   * records the hold, adds the quote to the day's spend and appends a
   * `reserve` audit record. A refusal changes nothing, except a velocity
   * refusal of a policy with `autoKill`: then the agent is killed (reason
   * `velocity`) in the same transaction, unless it is the account's last
   * live owner.
   */
  readonly reserve: (input: ReserveInput) => Effect.Effect<Result.Result<HeldReservation, SpendRefusal | QuoteRefusal>>
  /**
   * Optional: takes a settle off the caller's path. The store answers at
   * once and commits the settle soon after (batched with other settles, or
   * with the next reserve of the same wallet), retrying while the database
   * is unreachable. Only for a reservation whose hold does not expire soon
   * and with `standardRules`; the caller builds the receipt itself
   * (`settleIdsOf`, `planSettle`, the hold's `walletAfterHold`). Until it
   * lands, reads of the account on this instance wait for it (read your own
   * writes); if the process dies first, the recovery sweep captures the hold
   * at its quote under the same ids (`sweepExpired` with `capture`).
   * Stores without it (the in-memory one) settle on the caller's path.
   */
  readonly settleLater?: ((input: SettleInput) => Effect.Effect<void>) | undefined
  /** Stores a new, unused quote. */
  readonly createQuote: (quote: StoredQuote) => Effect.Effect<void>
  /** The account's quote of that id (used or not, expired or not); None for another account's. */
  readonly findQuote: (accountId: AccountId, quoteId: string) => Effect.Effect<Option.Option<StoredQuote>>
  /** Deletes up to `limit` quotes that expired before `before`; returns how many. */
  readonly deleteExpiredQuotes: (before: Date, limit: number) => Effect.Effect<number>
  /**
   * Charges a held reservation: the plan's refund goes back to the pockets,
   * a `charge` transaction and a `settle` audit record are written, and the
   * day's spend is lowered from the quote to the charge. A reservation the
   * recovery sweep released (status `released`, no amount recorded yet) is
   * settled late by `planLate`, under the wallet lock: either a new debit (a
   * `charge` transaction, a `settle` audit record with the pockets' loss, the
   * reservation `settled`, the day's spend raised by the charge) or, when the
   * wallet or the daily cap cannot take it, an owed amount (`settledMicroUsd`
   * on the still-released reservation and a `settle` audit record that moves
   * nothing). Anything else (already settled, released by a failure and then
   * recorded) is left alone (`NotHeld`): a call is charged at most once.
   */
  readonly settle: (input: SettleInput) => Effect.Effect<SettleOutcome>
  /** Returns everything a held reservation took; no transaction (nothing was charged). */
  readonly release: (input: ReleaseInput) => Effect.Effect<"Released" | "NotHeld">
  /**
   * Ends up to `limit` held reservations whose `expiresAt` is before `now`;
   * returns how many. Without `capture` each is released. With `capture`
   * (the recovery rule, docs/ledger-recovery.md): a hold whose call runs in
   * this process (`capture.running`) or of the `pay` capability (its outcome
   * is read from the Lightning node) is released, as before; any other hold
   * is one whose upstream call started and whose settle never landed, and is
   * charged at its quote, under the ids `settleIdsOf` gives, as the answer's
   * receipt named them.
   */
  readonly sweepExpired: (now: Date, limit: number, capture?: SweepCapture) => Effect.Effect<number>
  readonly credit: (input: CreditInput) => Effect.Effect<CreditOutcome>
  /**
   * Refunds a charge, found by id in any account (the operator's refund), in
   * one transaction under the wallet lock: reads the charge and what its
   * earlier refunds gave back, asks `plan`; on success credits the pockets,
   * raises the charge's refunded totals, writes the `refund` transaction
   * (`refundOf` = the charge) and a `refund` audit record. A refusal changes
   * nothing. Concurrent refunds of one charge are serialised by the lock, so
   * together they never give back more than the charge took.
   * The daily, monthly and lifetime spend counters are not lowered.
   */
  readonly refund: (input: RefundInput) => Effect.Effect<RefundOutcome>
  /** What refunds of a charge have given back so far; None when no transaction has that id. */
  readonly refundedOf: (chargeId: string) => Effect.Effect<Option.Option<{ readonly charge: Transaction; readonly refunded: Refunded }>>
  /** The account's transaction of that id; None for another account's or an unknown id. */
  readonly getTransaction: (accountId: AccountId, transactionId: string) => Effect.Effect<Option.Option<Transaction>>
  /** Newest first (createdAt, then id, descending). */
  readonly listTransactions: (
    accountId: AccountId,
    filter: TransactionFilter,
    page: PageRequest
  ) => Effect.Effect<Page<Transaction>>
  readonly listReservations: (accountId: AccountId, page: PageRequest) => Effect.Effect<Page<Reservation>>
  /** The account's charges and refunds in the window, grouped by UTC day, agent, capability and provider, from one snapshot. */
  readonly spendGroups: (accountId: AccountId, query: SpendQuery) => Effect.Effect<SpendGroups>
  /** The agent's spend of `day` and of its month: what its caps count (a few rows, whatever the agent's history). */
  readonly agentSpend: (accountId: AccountId, agentId: AgentId, day: string) => Effect.Effect<AgentSpend>
  /** What the agent's charges add up to, ever (refunds do not lower it): a read over its history, kept off the spend path. */
  readonly agentLifetimeSpend: (accountId: AccountId, agentId: AgentId) => Effect.Effect<bigint>
  /** The agent's calls of the last hour and minute before `now` (what the velocity limits count). */
  readonly recentActivity: (accountId: AccountId, agentId: AgentId, now: Date) => Effect.Effect<RecentActivity>
  readonly getAudit: (accountId: AccountId, auditId: string) => Effect.Effect<Option.Option<AuditRecord>>
  /** Records with seq in (afterSeq, afterSeq + limit], in order. */
  readonly listAudit: (accountId: AccountId, afterSeq: bigint, limit: number) => Effect.Effect<ReadonlyArray<AuditRecord>>
}

// ---- funding ---------------------------------------------------------------

export interface PayInvoiceInput {
  readonly type: InvoiceType
  readonly externalId: string
  readonly paidAt: Date
  /** What the rail says was paid (msat or µUSD); the invoice amount when it does not say. */
  readonly amountPaid: bigint | undefined
  readonly source: string
  /** Ids for the credit, used only when it happens. */
  readonly transactionId: string
  readonly auditId: string
  /** USD value of a sats credit at the current rate (0 when none is known). */
  readonly valueOfMsat: (amountMsat: bigint) => { readonly valueMicroUsd: bigint; readonly rateMicroUsdPerBtc: bigint | null }
  readonly now: Date
}

export interface InvoiceFilter {
  /** Effective status: "pending" excludes, "expired" includes, pending invoices past their expiry. */
  readonly status?: InvoiceStatus | undefined
  readonly now: Date
}

export interface FundingStore {
  readonly createInvoice: (invoice: Invoice) => Effect.Effect<void>
  readonly findInvoice: (
    by: { readonly type: InvoiceType; readonly externalId: string } | { readonly paymentRequest: string }
  ) => Effect.Effect<Option.Option<Invoice>>
  /**
   * One transaction: the invoice is marked paid and the wallet credited
   * (credit key = invoice id), or nothing changes. Already paid: "duplicate".
   * Paid at or after expiry: the invoice is expired, the late payment recorded,
   * nothing credited ("late"). A credit that would take the pocket above its
   * maximum: the invoice is refused, the payment recorded, nothing credited
   * ("refused"). The rule is `decidePayment` (src/funding/payment.ts).
   */
  readonly payInvoice: (input: PayInvoiceInput) => Effect.Effect<PaymentOutcome>
  /** Marks a still-pending invoice expired (the rail says it can no longer be paid). */
  readonly expireInvoice: (type: InvoiceType, externalId: string, at: Date) => Effect.Effect<void>
  /** Writes `expired` on up to `limit` pending invoices past their expiry; returns how many. */
  readonly expireDue: (now: Date, limit: number) => Effect.Effect<number>
  /** Newest first. */
  readonly listInvoices: (accountId: AccountId, filter: InvoiceFilter, page: PageRequest) => Effect.Effect<Page<Invoice>>
  /** Invoices with a payment recorded and not credited (late or refused), newest payment first (for the operator). */
  readonly listLatePayments: (page: PageRequest) => Effect.Effect<Page<Invoice>>
  readonly loadCursor: (name: string) => Effect.Effect<string | null>
  readonly saveCursor: (name: string, value: string) => Effect.Effect<void>
}

export class Store extends Context.Service<Store, StoreShape>()("spendgate/Store") {}
