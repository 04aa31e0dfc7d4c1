import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Exit, Layer, Redacted, Scope } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { createServer, request } from "node:http"
import Stripe from "stripe"
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { mountRailRoutes } from "../../adapters/http/railRoutes.ts"
import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import * as StripeRail from "../../adapters/rails/Stripe.ts"
import { CardRail, type CheckoutRequest, type PaymentNotice, PaymentSink, RailError } from "../../src/ports/Rails.ts"
import { closedPort, type FakeStripe, startFakeStripe } from "./fakeStripe.ts"

const SECRET_KEY = "sk_test_51SpendgateFakeKey0123456789abcdefGHIJKLmnopQRSTuvwxYZ"
const WEBHOOK_SECRET = "whsec_spendgateTestSigningSecret0123456789"

const baseConfig = {
  secretKey: Redacted.make(SECRET_KEY),
  webhookSecret: Redacted.make(WEBHOOK_SECRET),
  successUrl: "https://spendgate.example/funding/success?session={CHECKOUT_SESSION_ID}",
  cancelUrl: "https://spendgate.example/funding/cancel"
} satisfies StripeRail.StripeConfig

const nowSeconds = () => Math.floor(Date.now() / 1000)

/** The SDK's import, failing the first time as a missing package does, then the real one; counts its calls. */
const flakyImport = () => {
  const state = { calls: 0, load: (): ReturnType<typeof StripeRail.importStripe> => {
    state.calls += 1
    return state.calls === 1
      ? Promise.reject(Object.assign(new Error("Cannot find package 'stripe'"), { code: "ERR_MODULE_NOT_FOUND" }))
      : StripeRail.importStripe()
  } }
  return state
}

