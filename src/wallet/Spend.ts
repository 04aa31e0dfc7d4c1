import { Cause, Clock, Context, Duration, Effect, Exit, Layer, Option, Result, Schedule } from "effect"
import type { Principal } from "../domain/Agent.ts"
import type { Capability } from "../domain/Capability.ts"
import { AgentKilled, type SpendRefusal } from "../domain/errors.ts"
import { newAuditId, newReservationId, newTransactionId, type Reservation, utcDay, type Wallet } from "../domain/Ledger.ts"
import { MicroUsd, Msat, msatToMicroUsdValue, usdToMsatForCharge } from "../domain/Money.ts"
import { RateSource } from "../ports/RateSource.ts"
import { type QuoteClaim, type SettleInput, settleIdsOf, Store } from "../ports/Store.ts"
import type { QuoteRefusal } from "../quotes/Quote.ts"
import * as Metrics from "../observability/Metrics.ts"
import { currentSpans } from "../observability/Tracing.ts"
import { type HoldPlan, planHold, planLateSettle, planSettle, type SettlePlan } from "./decide.ts"

/**
 * The one way money is spent: authorize → quote → reserve (atomic hold) →
 * run the upstream → settle (charge the actual cost, return the rest) or
 * release (return everything on failure, interruption or timeout).
 * Capabilities and the proxy both come through here.
 */

export interface SpendRequest<A, E, R> {
  readonly capability: Capability
  readonly provider: string
  /** Upper bound of the cost, in micro-dollars (decisions §2). */
  readonly quotedMicroUsd: bigint
  readonly description: string
  /** The upstream call, run with no lock held. It reports the actual cost, clamped to the quote. */
  readonly run: Effect.Effect<{ readonly value: A; readonly actualMicroUsd: bigint }, E, R>
  /**
   * A binding quote the call uses (src/quotes/Quote.ts): checked and used up
   * atomically with the hold; a refused hold leaves it unused.
   */
  readonly quote?: QuoteClaim | undefined
  /** Told the reservation's id once the hold is taken, before `run` starts (L402 records it with its payment). */
  readonly onHeld?: ((reservationId: string) => void) | undefined
  /**
   * A failure of `run` after which the hold must stay (money may have left
   * on a rail whose outcome is not known yet): nothing is released; whoever
   * learns the outcome settles or releases it (`resolveHeld`), or the
   * recovery sweep returns it after its expiry.
   */
  readonly keepHold?: ((cause: Cause.Cause<unknown>) => boolean) | undefined
}

/** How a hold left by `keepHold` ends: charged what was spent, or released. */
export type HeldOutcome =
  | { readonly _tag: "Charge"; readonly actualMicroUsd: bigint; readonly description: string }
  | { readonly _tag: "Release"; readonly reason: string }

export interface SpendReceipt {
  readonly quotedMicroUsd: bigint
  readonly chargedMicroUsd: bigint
  /** The charged price in msat at the quote's rate snapshot (null when no rate was known). */
  readonly chargedMsat: bigint | null
  /** What each pocket actually lost. */
  readonly debitedUsdMicroUsd: bigint
  readonly debitedSatsMsat: bigint
  /** Spendable value of the wallet after the charge: usd + sats at the snapshot rate, rounded down. */
  readonly balanceAfterMicroUsd: bigint
  readonly auditId: string
  readonly transactionId: string
  readonly reservationId: string
  readonly provider: string
  /**
   * The upstream call's time: how long `run` took, from the request being
   * sent until the last byte of the answer was in (a stream: until it ended).
   * The hold before and the settlement after are not part of it.
   */
  readonly latencyMs: number
}

export interface SpendOptions {
  /** How long a hold may stay unsettled before the recovery sweep returns it. */
  readonly holdTtlMs: number
  /** How often the recovery sweep runs (it also runs once at start). */
  readonly sweepEveryMs: number
  /** Most reservations one sweep pass releases. */
  readonly sweepBatch: number
}

/**
 * A settle is taken off the caller's path only while its hold has at least
 * this long to live, so that it lands long before the recovery sweep could
 * look at the hold.
 */
