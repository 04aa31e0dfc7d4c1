import { Clock, Effect, Layer, Option, Schema } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { effectiveStatus } from "../../src/domain/Invoice.ts"
import { microUsdToCents } from "../../src/domain/Money.ts"
import { PaymentSink } from "../../src/ports/Rails.ts"
import { Store } from "../../src/ports/Store.ts"
import { envelopeResponse } from "./errors.ts"

/**
 * Development-only routes that stand in for the payer, so that `npm start`
 * can be funded end to end on one machine:
 *
 * - `POST /v1/dev/lightning/pay` `{ paymentRequest }` pays a dev-rail invoice
 *   (also what `npm run dev:pay -- <paymentRequest>` calls);
 * - `GET /dev/checkout/{sessionId}` is the dev card rail's checkout page,
 *   whose Pay button posts to `/dev/checkout/{sessionId}/pay`.
 *
 * Each is mounted only while the matching dev rail is the configured one.
 */

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" })[c]!)

const page = (title: string, body: string, status = 200) =>
  HttpServerResponse.text(
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>` +
      `<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}` +
      `button{font-size:1.1rem;padding:.6rem 1.4rem}</style></head><body>${body}</body></html>`,
    { status, contentType: "text/html; charset=utf-8" }
  )

const PayBody = Schema.Struct({ paymentRequest: Schema.String.check(Schema.isMaxLength(4096)) })

const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

const payLightning = HttpRouter.add(
  "POST",
  "/v1/dev/lightning/pay",
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const body = yield* Effect.flatMap(request.json, Schema.decodeUnknownEffect(PayBody)).pipe(Effect.option)
    if (Option.isNone(body)) {
      return envelopeResponse("VALIDATION_ERROR", "Expected { paymentRequest: string }", { issues: [] })
    }
    const store = yield* Store
    const sink = yield* PaymentSink
    const invoice = yield* store.findInvoice({ paymentRequest: body.value.paymentRequest.trim() })
    if (Option.isNone(invoice) || invoice.value.type !== "lightning" || invoice.value.rail !== "dev") {
      return envelopeResponse("NOT_FOUND", "No dev-rail invoice has this payment request")
    }
    const outcome = yield* sink.record({
      type: "lightning",
      externalId: invoice.value.externalId,
      paidAt: yield* now,
      source: "dev"
    })
    return HttpServerResponse.jsonUnsafe({ invoiceId: invoice.value.id, outcome })
  })
)

const findSession = (sessionId: string) =>
  Effect.gen(function*() {
    const store = yield* Store
    const found = yield* store.findInvoice({ type: "card", externalId: sessionId })
    return Option.filter(found, (invoice) => invoice.rail === "dev")
  })

const checkoutPage = HttpRouter.add(
  "GET",
  "/dev/checkout/:sessionId",
  Effect.gen(function*() {
    const { sessionId } = yield* HttpRouter.params
    const invoice = yield* findSession(sessionId ?? "")
    if (Option.isNone(invoice)) return page("Not found", "<h1>No such checkout session</h1>", 404)
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
)

const checkoutPay = HttpRouter.add(
  "POST",
  "/dev/checkout/:sessionId/pay",
  Effect.gen(function*() {
    const { sessionId } = yield* HttpRouter.params
    const invoice = yield* findSession(sessionId ?? "")
    if (Option.isNone(invoice)) return page("Not found", "<h1>No such checkout session</h1>", 404)
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
)

export const devRoutes = (options: { readonly lightning: boolean; readonly card: boolean }) =>
  Layer.mergeAll(
    options.lightning ? payLightning : Layer.empty,
    options.card ? Layer.mergeAll(checkoutPage, checkoutPay) : Layer.empty
  )
