import { Clock, Context, Duration, Effect, Layer, Option, Schedule } from "effect"
import { requireOwner } from "../agents/Access.ts"
import type { Principal } from "../domain/Agent.ts"
import { type Forbidden, InvalidAmount } from "../domain/errors.ts"
import {
  CARD_MINIMUM_MICRO_USD,
  CARD_SESSION_TTL_MS,
  effectiveStatus,
  type Invoice,
  type InvoiceStatus,
  LIGHTNING_INVOICE_TTL_MS,
  newInvoiceId
} from "../domain/Invoice.ts"
import { newAuditId, newTransactionId } from "../domain/Ledger.ts"
import {
  MAX_CARD_FUNDING_MICRO_USD,
  MAX_LIGHTNING_FUNDING_MSAT,
  MICRO_USD_PER_CENT,
  type Msat,
  MSAT_PER_SAT,
  msatToMicroUsdValue
} from "../domain/Money.ts"
import { RateSource } from "../ports/RateSource.ts"
import { CardRail, LightningRail, type PaymentNotice, PaymentSink, type RailError } from "../ports/Rails.ts"
import { type Page, type PageRequest, Store } from "../ports/Store.ts"

/**
 * The invoice lifecycle: create a funding request on a rail (pending), then
 * paid — the right pocket credited and `paidAt` set in one transaction,
 * exactly once whatever the number of notices — or expired (Lightning 1 h,
 * card 30 min after creation, by the Clock). A payment that arrives after
 * expiry is recorded on the invoice for the operator and never credited.
 */

/** An invoice as shown: its status is the effective one at `now`. */
export interface InvoiceView extends Invoice {
  readonly status: InvoiceStatus
}

export class Funding extends Context.Service<Funding, {
  /** Owners only. `amountSats` must be a whole number from 1 to 100,000,000 (1 BTC). */
  readonly fundLightning: (
    principal: Principal,
    amountSats: number
  ) => Effect.Effect<InvoiceView, Forbidden | InvalidAmount | RailError>
  /** Owners only. Whole cents from 1000 ($10) to 10,000,000 ($100,000). */
  readonly fundCard: (
    principal: Principal,
    amountCents: number
  ) => Effect.Effect<InvoiceView, Forbidden | InvalidAmount | RailError>
  /** Owners only; newest first. */
  readonly invoices: (
    principal: Principal,
    status: InvoiceStatus | undefined,
    page: PageRequest
  ) => Effect.Effect<Page<InvoiceView>, Forbidden>
  /** Writes `expired` on pending invoices past their time; returns how many. */
  readonly expireDue: Effect.Effect<number>
}>()("spendgate/Funding") {
  static readonly layer = Layer.effect(
    Funding,
    Effect.gen(function*() {
      const store = yield* Store
      const lightning = yield* LightningRail
      const card = yield* CardRail
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))
      const view = (invoice: Invoice, at: Date): InvoiceView => ({ ...invoice, status: effectiveStatus(invoice, at) })

      const fundLightning = Effect.fn("Funding.fundLightning")(function*(principal: Principal, amountSats: number) {
        yield* requireOwner(principal, "fund the wallet")
        const maximumSats = Number(MAX_LIGHTNING_FUNDING_MSAT / MSAT_PER_SAT)
        if (!Number.isFinite(amountSats) || amountSats < 1 || amountSats > maximumSats) {
          return yield* new InvalidAmount({
            message: `amountSats must be between 1 and ${maximumSats}`,
            minimum: 1,
            maximum: maximumSats
          })
        }
        if (!Number.isSafeInteger(amountSats)) {
          return yield* new InvalidAmount({ message: "amountSats must be a positive whole number of sats" })
        }
        const createdAt = yield* now
        const id = newInvoiceId()
        const amountMsat = BigInt(amountSats) * MSAT_PER_SAT
        const created = yield* lightning.createInvoice({
          invoiceId: id,
          amountMsat,
          memo: `Spendgate wallet funding ${id}`,
          expirySeconds: LIGHTNING_INVOICE_TTL_MS / 1000,
          createdAt
        })
        const invoice: Invoice = {
          id,
          accountId: principal.agent.accountId,
          agentId: principal.agent.id,
          type: "lightning",
          amountMsat,
          amountMicroUsd: null,
          status: "pending",
          rail: lightning.name,
          externalId: created.paymentHash,
          paymentRequest: created.paymentRequest,
          checkoutUrl: null,
          createdAt,
          expiresAt: new Date(createdAt.getTime() + LIGHTNING_INVOICE_TTL_MS),
          paidAt: null,
          latePaymentAt: null,
          latePaymentAmount: null,
          transactionId: null
        }
        yield* store.createInvoice(invoice)
        return invoice
      })

      const fundCard = Effect.fn("Funding.fundCard")(function*(principal: Principal, amountCents: number) {
        yield* requireOwner(principal, "fund the wallet")
        const minimumCents = Number(CARD_MINIMUM_MICRO_USD / MICRO_USD_PER_CENT)
        const maximumCents = Number(MAX_CARD_FUNDING_MICRO_USD / MICRO_USD_PER_CENT)
        if (!Number.isFinite(amountCents) || amountCents < minimumCents) {
          return yield* new InvalidAmount({
            message: `amountUsdCents must be at least ${minimumCents}`,
            minimum: minimumCents,
            maximum: maximumCents
          })
        }
        if (amountCents > maximumCents) {
          return yield* new InvalidAmount({
            message: `amountUsdCents must be at most ${maximumCents}`,
            minimum: minimumCents,
            maximum: maximumCents
          })
        }
        if (!Number.isSafeInteger(amountCents)) {
          return yield* new InvalidAmount({ message: "amountUsdCents must be a whole number of cents for card funding" })
        }
        const createdAt = yield* now
        const id = newInvoiceId()
        const amountMicroUsd = BigInt(amountCents) * MICRO_USD_PER_CENT
        const requestedExpiry = new Date(createdAt.getTime() + CARD_SESSION_TTL_MS)
        const created = yield* card.createCheckout({
          invoiceId: id,
          amountMicroUsd,
          description: "Spendgate wallet funding",
          expiresAt: requestedExpiry,
          createdAt
        })
        // The invoice lives exactly as long as the rail's session can be paid.
        const expiresAt = created.expiresAt !== undefined && Number.isFinite(created.expiresAt.getTime()) &&
            created.expiresAt.getTime() > createdAt.getTime()
          ? created.expiresAt
          : requestedExpiry
        const invoice: Invoice = {
          id,
          accountId: principal.agent.accountId,
          agentId: principal.agent.id,
          type: "card",
          amountMsat: null,
          amountMicroUsd,
          status: "pending",
          rail: card.name,
          externalId: created.sessionId,
          paymentRequest: null,
          checkoutUrl: created.checkoutUrl,
          createdAt,
          expiresAt,
          paidAt: null,
          latePaymentAt: null,
          latePaymentAmount: null,
          transactionId: null
        }
        yield* store.createInvoice(invoice)
        return invoice
      })

      const invoices = Effect.fn("Funding.invoices")(function*(
        principal: Principal,
        status: InvoiceStatus | undefined,
        page: PageRequest
      ) {
        yield* requireOwner(principal, "read invoices")
        const at = yield* now
        const result = yield* store.listInvoices(principal.agent.accountId, { status, now: at }, page)
        return { items: result.items.map((invoice) => view(invoice, at)), total: result.total }
      })

      const expireDue = Effect.gen(function*() {
        let total = 0
        for (let pass = 0; pass < 100; pass++) {
          const expired = yield* store.expireDue(yield* now, 500)
          total += expired
          if (expired < 500) break
        }
        return total
      })

      return Funding.of({ fundLightning, fundCard, invoices, expireDue })
    })
  )

  /** Writes expiries every `everyMs` for the life of the layer (reads never depend on it). */
  static readonly expirer = (everyMs = 60_000) =>
    Layer.effectDiscard(
      Effect.gen(function*() {
        const funding = yield* Funding
        yield* funding.expireDue.pipe(
          Effect.catchCause((cause) => Effect.as(Effect.logError("Invoice expiry sweep failed", cause), 0)),
          Effect.repeat(Schedule.spaced(Duration.millis(everyMs))),
          Effect.forkScoped
        )
      })
    )
}

