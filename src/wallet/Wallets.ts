import { Clock, Context, Effect, Layer, Option, Stream } from "effect"
import { requireOwner, requireSelfOrOwner } from "../agents/Access.ts"
import { type ChainBreak, verifyChainSegment } from "../audit/chain.ts"
import type { Principal } from "../domain/Agent.ts"
import { Forbidden, NotFound, ValidationError } from "../domain/errors.ts"
import type { AccountId, AgentId } from "../domain/ids.ts"
import {
  type AuditRecord,
  newAuditId,
  newTransactionId,
  type Pocket,
  type Transaction,
  utcDay,
  type Wallet
} from "../domain/Ledger.ts"
import { Msat, msatToMicroUsdValue } from "../domain/Money.ts"
import { RateSource } from "../ports/RateSource.ts"
import { type CreditOutcome, type Page, type PageRequest, Store, type TransactionFilter } from "../ports/Store.ts"
import {
  DEFAULT_SPEND_DAYS,
  EXPORT_PAGE_ROWS,
  MAX_EXPORT_ROWS,
  MAX_SPEND_DAYS,
  spendWindow,
  type SpendSummary,
  summarizeSpend
} from "./reports.ts"

export interface WalletView extends Wallet {
  /** usd + sats valued at the current rate (rounded down); usd only when no rate is known. */
  readonly spendableMicroUsd: bigint
}

export interface AgentWalletView extends WalletView {
  readonly agentId: AgentId
  readonly dailySpentMicroUsd: bigint
  readonly lifetimeSpentMicroUsd: bigint
}

export interface AuditView {
  readonly record: AuditRecord
  /** Its own hash matches its content, and its link matches the record before it. */
  readonly verified: boolean
}

export interface CreditRequest {
  readonly accountId: AccountId
  readonly agentId?: AgentId | null | undefined
  /** Idempotency key of the credit: the same key credits once, whatever the number of calls. */
  readonly key: string
  readonly pocket: Pocket
  /** In the pocket's unit: micro-dollars for `usd`, millisatoshis for `sats`. */
  readonly amount: bigint
  readonly description: string
}

/** Filters on transaction lists; dates are UTC calendar days, both inclusive. */
export interface TransactionQuery {
  readonly type?: Transaction["type"] | undefined
  readonly agentId?: AgentId | undefined
  readonly startDate?: string | undefined
  readonly endDate?: string | undefined
}

const AUDIT_PAGE = 500

/** An export: how many rows it holds, and the rows, newest first, read page by page as the stream is pulled. */
export interface TransactionExport {
  readonly total: number
  readonly rows: Stream.Stream<Transaction>
}

