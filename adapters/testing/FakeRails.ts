import { Clock, Context, Effect, Layer, Option } from "effect"
import type { InvoiceType } from "../../src/domain/Invoice.ts"
import {
  CardRail,
  LightningRail,
  type PaymentOutcome,
  PaymentSink,
  RailError
} from "../../src/ports/Rails.ts"
import { Store } from "../../src/ports/Store.ts"
import * as DevCard from "../rails/DevCard.ts"
import * as DevLightning from "../rails/DevLightning.ts"
import { advanceTo } from "./TestTime.ts"

/**
 * Payment rails a test pays through on command. They are the development
 * rails (real signed BOLT #11 invoices, dev checkout sessions) with a payer
 * attached: `pay` hands the rail's notice to the core's `PaymentSink`, the
 * one path every production rail (LND's subscription, Stripe's webhook, the
 * dev pay page) credits wallets through, so a payment here is credited,
 * refused, duplicated or recorded late by exactly the rules that apply in
 * production. Not paying at all is the third behaviour: just don't call.
 */

/** A funding request the rails received. */
export interface Issued {
  /** The gateway's invoice id (`inv_…`). */
  readonly invoiceId: string
  readonly type: InvoiceType
  /** What payments are reported by: the payment hash or the checkout session id. */
  readonly externalId: string
  /** Lightning: msat. Card: µUSD. */
  readonly amount: bigint
  /** The BOLT #11 payment request or the checkout URL. */
  readonly payTo: string
  readonly createdAt: Date
}

/** An invoice, by id or as `Funding` returned it. */
export type InvoiceRef = string | { readonly id: string }

export interface PayOptions {
  /** What the rail reports was paid (msat or µUSD); default: the invoice amount. */
  readonly amountPaid?: bigint
}

export interface FakeRails {
  /** The Lightning and card rails, to give the gateway (`TestGateway.layer({ rails })` does). */
  readonly layer: Layer.Layer<LightningRail | CardRail>
  /** Every funding request the rails received, oldest first. */
  readonly issued: ReadonlyArray<Issued>
  /** The payer pays now, by the Clock. */
  readonly pay: (invoice: InvoiceRef, options?: PayOptions) => Effect.Effect<PaymentOutcome, never, PaymentSink | Store>
  /**
   * The payment arrives after the invoice has expired: the clock is moved
   * to the expiry instant (`TestTime.advanceTo`, when it is not there yet; a
   * payment at that instant is already late) and the payment is reported.
   * Needs a TestClock (TestGateway provides it).
   */
  readonly payLate: (invoice: InvoiceRef, options?: PayOptions) => Effect.Effect<PaymentOutcome, never, PaymentSink | Store>
  /** The next `count` funding requests on this rail fail with a RailError (the rail is down). */
  readonly refuseNext: (type: InvoiceType, count?: number) => void
}

/** The test's rails, as TestGateway provides them. */
export class TestRails extends Context.Service<TestRails, FakeRails>()("spendgate/testing/TestRails") {}

const SOURCE = "test"

/** Most funding requests one set of rails remembers; a test that makes more has a runaway loop. */
export const MAX_ISSUED = 10_000

const idOf = (invoice: InvoiceRef) => (typeof invoice === "string" ? invoice : invoice.id)

export const make = (options: { readonly publicUrl?: string } = {}): FakeRails => {
  const issued: Array<Issued> = []
  const refusals: Record<InvoiceType, number> = { lightning: 0, card: 0 }

  const refusal = (type: InvoiceType) =>
    Effect.suspend(() => {
      if (issued.length >= MAX_ISSUED) return Effect.die(new Error(`These rails received more than ${MAX_ISSUED} funding requests`))
      if (refusals[type] <= 0) return Effect.void
      refusals[type]--
      return Effect.fail(new RailError({ rail: DevLightning.RAIL_NAME, message: `the ${type} rail is down (scripted)` }))
    })

  const layer = Layer.effectContext(Effect.gen(function*() {
    const node = yield* Effect.orDie(DevLightning.make({ dataDir: undefined }))
    const card = yield* CardRail.pipe(Effect.provide(DevCard.layer({ publicUrl: options.publicUrl ?? "http://spendgate.test" })))
    const lightning = LightningRail.of({
      name: node.rail.name,
      createInvoice: (request) =>
        refusal("lightning").pipe(
          Effect.andThen(node.rail.createInvoice(request)),
          Effect.tap((created) =>
            Effect.sync(() =>
              issued.push({
                invoiceId: request.invoiceId,
                type: "lightning",
                externalId: created.paymentHash,
                amount: request.amountMsat,
                payTo: created.paymentRequest,
                createdAt: request.createdAt
              })
            )
          )
        )
    })
    const checkout = CardRail.of({
      name: card.name,
      createCheckout: (request) =>
        refusal("card").pipe(
          Effect.andThen(card.createCheckout(request)),
          Effect.tap((created) =>
            Effect.sync(() =>
              issued.push({
                invoiceId: request.invoiceId,
                type: "card",
                externalId: created.sessionId,
                amount: request.amountMicroUsd,
                payTo: created.checkoutUrl,
                createdAt: request.createdAt
              })
            )
          )
        )
    })
    return Context.make(LightningRail, lightning).pipe(Context.add(CardRail, checkout))
  }))

  const find = (invoice: InvoiceRef) =>
    Effect.suspend(() => {
      const id = idOf(invoice)
      const found = issued.find((entry) => entry.invoiceId === id)
      return found === undefined
        ? Effect.die(new Error(`These rails issued no invoice ${id}: only invoices created through Funding on them can be paid`))
        : Effect.succeed(found)
    })

  const report = (entry: Issued, options: PayOptions) =>
    Effect.gen(function*() {
      const sink = yield* PaymentSink
      return yield* sink.record({
        type: entry.type,
        externalId: entry.externalId,
        paidAt: new Date(yield* Clock.currentTimeMillis),
        source: SOURCE,
        ...(options.amountPaid === undefined ? {} : { amountPaid: options.amountPaid })
      })
    })

  const pay = (invoice: InvoiceRef, options: PayOptions = {}) =>
    Effect.flatMap(find(invoice), (entry) => report(entry, options))

  const payLate = (invoice: InvoiceRef, options: PayOptions = {}) =>
    Effect.gen(function*() {
      const entry = yield* find(invoice)
      const stored = yield* (yield* Store).findInvoice({ type: entry.type, externalId: entry.externalId })
      if (Option.isNone(stored)) return yield* Effect.die(new Error(`Invoice ${entry.invoiceId} is not in the store`))
      yield* advanceTo(stored.value.expiresAt)
      return yield* report(entry, options)
    })

  return {
    layer,
    get issued() {
      return [...issued]
    },
    pay,
    payLate,
    refuseNext: (type, count = 1) => {
      refusals[type] += count
    }
  }
}
