import * as MemoryL402Store from "./MemoryL402Store.ts"
import type { L402Store } from "../../src/ports/L402Store.ts"
import { Context, Effect, Layer, Option, Result, Semaphore } from "effect"
import { GENESIS_HASH, sealAuditRecord, type UnhashedAuditRecord } from "../../src/audit/chain.ts"
import type { Agent, Policy } from "../../src/domain/Agent.ts"
import type { AccountId, AgentId } from "../../src/domain/ids.ts"
import type { AuditRecord, Reservation, Transaction, Wallet } from "../../src/domain/Ledger.ts"
import { newAuditId, utcDay } from "../../src/domain/Ledger.ts"
import {
  creditEntries,
  heldReservation,
  lateSettleEntries,
  refundEntries,
  captureSettleInput,
  capturesOnExpiry,
  settleQueuedHere,
  releaseAudit,
  reserveAudit,
  settleEntries,
  unpaidEntries
} from "../../src/wallet/entries.ts"
import { NOTHING_REFUNDED, type Refunded } from "../../src/wallet/refund.ts"
import { AdminStore } from "../../src/ports/AdminStore.ts"
import type { RegistryStore } from "../../src/ports/RegistryStore.ts"
import * as MemoryRegistryStore from "./MemoryRegistryStore.ts"
import type { IdempotencyStore } from "../../src/ports/IdempotencyStore.ts"
import { effectiveStatus, type Invoice, type InvoiceType } from "../../src/domain/Invoice.ts"
import { decidePayment } from "../../src/funding/payment.ts"
import { isLiveOwner } from "../../src/agents/Access.ts"
import { planAgentChange } from "../../src/agents/owners.ts"
import { creditFits, MicroUsd, Msat, pocketMaximum } from "../../src/domain/Money.ts"
import { refusalKillsAgent, usesRecentActivity } from "../../src/wallet/decide.ts"
import type { StoredQuote } from "../../src/quotes/Quote.ts"
import { reservationSpend } from "../../src/wallet/entries.ts"
import {
  type AgentWithPolicy,
  type RecentActivity,
  type CreditInput,
  type FundingStore,
  type InvoiceFilter,
  type LedgerStore,
  type NewAgent,
  type Page,
  Store,
  type StoreShape
} from "../../src/ports/Store.ts"
import * as MemoryIdempotencyStore from "./MemoryIdempotencyStore.ts"
import { makeTimeline, type Timeline } from "./timeline.ts"
import { makeMemoryWebhooks } from "./MemoryWebhooks.ts"
import { reserveEvents } from "../../src/webhooks/spendEvents.ts"
import { agentChangeEvents, agentCreated, chargeRefunded, invoiceExpired, invoiceLatePayment, invoicePaid, type OutboxEvent } from "../../src/webhooks/events.ts"

/**
 * In-memory store for embedding and fast tests. Every method runs
 * synchronously inside one `Effect.sync`, so each is atomic with respect to
 * every other fiber, exactly as the SQL store's transactions are. Nothing
 * survives the process.
 */

interface AgentEntry {
  agent: Agent
  policy: Policy
  keyHash: string
  /** The key a rotation kept valid until `previousExpiresAt`. */
  previous: { readonly keyHash: string; readonly expiresAt: Date } | null
}

const byNewest = (a: Agent, b: Agent) =>
  b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0)