describe("Stripe card rail: createCheckout against a local Stripe API", () => {
  let fake: FakeStripe
  beforeAll(async () => {
    fake = await startFakeStripe()
  })
  afterAll(() => fake?.close())
  beforeEach(() => {
    fake.requests.length = 0
    fake.behaviour = { kind: "session" }
  })

  const configFor = (port: number, timeoutMs?: number): StripeRail.StripeConfig => ({
    ...baseConfig,
    apiHost: "127.0.0.1",
    apiPort: port,
    apiProtocol: "http",
    ...(timeoutMs === undefined ? {} : { timeoutMs })
  })

  let invoiceCounter = 0
  const checkoutRequest = (amountMicroUsd: bigint): CheckoutRequest => {
    // Created a little over a second before the request reaches Stripe (latency, clock
    // skew), with milliseconds: the fake measures the lifetime with its own clock, as
    // Stripe does, so an expires_at of exactly creation + 30 min would be refused.
    const createdAt = new Date(Math.floor(Date.now() / 1000) * 1000 - 1211)
    return {
      invoiceId: `inv_${(invoiceCounter++).toString().padStart(4, "0")}Q7cE2xYt9`,
      amountMicroUsd,
      description: "Wallet funding",
      createdAt,
      expiresAt: new Date(createdAt.getTime() + 30 * 60 * 1000)
    }
  }

  const create = (config: StripeRail.StripeConfig, req: CheckoutRequest) =>
    CardRail.use((rail) => rail.createCheckout(req)).pipe(Effect.provide(StripeRail.layer(config)))

  /** The RailError of a failed call; rejects if the call succeeded or died. */
  const railError = async (config: StripeRail.StripeConfig, req: CheckoutRequest): Promise<RailError> => {
    const exit = await Effect.runPromiseExit(create(config, req))
    if (Exit.isSuccess(exit)) throw new Error("expected a RailError, got a session")
    const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail")
    if (failure === undefined || failure._tag !== "Fail") {
      throw new Error(`expected a typed failure, got: ${String(exit.cause)}`)
    }
    expect(failure.error).toBeInstanceOf(RailError)
    return failure.error
  }

  it("creates a Checkout Session with the documented request and answers its id and URL", async () => {
    const req = checkoutRequest(25_000_000n) // $25.00
    const created = await Effect.runPromise(create(configFor(fake.port), req))

    expect(fake.requests).toHaveLength(1)
    const sent = fake.requests[0]!
    expect(sent.method).toBe("POST")
    expect(sent.path).toBe("/v1/checkout/sessions")
    expect(sent.headers["authorization"]).toBe(`Bearer ${SECRET_KEY}`)
    expect(sent.headers["idempotency-key"]).toBe(req.invoiceId)
    expect(sent.headers["content-type"]).toMatch(/^application\/x-www-form-urlencoded/)
    expect(sent.headers["stripe-version"]).toBe(Stripe.API_VERSION)

    const form = sent.form
    expect(form.get("mode")).toBe("payment")
    expect(form.get("line_items[0][price_data][unit_amount]")).toBe("2500")
    expect(form.get("line_items[0][price_data][currency]")).toBe("usd")
    expect(form.get("line_items[0][price_data][product_data][name]")).toBe("Spendgate wallet funding")
    expect(form.get("line_items[0][quantity]")).toBe("1")
    expect(form.get("expires_at")).toBe(String(Math.ceil(req.expiresAt.getTime() / 1000) + StripeRail.EXPIRY_MARGIN_SECONDS))
    expect(Number(form.get("expires_at")) - Math.floor(req.createdAt.getTime() / 1000)).toBe(30 * 60 + 1 + 120)
    // The invoice takes the session's expiry as Stripe answered it.
    expect(created.expiresAt).toEqual(new Date(Number(form.get("expires_at")) * 1000))
    expect(form.get("success_url")).toBe(baseConfig.successUrl)
    expect(form.get("cancel_url")).toBe(baseConfig.cancelUrl)
    expect(form.get("client_reference_id")).toBe(req.invoiceId)
    expect(form.get("metadata[invoice_id]")).toBe(req.invoiceId)
    // Nothing else is sent: no customer data, no payment method restrictions.
    expect([...new Set([...form.keys()])].sort()).toEqual([
      "cancel_url",
      "client_reference_id",
      "expires_at",
      "line_items[0][price_data][currency]",
      "line_items[0][price_data][product_data][name]",
      "line_items[0][price_data][unit_amount]",
      "line_items[0][quantity]",
      "metadata[invoice_id]",
      "mode",
      "success_url"
    ])

    expect(created.sessionId).toMatch(/^cs_test_/)
    expect(created.checkoutUrl).toBe(`https://checkout.stripe.com/c/pay/${created.sessionId}#fidkdWxOYHwnPyd1blpxYHZxWjA0`)
  })

  it("reports its name and converts micro-dollars to cents exactly", async () => {
    const name = await Effect.runPromise(
      CardRail.use((rail) => Effect.succeed(rail.name)).pipe(Effect.provide(StripeRail.layer(configFor(fake.port))))
    )
    expect(name).toBe("stripe")
    for (const [micro, cents] of [[500_000n, "50"], [10_000n, "1"], [99_999_990_000n, "9999999"]] as const) {
      fake.requests.length = 0
      await Effect.runPromise(create(configFor(fake.port), checkoutRequest(micro)))
      expect(fake.requests[0]!.form.get("line_items[0][price_data][unit_amount]")).toBe(cents)
    }
  })

  it("sends the invoice id as the idempotency key, so a repeated call gets the same session", async () => {
    const req = checkoutRequest(1_000_000n)
    const first = await Effect.runPromise(create(configFor(fake.port), req))
    const second = await Effect.runPromise(create(configFor(fake.port), req))
    expect(second).toEqual(first)
    expect(fake.requests.map((r) => r.headers["idempotency-key"])).toEqual([req.invoiceId, req.invoiceId])
  })

  it("refuses an amount that is not a positive whole number of cents without calling Stripe", async () => {
    for (const micro of [25_005_000n, 1n, 9_999n, 0n, -10_000n]) {
      const error = await railError(configFor(fake.port), checkoutRequest(micro))
      expect(error.rail).toBe("stripe")
      expect(error.message).toMatch(/whole number of cents/)
    }
    expect(fake.requests).toHaveLength(0)
  })

  it("maps a 401 (invalid API key) to a RailError that does not quote the key", async () => {
    fake.behaviour = {
      kind: "error",
      status: 401,
      type: "invalid_request_error",
      message: `Invalid API Key provided: ${SECRET_KEY}`
    }
    const error = await railError(configFor(fake.port), checkoutRequest(2_500_000n))
    expect(error.rail).toBe("stripe")
    expect(error.code).toBe("PROVIDER_ERROR")
    expect(error.message).toMatch(/refused the API key/)
    expect(error.message).toContain("401")
    expect(error.message).not.toContain(SECRET_KEY)
    expect(error.message).not.toMatch(/sk_test_[A-Za-z0-9]/)
    expect(fake.requests).toHaveLength(1) // not retried
  })

  it("scrubs keys from any other error message Stripe sends back", async () => {
    fake.behaviour = {
      kind: "error",
      status: 400,
      type: "invalid_request_error",
      message: `Something about ${SECRET_KEY} and sk_live_51Other0123456789 and ${WEBHOOK_SECRET}`
    }
    const error = await railError(configFor(fake.port), checkoutRequest(2_500_000n))
    expect(error.message).toContain("400")
    expect(error.message).toContain("Something about")
    for (const secret of [SECRET_KEY, "sk_live_51Other0123456789", WEBHOOK_SECRET]) {
      expect(error.message).not.toContain(secret)
    }
  })

  it("maps a 500 to a RailError after the SDK's one retry with the same idempotency key", async () => {
    fake.behaviour = { kind: "error", status: 500, type: "api_error", message: "An unknown error occurred" }
    const req = checkoutRequest(2_500_000n)
    const error = await railError(configFor(fake.port), req)
    expect(error.message).toContain("500")
    expect(error.message).not.toContain(SECRET_KEY)
    expect(fake.requests).toHaveLength(2)
    expect(fake.requests.map((r) => r.headers["idempotency-key"])).toEqual([req.invoiceId, req.invoiceId])
  })

  it("maps a refused connection to a RailError", async () => {
    const port = await closedPort()
    const error = await railError(configFor(port), checkoutRequest(2_500_000n))
    expect(error.rail).toBe("stripe")
    expect(error.message).toMatch(/Could not reach Stripe/)
    expect(error.message).not.toContain(SECRET_KEY)
  })

  it("maps a timeout to a RailError, bounded by timeoutMs", async () => {
    fake.behaviour = { kind: "hang" }
    const started = Date.now()
    const error = await railError(configFor(fake.port, 250), checkoutRequest(2_500_000n))
    const elapsed = Date.now() - started
    expect(error.message).toMatch(/timeout/i)
    expect(error.message).not.toContain(SECRET_KEY)
    // Two attempts of 250 ms and one back-off of at most 500 ms.
    expect(elapsed).toBeLessThan(3_000)
    expect(fake.requests).toHaveLength(2)
  })

  it("a failed load of the SDK is not kept: the next checkout loads it again and succeeds", async () => {
    const importSdk = flakyImport()
    const rail = StripeRail.make(configFor(fake.port), importSdk.load)
    const failed = await Effect.runPromiseExit(rail.createCheckout(checkoutRequest(5_000_000n)))
    if (Exit.isSuccess(failed)) throw new Error("expected the first checkout to fail")
    expect(String(failed.cause)).toContain("Cannot find package 'stripe'")
    expect(fake.requests).toHaveLength(0)
    const created = await Effect.runPromise(rail.createCheckout(checkoutRequest(5_000_000n)))
    expect(created.sessionId).toMatch(/^cs_/)
    expect(importSdk.calls).toBe(2)
    // Loaded, it is kept: a third checkout imports nothing.
    await Effect.runPromise(rail.createCheckout(checkoutRequest(5_000_000n)))
    expect(importSdk.calls).toBe(2)
  })

  it("refuses a session that comes back without a URL", async () => {
    fake.behaviour = { kind: "session", url: null }
    const error = await railError(configFor(fake.port), checkoutRequest(2_500_000n))
    expect(error.message).toMatch(/without a URL/)
  })
})