const DEFER_MARGIN_MS = 60_000

/**
 * The receipt of a settle the store has not written yet: the charge as
 * `planSettle` splits it, the wallet as the hold left it plus what the
 * settle gives back.
 */
const receiptOf = (
  quotedMicroUsd: bigint,
  provider: string,
  rate: { readonly microUsdPerBtc: bigint } | null,
  reservation: Reservation,
  plan: SettlePlan,
  walletAfterHold: Wallet,
  latencyMs: number
): SpendReceipt => {
  const usd = walletAfterHold.usdMicroUsd + plan.refundUsdMicroUsd
  const sats = walletAfterHold.satsMsat + plan.refundSatsMsat
  return {
    quotedMicroUsd,
    chargedMicroUsd: plan.chargedMicroUsd,
    chargedMsat: rate === null ? null : usdToMsatForCharge(plan.chargedMicroUsd, rate),
    debitedUsdMicroUsd: plan.chargeUsdMicroUsd,
    debitedSatsMsat: plan.chargeSatsMsat,
    balanceAfterMicroUsd: usd + (rate === null ? 0n : msatToMicroUsdValue(Msat.make(sats), rate)),
    ...settleIdsOf(reservation.id),
    reservationId: reservation.id,
    provider,
    latencyMs
  }
}

/** How long an expired quote is kept (so a late call still hears QUOTE_EXPIRED, not 404). */
const QUOTE_RETENTION_MS = 24 * 60 * 60_000

export const defaultSpendOptions: SpendOptions = {
  holdTtlMs: 15 * 60_000,
  sweepEveryMs: 60_000,
  sweepBatch: 500
}

/** What `spend` would decide for a quote now, with nothing held or charged. */
export interface SpendEstimate {
  readonly decision: Result.Result<HoldPlan, SpendRefusal>
  readonly dailySpentMicroUsd: bigint
  /** The daily cap less the day's spend (never below zero); null when the policy has no daily cap. */
  readonly remainingTodayMicroUsd: bigint | null
  /** Held plus settled spend of the current calendar month (UTC). */
  readonly monthlySpentMicroUsd: bigint
  /** The monthly cap less the month's spend (never below zero); null when the policy has no monthly cap. */
  readonly remainingThisMonthMicroUsd: bigint | null
  /** maxPerHour less the spend of the last 60 minutes (never below zero); null when there is no hourly limit. */
  readonly remainingThisHourMicroUsd: bigint | null
}

/** A cap less what was spent against it, never below zero; null for no cap. */
export const remainingUnder = (cap: bigint | null, spent: bigint): bigint | null =>
  cap === null ? null : cap > spent ? cap - spent : 0n