export const makeMemoryStore = (): StoreShape & { readonly admin: AdminStore["Service"] } => {
  const accounts = new Map<AccountId, { readonly createdAt: Date }>()
  const wallets = new Map<AccountId, Wallet>()
  const agents = new Map<AgentId, AgentEntry>()
  const agentByKeyHash = new Map<string, AgentId>()
  const { emit, lowBalanceThreshold, ...webhooks } = makeMemoryWebhooks()

  const insertAgent = (input: NewAgent) => {
    if (agents.has(input.agent.id) || agentByKeyHash.has(input.keyHash)) {
      throw new Error("duplicate agent id or key hash")
    }
    if (!accounts.has(input.agent.accountId)) throw new Error("unknown account")
    agents.set(input.agent.id, { agent: input.agent, policy: input.policy, keyHash: input.keyHash, previous: null })
    agentByKeyHash.set(input.keyHash, input.agent.id)
  }

  const entryIn = (accountId: AccountId, agentId: AgentId): AgentEntry | undefined => {
    const entry = agents.get(agentId)
    return entry !== undefined && entry.agent.accountId === accountId ? entry : undefined
  }

  const ledger = makeMemoryLedger({
    wallets,
    agentEntry: (accountId, agentId) => {
      const entry = entryIn(accountId, agentId)
      return entry === undefined ? undefined : { agent: entry.agent, policy: entry.policy }
    },
    killForVelocity: (agentId, at) => {
      const entry = agents.get(agentId)
      if (entry !== undefined && !entry.agent.killed) {
        const before = entry.agent
        entry.agent = { ...entry.agent, killed: true, killReason: "velocity" }
        emit(agentChangeEvents(before, entry.agent, at))
      }
    },
    emit,
    lowBalanceThreshold
  })

  const { allTransactions, allAudit, ...ledgerStore } = ledger
  const inRange = (at: Date, from: Date | undefined, until: Date | undefined) =>
    (from === undefined || at.getTime() >= from.getTime()) && (until === undefined || at.getTime() < until.getTime())
  const admin: AdminStore["Service"] = {
    stats: ({ from, until }) =>
      Effect.sync(() => {
        const all = [...agents.values()].map((e) => e.agent)
        const spend = new Map<string, { day: string; capability: string; provider: string; calls: number; amountMicroUsd: bigint }>()
        const funding = new Map<string, { day: string; pocket: "usd" | "sats"; credits: number; usdMicroUsd: bigint; satsMsat: bigint }>()
        for (const t of allTransactions()) {
          if (!inRange(t.createdAt, from, until)) continue
          const day = utcDay(t.createdAt)
          if (t.type === "charge") {
            const key = `${day}|${t.capability}|${t.provider}`
            const row = spend.get(key) ?? { day, capability: t.capability ?? "", provider: t.provider ?? "", calls: 0, amountMicroUsd: 0n }
            spend.set(key, { ...row, calls: row.calls + 1, amountMicroUsd: row.amountMicroUsd + t.amountMicroUsd })
          } else if (t.type === "credit") {
            const pocket = t.satsMsat > 0n ? "sats" as const : "usd" as const
            const key = `${day}|${pocket}`
            const row = funding.get(key) ?? { day, pocket, credits: 0, usdMicroUsd: 0n, satsMsat: 0n }
            funding.set(key, { ...row, credits: row.credits + 1, usdMicroUsd: row.usdMicroUsd + t.usdMicroUsd, satsMsat: row.satsMsat + t.satsMsat })
          }
        }
        const byKey = <A extends { day: string }>(a: A, b: A) => (a.day < b.day ? 1 : a.day > b.day ? -1 : 0)
        return {
          accounts: accounts.size,
          agents: {
            total: all.length,
            killed: all.filter((a) => a.killed).length,
            owners: all.filter((a) => a.role === "owner").length
          },
          balances: {
            usdMicroUsd: [...wallets.values()].reduce((sum, w) => sum + w.usdMicroUsd, 0n),
            satsMsat: [...wallets.values()].reduce((sum, w) => sum + w.satsMsat, 0n)
          },
          spend: [...spend.values()].sort(byKey),
          funding: [...funding.values()].sort(byKey)
        }
      }),
    agents: (filter, request) =>
      Effect.sync(() =>
        page(
          [...agents.values()].map((e) => e.agent).filter((a) =>
            (filter.accountId === undefined || a.accountId === filter.accountId) &&
            (filter.role === undefined || a.role === filter.role) &&
            (filter.killed === undefined || a.killed === filter.killed)
          ).sort(byNewest),
          request
        )
      ),
    transactions: (filter, request) =>
      Effect.sync(() =>
        page(
          allTransactions().filter((t) =>
            (filter.accountId === undefined || t.accountId === filter.accountId) &&
            (filter.agentId === undefined || t.agentId === filter.agentId) &&
            (filter.type === undefined || t.type === filter.type) &&
            inRange(t.createdAt, filter.from, filter.until)
          ).sort(byNewestRecord),
          request
        )
      ),
    auditLogs: (filter, request) =>
      Effect.sync(() =>
        page(
          allAudit().filter((r) =>
            (filter.accountId === undefined || r.accountId === filter.accountId) &&
            (filter.kind === undefined || r.kind === filter.kind) &&
            inRange(r.createdAt, filter.from, filter.until)
          ).sort(byNewestRecord),
          request
        )
      )
  }

  return {
    ...ledgerStore,
    ...webhooks,
    admin,
    ping: Effect.void,
    createAccount: ({ accountId, createdAt, owner }) =>
      Effect.sync(() => {
        if (accounts.has(accountId)) throw new Error("duplicate account id")
        accounts.set(accountId, { createdAt })
        try {
          insertAgent(owner)
        } catch (error) {
          accounts.delete(accountId)
          throw error
        }
        wallets.set(accountId, { accountId, usdMicroUsd: MicroUsd.make(0n), satsMsat: Msat.make(0n) })
        emit([agentCreated(owner.agent)])
      }),
    createAgent: (input) =>
      Effect.sync(() => {
        insertAgent(input)
        emit([agentCreated(input.agent)])
      }),
    findAgentByKeyHash: (keyHash, now) =>
      Effect.sync(() => {
        const id = agentByKeyHash.get(keyHash)
        const entry = id === undefined ? undefined : agents.get(id)
        if (entry === undefined || entry.agent.deletedAt !== null) return Option.none()
        if (entry.keyHash === keyHash) return Option.some(entry.agent)
        const previous = entry.previous
        return previous !== null && previous.keyHash === keyHash && previous.expiresAt.getTime() > now.getTime()
          ? Option.some(entry.agent)
          : Option.none()
      }),
    rotateKey: (accountId, agentId, rotation) =>
      Effect.sync(() => {
        const entry = entryIn(accountId, agentId)
        if (entry === undefined || entry.agent.deletedAt !== null) return Option.none()
        if (agentByKeyHash.has(rotation.keyHash)) throw new Error("duplicate key hash")
        if (entry.previous !== null) agentByKeyHash.delete(entry.previous.keyHash)
        if (rotation.previousExpiresAt === null) {
          agentByKeyHash.delete(entry.keyHash)
          entry.previous = null
        } else {
          entry.previous = { keyHash: entry.keyHash, expiresAt: rotation.previousExpiresAt }
        }
        entry.keyHash = rotation.keyHash
        agentByKeyHash.set(rotation.keyHash, agentId)
        return Option.some(entry.agent)
      }),
    getAgent: (accountId, agentId) =>
      Effect.sync(() => {
        const entry = entryIn(accountId, agentId)
        return entry === undefined
          ? Option.none()
          : Option.some<AgentWithPolicy>({ agent: entry.agent, policy: entry.policy })
      }),
    agentNames: (accountId, agentIds) =>
      Effect.sync(() => {
        const names = new Map<AgentId, string>()
        for (const agentId of agentIds) {
          const entry = entryIn(accountId, agentId)
          if (entry !== undefined) names.set(agentId, entry.agent.name)
        }
        return names
      }),
    listAgents: (accountId, page) =>
      Effect.sync((): Page<Agent> => {
        const all = [...agents.values()].map((e) => e.agent)
          .filter((a) => a.accountId === accountId && a.deletedAt === null)
          .sort(byNewest)
        return { items: all.slice(page.offset, page.offset + page.limit), total: all.length }
      }),
    updateAgent: (accountId, agentId, changes) =>
      Effect.sync(() => {
        const entry = entryIn(accountId, agentId)
        if (entry === undefined) return { _tag: "NotFound" as const }
        const otherLiveOwner = [...agents.values()].some((e) =>
          e.agent.accountId === accountId && e.agent.id !== agentId && isLiveOwner(e.agent)
        )
        const plan = planAgentChange({ agent: entry.agent, otherLiveOwner }, changes)
        if (plan._tag === "LastLiveOwner") return plan
        if (plan._tag === "Deleted") return { _tag: "NotFound" as const }
        const before = entry.agent
        entry.agent = plan.agent
        emit(agentChangeEvents(before, entry.agent, changes.at ?? new Date()))
        return { _tag: "Updated" as const, agent: entry.agent }
      }),
    touchAgent: (agentId, at, staleBefore) =>
      Effect.sync(() => {
        const entry = agents.get(agentId)
        if (entry === undefined) return
        const last = entry.agent.lastActiveAt
        if (last === null || last.getTime() < staleBefore.getTime()) entry.agent = { ...entry.agent, lastActiveAt: at }
      }),
    updatePolicy: (accountId, agentId, patch) =>
      Effect.sync(() => {
        const entry = entryIn(accountId, agentId)
        if (entry === undefined || entry.agent.deletedAt !== null) return Option.none()
        entry.policy = {
          maxPerCallMicroUsd: patch.maxPerCallMicroUsd !== undefined
            ? patch.maxPerCallMicroUsd
            : entry.policy.maxPerCallMicroUsd,
          maxPerDayMicroUsd: patch.maxPerDayMicroUsd !== undefined
            ? patch.maxPerDayMicroUsd
            : entry.policy.maxPerDayMicroUsd,
          maxPerMonthMicroUsd: patch.maxPerMonthMicroUsd !== undefined
            ? patch.maxPerMonthMicroUsd
            : entry.policy.maxPerMonthMicroUsd,
          maxPerHourMicroUsd: patch.maxPerHourMicroUsd !== undefined
            ? patch.maxPerHourMicroUsd
            : entry.policy.maxPerHourMicroUsd,
          maxCallsPerMinute: patch.maxCallsPerMinute !== undefined
            ? patch.maxCallsPerMinute
            : entry.policy.maxCallsPerMinute,
          autoKill: patch.autoKill ?? entry.policy.autoKill,
          allowedCapabilities: patch.allowedCapabilities ?? entry.policy.allowedCapabilities
        }
        return Option.some(entry.policy)
      })
  }
}