// ---------------------------------------------------------------------------
// Webhooks

interface Expiry {
  readonly type: string
  readonly externalId: string
  readonly at: Date
}

/** A PaymentSink that records what it is told and, like the real one, credits an id once. */
const recordingSink = () => {
  const notices: Array<PaymentNotice> = []
  const expiries: Array<Expiry> = []
  const credited = new Set<string>()
  const state = { failing: false }
  const layer = Layer.succeed(
    PaymentSink,
    PaymentSink.of({
      record: (notice) =>
        Effect.suspend(() => {
          if (state.failing) return Effect.die(new Error("ledger unavailable"))
          notices.push(notice)
          if (credited.has(notice.externalId)) return Effect.succeed("duplicate" as const)
          credited.add(notice.externalId)
          return Effect.succeed("credited" as const)
        }),
      recordExpiry: (type, externalId, at) => Effect.sync(() => void expiries.push({ type, externalId, at })),
      loadCursor: () => Effect.succeed(null),
      saveCursor: () => Effect.void
    })
  )
  const reset = () => {
    notices.length = 0
    expiries.length = 0
    credited.clear()
    state.failing = false
  }
  return { notices, expiries, state, layer, reset }
}

let idCounter = 0
const stripeId = (prefix: string) => `${prefix}${Date.now().toString(36)}${(idCounter++).toString(36)}Xk9PqR2sT`

