import { Clock, Effect, Option, Schema } from "effect"
import { effectiveStatus } from "../../src/domain/Invoice.ts"
import { microUsdToCents } from "../../src/domain/Money.ts"
import { PaymentSink, railHtml, railJson, type RailRoute, RailRouteRefused } from "../../src/ports/Rails.ts"
import { Store } from "../../src/ports/Store.ts"
import { preimageOf } from "./DevLightning.ts"

/**
 * The dev rails' routes, which stand in for the payer so that `npm start`
 * can be funded end to end on one machine:
 *
 * - `POST /v1/dev/lightning/pay` `{ paymentRequest }` pays a dev-rail invoice
 *   (also what `npm run dev:pay -- <paymentRequest>` calls);
 * - `GET /dev/checkout/{sessionId}` is the dev card rail's checkout page,
 *   whose Pay button posts to `/dev/checkout/{sessionId}/pay`.
 *
 * Each is served only while the matching dev rail is the configured one (and,
 * off loopback, only with DEV_RAILS_PUBLIC=on: adapters/payments.ts).
 */

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" })[c]!)

const page = (title: string, body: string, status = 200) =>
  railHtml(
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>` +
      `<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}` +
      `button{font-size:1.1rem;padding:.6rem 1.4rem}</style></head><body>${body}</body></html>`,
    status
  )

const PayBody = Schema.fromJsonString(Schema.Struct({ paymentRequest: Schema.String.check(Schema.isMaxLength(4096)) }))

const textDecoder = new TextDecoder()

const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

/** `POST /v1/dev/lightning/pay`: pays a dev-rail invoice by its payment request. */
export const lightningPayRoute: RailRoute = {
  method: "POST",
  path: "/v1/dev/lightning/pay",
  handle: (request) =>
    Effect.gen(function*() {
      const body = yield* Schema.decodeUnknownEffect(PayBody)(textDecoder.decode(request.body)).pipe(Effect.option)
      if (Option.isNone(body)) {
        return yield* new RailRouteRefused({
          code: "VALIDATION_ERROR",
          message: "Expected { paymentRequest: string }",
          details: { issues: [] }
        })
      }
      const store = yield* Store
      const sink = yield* PaymentSink
      const invoice = yield* store.findInvoice({ paymentRequest: body.value.paymentRequest.trim() })
      if (Option.isNone(invoice) || invoice.value.type !== "lightning" || invoice.value.rail !== "dev") {
        return yield* new RailRouteRefused({ code: "NOT_FOUND", message: "No dev-rail invoice has this payment request" })
      }
      const outcome = yield* sink.record({
        type: "lightning",
        externalId: invoice.value.externalId,
        paidAt: yield* now,
        source: "dev"
      })
      // A paid invoice's preimage is the payer's proof of payment (what an L402 client presents).
      const preimage = outcome === "credited" || outcome === "duplicate" ? preimageOf(invoice.value.externalId) : undefined
      return railJson({ invoiceId: invoice.value.id, outcome, ...(preimage === undefined ? {} : { preimage }) })
    })
}

const findSession = (sessionId: string) =>
  Effect.gen(function*() {
    const store = yield* Store
    const found = yield* store.findInvoice({ type: "card", externalId: sessionId })
    return Option.filter(found, (invoice) => invoice.rail === "dev")
  })

const notFoundPage = () => page("Not found", "<h1>No such checkout session</h1>", 404)

/** `GET /dev/checkout/:sessionId`: the dev card rail's checkout page. */
export const checkoutPageRoute: RailRoute = {
  method: "GET",
  path: "/dev/checkout/:sessionId",
  handle: (request) =>
    Effect.gen(function*() {
      const invoice = yield* findSession(request.params.sessionId ?? "")
      if (Option.isNone(invoice)) return notFoundPage()
      const status = effectiveStatus(invoice.value, yield* now)
      const amount = microUsdToCents(invoice.value.amountMicroUsd ?? 0n) / 100
      const form = status === "pending"
        ? `<form method="post" action="/dev/checkout/${escapeHtml(invoice.value.externalId)}/pay">` +
          `<button type="submit">Pay $${amount.toFixed(2)}</button></form>`
        : `<p>This session is <strong>${status}</strong>.</p>`
      return page(
        "Spendgate dev checkout",
        `<h1>Spendgate dev checkout</h1><p>Development card rail: no real card is charged.</p>` +
          `<p>Amount: <strong>$${amount.toFixed(2)}</strong></p><p>Status: <strong id="status">${status}</strong></p>${form}`
      )
    })
}

/** `POST /dev/checkout/:sessionId/pay`: the checkout page's Pay button. */
export const checkoutPayRoute: RailRoute = {
  method: "POST",
  path: "/dev/checkout/:sessionId/pay",
  handle: (request) =>
    Effect.gen(function*() {
      const invoice = yield* findSession(request.params.sessionId ?? "")
      if (Option.isNone(invoice)) return notFoundPage()
      const sink = yield* PaymentSink
      const outcome = yield* sink.record({ type: "card", externalId: invoice.value.externalId, paidAt: yield* now, source: "dev" })
      const message = outcome === "credited" || outcome === "duplicate"
        ? "Payment received: the wallet has been credited."
        : outcome === "late"
        ? "This session had expired: nothing was credited."
        : outcome === "refused"
        ? "The wallet cannot hold this much: the payment was recorded for the operator, nothing was credited."
        : "Unknown session."
      return page("Spendgate dev checkout", `<h1>Spendgate dev checkout</h1><p id="outcome">${message}</p>`)
    })
}

/** The dev Lightning rail's route: its payer. */
export const lightningRoutes: ReadonlyArray<RailRoute> = [lightningPayRoute]

/** The dev card rail's routes: its checkout page and Pay button. */
export const cardRoutes: ReadonlyArray<RailRoute> = [checkoutPageRoute, checkoutPayRoute]