const byNewestRecord = (a: { createdAt: Date; id: string }, b: { createdAt: Date; id: string }) =>
  b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0)

const page = <A>(items: ReadonlyArray<A>, request: { limit: number; offset: number }): Page<A> => ({
  items: items.slice(request.offset, request.offset + request.limit),
  total: items.length
})

/** The ledger half of the memory store: wallets, holds, transactions and the audit chain. */
interface LedgerInternals {
  readonly allTransactions: () => ReadonlyArray<Transaction>
  readonly allAudit: () => ReadonlyArray<AuditRecord>
}

const makeMemoryLedger = (shared: {
  readonly wallets: Map<AccountId, Wallet>
  readonly agentEntry: (accountId: AccountId, agentId: AgentId) => AgentWithPolicy | undefined
  readonly killForVelocity: (agentId: AgentId, at: Date) => void
  /** Writes events to the outbox in the current step. */
  readonly emit: (events: ReadonlyArray<OutboxEvent>) => void
  readonly lowBalanceThreshold: (accountId: AccountId) => bigint | null
}): LedgerStore & FundingStore & LedgerInternals => {
  const { wallets } = shared
  const lock = Semaphore.makeUnsafe(1)
  const reservations = new Map<string, Reservation>()
  /** The held reservations' ids, in the order they were made (the sweep's and the credit bound's walk). */
  const heldIds = new Set<string>()
  /** Each agent's reservations by time, with their spend summed: the velocity window (./timeline.ts). */
  const timelines = new Map<AgentId, Timeline>()
  const transactions: Array<Transaction> = []
  const audit = new Map<AccountId, Array<AuditRecord>>()
  const daily = new Map<string, bigint>()
  /** The sum of each agent's day rows of a calendar month, by `agentId|YYYY-MM`, kept with them. */
  const monthly = new Map<string, bigint>()
  const creditKeys = new Map<string, Transaction>()
  /** Each refunded charge's refunded totals, by charge id. */
  const refundedByCharge = new Map<string, Refunded>()
  const quotes = new Map<string, StoredQuote>()

  const dayKey = (agentId: AgentId, day: string) => `${agentId}|${day}`
  const monthKey = (agentId: AgentId, day: string) => `${agentId}|${day.slice(0, 7)}`
  /** The month's spend: the sum of its days' rows (`day` is YYYY-MM-DD). */
  const monthlySpent = (agentId: AgentId, day: string) => monthly.get(monthKey(agentId, day)) ?? 0n
  /** A new reservation: stored, held, in its agent's timeline. */
  const addReservation = (reservation: Reservation) => {
    reservations.set(reservation.id, reservation)
    if (reservation.status === "held") heldIds.add(reservation.id)
    let timeline = timelines.get(reservation.agentId)
    if (timeline === undefined) timelines.set(reservation.agentId, timeline = makeTimeline())
    timeline.add(
      { at: reservation.createdAt.getTime(), id: reservation.id, createdAt: reservation.createdAt },
      reservationSpend(reservation)
    )
  }
  /** A reservation settled or released: stored, and its spend updated in its agent's timeline. */
  const replaceReservation = (reservation: Reservation) => {
    reservations.set(reservation.id, reservation)
    if (reservation.status !== "held") heldIds.delete(reservation.id)
    timelines.get(reservation.agentId)?.update(reservation.id, reservationSpend(reservation))
  }
  const NO_RECENT_ACTIVITY: RecentActivity = { spentLastHourMicroUsd: 0n, callsLastMinute: 0, oldestCallLastMinuteAt: null }
  /** The agent's reservations of the last hour and minute before `now`, and any stamped after it. */
  const recentOf = (agentId: AgentId, now: Date): RecentActivity =>
    timelines.get(agentId)?.recent(now) ?? NO_RECENT_ACTIVITY
  const addDaily = (agentId: AgentId, day: string, delta: bigint) => {
    const key = dayKey(agentId, day)
    daily.set(key, (daily.get(key) ?? 0n) + delta)
    const month = monthKey(agentId, day)
    monthly.set(month, (monthly.get(month) ?? 0n) + delta)
  }
  const walletOf = (accountId: AccountId): Wallet => {
    const wallet = wallets.get(accountId)
    if (wallet === undefined) throw new Error(`no wallet for ${accountId}`)
    return wallet
  }
  /** The wallet with each pocket moved by a signed amount; undefined when a pocket would go negative. */
  const movedBy = (wallet: Wallet, usdDeltaMicroUsd: bigint, satsDeltaMsat: bigint): Wallet | undefined => {
    const usd = wallet.usdMicroUsd + usdDeltaMicroUsd
    const sats = wallet.satsMsat + satsDeltaMsat
    return usd < 0n || sats < 0n ? undefined : { ...wallet, usdMicroUsd: MicroUsd.make(usd), satsMsat: Msat.make(sats) }
  }
  /** The wallet after a credit, release or refund (never below zero). */
  const creditedBy = (wallet: Wallet, usdMicroUsd: bigint, satsMsat: bigint): Wallet => {
    const next = movedBy(wallet, usdMicroUsd, satsMsat)
    if (next === undefined) throw new Error("a wallet pocket would go negative")
    return next
  }
  const setWallet = (wallet: Wallet) => {
    if (wallet.usdMicroUsd < 0n || wallet.satsMsat < 0n) throw new Error("a wallet pocket would go negative")
    wallets.set(wallet.accountId, wallet)
  }
  const appendAudit = (record: Omit<UnhashedAuditRecord, "seq" | "prevHash">) =>
    Effect.gen(function*() {
      const chain = audit.get(record.accountId) ?? []
      const last = chain[chain.length - 1]
      const sealed = yield* sealAuditRecord({
        ...record,
        seq: last === undefined ? 1n : last.seq + 1n,
        prevHash: last === undefined ? GENESIS_HASH : last.hash
      })
      chain.push(sealed)
      audit.set(record.accountId, chain)
      return sealed
    })

  const releaseHeld = (reservation: Reservation, auditId: string, reason: string, now: Date) =>
    Effect.gen(function*() {
      const wallet = walletOf(reservation.accountId)
      const record = yield* appendAudit(releaseAudit(reservation, auditId, reason, now))
      setWallet(creditedBy(wallet, reservation.heldUsdMicroUsd, reservation.heldSatsMsat))
      replaceReservation({ ...reservation, status: "released" })
      addDaily(reservation.agentId, reservation.day, -reservation.quotedMicroUsd)
      return record
    })

  /**
   * Each pocket with what its held reservations will give back at most: the
   * figure a credit is bounded by, so that no later release or refund can take
   * the pocket above its maximum.
   */
  const boundedBalances = (accountId: AccountId) => {
    const wallet = walletOf(accountId)
    let usdMicroUsd: bigint = wallet.usdMicroUsd
    let satsMsat: bigint = wallet.satsMsat
    for (const id of heldIds) {
      const reservation = reservations.get(id)!
      if (reservation.accountId !== accountId) continue
      usdMicroUsd += reservation.heldUsdMicroUsd
      satsMsat += reservation.heldSatsMsat
    }
    return { usdMicroUsd, satsMsat }
  }

  const creditUnlocked = (input: CreditInput) =>
    Effect.gen(function*() {
        const key = `${input.accountId}|${input.creditKey}`
        const existing = creditKeys.get(key)
        if (existing !== undefined) return { _tag: "Duplicate", transaction: existing } as const
        const bounded = boundedBalances(input.accountId)
        const balance = input.pocket === "usd" ? bounded.usdMicroUsd : bounded.satsMsat
        if (input.amount <= 0n || !creditFits(input.pocket, balance, input.amount)) {
          return { _tag: "Refused", maximum: pocketMaximum(input.pocket) } as const
        }
        const { transaction, audit: draft, usdMicroUsd: usd, satsMsat: sats } = creditEntries(input)
        yield* appendAudit(draft)
        const wallet = walletOf(input.accountId)
        const next = creditedBy(wallet, usd, sats)
        setWallet(next)
        transactions.push(transaction)
        creditKeys.set(key, transaction)
        return { _tag: "Credited", transaction, wallet: next } as const
      })

  const invoices = new Map<string, Invoice>()
  const cursors = new Map<string, string>()
  const externalKey = (type: InvoiceType, externalId: string) => `${type}|${externalId}`
  const invoiceByExternal = new Map<string, string>()
  const matchesStatus = (invoice: Invoice, filter: InvoiceFilter) =>
    filter.status === undefined || effectiveStatus(invoice, filter.now) === filter.status

  const funding: FundingStore = {
    createInvoice: (invoice) =>
      Effect.sync(() => {
        const key = externalKey(invoice.type, invoice.externalId)
        if (invoices.has(invoice.id) || invoiceByExternal.has(key)) throw new Error("duplicate invoice")
        invoices.set(invoice.id, invoice)
        invoiceByExternal.set(key, invoice.id)
      }),
    findInvoice: (by) =>
      Effect.sync(() => {
        if ("paymentRequest" in by) {
          return Option.fromNullishOr([...invoices.values()].find((i) => i.paymentRequest === by.paymentRequest))
        }
        const id = invoiceByExternal.get(externalKey(by.type, by.externalId))
        return Option.fromNullishOr(id === undefined ? undefined : invoices.get(id))
      }),
    payInvoice: (input) =>
      lock.withPermits(1)(Effect.gen(function*() {
        const id = invoiceByExternal.get(externalKey(input.type, input.externalId))
        const invoice = id === undefined ? undefined : invoices.get(id)
        if (invoice === undefined) return "unknown" as const
        const decision = decidePayment(invoice, input, boundedBalances(invoice.accountId))
        if (decision._tag === "Duplicate") return "duplicate" as const
        if (decision._tag === "Late" || decision._tag === "Refused") {
          invoices.set(invoice.id, {
            ...invoice,
            status: decision._tag === "Late" ? "expired" : "refused",
            latePaymentAt: invoice.latePaymentAt ?? input.paidAt,
            latePaymentAmount: invoice.latePaymentAmount ?? decision.amount
          })
          if (invoice.latePaymentAt === null) {
            const status = decision._tag === "Late" ? "expired" : "refused"
            shared.emit([invoiceLatePayment(invoice, status, input.paidAt, decision.amount, input.now)])
          }
          return decision._tag === "Late" ? ("late" as const) : ("refused" as const)
        }
        const credited = yield* creditUnlocked(decision.credit)
        if (credited._tag === "Refused") return yield* Effect.die(new Error("a credit decided to fit was refused"))
        invoices.set(invoice.id, { ...invoice, status: "paid", paidAt: input.paidAt, transactionId: credited.transaction.id })
        if (credited._tag === "Credited") shared.emit([invoicePaid(invoice, input.paidAt, credited.transaction.id, input.now)])
        return credited._tag === "Credited" ? ("credited" as const) : ("duplicate" as const)
      })),
    expireInvoice: (type, externalId, at) =>
      Effect.sync(() => {
        const id = invoiceByExternal.get(externalKey(type, externalId))
        const invoice = id === undefined ? undefined : invoices.get(id)
        if (invoice !== undefined && invoice.status === "pending") {
          invoices.set(invoice.id, { ...invoice, status: "expired" })
          shared.emit([invoiceExpired(invoice, at)])
        }
      }),
    expireDue: (now, limit) =>
      Effect.sync(() => {
        const due = [...invoices.values()]
          .filter((i) => i.status === "pending" && i.expiresAt.getTime() <= now.getTime())
          .slice(0, limit)
        for (const invoice of due) invoices.set(invoice.id, { ...invoice, status: "expired" })
        shared.emit(due.map((invoice) => invoiceExpired(invoice, now)))
        return due.length
      }),
    listInvoices: (accountId, filter, request) =>
      Effect.sync(() =>
        page(
          [...invoices.values()].filter((i) => i.accountId === accountId && matchesStatus(i, filter)).sort(byNewestRecord),
          request
        )
      ),
    listLatePayments: (request) =>
      Effect.sync(() =>
        page(
          [...invoices.values()]
            .filter((i) => i.latePaymentAt !== null)
            .sort((a, b) => b.latePaymentAt!.getTime() - a.latePaymentAt!.getTime() || (a.id < b.id ? 1 : -1)),
          request
        )
      ),
    loadCursor: (name) => Effect.sync(() => cursors.get(name) ?? null),
    saveCursor: (name, value) => Effect.sync(() => void cursors.set(name, value))
  }

  const store: LedgerStore & FundingStore & LedgerInternals = {
    ...funding,
    allTransactions: () => transactions,
    allAudit: () => [...audit.values()].flat(),
    getWallet: (accountId) => Effect.sync(() => walletOf(accountId)),
    reserve: (input) =>
      lock.withPermits(1)(Effect.gen(function*() {
        const entry = shared.agentEntry(input.accountId, input.agentId)
        if (entry === undefined) return yield* Effect.die(new Error("reserve: unknown agent"))
        let claimed: StoredQuote | undefined
        if (input.quote !== undefined) {
          const found = quotes.get(input.quote.quoteId)
          const checked = input.quote.check(found !== undefined && found.accountId === input.accountId ? found : null, input.now)
          if (Result.isFailure(checked)) return Result.fail(checked.failure)
          claimed = checked.success
        }
        const wallet = walletOf(input.accountId)
        const snapshot = {
          agent: entry.agent,
          policy: entry.policy,
          dailySpentMicroUsd: daily.get(dayKey(input.agentId, input.day)) ?? 0n,
          monthlySpentMicroUsd: monthlySpent(input.agentId, input.day),
          // The last hour's reservations only for a velocity limit, as the SQL store reads them.
          recent: usesRecentActivity(entry.policy) ? recentOf(input.agentId, input.now) : NO_RECENT_ACTIVITY,
          now: input.now,
          wallet
        }
        const decision = input.decide(snapshot)
        shared.emit(reserveEvents(input, snapshot, decision, shared.lowBalanceThreshold(input.accountId)))
        if (Result.isFailure(decision)) {
          if (refusalKillsAgent(decision.failure)) shared.killForVelocity(input.agentId, input.now)
          return Result.fail(decision.failure)
        }
        const plan = decision.success
        const reservation = heldReservation(input, plan)
        const next = movedBy(wallet, -plan.fromUsdMicroUsd, -plan.fromSatsMsat)
        if (next === undefined) return yield* Effect.die(new Error("hold larger than the wallet"))
        yield* appendAudit(reserveAudit(input, plan))
        setWallet(next)
        addReservation(reservation)
        addDaily(input.agentId, input.day, input.quotedMicroUsd)
        if (claimed !== undefined) quotes.set(claimed.id, { ...claimed, usedAt: input.now, reservationId: reservation.id })
        return Result.succeed(reservation)
      })),
    settle: (input) =>
      lock.withPermits(1)(Effect.gen(function*() {
        const reservation = reservations.get(input.reservationId)
        if (reservation === undefined || reservation.accountId !== input.accountId) {
          return { _tag: "NotHeld", reservation: null } as const
        }
        if (reservation.status === "released" && reservation.settledMicroUsd === null && input.onlyHeld !== true) {
          // The sweep returned the hold while the call ran: settle late.
          const entry = shared.agentEntry(reservation.accountId, reservation.agentId)
          if (entry === undefined) return yield* Effect.die(new Error("settle: unknown agent"))
          const wallet = walletOf(reservation.accountId)
          const late = input.planLate(reservation, {
            policy: entry.policy,
            dailySpentMicroUsd: daily.get(dayKey(reservation.agentId, reservation.day)) ?? 0n,
            monthlySpentMicroUsd: monthlySpent(reservation.agentId, reservation.day),
            wallet
          })
          if (late._tag === "Unpaid") {
            const unpaid = unpaidEntries(reservation, late, input)
            yield* appendAudit(unpaid.audit)
            replaceReservation(unpaid.reservation)
            return { _tag: "Unpaid", reservation: unpaid.reservation, plan: late } as const
          }
          const { transaction, audit: draft, reservation: settled } = lateSettleEntries(reservation, late, input)
          const next = movedBy(wallet, -late.chargeUsdMicroUsd, -late.chargeSatsMsat)
          if (next === undefined) return yield* Effect.die(new Error("late charge larger than the wallet"))
          yield* appendAudit(draft)
          setWallet(next)
          replaceReservation(settled)
          addDaily(reservation.agentId, reservation.day, late.chargedMicroUsd)
          transactions.push(transaction)
          return { _tag: "Settled", transaction, wallet: next, reservation: settled, late: true } as const
        }
        if (reservation.status !== "held") return { _tag: "NotHeld", reservation } as const
        const plan = input.plan(reservation)
        const wallet = walletOf(reservation.accountId)
        const { transaction, audit: draft, reservation: settled } = settleEntries(reservation, plan, input)
        yield* appendAudit(draft)
        const next = creditedBy(wallet, plan.refundUsdMicroUsd, plan.refundSatsMsat)
        setWallet(next)
        replaceReservation(settled)
        addDaily(reservation.agentId, reservation.day, plan.chargedMicroUsd - reservation.quotedMicroUsd)
        transactions.push(transaction)
        return { _tag: "Settled", transaction, wallet: next, reservation: settled, late: false } as const
      })),
    release: (input) =>
      lock.withPermits(1)(Effect.gen(function*() {
        const reservation = reservations.get(input.reservationId)
        if (reservation === undefined || reservation.accountId !== input.accountId || reservation.status !== "held") {
          return "NotHeld" as const
        }
        yield* releaseHeld(reservation, input.auditId, input.reason, input.now)
        return "Released" as const
      })),
    sweepExpired: (now, limit, capture) =>
      Effect.gen(function*() {
        const expired = yield* lock.withPermits(1)(Effect.sync(() =>
          [...heldIds].map((id) => reservations.get(id)!)
            .filter((r) => r.expiresAt.getTime() < now.getTime())
            .slice(0, limit)
        ))
        let ended = 0
        for (const reservation of expired) {
          if (settleQueuedHere(reservation, capture)) continue
          if (capture !== undefined && capturesOnExpiry(reservation, capture.running)) {
            const settled = yield* store.settle(captureSettleInput(reservation, now))
            if (settled._tag === "Settled") ended++
          } else {
            const released = yield* store.release({
              reservationId: reservation.id,
              accountId: reservation.accountId,
              auditId: newAuditId(),
              reason: "expired",
              now
            })
            if (released === "Released") ended++
          }
        }
        return ended
      }),
    credit: (input) => lock.withPermits(1)(creditUnlocked(input)),
    refund: (input) =>
      lock.withPermits(1)(Effect.gen(function*() {
        const charge = transactions.find((t) => t.id === input.chargeId)
        if (charge === undefined) return { _tag: "NotFound" } as const
        const refunded = refundedByCharge.get(charge.id) ?? NOTHING_REFUNDED
        const decision = input.plan({ charge, refunded, bounded: boundedBalances(charge.accountId) })
        if (Result.isFailure(decision)) return { _tag: "Refused", refusal: decision.failure } as const
        const plan = decision.success
        const { transaction, audit: draft } = refundEntries(charge, plan, input)
        yield* appendAudit(draft)
        const next = creditedBy(walletOf(charge.accountId), plan.usdMicroUsd, plan.satsMsat)
        setWallet(next)
        refundedByCharge.set(charge.id, plan.refundedAfter)
        transactions.push(transaction)
        shared.emit([chargeRefunded(transaction, charge.id, input.now)])
        return { _tag: "Refunded", refund: transaction, charge, refunded: plan.refundedAfter, wallet: next } as const
      })),
    refundedOf: (chargeId) =>
      Effect.sync(() => {
        const charge = transactions.find((t) => t.id === chargeId)
        return charge === undefined
          ? Option.none()
          : Option.some({ charge, refunded: refundedByCharge.get(chargeId) ?? NOTHING_REFUNDED })
      }),
    createQuote: (quote) =>
      Effect.sync(() => {
        if (quotes.has(quote.id)) throw new Error("duplicate quote id")
        quotes.set(quote.id, quote)
      }),
    findQuote: (accountId, quoteId) =>
      Effect.sync(() => {
        const quote = quotes.get(quoteId)
        return Option.fromNullishOr(quote !== undefined && quote.accountId === accountId ? quote : undefined)
      }),
    deleteExpiredQuotes: (before, limit) =>
      Effect.sync(() => {
        let deleted = 0
        for (const quote of [...quotes.values()]) {
          if (deleted >= limit) break
          if (quote.expiresAt.getTime() < before.getTime()) {
            quotes.delete(quote.id)
            deleted++
          }
        }
        return deleted
      }),
    getTransaction: (accountId, transactionId) =>
      Effect.sync(() => Option.fromNullishOr(transactions.find((t) => t.id === transactionId && t.accountId === accountId))),
    listTransactions: (accountId, filter, request) =>
      Effect.sync(() =>
        page(
          transactions.filter((t) =>
            t.accountId === accountId &&
            (filter.type === undefined || t.type === filter.type) &&
            (filter.agentId === undefined || t.agentId === filter.agentId) &&
            (filter.from === undefined || t.createdAt.getTime() >= filter.from.getTime()) &&
            (filter.until === undefined || t.createdAt.getTime() < filter.until.getTime()) &&
            (filter.before === undefined || byNewestRecord(filter.before, t) < 0)
          ).sort(byNewestRecord),
          request
        )
      ),
    listReservations: (accountId, request) =>
      Effect.sync(() =>
        page([...reservations.values()].filter((r) => r.accountId === accountId).sort(byNewestRecord), request)
      ),
    spendGroups: (accountId, query) =>
      Effect.sync(() => {
        const groups = { byDay: new Map(), byAgent: new Map(), byCapability: new Map(), byProvider: new Map() } as const
        type Group = { key: string | null; calls: number; chargedMicroUsd: bigint; refundedMicroUsd: bigint }
        const add = (into: Map<string | null, Group>, key: string | null, t: Transaction) => {
          const group = into.get(key) ?? { key, calls: 0, chargedMicroUsd: 0n, refundedMicroUsd: 0n }
          if (t.type === "charge") {
            group.calls += 1
            group.chargedMicroUsd += t.amountMicroUsd
          } else group.refundedMicroUsd += t.amountMicroUsd
          into.set(key, group)
        }
        for (const t of transactions) {
          if (
            t.accountId !== accountId || t.type === "credit" ||
            t.createdAt.getTime() < query.from.getTime() || t.createdAt.getTime() >= query.until.getTime() ||
            (query.agentId !== undefined && t.agentId !== query.agentId)
          ) continue
          add(groups.byDay, utcDay(t.createdAt), t)
          add(groups.byAgent, t.agentId, t)
          add(groups.byCapability, t.capability, t)
          add(groups.byProvider, t.provider, t)
        }
        return {
          byDay: [...groups.byDay.values()],
          byAgent: [...groups.byAgent.values()],
          byCapability: [...groups.byCapability.values()],
          byProvider: [...groups.byProvider.values()]
        }
      }),
    agentSpend: (accountId, agentId, day) =>
      Effect.sync(() =>
        // Another account's agent spent nothing here, as the SQL store's join finds.
        shared.agentEntry(accountId, agentId) === undefined
          ? { dailySpentMicroUsd: 0n, monthlySpentMicroUsd: 0n }
          : { dailySpentMicroUsd: daily.get(dayKey(agentId, day)) ?? 0n, monthlySpentMicroUsd: monthlySpent(agentId, day) }
      ),
    agentLifetimeSpend: (accountId, agentId) =>
      Effect.sync(() =>
        transactions
          .filter((t) => t.accountId === accountId && t.agentId === agentId && t.type === "charge")
          .reduce((sum, t) => sum + t.amountMicroUsd, 0n)
      ),
    recentActivity: (accountId, agentId, now) =>
      Effect.sync(() =>
        shared.agentEntry(accountId, agentId) === undefined
          ? NO_RECENT_ACTIVITY
          : recentOf(agentId, now)
      ),
    getAudit: (accountId, auditId) =>
      Effect.sync(() => Option.fromNullishOr((audit.get(accountId) ?? []).find((r) => r.id === auditId))),
    listAudit: (accountId, afterSeq, limit) =>
      Effect.sync(() => (audit.get(accountId) ?? []).filter((r) => r.seq > afterSeq).slice(0, limit))
  }
  return store
}

/** The in-memory store together with the in-memory idempotency-key store. */
export const layer: Layer.Layer<Store | AdminStore | IdempotencyStore | RegistryStore | L402Store> = Layer.mergeAll(
  Layer.effectContext(Effect.sync(() => {
    const { admin, ...store } = makeMemoryStore()
    return Context.make(Store, store).pipe(Context.add(AdminStore, admin))
  })),
  MemoryIdempotencyStore.layer,
  MemoryRegistryStore.layer,
  MemoryL402Store.layer
)