export class Wallets extends Context.Service<Wallets, {
  /** The wallet of the caller's account (any agent of it). */
  readonly get: (principal: Principal) => Effect.Effect<WalletView>
  /** The account wallet plus one agent's spend; owners only. */
  readonly ofAgent: (principal: Principal, agentId: AgentId) => Effect.Effect<AgentWalletView, Forbidden | NotFound>
  /** Adds money to a pocket, exactly once per key. Internal: funding rails call it. */
  readonly credit: (request: CreditRequest) => Effect.Effect<CreditOutcome>
  /** Newest first; an agent-role key sees only its own transactions. A startDate after endDate is a ValidationError. */
  readonly transactions: (
    principal: Principal,
    query: TransactionQuery,
    page: PageRequest
  ) => Effect.Effect<Page<Transaction>, Forbidden | ValidationError>
  readonly audit: (principal: Principal, auditId: string) => Effect.Effect<AuditView, NotFound | Forbidden>
  /** One transaction of the caller's account; an agent-role key reads only its own. */
  readonly transaction: (principal: Principal, transactionId: string) => Effect.Effect<Transaction, NotFound | Forbidden>
  /**
   * Charges and refunds of the last `days` UTC days (today included; default
   * 30, at most 366) by day, agent, capability and provider. An agent-role
   * key sees only its own spend, with or without `agentId`.
   */
  readonly spendSummary: (
    principal: Principal,
    query: { readonly days?: number | undefined; readonly agentId?: AgentId | undefined }
  ) => Effect.Effect<SpendSummary, Forbidden | ValidationError>
  /**
   * Every transaction the filters match (the same filters and access as
   * `transactions`), newest first. More than MAX_EXPORT_ROWS rows is a
   * ValidationError naming the dates, checked before any row is handed out.
   */
  readonly exportTransactions: (
    principal: Principal,
    query: TransactionQuery
  ) => Effect.Effect<TransactionExport, Forbidden | ValidationError>
  /** Walks the account's whole audit chain; null when it is intact. */
  readonly verifyChain: (accountId: AccountId) => Effect.Effect<ChainBreak | null>
}>()("spendgate/Wallets") {
  static readonly layer = Layer.effect(
    Wallets,
    Effect.gen(function*() {
      const store = yield* Store
      const rates = yield* RateSource
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

      const view = (wallet: Wallet) =>
        Effect.map(rates.current, (rate): WalletView => ({
          ...wallet,
          spendableMicroUsd: wallet.usdMicroUsd +
            (Option.isSome(rate) ? msatToMicroUsdValue(wallet.satsMsat, rate.value.rate) : 0n)
        }))

      const get = Effect.fn("Wallets.get")(function*(principal: Principal) {
        return yield* view(yield* store.getWallet(principal.agent.accountId))
      })

      const ofAgent = Effect.fn("Wallets.ofAgent")(function*(principal: Principal, agentId: AgentId) {
        const found = yield* store.getAgent(principal.agent.accountId, agentId)
        if (Option.isNone(found)) return yield* new NotFound({ resource: "Agent" })
        yield* requireOwner(principal, "read the wallet of an agent")
        const wallet = yield* view(yield* store.getWallet(principal.agent.accountId))
        const spend = yield* store.agentSpend(principal.agent.accountId, agentId, utcDay(yield* now))
        const lifetimeSpentMicroUsd = yield* store.agentLifetimeSpend(principal.agent.accountId, agentId)
        return { ...wallet, agentId, ...spend, lifetimeSpentMicroUsd }
      })

      const credit = Effect.fn("Wallets.credit")(function*(request: CreditRequest) {
        const rate = yield* rates.current
        const valueMicroUsd = request.pocket === "usd"
          ? request.amount
          : Option.isSome(rate) && request.amount > 0n
          ? msatToMicroUsdValue(Msat.make(request.amount), rate.value.rate)
          : 0n
        return yield* store.credit({
          accountId: request.accountId,
          agentId: request.agentId ?? null,
          creditKey: request.key,
          pocket: request.pocket,
          amount: request.amount,
          valueMicroUsd,
          rateMicroUsdPerBtc: request.pocket === "sats" && Option.isSome(rate) ? rate.value.rate.microUsdPerBtc : null,
          description: request.description,
          transactionId: newTransactionId(),
          auditId: newAuditId(),
          now: yield* now
        })
      })

      const transactionFilter = Effect.fn("Wallets.transactionFilter")(function*(
        principal: Principal,
        query: TransactionQuery
      ) {
        if (query.startDate !== undefined && query.endDate !== undefined && query.startDate > query.endDate) {
          return yield* new ValidationError({
            message: "startDate must not be after endDate",
            issues: [{ path: "startDate", message: "must not be after endDate" }]
          })
        }
        yield* requireSelfOrOwner(principal, query.agentId ?? principal.agent.id, "list the transactions of")
        // An agent lists only its own rows, with or without the filter.
        const agentId = principal.agent.role === "owner" ? query.agentId : principal.agent.id
        const filter: TransactionFilter = {
          type: query.type,
          agentId,
          from: query.startDate === undefined ? undefined : new Date(`${query.startDate}T00:00:00.000Z`),
          until: query.endDate === undefined
            ? undefined
            : new Date(new Date(`${query.endDate}T00:00:00.000Z`).getTime() + 86_400_000)
        }
        return filter
      })

      const transactions = Effect.fn("Wallets.transactions")(function*(
        principal: Principal,
        query: TransactionQuery,
        page: PageRequest
      ) {
        const filter = yield* transactionFilter(principal, query)
        return yield* store.listTransactions(principal.agent.accountId, filter, page)
      })

      const exportTransactions = Effect.fn("Wallets.exportTransactions")(function*(
        principal: Principal,
        query: TransactionQuery
      ) {
        const filter = yield* transactionFilter(principal, query)
        const accountId = principal.agent.accountId
        const first = yield* store.listTransactions(accountId, filter, { limit: EXPORT_PAGE_ROWS, offset: 0 })
        if (first.total > MAX_EXPORT_ROWS) {
          const message = `The export would hold ${first.total} transactions, more than the ${MAX_EXPORT_ROWS} one export may hold; narrow startDate and endDate`
          return yield* new ValidationError({ message, issues: [{ path: "startDate", message }] })
        }
        // Each next page starts after the last row read (keyset), so rows written meanwhile cannot shift it.
        type Step = { readonly items: ReadonlyArray<Transaction>; readonly read: number }
        const next = (step: Step): Effect.Effect<readonly [ReadonlyArray<Transaction>, Option.Option<Step>]> => {
          const last = step.items[step.items.length - 1]
          if (last === undefined || step.items.length < EXPORT_PAGE_ROWS || step.read >= first.total) {
            return Effect.succeed([step.items, Option.none()] as const)
          }
          return Effect.map(
            store.listTransactions(accountId, { ...filter, before: { createdAt: last.createdAt, id: last.id } }, {
              limit: Math.min(EXPORT_PAGE_ROWS, MAX_EXPORT_ROWS - step.read),
              offset: 0
            }),
            (page) => [step.items, Option.some({ items: page.items, read: step.read + page.items.length })] as const
          )
        }
        return {
          total: first.total,
          rows: Stream.paginate({ items: first.items, read: first.items.length } as Step, next)
        }
      })

      const spendSummary = Effect.fn("Wallets.spendSummary")(function*(
        principal: Principal,
        query: { readonly days?: number | undefined; readonly agentId?: AgentId | undefined }
      ) {
        const days = query.days ?? DEFAULT_SPEND_DAYS
        if (!Number.isInteger(days) || days < 1 || days > MAX_SPEND_DAYS) {
          const message = `days must be a whole number from 1 to ${MAX_SPEND_DAYS}`
          return yield* new ValidationError({ message, issues: [{ path: "days", message }] })
        }
        yield* requireSelfOrOwner(principal, query.agentId ?? principal.agent.id, "read the spend of")
        const agentId = principal.agent.role === "owner" ? query.agentId : principal.agent.id
        const accountId = principal.agent.accountId
        const window = spendWindow(yield* Clock.currentTimeMillis, days)
        const groups = yield* store.spendGroups(accountId, { ...window, agentId })
        // Every agent of the summary named in one read, however many there are.
        const names: ReadonlyMap<string, string> = yield* store.agentNames(
          accountId,
          groups.byAgent.flatMap((row) => row.key === null ? [] : [row.key as AgentId])
        )
        return summarizeSpend({ window, days, agentId: agentId ?? null, groups, names })
      })

      const audit = Effect.fn("Wallets.audit")(function*(principal: Principal, auditId: string) {
        const found = yield* store.getAudit(principal.agent.accountId, auditId)
        if (Option.isNone(found)) return yield* new NotFound({ resource: "Audit record" })
        const record = found.value
        yield* requireSelfOrOwner(principal, record.agentId, "read the audit records of")
        const previous = record.seq === 1n
          ? null
          : (yield* store.listAudit(record.accountId, record.seq - 2n, 1))[0] ?? null
        const broken = yield* verifyChainSegment(previous, [record])
        return { record, verified: broken === null && (record.seq === 1n || previous !== null) }
      })

      const transaction = Effect.fn("Wallets.transaction")(function*(principal: Principal, transactionId: string) {
        const found = yield* store.getTransaction(principal.agent.accountId, transactionId)
        if (Option.isNone(found)) return yield* new NotFound({ resource: "Transaction" })
        yield* requireSelfOrOwner(principal, found.value.agentId, "read the transactions of")
        return found.value
      })

      const verifyChain = Effect.fn("Wallets.verifyChain")(function*(accountId: AccountId) {
        let previous: AuditRecord | null = null
        for (;;) {
          const batch: ReadonlyArray<AuditRecord> = yield* store.listAudit(accountId, previous?.seq ?? 0n, AUDIT_PAGE)
          if (batch.length === 0) return null
          const broken = yield* verifyChainSegment(previous, batch)
          if (broken !== null) return broken
          previous = batch[batch.length - 1]!
          if (batch.length < AUDIT_PAGE) return null
        }
      })

      return Wallets.of({ get, ofAgent, credit, transactions, transaction, audit, verifyChain, spendSummary, exportTransactions })
    })
  )
}