/**
 * The core's side of every rail: payments are recorded here, exactly once.
 * A sats credit records its USD value at the current rate (0 when none).
 */
export const paymentSinkLayer: Layer.Layer<PaymentSink, never, Store | RateSource> = Layer.effect(
  PaymentSink,
  Effect.gen(function*() {
    const store = yield* Store
    const rates = yield* RateSource
    const record = Effect.fn("PaymentSink.record")(function*(notice: PaymentNotice) {
      const rate = yield* rates.current
      const outcome = yield* store.payInvoice({
        type: notice.type,
        externalId: notice.externalId,
        paidAt: notice.paidAt,
        amountPaid: notice.amountPaid,
        source: notice.source,
        transactionId: newTransactionId(),
        auditId: newAuditId(),
        valueOfMsat: (amountMsat) =>
          Option.isSome(rate)
            ? {
              valueMicroUsd: msatToMicroUsdValue(amountMsat as Msat, rate.value.rate),
              rateMicroUsdPerBtc: rate.value.rate.microUsdPerBtc
            }
            : { valueMicroUsd: 0n, rateMicroUsdPerBtc: null },
        now: new Date(yield* Clock.currentTimeMillis)
      })
      if (outcome === "refused") {
        yield* Effect.logWarning(`Payment for ${notice.type} invoice (${notice.externalId}) from ${notice.source} would take the wallet pocket above its maximum: recorded, not credited`)
      } else if (outcome === "late") {
        yield* Effect.logWarning(`Payment for an expired ${notice.type} invoice (${notice.externalId}) from ${notice.source}: recorded, not credited`)
      } else if (outcome === "unknown") {
        yield* Effect.logWarning(`Payment notice for an unknown ${notice.type} id ${notice.externalId} from ${notice.source}: ignored`)
      }
      return outcome
    })
    return PaymentSink.of({
      record,
      recordExpiry: (type, externalId, at) => store.expireInvoice(type, externalId, at),
      loadCursor: store.loadCursor,
      saveCursor: store.saveCursor
    })
  })
)