/** A completed Checkout Session as Stripe puts it in `data.object`. */
const sessionObject = (overrides: Record<string, unknown> = {}) => {
  const id = stripeId("cs_test_a1")
  return {
    id,
    object: "checkout.session",
    amount_subtotal: 2500,
    amount_total: 2500,
    cancel_url: baseConfig.cancelUrl,
    client_reference_id: "inv_7QfE3pWz",
    created: nowSeconds() - 120,
    currency: "usd",
    currency_conversion: null,
    customer: null,
    customer_details: { email: "payer@example.com", name: null },
    expires_at: nowSeconds() + 1680,
    livemode: false,
    metadata: { invoice_id: "inv_7QfE3pWz" },
    mode: "payment",
    payment_intent: stripeId("pi_"),
    payment_method_types: ["card"],
    payment_status: "paid",
    status: "complete",
    success_url: baseConfig.successUrl,
    url: null,
    ...overrides
  }
}

/** The JSON of an event, pretty-printed the way Stripe delivers it. */
const eventPayload = (type: string, object: unknown, options: { readonly id?: string; readonly created?: number } = {}) =>
  JSON.stringify(
    {
      id: options.id ?? stripeId("evt_1"),
      object: "event",
      api_version: Stripe.API_VERSION,
      created: options.created ?? nowSeconds(),
      data: { object },
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      type
    },
    null,
    2
  )

const sign = (payload: string, options: { readonly secret?: string; readonly timestamp?: number } = {}) =>
  Stripe.webhooks.generateTestHeaderString({
    payload,
    secret: options.secret ?? WEBHOOK_SECRET,
    ...(options.timestamp === undefined ? {} : { timestamp: options.timestamp })
  })

interface Answer {
  readonly status: number
  readonly body: any
}