export class Spend extends Context.Service<Spend, {
  readonly spend: <A, E, R>(
    principal: Principal,
    request: SpendRequest<A, E, R>
  ) => Effect.Effect<{ readonly value: A; readonly receipt: SpendReceipt }, SpendRefusal | E, R>
  /** `spend` for a call made with a binding quote: also refused when the quote may not be used. */
  readonly spendQuoted: <A, E, R>(
    principal: Principal,
    request: SpendRequest<A, E, R> & { readonly quote: QuoteClaim }
  ) => Effect.Effect<{ readonly value: A; readonly receipt: SpendReceipt }, SpendRefusal | QuoteRefusal | E, R>
  /**
   * The decision `spend` would make for this quote now: the same rules
   * (`planHold`) over the same snapshot (agent, policy, the day's held and
   * settled spend, wallet), read without the wallet lock. Holds and charges
   * nothing; a concurrent call may change the answer before a real spend.
   */
  readonly estimate: (
    principal: Principal,
    capability: Capability,
    quotedMicroUsd: bigint
  ) => Effect.Effect<SpendEstimate>
  /**
   * Ends a hold a call left behind (`keepHold`): charges what was spent
   * (clamped to the quote; a hold the sweep already returned is charged as a
   * new debit, as for a late call) or releases it. The transaction id when
   * charged; null when released, or when the hold was already settled or released.
   */
  readonly resolveHeld: (
    accountId: Principal["agent"]["accountId"],
    reservationId: string,
    outcome: HeldOutcome
  ) => Effect.Effect<string | null>
  /** Releases holds older than their expiry; idempotent; returns how many it released. */
  readonly sweep: Effect.Effect<number>
}>()("spendgate/Spend") {
  static readonly layerWith = (options: Partial<SpendOptions> = {}) =>
    Layer.effect(
      Spend,
      Effect.gen(function*() {
        const store = yield* Store
        const rates = yield* RateSource
        const { holdTtlMs, sweepBatch } = { ...defaultSpendOptions, ...options }
        const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))
        /**
         * Reservations whose calls run in this process: the recovery sweep
         * releases these when they outlive their hold (the call settles late),
         * and captures any other expired hold at its quote.
         */
        const running = new Set<string>()
        /** Reservations whose settle is queued in the store (`settleLater`) and has not landed yet. */
        const settling = new Set<string>()

        // The generator is made once, not per call: a fresh generator function costs V8 a new
        // prototype and object shape on every call (docs/performance.md, "Generators made once").
        const spendQuotedIn = Effect.fnUntraced(function*<A, E, R>(
          principal: Principal,
          request: SpendRequest<A, E, R>,
          restore: <X, Y, Z>(effect: Effect.Effect<X, Y, Z>) => Effect.Effect<X, Y, Z>
        ) {
            const agent = principal.agent
            // The spans of the pipeline (Effect's own tracing; exported when the host configures an exporter):
            // names, ids and amounts only, never an input, an answer or a key.
            // Made only when spans are recorded: a host that exports none has tracing off, and then the
            // pipeline neither builds nor annotates a span (src/observability/Tracing.ts).
            const spans = yield* currentSpans
            const spanAttributes = () => ({
              "spendgate.capability": request.capability,
              "spendgate.provider": request.provider,
              "spendgate.agent_id": agent.id
            })
            // Quotes are never negative: a negative one is a bug, refused here as a defect.
            const quotedMicroUsd = MicroUsd.make(request.quotedMicroUsd)
            const rate = Option.getOrNull(yield* rates.current)
            const reservedAt = yield* now
            const reserved = yield* store.reserve({
              reservationId: newReservationId(),
              auditId: newAuditId(),
              accountId: agent.accountId,
              agentId: agent.id,
              capability: request.capability,
              provider: request.provider,
              quotedMicroUsd,
              rate,
              day: utcDay(reservedAt),
              now: reservedAt,
              expiresAt: new Date(reservedAt.getTime() + holdTtlMs),
              decide: (snapshot) => planHold(snapshot, request.capability, quotedMicroUsd, rate?.rate ?? null),
              standardRules: true,
              quote: request.quote
            }).pipe(
              spans.annotateWith((result) =>
                Result.isFailure(result)
                  ? { "spendgate.refusal": result.failure.code }
                  : { "spendgate.reservation_id": result.success.id }
              ),
              spans.span("Spend.reserve", () => ({
                attributes: { ...spanAttributes(), "spendgate.quoted_micro_usd": Number(quotedMicroUsd) }
              }))
            )
            if (Result.isFailure(reserved)) {
              yield* Metrics.countSpendRefusal(reserved.failure.code)
              return yield* Effect.fail(reserved.failure)
            }
            const reservation = reserved.success
            running.add(reservation.id)
            yield* Metrics.holdTaken
            request.onHeld?.(reservation.id)

            const callStartedMs = yield* Clock.currentTimeMillis
            const exit = yield* Effect.exit(restore(request.run).pipe(
              spans.annotateWith((done) => ({ "spendgate.actual_micro_usd": Number(done.actualMicroUsd) })),
              spans.span("Spend.upstream", () => ({ kind: "client", attributes: spanAttributes() }))
            ))
            const callEndedMs = yield* Clock.currentTimeMillis
            const latencyMs = callEndedMs - callStartedMs
            if (Exit.isFailure(exit) && request.keepHold?.(exit.cause) === true) {
              running.delete(reservation.id)
              // Left to whoever resolves it (resolveHeld): no longer a hold of a call in flight.
              yield* Metrics.holdEnded
              yield* Effect.logWarning(`Reservation ${reservation.id} (${request.provider}) kept held: outcome unknown`)
              return yield* Effect.failCause(exit.cause)
            }
            if (Exit.isFailure(exit)) {
              const reason = Cause.hasInterruptsOnly(exit.cause) ? "interrupted" : "upstream failed"
              yield* store.release({
                reservationId: reservation.id,
                accountId: agent.accountId,
                auditId: newAuditId(),
                reason,
                now: yield* now
              }).pipe(
                spans.span("Spend.release", () => ({ attributes: { ...spanAttributes(), "spendgate.release_reason": reason } })),
                // Still `running` until the release has landed (and if it never does, this process's
                // sweep releases the hold at its expiry): recovery must never charge a failed call.
                Effect.tap(() => Effect.sync(() => running.delete(reservation.id))),
                Effect.ensuring(Metrics.holdEnded)
              )
              return yield* Effect.failCause(exit.cause)
            }

            const settledAt = new Date(callEndedMs)
            const settleInput: SettleInput = {
              reservationId: reservation.id,
              accountId: agent.accountId,
              actualMicroUsd: exit.value.actualMicroUsd,
              // The ids recovery would use too (settleIdsOf): what the receipt names always exists.
              ...settleIdsOf(reservation.id),
              description: request.description,
              now: settledAt,
              plan: (held) => planSettle(held, exit.value.actualMicroUsd),
              standardRules: true,
              // The call outlived its hold and the sweep returned it: charge again or record what is owed.
              planLate: (swept, snapshot) => planLateSettle(swept, exit.value.actualMicroUsd, snapshot)
            }
            const walletAfterHold = reservation.walletAfterHold
            if (
              store.settleLater !== undefined && walletAfterHold !== undefined && request.keepHold === undefined &&
              settledAt.getTime() + DEFER_MARGIN_MS < reservation.expiresAt.getTime()
            ) {
              // Off the caller's path: the store commits it right after (batched); the receipt is
              // what planSettle makes of the hold, the same rule the store applies.
              const plan = planSettle(reservation, exit.value.actualMicroUsd)
              // Until the settle lands the sweep leaves the hold alone (`settling`): it lands as the
              // receipt says, however late.
              settling.add(reservation.id)
              running.delete(reservation.id)
              yield* store.settleLater({ ...settleInput, onLanded: () => settling.delete(reservation.id) }).pipe(
                spans.span("Spend.settle", () => ({
                  attributes: {
                    ...spanAttributes(),
                    "spendgate.reservation_id": reservation.id,
                    "spendgate.outcome": "queued",
                    "spendgate.charged_micro_usd": Number(plan.chargedMicroUsd),
                    "spendgate.transaction_id": settleInput.transactionId
                  }
                }))
              )
              yield* Metrics.countSettledCharge(request.capability, request.provider, plan.chargedMicroUsd)
              return {
                value: exit.value.value,
                receipt: receiptOf(request.quotedMicroUsd, request.provider, rate?.rate ?? null, reservation, plan,
                  walletAfterHold, latencyMs)
              }
            }
            const outcome = yield* store.settle(settleInput).pipe(
              spans.annotateWith((settled) =>
                settled._tag === "Settled"
                  ? {
                    "spendgate.outcome": settled.late ? "settled-late" : "settled",
                    "spendgate.charged_micro_usd": Number(settled.transaction.amountMicroUsd),
                    "spendgate.transaction_id": settled.transaction.id
                  }
                  : { "spendgate.outcome": settled._tag === "Unpaid" ? "unpaid" : "not-held" }
              ),
              spans.span("Spend.settle", () => ({
                attributes: { ...spanAttributes(), "spendgate.reservation_id": reservation.id }
              })),
              // Still `running` if the settle failed: this process's sweep then releases the hold.
              Effect.tap(() => Effect.sync(() => running.delete(reservation.id))),
              Effect.ensuring(Metrics.holdEnded)
            )
            if (outcome._tag === "NotHeld" && outcome.reservation?.status === "settled") {
              // Another instance's recovery sweep captured the hold at its quote (the call outlived
              // it there): that charge, under this settle's ids, is the call's.
              yield* Effect.logWarning(
                `Reservation ${reservation.id} (${request.provider}) was captured at its quote by recovery before its settle`
              )
              const captured = yield* store.getTransaction(agent.accountId, settleInput.transactionId)
              if (Option.isNone(captured)) {
                return yield* Effect.die(new Error(`reservation ${reservation.id} was settled, and not under its own ids`))
              }
              const charge = captured.value
              const wallet = yield* store.getWallet(agent.accountId)
              const snapshot = rate?.rate ?? null
              return {
                value: exit.value.value,
                receipt: {
                  quotedMicroUsd: request.quotedMicroUsd,
                  chargedMicroUsd: charge.amountMicroUsd,
                  chargedMsat: snapshot === null ? null : usdToMsatForCharge(charge.amountMicroUsd, snapshot),
                  debitedUsdMicroUsd: charge.usdMicroUsd,
                  debitedSatsMsat: charge.satsMsat,
                  balanceAfterMicroUsd: wallet.usdMicroUsd + (snapshot === null ? 0n : msatToMicroUsdValue(wallet.satsMsat, snapshot)),
                  auditId: charge.auditId,
                  transactionId: charge.id,
                  reservationId: reservation.id,
                  provider: request.provider,
                  latencyMs
                }
              }
            }
            if (outcome._tag === "NotHeld") {
              // A reservation is settled once, by the call that made it: nothing else settles it.
              return yield* Effect.die(new Error(`reservation ${reservation.id} was settled twice`))
            }
            if (outcome._tag === "Unpaid") {
              yield* Effect.logError(
                `Unpaid charge: reservation ${reservation.id} (${request.provider}) outlived its hold and ` +
                  `${outcome.plan.owedMicroUsd} µUSD could not be charged (${outcome.plan.refusal.code}); ` +
                  `recorded as owed, the caller is refused`
              )
              yield* Metrics.countSpendRefusal(outcome.plan.refusal.code)
              return yield* Effect.fail(outcome.plan.refusal)
            }
            if (outcome.late) {
              yield* Effect.logWarning(
                `Reservation ${reservation.id} (${request.provider}) outlived its hold; charged as a new debit`
              )
            }
            const { transaction, wallet } = outcome
            yield* Metrics.countCharge(request.capability, request.provider, transaction.amountMicroUsd)
            const snapshot = rate?.rate ?? null
            const receipt: SpendReceipt = {
              quotedMicroUsd: request.quotedMicroUsd,
              chargedMicroUsd: transaction.amountMicroUsd,
              chargedMsat: snapshot === null
                ? null
                : usdToMsatForCharge(transaction.amountMicroUsd, snapshot),
              debitedUsdMicroUsd: transaction.usdMicroUsd,
              debitedSatsMsat: transaction.satsMsat,
              balanceAfterMicroUsd: wallet.usdMicroUsd +
                (snapshot === null ? 0n : msatToMicroUsdValue(wallet.satsMsat, snapshot)),
              auditId: transaction.auditId,
              transactionId: transaction.id,
              reservationId: reservation.id,
              provider: request.provider,
              latencyMs
            }
            return { value: exit.value.value, receipt }
        })

        const spendQuoted = <A, E, R>(principal: Principal, request: SpendRequest<A, E, R>) =>
          Effect.uninterruptibleMask((restore) => spendQuotedIn(principal, request, restore))

        /** Without a quote, the store can refuse only with a SpendRefusal. */
        const spend = <A, E, R>(principal: Principal, request: SpendRequest<A, E, R>) =>
          spendQuoted(principal, { ...request, quote: undefined }) as Effect.Effect<
            { readonly value: A; readonly receipt: SpendReceipt },
            SpendRefusal | E,
            R
          >

        const sweep = Effect.gen(function*() {
          let total = 0
          for (let pass = 0; pass < 100; pass++) {
            const released = yield* store.sweepExpired(yield* now, sweepBatch, { running, settling })
            total += released
            if (released < sweepBatch) break
          }
          // Quotes a day past their expiry are of no use to anyone (a bounded batch per pass).
          yield* store.deleteExpiredQuotes(new Date((yield* now).getTime() - QUOTE_RETENTION_MS), sweepBatch)
          return total
        })

        const estimate = (principal: Principal, capability: Capability, quotedMicroUsd: bigint) =>
          Effect.gen(function*() {
            const quote = MicroUsd.make(quotedMicroUsd)
            const rate = Option.getOrNull(yield* rates.current)
            const at = yield* now
            const { accountId, id: agentId } = principal.agent
            const stored = yield* store.getAgent(accountId, agentId)
            const { dailySpentMicroUsd, monthlySpentMicroUsd } = yield* store.agentSpend(accountId, agentId, utcDay(at))
            // Gone since it authenticated: it can spend nothing, as reserve would find.
            if (Option.isNone(stored)) {
              return {
                decision: Result.fail(new AgentKilled()),
                dailySpentMicroUsd,
                remainingTodayMicroUsd: 0n,
                monthlySpentMicroUsd,
                remainingThisMonthMicroUsd: 0n,
                remainingThisHourMicroUsd: 0n
              } satisfies SpendEstimate
            }
            // Read again, as reserve reads it, so a kill or policy change since authentication is seen.
            const { agent, policy } = stored.value
            const wallet = yield* store.getWallet(accountId)
            const recent = yield* store.recentActivity(accountId, agentId, at)
            const decision = planHold(
              { agent, policy, dailySpentMicroUsd, monthlySpentMicroUsd, recent, now: at, wallet },
              capability,
              quote,
              rate?.rate ?? null
            )
            return {
              decision,
              dailySpentMicroUsd,
              remainingTodayMicroUsd: remainingUnder(policy.maxPerDayMicroUsd, dailySpentMicroUsd),
              monthlySpentMicroUsd,
              remainingThisMonthMicroUsd: remainingUnder(policy.maxPerMonthMicroUsd, monthlySpentMicroUsd),
              remainingThisHourMicroUsd: remainingUnder(policy.maxPerHourMicroUsd, recent.spentLastHourMicroUsd)
            } satisfies SpendEstimate
          })

        const resolveHeld = (accountId: Principal["agent"]["accountId"], reservationId: string, outcome: HeldOutcome) =>
          Effect.gen(function*() {
            if (outcome._tag === "Release") {
              yield* store.release({ reservationId, accountId, auditId: newAuditId(), reason: outcome.reason, now: yield* now })
              return null
            }
            const settled = yield* store.settle({
              reservationId,
              accountId,
              actualMicroUsd: outcome.actualMicroUsd,
              transactionId: newTransactionId(),
              auditId: newAuditId(),
              description: outcome.description,
              now: yield* now,
              plan: (held) => planSettle(held, outcome.actualMicroUsd),
              planLate: (swept, snapshot) => planLateSettle(swept, outcome.actualMicroUsd, snapshot)
            })
            if (settled._tag === "Settled") return settled.transaction.id
            if (settled._tag === "Unpaid") {
              yield* Effect.logError(`Unpaid charge: reservation ${reservationId} could not be charged; recorded as owed`)
            }
            return null
          })

        return Spend.of({ spend, spendQuoted, estimate, resolveHeld, sweep })
      })
    )

  static readonly layer = Spend.layerWith()

  /** Runs the recovery sweep at start-up and then every `sweepEveryMs`, for the life of the layer. */
  static readonly sweeper = (options: Partial<SpendOptions> = {}) =>
    Layer.effectDiscard(
      Effect.gen(function*() {
        const spend = yield* Spend
        const every = options.sweepEveryMs ?? defaultSpendOptions.sweepEveryMs
        const released = yield* spend.sweep
        if (released > 0) yield* Effect.logWarning(`Recovery sweep released ${released} expired hold(s)`)
        yield* spend.sweep.pipe(
          Effect.tap((n) => n > 0 ? Effect.logWarning(`Recovery sweep released ${n} expired hold(s)`) : Effect.void),
          Effect.catchCause((cause) => Effect.logError("Recovery sweep failed", cause)),
          Effect.repeat(Schedule.spaced(Duration.millis(every))),
          Effect.forkScoped
        )
      })
    )
}
