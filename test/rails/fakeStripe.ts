import { createServer, type IncomingHttpHeaders, type Server } from "node:http"
import type { AddressInfo } from "node:net"

/**
 * A local stand-in for api.stripe.com, enough for `POST /v1/checkout/sessions`:
 * it records every request as received and answers the way Stripe does
 * (a Checkout Session object, Stripe's error JSON, or nothing at all).
 * Like Stripe, it replays the stored answer for a repeated Idempotency-Key.
 */

export interface RecordedRequest {
  readonly method: string
  readonly path: string
  readonly headers: IncomingHttpHeaders
  readonly body: string
  readonly form: URLSearchParams
}

export type Behaviour =
  | { readonly kind: "session"; readonly url?: string | null }
  | { readonly kind: "error"; readonly status: number; readonly type: string; readonly message: string }
  /** Accepts the request and never answers. */
  | { readonly kind: "hang" }

export interface FakeStripe {
  readonly port: number
  readonly requests: Array<RecordedRequest>
  behaviour: Behaviour
  readonly close: () => Promise<void>
}

const randomId = (prefix: string) => {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
  let out = prefix
  for (let i = 0; i < 58; i++) out += alphabet[Math.floor(Math.random() * alphabet.length)]
  return out
}

/** A Checkout Session object as the API documents it, built from the create parameters. */
const checkoutSession = (form: URLSearchParams, url: string | null | undefined) => {
  const id = randomId("cs_test_a1")
  const unitAmount = Number(form.get("line_items[0][price_data][unit_amount]"))
  const quantity = Number(form.get("line_items[0][quantity]") ?? "1")
  const amount = unitAmount * quantity
  const metadata: Record<string, string> = {}
  for (const [key, value] of form) {
    const match = /^metadata\[(.+)\]$/.exec(key)
    if (match !== null) metadata[match[1]!] = value
  }
  return {
    id,
    object: "checkout.session",
    adaptive_pricing: { enabled: false },
    after_expiration: null,
    allow_promotion_codes: null,
    amount_subtotal: amount,
    amount_total: amount,
    automatic_tax: { enabled: false, liability: null, status: null },
    billing_address_collection: null,
    cancel_url: form.get("cancel_url"),
    client_reference_id: form.get("client_reference_id"),
    client_secret: null,
    consent: null,
    consent_collection: null,
    created: Math.floor(Date.now() / 1000),
    currency: form.get("line_items[0][price_data][currency]"),
    currency_conversion: null,
    custom_fields: [],
    custom_text: { after_submit: null, shipping_address: null, submit: null, terms_of_service_acceptance: null },
    customer: null,
    customer_creation: "if_required",
    customer_details: null,
    customer_email: null,
    expires_at: Number(form.get("expires_at")),
    invoice: null,
    invoice_creation: null,
    livemode: false,
    locale: null,
    metadata,
    mode: form.get("mode"),
    payment_intent: null,
    payment_link: null,
    payment_method_collection: "if_required",
    payment_method_options: {},
    payment_method_types: ["card"],
    payment_status: "unpaid",
    phone_number_collection: { enabled: false },
    recovered_from: null,
    setup_intent: null,
    shipping_address_collection: null,
    shipping_cost: null,
    shipping_options: [],
    status: "open",
    submit_type: null,
    subscription: null,
    success_url: form.get("success_url"),
    total_details: { amount_discount: 0, amount_shipping: 0, amount_tax: 0 },
    ui_mode: "hosted",
    url: url === undefined ? `https://checkout.stripe.com/c/pay/${id}#fidkdWxOYHwnPyd1blpxYHZxWjA0` : url
  }
}

export const startFakeStripe = async (): Promise<FakeStripe> => {
  const requests: Array<RecordedRequest> = []
  const replies = new Map<string, { status: number; body: string }>()
  const state: { behaviour: Behaviour } = { behaviour: { kind: "session" } }

  const server: Server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8")
      const form = new URLSearchParams(body)
      const path = (req.url ?? "").split("?")[0] ?? ""
      requests.push({ method: req.method ?? "", path, headers: req.headers, body, form })
      const behaviour = state.behaviour
      if (behaviour.kind === "hang") return
      const send = (status: number, json: string) => {
        res.writeHead(status, { "content-type": "application/json", "request-id": randomId("req_").slice(0, 18) })
        res.end(json)
      }
      if (behaviour.kind === "error") {
        send(behaviour.status, JSON.stringify({ error: { type: behaviour.type, message: behaviour.message } }))
        return
      }
      if (req.method !== "POST" || path !== "/v1/checkout/sessions") {
        send(404, JSON.stringify({ error: { type: "invalid_request_error", message: `Unrecognized request URL (${req.method}: ${path}).` } }))
        return
      }
      const key = req.headers["idempotency-key"]
      const stored = typeof key === "string" ? replies.get(key) : undefined
      if (stored !== undefined) {
        send(stored.status, stored.body)
        return
      }
      // Stripe's bounds on expires_at, measured from the creation time by its own clock.
      const expiresAt = form.get("expires_at")
      const lifetime = expiresAt === null ? undefined : Number(expiresAt) - Math.floor(Date.now() / 1000)
      const lifetimeError = lifetime === undefined
        ? undefined
        : lifetime < 30 * 60
        ? "The `expires_at` timestamp must be at least 30 minutes from Checkout Session creation."
        : lifetime > 24 * 60 * 60
        ? "The `expires_at` timestamp must be less than 24 hours from Checkout Session creation."
        : undefined
      if (lifetimeError !== undefined) {
        send(400, JSON.stringify({ error: { type: "invalid_request_error", param: "expires_at", message: lifetimeError } }))
        return
      }
      const reply = { status: 200, body: JSON.stringify(checkoutSession(form, behaviour.url), null, 2) }
      if (typeof key === "string") replies.set(key, reply)
      send(reply.status, reply.body)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    port,
    requests,
    get behaviour() {
      return state.behaviour
    },
    set behaviour(value: Behaviour) {
      state.behaviour = value
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

/** A loopback port nothing listens on (bound, then released). */
export const closedPort = async (): Promise<number> => {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}