describe("Stripe webhooks through POST /v1/webhooks/stripe", () => {
  const sink = recordingSink()
  let scope: Scope.Closeable
  let baseUrl: string

  beforeAll(async () => {
    scope = Effect.runSync(Scope.make())
    // Mounted as the server mounts it: the rail describes the route, the HTTP adapter serves it.
    const app = HttpRouter.serve(mountRailRoutes(StripeRail.routes(baseConfig)), { disableLogger: true, disableListenLog: true }).pipe(
      Layer.provide([sink.layer, MemoryStore.layer]),
      Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
    )
    const context = await Effect.runPromise(Layer.buildWithScope(app, scope))
    const address = Context.get(context, HttpServer.HttpServer).address
    if (address._tag === "UnixPathAddress") throw new Error("expected a TCP address")
    baseUrl = `http://127.0.0.1:${address.port}`
  })
  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)))
  afterEach(() => sink.reset())

  const deliver = async (payload: string, signature: string | undefined): Promise<Answer> => {
    const headers: Record<string, string> = { "content-type": "application/json; charset=utf-8" }
    if (signature !== undefined) headers["stripe-signature"] = signature
    const response = await fetch(`${baseUrl}/v1/webhooks/stripe`, { method: "POST", headers, body: payload })
    const text = await response.text()
    return { status: response.status, body: text === "" ? undefined : JSON.parse(text) }
  }

  const expectRejected = (answer: Answer) => {
    expect(answer.status).toBe(400)
    expect(Object.keys(answer.body)).toEqual(["error"])
    expect(answer.body.error.code).toBe("VALIDATION_ERROR")
    expect(typeof answer.body.error.message).toBe("string")
    expect(answer.body.error.details).toEqual({ issues: [] })
    expect(JSON.stringify(answer.body)).not.toContain(WEBHOOK_SECRET)
  }

  it("records a paid checkout.session.completed once, in µUSD, with the event as its source", async () => {
    const session = sessionObject()
    const created = nowSeconds() - 5
    const payload = eventPayload("checkout.session.completed", session, { id: "evt_1PaidCompletedTest", created })
    const answer = await deliver(payload, sign(payload))
    expect(answer).toEqual({ status: 200, body: { received: true } })
    expect(sink.notices).toEqual([{
      type: "card",
      externalId: session.id,
      amountPaid: 25_000_000n,
      paidAt: new Date(created * 1000),
      source: "stripe:evt_1PaidCompletedTest"
    }])
    expect(sink.expiries).toEqual([])
  })

  it("rejects a signature made with another secret, and a body altered after signing", async () => {
    const payload = eventPayload("checkout.session.completed", sessionObject())
    expectRejected(await deliver(payload, sign(payload, { secret: "whsec_someoneElsesSecret" })))

    const tampered = payload.replace("\"amount_total\": 2500", "\"amount_total\": 250000")
    expect(tampered).not.toBe(payload)
    expectRejected(await deliver(tampered, sign(payload)))

    expectRejected(await deliver(payload, "t=1700000000,v1=deadbeef"))
    expectRejected(await deliver(payload, "garbage"))
    expect(sink.notices).toEqual([])
  })

  it("rejects a signature older than 300 seconds and accepts one within the tolerance", async () => {
    const payload = eventPayload("checkout.session.completed", sessionObject())
    expectRejected(await deliver(payload, sign(payload, { timestamp: nowSeconds() - 301 })))
    expectRejected(await deliver(payload, sign(payload, { timestamp: nowSeconds() - 3600 })))
    expect(sink.notices).toEqual([])

    const fresh = await deliver(payload, sign(payload, { timestamp: nowSeconds() - 240 }))
    expect(fresh.status).toBe(200)
    expect(sink.notices).toHaveLength(1)
  })

  it("rejects the same event re-serialised after signing (the signature covers the raw bytes)", async () => {
    const payload = eventPayload("checkout.session.completed", sessionObject())
    const signature = sign(payload)
    const compact = JSON.stringify(JSON.parse(payload))
    const fourSpaces = JSON.stringify(JSON.parse(payload), null, 4)
    expect(JSON.parse(compact)).toEqual(JSON.parse(payload))
    expectRejected(await deliver(compact, signature))
    expectRejected(await deliver(fourSpaces, signature))
    expectRejected(await deliver(`${payload}\n`, signature))
    expect(sink.notices).toEqual([])
  })

  it("rejects a delivery without a Stripe-Signature header, or with an empty one", async () => {
    const payload = eventPayload("checkout.session.completed", sessionObject())
    const missing = await deliver(payload, undefined)
    expectRejected(missing)
    expect(missing.body.error.message).toMatch(/Stripe-Signature/)
    expectRejected(await deliver(payload, ""))
    // Correctly signed, but not an event at all.
    const empty = await deliver("", sign(""))
    expectRejected(empty)
    expect(empty.body.error.message).toMatch(/not a JSON Stripe event/)
    const notEvent = "{\"hello\": \"world\"}"
    expectRejected(await deliver(notEvent, sign(notEvent)))
    expect(sink.notices).toEqual([])
  })

  it("acknowledges an unpaid completion without recording, then records async_payment_succeeded", async () => {
    const session = sessionObject({ payment_status: "unpaid", payment_method_types: ["us_bank_account"] })
    const completed = eventPayload("checkout.session.completed", session)
    expect(await deliver(completed, sign(completed))).toEqual({ status: 200, body: { received: true } })
    expect(sink.notices).toEqual([])

    const succeededId = stripeId("evt_1")
    const succeeded = eventPayload("checkout.session.async_payment_succeeded", { ...session, payment_status: "paid" }, {
      id: succeededId
    })
    expect(await deliver(succeeded, sign(succeeded))).toEqual({ status: 200, body: { received: true } })
    expect(sink.notices).toHaveLength(1)
    expect(sink.notices[0]).toMatchObject({
      type: "card",
      externalId: session.id,
      amountPaid: 25_000_000n,
      source: `stripe:${succeededId}`
    })
  })

  it("hands both deliveries to the sink when async_payment_succeeded arrives before completed", async () => {
    const session = sessionObject()
    const succeeded = eventPayload("checkout.session.async_payment_succeeded", session)
    const completed = eventPayload("checkout.session.completed", session)
    expect((await deliver(succeeded, sign(succeeded))).status).toBe(200)
    expect((await deliver(completed, sign(completed))).status).toBe(200)
    expect(sink.notices).toHaveLength(2)
    expect(sink.notices.map((n) => n.externalId)).toEqual([session.id, session.id])
    expect(sink.notices.map((n) => n.amountPaid)).toEqual([25_000_000n, 25_000_000n])
    // The same event delivered again (Stripe retries) is harmless too.
    expect((await deliver(completed, sign(completed))).status).toBe(200)
    expect(new Set(sink.notices.map((n) => n.externalId))).toEqual(new Set([session.id]))
  })

  it("records an expiry for checkout.session.expired and async_payment_failed", async () => {
    const expiredSession = sessionObject({ status: "expired", payment_status: "unpaid", payment_intent: null })
    const created = nowSeconds() - 2
    const expired = eventPayload("checkout.session.expired", expiredSession, { created })
    expect(await deliver(expired, sign(expired))).toEqual({ status: 200, body: { received: true } })

    const failedSession = sessionObject({ payment_status: "unpaid" })
    const failed = eventPayload("checkout.session.async_payment_failed", failedSession, { created })
    expect((await deliver(failed, sign(failed))).status).toBe(200)

    expect(sink.expiries).toEqual([
      { type: "card", externalId: expiredSession.id, at: new Date(created * 1000) },
      { type: "card", externalId: failedSession.id, at: new Date(created * 1000) }
    ])
    expect(sink.notices).toEqual([])
  })

  it("acknowledges and ignores other event types, and completions that required no payment", async () => {
    for (
      const [type, object] of [
        ["payment_intent.succeeded", { id: stripeId("pi_"), object: "payment_intent", amount: 2500, currency: "usd" }],
        ["charge.refunded", { id: stripeId("ch_"), object: "charge", amount: 2500 }],
        ["customer.created", { id: stripeId("cus_"), object: "customer" }],
        ["checkout.session.completed", sessionObject({ payment_status: "no_payment_required", amount_total: 0 })]
      ] as const
    ) {
      const payload = eventPayload(type, object)
      expect(await deliver(payload, sign(payload)), type).toEqual({ status: 200, body: { received: true } })
    }
    expect(sink.notices).toEqual([])
    expect(sink.expiries).toEqual([])
  })

  it("answers 500 when the sink fails, so that Stripe retries; the retry is then recorded", async () => {
    const session = sessionObject()
    const payload = eventPayload("checkout.session.completed", session)
    sink.state.failing = true
    const failed = await deliver(payload, sign(payload))
    expect(failed.status).toBe(500)
    expect(failed.body.error.code).toBe("INTERNAL")
    expect(JSON.stringify(failed.body)).not.toContain("ledger unavailable")
    expect(sink.notices).toEqual([])

    sink.state.failing = false
    const retried = await deliver(payload, sign(payload))
    expect(retried.status).toBe(200)
    expect(sink.notices.map((n) => n.externalId)).toEqual([session.id])
  })

  it("refuses a body over 1 MiB, with or without Content-Length, and records nothing", async () => {
    const padding = "x".repeat(1024 * 1024)
    const payload = eventPayload("checkout.session.completed", sessionObject({ metadata: { invoice_id: "inv_1", padding } }))
    const declared = await deliver(payload, sign(payload))
    expect([400, 413]).toContain(declared.status)
    expect(declared.body.error.code).toBe("PAYLOAD_TOO_LARGE")

    // Chunked: no Content-Length, the limit is enforced while reading.
    const chunked = await new Promise<Answer>((resolve, reject) => {
      const req = request(new URL("/v1/webhooks/stripe", baseUrl), {
        method: "POST",
        headers: { "content-type": "application/json", "stripe-signature": sign(payload) }
      }, (res) => {
        let text = ""
        res.on("data", (chunk) => (text += chunk))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }))
      })
      req.on("error", reject)
      for (let offset = 0; offset < payload.length; offset += 64 * 1024) req.write(payload.slice(offset, offset + 64 * 1024))
      req.end()
    })
    expect(chunked.status).toBe(413)
    expect(chunked.body.error.code).toBe("PAYLOAD_TOO_LARGE")
    expect(sink.notices).toEqual([])

    // Just under the limit is read and verified as usual.
    const small = eventPayload("checkout.session.completed", sessionObject({ metadata: { padding: "y".repeat(900_000) } }))
    expect((await deliver(small, sign(small))).status).toBe(200)
    expect(sink.notices).toHaveLength(1)
  })
})

describe("handleWebhook", () => {
  it("tells what each event led to", async () => {
    const sink = recordingSink()
    const handle = StripeRail.handleWebhook(baseConfig)
    const run = (payload: string) =>
      Effect.runPromise(handle(new TextEncoder().encode(payload), sign(payload)).pipe(Effect.provide(sink.layer)))

    const session = sessionObject()
    const paid = eventPayload("checkout.session.completed", session, { id: "evt_1Result" })
    expect(await run(paid)).toEqual({
      eventId: "evt_1Result",
      eventType: "checkout.session.completed",
      action: "payment",
      sessionId: session.id,
      outcome: "credited"
    })
    expect((await run(paid)).outcome).toBe("duplicate")
    expect((await run(eventPayload("checkout.session.completed", sessionObject({ payment_status: "unpaid" })))).action)
      .toBe("awaiting_payment")
    expect((await run(eventPayload("checkout.session.expired", sessionObject()))).action).toBe("expiry")
    expect((await run(eventPayload("invoice.paid", { id: "in_1", object: "invoice" }))).action).toBe("ignored")

    const rejected = await Effect.runPromise(
      Effect.flip(handle(new TextEncoder().encode(paid), undefined)).pipe(Effect.provide(sink.layer))
    )
    expect(rejected).toBeInstanceOf(StripeRail.WebhookRejected)
  })

  it("a failed load of the SDK is not kept: the delivery fails (500, Stripe retries) and the next one is verified", async () => {
    const sink = recordingSink()
    const importSdk = flakyImport()
    const handle = StripeRail.handleWebhook(baseConfig, importSdk.load)
    const payload = eventPayload("checkout.session.completed", sessionObject(), { id: "evt_1RetriedLoad" })
    const run = () => Effect.runPromiseExit(handle(new TextEncoder().encode(payload), sign(payload)).pipe(Effect.provide(sink.layer)))
    const first = await run()
    expect(Exit.isSuccess(first)).toBe(false)
    expect(sink.notices).toHaveLength(0)
    const second = await run()
    expect(second).toEqual(Exit.succeed(expect.objectContaining({ eventId: "evt_1RetriedLoad", action: "payment", outcome: "credited" })))
    expect(importSdk.calls).toBe(2)
  })

  it("takes the USD total from currency_conversion for older Adaptive Pricing sessions", async () => {
    const sink = recordingSink()
    const handle = StripeRail.handleWebhook(baseConfig)
    const session = sessionObject({
      currency: "eur",
      amount_total: 2300,
      currency_conversion: { amount_subtotal: 2500, amount_total: 2500, fx_rate: "0.92", source_currency: "usd" }
    })
    const payload = eventPayload("checkout.session.completed", session)
    await Effect.runPromise(handle(new TextEncoder().encode(payload), sign(payload)).pipe(Effect.provide(sink.layer)))
    expect(sink.notices[0]?.amountPaid).toBe(25_000_000n)

    const unknownCurrency = sessionObject({ currency: "eur", amount_total: 2300 })
    const second = eventPayload("checkout.session.completed", unknownCurrency)
    await Effect.runPromise(handle(new TextEncoder().encode(second), sign(second)).pipe(Effect.provide(sink.layer)))
    expect(sink.notices[1]?.amountPaid).toBeUndefined()
  })
})
